//! The per-step split of a roll on Incus machines (BENCHMARKS.md §7).
//!
//! Each operation of the roll, as drover's event log has it (its own steps:
//! demote, drain, destroy, node removal, provision), and for each machine it
//! provisioned, the machine's own clock of its boot: when its systemd
//! started, when its boot script restarted the engine with drover's labels,
//! when the engine was back, and when its node joined the swarm (the node's
//! creation, as the managers record it). Machines are read while they live
//! (the roll retires the spare), by a thread beside the roll.
//!
//! The machine-bound minimum is what no controller could shorten: for every
//! provisioned machine, provision call → node joined, plus the group's
//! `watch`. The rest of the roll's wall time is drover's share: its own
//! steps, the leader's hand-over, and the gaps between its passes.

use drover_spi::Event;
use std::collections::BTreeMap;
use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

/// One machine's boot, in ms since the Unix epoch (the host's clock: the
/// machines are containers on it).
#[derive(Debug, Clone, Copy)]
pub struct Boot {
    /// Its systemd started (the container is up).
    pub userspace: u64,
    /// Its boot script restarted `docker.service` (cloud-init ran up to it).
    pub engine_restart: u64,
    /// `docker.service` was active again.
    pub engine_ready: u64,
    /// Its swarm node was created (the join or init returned).
    pub joined: u64,
}

/// Records every machine's boot on a lab bridge as it completes.
pub struct Recorder {
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<BTreeMap<String, Boot>>>,
}

impl Recorder {
    /// Starts watching the machines on `network`.
    pub fn start(network: &str) -> Recorder {
        let stop = Arc::new(AtomicBool::new(false));
        let network = network.to_string();
        let flag = stop.clone();
        let thread = std::thread::spawn(move || {
            let mut boots = BTreeMap::new();
            while !flag.load(Ordering::SeqCst) {
                record_new(&network, &mut boots);
                std::thread::sleep(Duration::from_millis(500));
            }
            record_new(&network, &mut boots);
            boots
        });
        Recorder {
            stop,
            thread: Some(thread),
        }
    }

    /// Stops; every boot seen, by the machine's link.
    pub fn finish(mut self) -> BTreeMap<String, Boot> {
        self.stop.store(true, Ordering::SeqCst);
        let thread = self.thread.take().expect("finished once");
        thread.join().expect("the boot recorder")
    }
}

/// A test that fails mid-roll stops the recorder too.
impl Drop for Recorder {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
    }
}

/// A running machine on the bridge: its name, link tag and whether its
/// group is the managers'.
struct Live {
    name: String,
    link: String,
    manager: bool,
}

fn machines(network: &str) -> Vec<Live> {
    let Ok(out) = Command::new("incus")
        .args(["list", "--format", "json"])
        .output()
    else {
        return Vec::new();
    };
    let all: Vec<serde_json::Value> = serde_json::from_slice(&out.stdout).unwrap_or_default();
    all.iter()
        .filter(|m| m["expanded_devices"]["eth0"]["network"] == network && m["status"] == "Running")
        .filter_map(|m| {
            Some(Live {
                name: m["name"].as_str()?.to_string(),
                link: m["config"]["user.drover.link"].as_str()?.to_string(),
                manager: m["config"]["user.drover.group"] == "managers",
            })
        })
        .collect()
}

/// What `cmd` printed inside machine `name`, if it succeeded.
fn exec(name: &str, cmd: &str) -> Option<String> {
    let out = drover_incus::testkit::exec(name, cmd);
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).into_owned())
}

/// What a machine says of its boot: its node id and systemd's timestamps
/// (one `KEY=VALUE` a line, units in order).
const ASK: &str = "docker info --format 'node={{.Swarm.NodeID}}'; \
    systemctl show --timestamp=us+utc -p UserspaceTimestamp; \
    for u in docker.service cloud-final.service; do \
      echo unit=$u; systemctl show --timestamp=us+utc -p InactiveExitTimestamp -p ActiveEnterTimestamp $u; done";

