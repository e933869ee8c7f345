//! The crash matrix's machinery, shared by `e2e_crash` (a roll by
//! replacement) and `e2e_crash_in_place` (an update in place): the step
//! boundaries at which the *acting* controller is SIGKILLed, the loop that
//! kills it the first time each one shows in the store, and the checks
//! after the roll. The manager boot script runs the controller under a
//! restart loop (as systemd's `Restart=always` would), so the same
//! manager's controller comes back (after 1 s) and resumes from the
//! journal.

use super::Lab;
use drover_core::journal::{Operation, Step};
use drover_spi::{Event, Store};
use std::collections::{HashMap, HashSet};
use std::time::{Duration, Instant};

/// A step boundary: the acting controller is killed the first time the
/// store shows it.
pub struct Point {
    pub name: &'static str,
    pub group: &'static str,
    pub at: At,
}

/// How the store shows a boundary.
pub enum At {
    /// An event of the group: its action, the start of its reason (the
    /// step's description, `Action::describe`, or the operation's kind)
    /// and its outcome (`started`, `ok` or `journaled`).
    Event {
        action: &'static str,
        reason: &'static str,
        outcome: &'static str,
    },
    /// An operation of the group records the step done in the journal:
    /// the end of a wait (out of the raft, healthy), which no event tells
    /// of. The planner records it in the commit that starts the next
    /// step, so the boundary is that step's start seen from the journal.
    Done(Step),
}

/// A boundary shown by an event.
pub const fn point(
    name: &'static str,
    group: &'static str,
    action: &'static str,
    reason: &'static str,
    outcome: &'static str,
) -> Point {
    Point {
        name,
        group,
        at: At::Event {
            action,
            reason,
            outcome,
        },
    }
}

/// An operation of `kind` (`Roll`, …) journaled, before its first step.
pub const fn journaled(name: &'static str, group: &'static str, kind: &'static str) -> Point {
    point(name, group, "begin", kind, "journaled")
}

/// A step started: `describe` is the start of its description.
pub const fn during(name: &'static str, group: &'static str, describe: &'static str) -> Point {
    point(name, group, "step", describe, "started")
}

/// A step ended well.
pub const fn after(name: &'static str, group: &'static str, describe: &'static str) -> Point {
    point(name, group, "step", describe, "ok")
}

/// A boundary shown by the journal: `step` recorded done.
pub const fn done(name: &'static str, group: &'static str, step: Step) -> Point {
    Point {
        name,
        group,
        at: At::Done(step),
    }
}

impl Point {
    /// Event `e` shows this boundary.
    pub fn matches(&self, e: &Event) -> bool {
        let At::Event {
            action,
            reason,
            outcome,
        } = self.at
        else {
            return false;
        };
        e.group.as_deref() == Some(self.group)
            && e.action == action
            && e.reason.starts_with(reason)
            && e.outcome == outcome
    }

    /// Operation `op`'s record shows this boundary.
    pub fn reached_by(&self, op: &Operation) -> bool {
        matches!(self.at, At::Done(step) if op.group == self.group && op.done.contains(&step))
    }
}

/// One kill: the point, whose controller (its PID and link), when (s
/// since the matrix started).
pub struct Kill {
    pub point: &'static str,
    pub whom: String,
    pub at: f64,
}

/// The kills at `points` over one or more rolls: each point fires once,
/// the first time the store shows it with its controller alive.
pub struct Matrix {
    points: &'static [Point],
    fired: Vec<bool>,
    pub kills: Vec<Kill>,
    /// The controllers killed (PIDs are not reused within a test run).
    killed: HashSet<i32>,
    t0: Instant,
}

/// An event's identity (events are bounded, 200 on the swarm store: they
/// are remembered, not counted).
pub fn event_key(e: &Event) -> String {
    format!("{e:?}")
}

/// The events the store holds now (none of them is a kill point's).
pub async fn events_now(store: &dyn Store) -> HashSet<String> {
    store
        .events(0)
        .await
        .unwrap()
        .iter()
        .map(event_key)
        .collect()
}

