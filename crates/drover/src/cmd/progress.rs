//! How `apply --wait` shows a rollout: on a terminal, one live bar per
//! group (members on the desired config / declared size, the phase and
//! what it waits on, the swarm's fault tolerance); otherwise one plain line
//! whenever anything changes, so logs and CI output stay readable. Either
//! way a follow nobody acts on says so after a few seconds, naming the
//! providers a controller needs.

use drover_controller::procedure::acting::{Unattended, unattended};
use drover_controller::{StatusDoc, wall_ms};
use indicatif::{MultiProgress, ProgressBar, ProgressStyle};
use std::collections::{BTreeMap, BTreeSet};
use std::io::IsTerminal;
use std::time::{Duration, Instant};

/// The display of the follow of one revision.
pub struct Progress {
    /// How it is shown.
    shown: Shown,
    /// The revision followed.
    rev: u64,
    /// The providers its groups use (named when nobody acts on it).
    providers: String,
    /// When the follow began.
    start: Instant,
    /// When nobody was last said to act on it.
    said_unattended: Option<Instant>,
}

/// How progress is shown.
enum Shown {
    /// Live bars.
    Bars {
        all: MultiProgress,
        bars: BTreeMap<String, ProgressBar>,
    },
    /// A line per change.
    Lines { last: String },
}

/// How long a follow waits for a controller to act before it says that
/// none does, and how often it says it again.
const UNATTENDED_NOTICE: Duration = Duration::from_secs(5);
const UNATTENDED_AGAIN: Duration = Duration::from_secs(30);

impl Progress {
    /// Bars on a terminal, lines otherwise, following revision `rev` of
    /// groups using `providers`.
    pub fn new(rev: u64, providers: &BTreeSet<String>) -> Self {
        let shown = if std::io::stdout().is_terminal() {
            Shown::Bars {
                all: MultiProgress::new(),
                bars: BTreeMap::new(),
            }
        } else {
            Shown::Lines {
                last: String::new(),
            }
        };
        let providers: Vec<&str> = providers.iter().map(String::as_str).collect();
        Progress {
            shown,
            rev,
            providers: providers.join(", "),
            start: Instant::now(),
            said_unattended: None,
        }
    }

    /// The revision followed.
    pub fn rev(&self) -> u64 {
        self.rev
    }

    /// Shows the latest published status, if any; says so, past a few
    /// seconds and then every half minute, when no controller acts on the
    /// revision ([`unattended`]).
    pub fn update(&mut self, doc: Option<&StatusDoc>) {
        match unattended(doc, self.rev, wall_ms()) {
            Some(why) => self.unattended(&why),
            None => self.said_unattended = None,
        }
        if let Some(doc) = doc {
            self.show(doc);
        }
    }

    /// Says that nobody acts on the revision, and asks about the one
    /// thing the operator can check.
    fn unattended(&mut self, why: &Unattended) {
        let waited = self.start.elapsed();
        let due = match self.said_unattended {
            None => waited >= UNATTENDED_NOTICE,
            Some(at) => at.elapsed() >= UNATTENDED_AGAIN,
        };
        if !due {
            return;
        }
        self.said_unattended = Some(Instant::now());
        let line = format!(
            "[{:>6.1}s] no controller has picked up revision {} after {} s ({why}): is one running with provider {}?",
            waited.as_secs_f64(),
            self.rev,
            waited.as_secs(),
            self.providers
        );
        match &self.shown {
            Shown::Bars { all, .. } => {
                let _ = all.println(line);
            }
            Shown::Lines { .. } => println!("{line}"),
        }
    }

    /// Shows one published status.
    fn show(&mut self, doc: &StatusDoc) {
        let ft = match doc.has_swarm() {
            true => format!(", ft {}", fault_tolerance(doc.swarm.fault_tolerance)),
            false => String::new(),
        };
        let start = self.start;
        match &mut self.shown {
            Shown::Bars { all, bars } => {
                for g in doc.groups.iter() {
                    let bar = bars.entry(g.name.clone()).or_insert_with(|| {
                        let style = ProgressStyle::with_template(
                            "{prefix:<12} [{bar:20}] {pos}/{len} {msg}",
                        )
                        .unwrap_or_else(|_| ProgressStyle::default_bar())
                        .progress_chars("=> ");
                        all.add(
                            ProgressBar::new(0)
                                .with_style(style)
                                .with_prefix(g.name.clone()),
                        )
                    });
                    bar.set_length(g.desired as u64);
                    bar.set_position(g.current as u64);
                    bar.set_message(format!(
                        "{}{}{}",
                        g.phase.as_str(),
                        ft.trim_start_matches(','),
                        g.reason
                            .as_deref()
                            .map(|r| format!(" — {r}"))
                            .unwrap_or_default()
                    ));
                }
            }
            Shown::Lines { last } => {
                let line: Vec<String> = doc
                    .groups
                    .iter()
                    .map(|g| {
                        format!(
                            "{} {} {}/{} current{ft}",
                            g.name,
                            g.phase.as_str(),
                            g.current,
                            g.desired,
                        )
                    })
                    .collect();
                let line = line.join(" | ");
                if line != *last {
                    println!("[{:>6.1}s] {line}", start.elapsed().as_secs_f64());
                    *last = line;
                }
            }
        }
    }

    /// Leaves the final state on screen.
    pub fn finish(&self) {
        if let Shown::Bars { bars, .. } = &self.shown {
            for b in bars.values() {
                b.finish();
            }
        }
    }
}

/// A fault tolerance as `status` and the follower show it.
pub fn fault_tolerance(ft: Option<i64>) -> String {
    ft.map_or_else(|| "unknown".into(), |f| f.to_string())
}