/// Records the machines whose boot script has finished and whose node a
/// manager lists.
fn record_new(network: &str, boots: &mut BTreeMap<String, Boot>) {
    let live = machines(network);
    for m in &live {
        if boots.contains_key(&m.link) {
            continue;
        }
        let Some(said) = exec(&m.name, ASK).and_then(|text| Said::parse(&text)) else {
            continue;
        };
        let joined = live.iter().filter(|x| x.manager).find_map(|x| {
            let out = exec(
                &x.name,
                &format!(
                    "docker node inspect --format '{{{{.CreatedAt}}}}' {}",
                    said.node
                ),
            )?;
            docker_time(out.trim())
        });
        if let Some(joined) = joined {
            boots.insert(
                m.link.clone(),
                Boot {
                    userspace: said.userspace,
                    engine_restart: said.engine_restart,
                    engine_ready: said.engine_ready,
                    joined,
                },
            );
        }
    }
}

/// A machine's answer to [`ASK`], once its boot script is done.
struct Said {
    node: String,
    userspace: u64,
    engine_restart: u64,
    engine_ready: u64,
}

impl Said {
    fn parse(text: &str) -> Option<Said> {
        let mut node = None;
        let mut unit = "";
        let mut stamps: BTreeMap<String, u64> = BTreeMap::new();
        for line in text.lines() {
            let (key, value) = line.split_once('=')?;
            match key {
                "node" if !value.is_empty() => node = Some(value.to_string()),
                "unit" => {
                    unit = if value == "docker.service" {
                        "docker"
                    } else {
                        "final"
                    }
                }
                _ if value.is_empty() => {}
                _ => {
                    stamps.insert(format!("{unit}{key}"), systemd_time(value)?);
                }
            }
        }
        // The boot script ran to its end: cloud-final is active.
        stamps.get("finalActiveEnterTimestamp")?;
        Some(Said {
            node: node?,
            userspace: *stamps.get("UserspaceTimestamp")?,
            engine_restart: *stamps.get("dockerInactiveExitTimestamp")?,
            engine_ready: *stamps.get("dockerActiveEnterTimestamp")?,
        })
    }
}

/// `Sat 2026-12-05 05:59:24.153205 UTC` (systemd, `--timestamp=us+utc`).
fn systemd_time(text: &str) -> Option<u64> {
    let mut words = text.split_whitespace().skip(1);
    epoch_ms(words.next()?, words.next()?)
}

/// `2026-12-05 05:59:28.965642233 +0000 UTC` (docker's `CreatedAt`).
fn docker_time(text: &str) -> Option<u64> {
    let mut words = text.split_whitespace();
    epoch_ms(words.next()?, words.next()?)
}

fn epoch_ms(date: &str, time: &str) -> Option<u64> {
    let at = humantime::parse_rfc3339_weak(&format!("{date} {time}")).ok()?;
    let ms = at.duration_since(std::time::UNIX_EPOCH).ok()?.as_millis();
    u64::try_from(ms).ok()
}

/// One operation of the roll.
struct Row {
    op: String,
    group: Option<String>,
    kind: String,
    /// Its steps other than provisioning (demote, drain, destroy, node
    /// removal, a leader's stand-down), summed, ms.
    own_ms: u64,
    /// The machine it provisioned: the provision call (create, push the
    /// boot environment, start), then the machine's stages, ms.
    machine: Option<Stages>,
    /// When its machine had joined and been watched (ms since the epoch).
    done_at: Option<u64>,
    begin_at: u64,
    /// When drover saw it end (its `end` event).
    end_at: Option<u64>,
    /// drover's own time between its steps, ms: from the operation's begin
    /// to its first step, and from each step's end to the next one's start.
    gaps_ms: Vec<u64>,
}

#[derive(Clone, Copy)]
struct Stages {
    call: u64,
    to_systemd: u64,
    cloud_init: u64,
    engine: u64,
    join: u64,
    watch: u64,
}

impl Stages {
    fn bound(&self) -> u64 {
        self.to_systemd + self.cloud_init + self.engine + self.join + self.watch
    }
}

/// The roll between `from_ms` and `to_ms`, split.
pub struct Split {
    rows: Vec<Row>,
    wall_ms: u64,
}

