//! How `apply --wait` shows a rollout: on a terminal, one live bar per
//! group (members on the desired config / declared size, the phase and
//! what it waits on, the swarm's fault tolerance); otherwise one plain line
//! whenever anything changes, so logs and CI output stay readable.

use drover_controller::StatusDoc;
use indicatif::{MultiProgress, ProgressBar, ProgressStyle};
use std::collections::BTreeMap;
use std::io::IsTerminal;
use std::time::Instant;

/// The display.
pub enum Progress {
    /// Live bars.
    Bars {
        all: MultiProgress,
        bars: BTreeMap<String, ProgressBar>,
    },
    /// A line per change.
    Lines { last: String, start: Instant },
}

impl Progress {
    /// Bars on a terminal, lines otherwise.
    pub fn new() -> Self {
        if std::io::stdout().is_terminal() {
            Progress::Bars {
                all: MultiProgress::new(),
                bars: BTreeMap::new(),
            }
        } else {
            Progress::Lines {
                last: String::new(),
                start: Instant::now(),
            }
        }
    }

    /// Shows the latest published status.
    pub fn update(&mut self, doc: &StatusDoc) {
        let ft = fault_tolerance(doc.swarm.fault_tolerance);
        match self {
            Progress::Bars { all, bars } => {
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
                        "{} ft {ft}{}",
                        g.phase.as_str(),
                        g.reason
                            .as_deref()
                            .map(|r| format!(" — {r}"))
                            .unwrap_or_default()
                    ));
                }
            }
            Progress::Lines { last, start } => {
                let line: Vec<String> = doc
                    .groups
                    .iter()
                    .map(|g| {
                        format!(
                            "{} {} {}/{} current, ft {ft}",
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
        if let Progress::Bars { bars, .. } = self {
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