impl Matrix {
    pub fn new(points: &'static [Point]) -> Matrix {
        Matrix {
            points,
            fired: vec![false; points.len()],
            kills: Vec::new(),
            killed: HashSet::new(),
            t0: Instant::now(),
        }
    }

    /// The points not reached yet (or reached only while their controller
    /// was already dead).
    pub fn missed(&self) -> Vec<&'static str> {
        (self.points.iter().zip(&self.fired))
            .filter(|(_, f)| !**f)
            .map(|(p, _)| p.name)
            .collect()
    }

    /// `KILL at …` lines for the test log.
    pub fn print(&self) {
        for k in &self.kills {
            eprintln!("KILL at {:.1}s: {} ({})", k.at, k.point, k.whom);
        }
    }

    /// Until revision `rev` is converged (at most `limit`, else the test
    /// fails), polls the store every 150 ms and SIGKILLs the acting
    /// controller the first time each point not fired yet shows (events
    /// not in `before`, each printed as an `EVENT` line; journal records)
    /// for an operation `only` selects: an event's own controller, or for a
    /// journal point the holder of the store's term. A point whose
    /// sighting finds its controller dead already (killed at a point of
    /// the same commit, not yet restarted) waits for its next sighting.
    /// How long the roll took.
    pub async fn roll(
        &mut self,
        lab: &Lab,
        rev: u64,
        before: HashSet<String>,
        only: fn(&Operation) -> bool,
        limit: Duration,
    ) -> Duration {
        let start = Instant::now();
        let mut processed = before;
        let mut seen_done: HashSet<(String, usize)> = HashSet::new();
        // Every operation seen in the journal, selected or not: an event is
        // judged by its operation's record (a step's last event is written
        // in the commit that removes the operation, long after it was first
        // seen).
        let mut selected: HashMap<String, bool> = HashMap::new();
        loop {
            tokio::time::sleep(Duration::from_millis(150)).await;
            if start.elapsed() >= limit {
                // What drover says of it, for the log.
                lab.drover(&["status"]);
                lab.drover(&["events", "--since", "1h"]);
            }
            assert!(
                start.elapsed() < limit,
                "the roll did not complete; missed so far {:?}",
                self.missed()
            );
            // The store is on a manager's engine; managers come and go.
            let Some(store) = lab.try_store().await else {
                continue;
            };
            // The journal first: an operation begun is in it by the time its
            // `begin` event is read.
            let Ok(journal) = store.journal().await else {
                continue;
            };
            for op in &journal {
                selected.insert(op.id.clone(), only(op));
            }
            let Ok(events) = store.events(0).await else {
                continue;
            };
            for e in &events {
                if !processed.insert(event_key(e)) {
                    continue;
                }
                eprintln!(
                    "EVENT {:.1}s {} {} {} {} {}: {}",
                    self.t0.elapsed().as_secs_f64(),
                    e.controller,
                    e.group.as_deref().unwrap_or("-"),
                    e.op.as_deref().unwrap_or("-"),
                    e.action,
                    e.outcome,
                    e.reason
                );
                if e.op.as_ref().and_then(|op| selected.get(op)) != Some(&true) {
                    continue;
                }
                if let Some(i) = self.unfired(|p| p.matches(e)) {
                    self.kill(lab, i, &e.controller);
                }
            }
            for op in journal.iter().filter(|op| only(op)) {
                let seen = |i: usize| seen_done.contains(&(op.id.clone(), i));
                let Some(i) = (0..self.points.len())
                    .find(|&i| !self.fired[i] && self.points[i].reached_by(op) && !seen(i))
                else {
                    continue;
                };
                seen_done.insert((op.id.clone(), i));
                if let Ok(Some((_, holder))) = store.leader().await {
                    self.kill(lab, i, &holder);
                }
            }
            if store
                .history()
                .await
                .is_ok_and(|h| h.iter().any(|r| r.rev == rev && r.converged))
            {
                return start.elapsed();
            }
        }
    }

    /// The first point not fired yet that `shows`.
    fn unfired(&self, shows: impl Fn(&Point) -> bool) -> Option<usize> {
        (0..self.points.len()).find(|&i| !self.fired[i] && shows(&self.points[i]))
    }

    /// Point `i` is seen: SIGKILLs the controller of the machine whose
    /// link is `link`, if one runs that was not killed already (a process
    /// SIGKILLed a moment ago may still be listed: the points seen with it
    /// are the same instant, not distinct ones).
    fn kill(&mut self, lab: &Lab, i: usize, link: &str) {
        let point = self.points[i].name;
        let pid = super::controller_pid(lab, link).filter(|p| !self.killed.contains(p));
        let Some(pid) = pid else {
            eprintln!("no controller to kill on {link} for {point}");
            return;
        };
        let pid_t = nix::unistd::Pid::from_raw(pid);
        if nix::sys::signal::kill(pid_t, nix::sys::signal::Signal::SIGKILL).is_err() {
            eprintln!("no controller to kill on {link} for {point} (pid {pid} gone)");
            return;
        }
        self.killed.insert(pid);
        self.fired[i] = true;
        let k = Kill {
            point,
            whom: format!("pid {pid} on {link}"),
            at: self.t0.elapsed().as_secs_f64(),
        };
        eprintln!("killing at {:.1}s: {} ({})", k.at, k.point, k.whom);
        self.kills.push(k);
    }
}