impl Split {
    /// `events` of the roll's window, `boots` by link, `watch_ms` of each
    /// group.
    pub fn new(
        events: &[Event],
        boots: &BTreeMap<String, Boot>,
        from_ms: u64,
        to_ms: u64,
        watch_ms: impl Fn(&str) -> u64,
    ) -> Split {
        let window: Vec<&Event> = events
            .iter()
            .filter(|e| (from_ms..=to_ms).contains(&e.at_ms))
            .collect();
        let rows = window
            .iter()
            .filter(|e| e.action == "begin")
            .filter_map(|begin| {
                let op = begin.op.clone()?;
                let steps: Vec<&&Event> = window
                    .iter()
                    .filter(|e| e.action == "step" && e.op.as_deref() == Some(op.as_str()))
                    .collect();
                let end_at = window
                    .iter()
                    .find(|e| e.action == "end" && e.op.as_deref() == Some(op.as_str()))
                    .map(|e| e.at_ms);
                Some(row(&op, begin, &steps, end_at, boots, &watch_ms))
            })
            .collect();
        Split {
            rows,
            wall_ms: to_ms - from_ms,
        }
    }

    /// For each operation, by drover's clock, from its end to the begin of
    /// its group's next one: drover's reaction (a group's operations run
    /// one after another here; the groups' run side by side).
    fn reactions_ms(&self) -> Vec<i64> {
        self.rows
            .iter()
            .enumerate()
            .filter_map(|(i, r)| {
                let next = self.rows[i + 1..].iter().find(|n| n.group == r.group)?;
                Some(next.begin_at as i64 - r.end_at? as i64)
            })
            .collect()
    }

    /// For each operation whose machine was watched, from its node's
    /// creation plus the watch to drover seeing the operation end: the
    /// swarm's time to list the node Ready, and drover's to see it.
    fn ready_lags_ms(&self) -> Vec<i64> {
        self.rows
            .iter()
            .filter_map(|r| Some(r.end_at? as i64 - r.done_at? as i64))
            .collect()
    }

    fn minimum_ms(&self) -> u64 {
        self.rows
            .iter()
            .filter_map(|r| r.machine)
            .map(|m| m.bound())
            .sum()
    }
}

/// One operation's row: its steps' start and end (by their text), its machine's
/// stages, and `end_at`, when drover saw it end.
fn row(
    op: &str,
    begin: &Event,
    steps: &[&&Event],
    end_at: Option<u64>,
    boots: &BTreeMap<String, Boot>,
    watch_ms: &impl Fn(&str) -> u64,
) -> Row {
    let mut own_ms = 0;
    let mut machine = None;
    let mut done_at = None;
    for start in steps.iter().filter(|e| e.outcome == "started") {
        let Some(end) = steps
            .iter()
            .find(|e| e.reason == start.reason && e.outcome != "started" && e.at_ms >= start.at_ms)
        else {
            continue;
        };
        let took = end.at_ms - start.at_ms;
        let link = start
            .reason
            .split_once("(link ")
            .and_then(|(_, rest)| rest.split_once(')'))
            .map(|(link, _)| link);
        match (
            start.reason.starts_with("provision"),
            link.and_then(|l| boots.get(l)),
        ) {
            (true, Some(b)) => {
                let watch = watch_ms(begin.group.as_deref().unwrap_or_default());
                machine = Some(Stages {
                    call: took,
                    to_systemd: b.userspace.saturating_sub(start.at_ms),
                    cloud_init: b.engine_restart.saturating_sub(b.userspace),
                    engine: b.engine_ready.saturating_sub(b.engine_restart),
                    join: b.joined.saturating_sub(b.engine_ready),
                    watch,
                });
                done_at = Some(b.joined + watch);
            }
            (true, None) => {}
            (false, _) => own_ms += took,
        }
    }
    let mut gaps_ms = Vec::new();
    let mut since = Some(begin.at_ms);
    for e in steps {
        match (e.outcome == "started", since) {
            (true, Some(t)) => {
                gaps_ms.push(e.at_ms.saturating_sub(t));
                since = None;
            }
            (false, _) => since = Some(e.at_ms),
            (true, None) => {}
        }
    }
    Row {
        op: op.to_string(),
        group: begin.group.clone(),
        gaps_ms,
        kind: begin.reason.clone(),
        own_ms,
        machine,
        done_at,
        begin_at: begin.at_ms,
        end_at,
    }
}

fn secs(ms: u64) -> String {
    format!("{:.1}", ms as f64 / 1000.0)
}

impl std::fmt::Display for Split {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        writeln!(
            f,
            "{:<30} {:<10} {:>6} {:>6} {:>8} {:>6} {:>6} {:>6} {:>6}",
            "operation", "kind", "own", "call", "systemd", "cloud", "engine", "join", "watch"
        )?;
        for r in &self.rows {
            let m = r.machine.map_or_else(
                || {
                    format!(
                        "{:>6} {:>8} {:>6} {:>6} {:>6} {:>6}",
                        "-", "-", "-", "-", "-", "-"
                    )
                },
                |m| {
                    format!(
                        "{:>6} {:>8} {:>6} {:>6} {:>6} {:>6}",
                        secs(m.call),
                        secs(m.to_systemd),
                        secs(m.cloud_init),
                        secs(m.engine),
                        secs(m.join),
                        secs(m.watch)
                    )
                },
            );
            writeln!(f, "{:<30} {:<10} {:>6} {m}", r.op, r.kind, secs(r.own_ms))?;
        }
        let minimum = self.minimum_ms();
        let steps = self.rows.len().max(1) as u64;
        let share = self.wall_ms.saturating_sub(minimum);
        let own: u64 = self.rows.iter().map(|r| r.own_ms).sum();
        let mut reactions = self.reactions_ms();
        reactions.sort_unstable();
        let mut lags = self.ready_lags_ms();
        lags.sort_unstable();
        writeln!(
            f,
            "drover's reaction, an operation's end → the next one's begin (ms, drover's clock): {reactions:?}"
        )?;
        writeln!(
            f,
            "node created + watch → operation's end (ms: the swarm lists the node Ready, drover sees it): {lags:?}"
        )?;
        let mut gaps: Vec<u64> = self
            .rows
            .iter()
            .flat_map(|r| r.gaps_ms.iter().copied())
            .collect();
        gaps.sort_unstable();
        writeln!(
            f,
            "drover between its steps, an operation's begin or a step's end → its next step's start (ms): median {}, max {} over {} ({gaps:?})",
            gaps.get(gaps.len() / 2).copied().unwrap_or_default(),
            gaps.last().copied().unwrap_or_default(),
            gaps.len(),
        )?;
        write!(
            f,
            "MEASURED incus roll split: wall {} s, machine-bound minimum {} s ({} machines: provision call → joined, + watch), \
             ratio {:.2}; drover's share {} s over {} operations = {} s an operation, of which its own steps {} s",
            secs(self.wall_ms),
            secs(minimum),
            self.rows.iter().filter(|r| r.machine.is_some()).count(),
            self.wall_ms as f64 / minimum.max(1) as f64,
            secs(share),
            steps,
            secs(share / steps),
            secs(own),
        )
    }
}

#[test]
fn timestamps_of_systemd_and_docker_read_as_epoch_ms() {
    assert_eq!(
        systemd_time("Sat 2026-12-05 05:59:24.153205 UTC"),
        docker_time("2026-12-05 05:59:24.153999999 +0000 UTC")
    );
    let said = Said::parse(
        "node=abc\nUserspaceTimestamp=Sat 2026-12-05 05:59:24.153205 UTC\n\
         unit=docker.service\nInactiveExitTimestamp=Sat 2026-12-05 05:59:27.134654 UTC\n\
         ActiveEnterTimestamp=Sat 2026-12-05 05:59:27.534375 UTC\n\
         unit=cloud-final.service\nInactiveExitTimestamp=Sat 2026-12-05 05:59:26.890976 UTC\n\
         ActiveEnterTimestamp=\n",
    );
    assert!(said.is_none(), "cloud-final not yet active: not done");
    let said = Said::parse(
        "node=abc\nUserspaceTimestamp=Sat 2026-12-05 05:59:24.153205 UTC\n\
         unit=docker.service\nInactiveExitTimestamp=Sat 2026-12-05 05:59:27.134654 UTC\n\
         ActiveEnterTimestamp=Sat 2026-12-05 05:59:27.534375 UTC\n\
         unit=cloud-final.service\nInactiveExitTimestamp=Sat 2026-12-05 05:59:26.890976 UTC\n\
         ActiveEnterTimestamp=Sat 2026-12-05 05:59:29.001000 UTC\n",
    )
    .expect("done");
    assert_eq!(said.node, "abc");
    assert_eq!(said.engine_restart - said.userspace, 2981);
    assert_eq!(said.engine_ready - said.engine_restart, 400);
}