/// What a crash must not leave behind: no duplicate logical id among the
/// machines, no operation in the journal, no orphan engine (every `dockerd`
/// of the lab is a recorded machine's, one each).
pub async fn assert_nothing_left_behind(lab: &Lab) {
    let records = lab.records();
    let mut ids: Vec<&String> = records
        .iter()
        .filter_map(|r| r.logical_id.as_ref())
        .collect();
    let n = ids.len();
    ids.sort();
    ids.dedup();
    assert_eq!(ids.len(), n, "duplicate logical id: {records:#?}");
    // A handle opened before the roll may be on a manager gone since.
    let store = lab.store().await;
    let journal = store.journal().await.unwrap();
    assert!(
        journal.is_empty(),
        "operations left in the journal: {journal:#?}"
    );
    let dir = lab.dir.display().to_string();
    let engines: Vec<i32> = drover_local::procs::pids_matching(&dir)
        .into_iter()
        .filter(|&p| drover_local::procs::cmdline(p).is_some_and(|c| c.starts_with("dockerd")))
        .collect();
    for pid in &engines {
        assert!(
            records.iter().any(|r| {
                let paths = drover_local::EnginePaths::new(r.socket.parent().unwrap());
                drover_local::launcher::running_engine_pid(&paths, r.pid) == Some(*pid)
            }),
            "orphan engine {pid}: {:?}",
            drover_local::procs::cmdline(*pid)
        );
    }
    assert_eq!(engines.len(), records.len(), "engines {engines:?}");
}

/// The lab's swarm store dumped raw (every label it keeps, decompressed)
/// after a roll full of joins, campaigns and crashes: no swarm secret in it.
pub async fn assert_no_secret_in_the_swarm_store(lab: &Lab) {
    let url = lab.store_url();
    let endpoint = url.strip_prefix("swarm:").expect("a swarm store url");
    let raw = drover_store::SwarmStore::connect(Some(endpoint))
        .await
        .expect("swarm store")
        .raw_dump()
        .await
        .expect("raw dump");
    let labels: Vec<&str> = raw.iter().map(|(k, _)| k.as_str()).collect();
    for section in ["revisions", "journal", "status", "events"] {
        assert!(
            labels.iter().any(|l| l.ends_with(section)),
            "no {section} label in the dump: {labels:?}"
        );
    }
    for (label, bytes) in &raw {
        let text = String::from_utf8_lossy(bytes);
        assert!(
            !text.contains("SWMTKN-") && !text.contains("SWMKEY-"),
            "a swarm secret in the store's {label}"
        );
    }
}
