//! A nemesis on real engines (issue 15): during a roll of 3 managers + 2
//! workers on the local provider (every machine a real `dockerd` on a
//! loopback address), once with the etcd store (127.0.86.x) and once with
//! the swarm store (127.0.87.x), three faults in turn, each while the roll
//! is under way (a new revision is committed first if the last one already
//! converged):
//!
//! 1. **pause**: the acting controller is SIGSTOPped the moment a step
//!    intent of its epoch shows in the journal (any step on etcd, in
//!    practice the roll's first provision; a `Destroy` on the swarm store); its engine's node is demoted
//!    from another manager's engine (leadership moves away); it stays stopped
//!    until the next controller's `took-over` event, and 5 s more; then
//!    SIGCONT. From then on it must perform no side effect: its own log
//!    (kept past its machine) shows no step starting or finishing and no
//!    machine made or destroyed, its events and journal intents stop at its
//!    epoch, and every raft removal the engines log afterwards is one the
//!    new term's events announced. The one exception is the window
//!    docs/safety.md §5 keeps: an act whose lease check (`term confirmed`,
//!    with its operation and epoch) had passed before the SIGSTOP may land
//!    after the SIGCONT; it is reported as `NEMESIS WINDOW`. A check whose
//!    line is written only after the SIGCONT counts as passed before the
//!    SIGSTOP when its lease was asked before it (`asked_ms`: a lease lasts
//!    1 s of monotonic time, the pause longer, so a check run after the
//!    SIGCONT on it would fail). Any other effect, and any lease check
//!    passed after the SIGCONT, fails the test.
//! 2. **partition**: the leader's engine is cut off from the other managers'
//!    swarm ports with iptables rules (see `support::nemesis::Partition` for
//!    the rules and what `ss -tnp` showed about loopback source addresses),
//!    held until another manager leads and 10 s more, then healed. The rules
//!    are removed by a guard on every exit path.
//! 3. **labels lost**: a follower manager's engine is restarted without
//!    drover's engine labels (`drover.cluster`, `drover.group`,
//!    `drover.link`), as configuration management rewriting `daemon.json`
//!    would; held past the group's `startup_timeout`; then restarted with
//!    them again (if its machine still exists). The victim is one the roll
//!    has no reason to touch (on the desired config, named by no journaled
//!    operation) and its machine stays up while its engine restarts, so
//!    drover sees a running raft member that lost its labels (not a stopped
//!    machine, which it heals at once).
//!
//! For all of them: the 200 ms quorum watcher never sees fewer reachable
//! managers than quorum (the partitioned engine's own minority view is not
//! asked; a leaderless stretch during a fault is an election unless it lasts
//! more than 45 s); no machine is destroyed while its node is a raft member
//! (from the watcher's samples of raft members and machines, and the destroy
//! events); every raft removal in the engines' logs (`manager removed from
//! raft cluster`) was announced by a `demote` event or done by the nemesis;
//! and once the faults are healed the roll completes at the declared shape
//! with an empty journal.
//!
//! Managers are cattle (`size: 3`) rolled with `strategy: surge`: the raft
//! never has fewer than 3 members in a surge roll, so any one fault the
//! nemesis injects leaves a quorum wherever it lands but one instant: swarm
//! adds a joining manager as a voter at once and its leader counts it
//! unreachable until its first message arrives (~70 ms measured), so a
//! fault at that instant shows one sample of 2 of 4 reachable. The watcher
//! forgives exactly that (one sample, one new unreachable member, quorum
//! without it, the next sample whole: `support::nemesis::join_window`) and
//! counts it. With `replace` a fault in the FT-0 window between a demote
//! and the replacement's join would lose quorum by itself and prove nothing
//! about drover.
//!
//! Everything started is stopped by PID when the lab drops, also on failure.
//! Logs kept: `target/tmp/nemesis-<store>/` (dockerd and controller logs of
//! every machine, with the timeline) when the test fails.

mod support;

use drover_core::journal::Step;
use drover_core::model::tags;
use drover_spi::{Event, Store, StoreError};
use std::collections::{BTreeMap, BTreeSet};
use std::future::Future;
use std::path::PathBuf;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use support::nemesis::{self, Fault, Partition, Seen, rfc3339_ms, wall_ms};
use support::{Lab, assert_converged_shape, bounded};

const ETCD_NET: u8 = 86;
const SWARM_NET: u8 = 87;
/// The managers group's size.
const MANAGERS: usize = 3;
/// The managers' `health.startup_timeout` (the labels-lost hold outlasts it).
const STARTUP_TIMEOUT_S: u64 = 20;
/// Controllers log at info, as JSON: the paused controller's own log is
/// one of the proofs. The controllers inherit it from the `apply` that
/// makes the first manager.
const LOG_ENV: &[(&str, &str)] = &[("DROVER_LOG", "info"), ("DROVER_LOG_FORMAT", "json")];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nemesis_on_the_etcd_store() {
    bounded(600, nemesis(false)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nemesis_on_the_swarm_store() {
    bounded(600, nemesis(true)).await;
}

fn spec(lab: &Lab, label: &str) -> PathBuf {
    let text = format!(
        "groups:
- name: managers
  role: manager
  allocation: {{size: {MANAGERS}}}
  instance: {{provider: local}}
  flavor: {{engine_labels: {{release: {label}}}}}
  update: {{strategy: surge, watch: 5s}}
  health: {{startup_timeout: {STARTUP_TIMEOUT_S}s, unhealthy_after: 30s}}
- name: workers
  role: worker
  allocation: {{size: 2}}
  instance: {{provider: local}}
  flavor: {{engine_labels: {{release: {label}}}}}
  update: {{watch: 2s}}
  health: {{startup_timeout: {STARTUP_TIMEOUT_S}s, unhealthy_after: 30s}}
"
    );
    let path = lab.dir.join(format!("nemesis-{label}.yaml"));
    std::fs::write(&path, text).expect("write spec");
    path
}

type StoreCall<'a, T> = Pin<Box<dyn Future<Output = Result<T, StoreError>> + Send + 'a>>;

/// Everything one run keeps: the lab, a store handle (reopened on another
/// manager when one stops answering: the swarm store lives on them), every
/// event seen (the swarm store keeps only the last 200), the nemesis' own
/// actions, and the failures found (asserted at the end, after every fault
/// ran, so one run shows them all).
struct Run {
    /// Drops before the lab: no controller runs while its teardown does.
    _halt: nemesis::HaltControllers,
    lab: Lab,
    store: Option<Box<dyn Store>>,
    turn: usize,
    events: BTreeMap<String, Event>,
    last_collect: Instant,
    fault: Arc<Mutex<Fault>>,
    keep: PathBuf,
    rev: u64,
    labels: Vec<&'static str>,
    t0: Instant,
    timeline: Vec<String>,
    failures: Vec<String>,
    /// In-flight effects of the paused controller that finished after it
    /// resumed, having begun in the world before it was stopped: the
    /// window that remains (reported, see docs/safety.md).
    windows: Vec<String>,
    /// Node ids the nemesis itself demoted, and when.
    demoted_by_nemesis: Vec<(String, u64)>,
    /// Machines whose engine the nemesis restarted: (id, from, to) ms.
    restarted: Vec<(String, u64, u64)>,
    seen: Arc<Mutex<Seen>>,
    /// What the nemesis started itself, stopped by PID when the run ends.
    spawned: nemesis::Spawned,
}

impl Run {
    fn note(&mut self, what: String) {
        let line = format!("{:7.1}s {what}", self.t0.elapsed().as_secs_f64());
        eprintln!("NEMESIS {line}");
        self.timeline.push(line);
    }

    async fn open(&mut self) -> bool {
        if self.store.is_some() {
            return true;
        }
        if !self.lab.swarm_store {
            self.store = drover_store::open(&self.lab.etcd.url).await.ok();
            return self.store.is_some();
        }
        let eps = self.lab.manager_endpoints();
        for i in 0..eps.len() {
            let e = &eps[(self.turn + i) % eps.len()];
            if let Ok(Ok(s)) = tokio::time::timeout(
                Duration::from_secs(3),
                drover_store::open(&format!("swarm:{e}")),
            )
            .await
            {
                self.store = Some(s);
                return true;
            }
        }
        false
    }

    /// One store call with a 5 s bound; on any failure the handle is
    /// dropped and the next call opens one on another manager.
    async fn call<T>(
        &mut self,
        f: impl for<'a> Fn(&'a dyn Store) -> StoreCall<'a, T>,
    ) -> Option<T> {
        for _ in 0..3 {
            if !self.open().await {
                tokio::time::sleep(Duration::from_millis(300)).await;
                continue;
            }
            let s = self.store.as_deref().unwrap();
            match tokio::time::timeout(Duration::from_secs(5), f(s)).await {
                Ok(Ok(v)) => return Some(v),
                _ => {
                    self.store = None;
                    self.turn += 1;
                }
            }
        }
        None
    }

    /// Collects new events (at most every 500 ms).
    async fn tick(&mut self) {
        if self.last_collect.elapsed() < Duration::from_millis(500) {
            return;
        }
        self.last_collect = Instant::now();
        if let Some(evs) = self.call(|s| Box::pin(s.events(0))).await {
            for e in evs {
                self.events.entry(format!("{e:?}")).or_insert(e);
            }
        }
    }

    async fn sleep(&mut self, d: Duration) {
        let until = Instant::now() + d;
        while Instant::now() < until {
            self.tick().await;
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    fn apply(&mut self, label: &str, wait: bool) {
        let spec = spec(&self.lab, label);
        let mut args = vec!["apply", "-f", spec.to_str().unwrap(), "--timeout", "8m"];
        if wait {
            args.push("--wait");
        }
        // The swarm store's address is the first manager machine's engine,
        // which may be one joining or leaving right now: retried then.
        for _ in 0..10 {
            let out = self.lab.drover_with(&args, LOG_ENV);
            if out.status.code() == Some(0) {
                return;
            }
            // (How drover says the store could not be opened: the swarm
            // store's engine unreachable, not a manager yet or any more, or
            // not answering within --store-timeout; exit 1, never 2.)
            let err = String::from_utf8_lossy(&out.stderr);
            let unopened = [
                "cannot open the store",
                "cannot reach the docker engine",
                "is not a reachable swarm manager",
                "did not answer within",
            ];
            assert!(
                out.status.code() == Some(1) && unopened.iter().any(|m| err.contains(m)),
                "apply {label} failed: {err}"
            );
            std::thread::sleep(Duration::from_secs(2));
        }
        panic!("apply {label}: the store could not be opened");
    }

    /// Commits the next spec (a new engine label: every machine is rolled).
    async fn roll(&mut self) {
        let label = self.labels.remove(0);
        self.apply(label, false);
        self.rev = self
            .call(|s| Box::pin(s.desired()))
            .await
            .flatten()
            .expect("a desired revision")
            .rev;
        self.note(format!("committed spec {label} (revision {})", self.rev));
    }

    async fn converged(&mut self) -> bool {
        let rev = self.rev;
        self.call(|s| Box::pin(s.history()))
            .await
            .is_some_and(|h| h.iter().any(|r| r.rev == rev && r.converged))
    }

    /// A fault is injected during a roll: if the last one converged, the
    /// next spec is committed first.
    async fn ensure_rolling(&mut self) {
        if self.converged().await {
            self.note("the roll had converged: rolling again".into());
            self.roll().await;
        }
    }

    /// Stops the run: the checks of the samples and logs so far, then a
    /// panic with the timeline and every failure found.
    fn abort(&mut self, why: String) -> ! {
        let seen = self.seen.clone();
        if let Ok(s) = seen.lock() {
            destroyed_members(self, &s);
            eprintln!("NEMESIS watcher: {}", s.summary());
        }
        unannounced_removals(self);
        dump(self);
        panic!(
            "{why}\ntimeline:\n{}\nfailures found so far:\n{}",
            self.timeline.join("\n"),
            self.failures.join("\n")
        );
    }

    /// Waits (bounded) until a manager answers with a whole raft: at least
    /// 3 members, every one reachable, a leader. Its node list.
    async fn whole_raft(&mut self, limit: Duration) -> Vec<drover_core::model::Node> {
        let t = Instant::now();
        loop {
            if let Some(nodes) = self.lab.nodes().await {
                let members: Vec<_> = nodes.iter().filter_map(|n| n.raft.as_ref()).collect();
                if members.len() >= 3
                    && members.iter().all(|r| r.reachable)
                    && members.iter().any(|r| r.leader)
                {
                    return nodes;
                }
            }
            if t.elapsed() > limit {
                let nodes = self.lab.nodes().await;
                self.abort(format!(
                    "the raft was not whole within {limit:?}: {nodes:#?}"
                ));
            }
            self.tick().await;
            tokio::time::sleep(Duration::from_millis(300)).await;
        }
    }

    fn record_of(&self, n: &drover_core::model::Node) -> Option<drover_local::InstanceRecord> {
        let addr = n
            .raft
            .as_ref()
            .map(|r| r.addr.split(':').next().unwrap_or("").to_string());
        self.lab.records().into_iter().find(|r| {
            (n.link.is_some() && r.tags.get(tags::LINK) == n.link.as_ref())
                || addr.as_deref() == Some(r.address.as_str())
        })
    }

    /// Fault 1: pause the acting controller past a hand-over, the moment a
    /// step intent of its epoch (of step `at`, if given) is journaled.
    async fn pause(&mut self, at: Option<Step>) {
        self.ensure_rolling().await;
        // The acting controller, the moment a step intent of its epoch shows.
        let t = Instant::now();
        let (epoch, holder, intents) = loop {
            assert!(
                t.elapsed() < Duration::from_secs(150),
                "no step intent ({at:?}) journaled by the acting controller"
            );
            let leader = self.call(|s| Box::pin(s.leader())).await.flatten();
            let journal = self.call(|s| Box::pin(s.journal())).await;
            if let (Some((epoch, holder)), Some(journal)) = (leader, journal) {
                let intents: BTreeSet<String> = journal
                    .iter()
                    .filter_map(|o| {
                        let i = o.intent.as_ref()?;
                        (i.epoch == epoch && at.is_none_or(|s| s == i.step))
                            .then(|| format!("{} {:?}", o.id, i.step))
                    })
                    .collect();
                if !intents.is_empty() {
                    break (epoch, holder, intents);
                }
            }
            tokio::time::sleep(Duration::from_millis(30)).await;
        };
        let machine = self
            .lab
            .records()
            .into_iter()
            .find(|r| r.tags.get(tags::LINK) == Some(&holder))
            .expect("the acting controller's machine");
        let pid = nemesis::controller_pid(&machine).expect("the acting controller's PID");
        let log = machine.socket.parent().unwrap().join("controller.log");
        let stopped = nemesis::Stopped::stop(pid);
        let stopped_at = wall_ms();
        // Stopped: it writes nothing more until SIGCONT.
        let offset = std::fs::metadata(&log).map(|m| m.len()).unwrap_or(0);
        self.note(format!(
            "PAUSE: SIGSTOP controller {pid} of {} ({holder}, epoch {epoch}), intents {intents:?}",
            machine.id
        ));

        // Its engine's leadership moves away: its node is demoted from
        // another manager's engine.
        self.fault.lock().unwrap().on = true;
        let nodes = self.lab.nodes().await.expect("the swarm answers");
        let own = nodes
            .iter()
            .find(|n| n.link.as_ref() == Some(&holder) && n.raft.is_some())
            .expect("the paused controller's node is a raft member")
            .clone();
        let other = nodes
            .iter()
            .filter(|n| n.id != own.id && n.raft.as_ref().is_some_and(|r| r.reachable))
            .find_map(|n| self.record_of(n))
            .expect("another reachable manager");
        let mut tries = 0;
        loop {
            let engine = drover_engine::Engine::connect(&other.endpoint())
                .await
                .expect("connect");
            match engine.demote(&own.id, &drover_spi::Unfenced).await {
                Ok(()) => break,
                Err(e) => {
                    tries += 1;
                    assert!(tries < 20, "could not demote {}: {e}", own.id);
                    tokio::time::sleep(Duration::from_millis(300)).await;
                }
            }
        }
        let demoted_at = wall_ms();
        self.demoted_by_nemesis.push((own.id.clone(), demoted_at));
        self.note(format!(
            "PAUSE: demoted node {} (leader: {}) through {}'s engine",
            own.id,
            own.raft.as_ref().is_some_and(|r| r.leader),
            other.id
        ));

        // Kept stopped past the hand-over: the next controller's term.
        let t = Instant::now();
        let (epoch2, holder2) = loop {
            assert!(
                t.elapsed() < Duration::from_secs(120),
                "no controller took over from the paused one"
            );
            if let Some(Some((e, h))) = self.call(|s| Box::pin(s.leader())).await
                && e > epoch
            {
                break (e, h);
            }
            self.tick().await;
            tokio::time::sleep(Duration::from_millis(200)).await;
        };
        let t = Instant::now();
        let took_over = loop {
            self.tick().await;
            let marker = format!("epoch {epoch2}");
            if let Some(e) = self
                .events
                .values()
                .find(|e| e.action == "took-over" && e.outcome == marker)
            {
                break e.at_ms;
            }
            assert!(
                t.elapsed() < Duration::from_secs(60),
                "no took-over event for epoch {epoch2}"
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        };
        self.note(format!(
            "PAUSE: {holder2} took over with epoch {epoch2}, {} ms after the demote",
            took_over.saturating_sub(demoted_at)
        ));
        self.sleep(Duration::from_secs(5)).await;
        stopped.resume();
        let resumed = wall_ms();
        self.note(format!("PAUSE: SIGCONT controller {pid}"));
        self.sleep(Duration::from_secs(12)).await;
        self.fault.lock().unwrap().on = false;

        // Its own log after SIGCONT: nothing started, confirmed, finished,
        // made or destroyed, except an act whose lease check had passed
        // before the SIGSTOP (docs/safety.md §5: the window that remains).
        let text = std::fs::read(&log)
            .or_else(|_| std::fs::read(self.keep.join(format!("{}.controller.log", machine.id))))
            .unwrap_or_default();
        let cut = (offset as usize).min(text.len());
        let mut before = parse_log(&String::from_utf8_lossy(&text[..cut]));
        let after = String::from_utf8_lossy(&text[cut..]).into_owned();
        // A lease check logged after the SIGCONT on a lease asked before
        // the SIGSTOP passed before it: the lease lasts 1 s (monotonic) and
        // the pause lasts longer, so a check run after the SIGCONT on it
        // fails. The process was stopped between the check and its line.
        let mut late_checks = Vec::new();
        for line in after.lines() {
            if let Some(l) = LogLine::parse(line)
                && l.message == "term confirmed"
                && l.epoch == Some(epoch)
                && l.asked_ms.is_some_and(|a| a < stopped_at)
            {
                late_checks.push(line.to_string());
                before.push(l);
            }
        }
        let armed = armed_calls(&before, epoch);
        for (op, step) in &armed {
            // Its last lease check, against the SIGSTOP.
            let checked = before
                .iter()
                .rev()
                .find(|l| l.message == "term confirmed" && l.op == *op)
                .and_then(|l| l.at_ms)
                .map_or("?".into(), |t| stopped_at.saturating_sub(t).to_string());
            self.note(format!(
                "PAUSE: in flight at the SIGSTOP, its lease check passed {checked} ms before \
                 it: {op} {step}"
            ));
        }
        let mut lines_after = Vec::new();
        for line in after.lines() {
            let Some(l) = LogLine::parse(line) else {
                continue;
            };
            lines_after.push(line.to_string());
            let at = l.at_ms.map_or(0, |t| t.saturating_sub(took_over));
            // The call this line is the effect of, if it is one: (what, the
            // step whose lease check it needed).
            let effect: Option<(&str, Option<&(String, String)>)> = match l.message.as_str() {
                // A step whose intent was journaled before the SIGSTOP but
                // that it spawned only after the SIGCONT: no act yet (the act
                // comes after its lease check). It must be seen refused.
                "starting" => {
                    let refused = after.lines().filter_map(LogLine::parse).any(|x| {
                        x.message == "step finished"
                            && x.op == l.op
                            && x.what == l.step
                            && x.outcome != "ok"
                    });
                    if refused {
                        self.note(format!(
                            "PAUSE: {} ({}) spawned after the SIGCONT, ended without acting",
                            l.op, l.step
                        ));
                        None
                    } else {
                        Some(("started a step not seen refused", None))
                    }
                }
                "term confirmed" if late_checks.contains(&line.to_string()) => {
                    self.note(format!(
                        "PAUSE: a lease check on a lease asked before the SIGSTOP, logged after the SIGCONT: {line}"
                    ));
                    None
                }
                "term confirmed" => Some(("passed a lease check", None)),
                "instance destroyed" => Some((
                    "destroyed a machine",
                    armed
                        .iter()
                        .find(|(_, step)| *step == format!("destroy instance {}", l.id)),
                )),
                "instance provisioned" => Some((
                    "provisioned a machine",
                    armed
                        .iter()
                        .find(|(_, step)| step.starts_with("provision ")),
                )),
                "step finished" if l.outcome == "ok" => Some((
                    "completed a step",
                    armed
                        .iter()
                        .find(|(op, step)| *op == l.op && *step == l.what),
                )),
                _ => None,
            };
            match effect {
                Some((what, Some((op, step)))) => {
                    // The new term's own lease checks for the same operation
                    // (it redoes a journaled intent it judges not done).
                    let theirs: Vec<String> = self
                        .controller_log_of(&holder2)
                        .iter()
                        .filter(|x| {
                            x.message == "term confirmed" && x.op == *op && x.epoch == Some(epoch2)
                        })
                        .filter_map(|x| x.at_ms)
                        .map(|t| format!("{:+}", t as i64 - stopped_at as i64))
                        .collect();
                    let w = format!(
                        "pause: the resumed controller {holder} (epoch {epoch}) {what} {at} ms \
                         after {holder2} took over (epoch {epoch2}); its lease check for {op} \
                         ({step}) had passed before it was stopped (the act was in flight \
                         through the pause){}; {holder2}'s own lease checks for {op} at [{}] ms \
                         from the SIGSTOP: {line}",
                        self.engine_term(&l, stopped_at, resumed),
                        theirs.join(", ")
                    );
                    eprintln!("NEMESIS WINDOW {w}");
                    self.windows.push(w);
                }
                Some((what, None)) => self.failures.push(format!(
                    "pause: the paused controller {holder} (epoch {epoch}) {what} after it was \
                     resumed, {at} ms after {holder2} took over with epoch {epoch2}, with no \
                     lease check passed before it was stopped{}: {line}",
                    self.engine_term(&l, stopped_at, resumed)
                )),
                None => {}
            }
        }
        eprintln!(
            "NEMESIS paused controller's log after SIGCONT:\n{}",
            lines_after.join("\n")
        );
        // Its events stop at its epoch: none after the hand-over.
        let late: Vec<String> = self
            .events
            .values()
            .filter(|e| e.controller == holder && e.at_ms > took_over)
            .map(|e| format!("{e:?}"))
            .collect();
        if !late.is_empty() {
            self.failures.push(format!(
                "pause: events of the deposed controller {holder} after the hand-over: {late:?}"
            ));
        }
        // No new intent of its epoch in the journal.
        if let Some(journal) = self.call(|s| Box::pin(s.journal())).await {
            for o in journal {
                if let Some(i) = &o.intent {
                    let key = format!("{} {:?}", o.id, i.step);
                    if i.epoch == epoch && !intents.contains(&key) {
                        self.failures.push(format!(
                            "pause: a new intent of the deposed epoch {epoch}: {key}"
                        ));
                    }
                }
            }
        }
        self.note(format!(
            "PAUSE: done ({} log lines after SIGCONT, resumed {} ms after the take-over)",
            lines_after.len(),
            resumed.saturating_sub(took_over)
        ));
    }

    /// The parsed log of the controller whose identity (its machine's
    /// link) is `holder`, as kept so far.
    fn controller_log_of(&self, holder: &str) -> Vec<LogLine> {
        let Some(r) = self
            .lab
            .records()
            .into_iter()
            .find(|r| r.tags.get(tags::LINK).map(String::as_str) == Some(holder))
        else {
            return Vec::new();
        };
        parse_log(&nemesis::kept_log(&self.keep, &r.id, "controller.log"))
    }

    /// For a destroy: when the machine's engine logged a SIGTERM, against
    /// the SIGSTOP and the SIGCONT (the world's side of the act; a SIGTERM
    /// between them is not the paused controller's: the new term's own
    /// destroy of the same machine, its intent judged from the world).
    fn engine_term(&self, l: &LogLine, stopped_at: u64, resumed: u64) -> String {
        if l.message != "instance destroyed" {
            return String::new();
        }
        let terms: Vec<String> = nemesis::kept_log(&self.keep, &l.id, "dockerd.log")
            .lines()
            .filter(|x| x.contains("Processing signal 'terminated'"))
            .filter_map(|x| {
                x.split("time=\"")
                    .nth(1)?
                    .split('"')
                    .next()
                    .and_then(rfc3339_ms)
            })
            .map(|t| format!("{:+}", t as i64 - stopped_at as i64))
            .collect();
        if terms.is_empty() {
            return "; its engine logged no SIGTERM".into();
        }
        format!(
            "; its engine logged SIGTERM at {} ms from the SIGSTOP (SIGCONT at +{} ms)",
            terms.join(", "),
            resumed.saturating_sub(stopped_at)
        )
    }

    /// Fault 3: a follower manager's engine restarted without drover's labels.
    ///
    /// The victim is chosen so that the roll has no reason to touch it: a
    /// follower already on the desired config, named by no journaled
    /// operation (as victim or target), at a moment the raft has exactly
    /// the declared number of members (with a surplus member, a surge's
    /// joined new one, a new term may retire one by scale-in, which ranks
    /// an unreachable member first: the victim, while its engine restarts),
    /// waited for while the roll makes one. Its machine stays up while its engine restarts (see
    /// `nemesis::restart_engine`), so what drover sees is exactly a running
    /// raft member whose engine lost its labels.
    async fn labels_lost(&mut self) {
        let t = Instant::now();
        let victim = loop {
            self.ensure_rolling().await;
            let nodes = self.whole_raft(Duration::from_secs(120)).await;
            if let Some(v) = self.stable_follower(&nodes).await {
                break v;
            }
            if t.elapsed() > Duration::from_secs(90) {
                self.abort(
                    "no follower manager on the desired config outside every operation, \
                     with no surplus raft member, within 90s"
                        .into(),
                );
            }
            self.sleep(Duration::from_millis(500)).await;
        };
        let dir = self.lab.dir.clone();
        let from = wall_ms();
        let engine_labels = nemesis::engine_labels(&victim);
        let without: BTreeMap<String, String> = engine_labels
            .iter()
            .filter(|(k, _)| !k.starts_with("drover."))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        let first = nemesis::restart_engine(&dir, &victim, &without, &self.spawned).await;
        let mut gone = false;
        match first {
            Ok(nemesis::Restart::Running(pid)) => self.note(format!(
                "LABELS: restarted {}'s engine (now {pid}) with labels {without:?} (it had \
                 {engine_labels:?})",
                victim.id
            )),
            Ok(nemesis::Restart::Replaced(why)) => {
                gone = true;
                self.note(format!(
                    "LABELS: {} went while its engine restarted without labels: {why}",
                    victim.id
                ));
            }
            Err(e) => self.abort(format!("LABELS: restarting {}: {e}", victim.id)),
        }
        self.sleep(Duration::from_secs(STARTUP_TIMEOUT_S + 15))
            .await;
        // What drover saw meanwhile: a raft member at its address with no link.
        let unlabelled: Vec<(u64, bool)> = self
            .seen
            .lock()
            .unwrap()
            .samples
            .iter()
            .filter(|x| x.at_ms >= from)
            .filter_map(|x| {
                let m = x
                    .members
                    .as_ref()?
                    .iter()
                    .find(|m| m.addr == victim.address)?;
                m.link.is_none().then_some((x.at_ms, m.reachable))
            })
            .collect();
        if let (Some(first), Some(last)) = (unlabelled.first(), unlabelled.last()) {
            self.note(format!(
                "LABELS: {} was a raft member without a link for {:.1}s (reachable in {} of {} \
                 samples)",
                victim.address,
                (last.0 - first.0) as f64 / 1000.0,
                unlabelled.iter().filter(|(_, r)| *r).count(),
                unlabelled.len()
            ));
        }
        let now = self.lab.records().into_iter().find(|r| r.id == victim.id);
        match now {
            Some(r) if !gone && nemesis::engine_pid(&r).is_some() => {
                match nemesis::restart_engine(&dir, &r, &engine_labels, &self.spawned).await {
                    Ok(nemesis::Restart::Running(pid)) => self.note(format!(
                        "LABELS: {} restarted with its labels (now {pid})",
                        r.id
                    )),
                    Ok(nemesis::Restart::Replaced(why)) => self.note(format!(
                        "LABELS: {} went while its engine restarted: {why}",
                        r.id
                    )),
                    Err(e) => self.abort(format!("LABELS: restarting {}: {e}", r.id)),
                }
            }
            _ => self.note(format!(
                "LABELS: {} is gone (drover replaced it)",
                victim.id
            )),
        }
        self.restarted.push((victim.id.clone(), from, wall_ms()));
        self.whole_raft(Duration::from_secs(120)).await;
    }

    /// A follower manager on the desired config that no journaled
    /// operation names (as victim or target), if there is one now and the
    /// raft has no surplus member.
    async fn stable_follower(
        &mut self,
        nodes: &[drover_core::model::Node],
    ) -> Option<drover_local::InstanceRecord> {
        if nodes.iter().filter(|n| n.raft.is_some()).count() != MANAGERS {
            return None;
        }
        // The published status's desired hash per group (read through the
        // run's store handle, which moves to another manager when one fails).
        let status = self.call(|s| Box::pin(s.status())).await.flatten()?;
        let desired = status["groups"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|g| g["name"].as_str() == Some("managers"))
            .and_then(|g| g["desired_hash"].as_str())
            .map(str::to_string)?;
        let journal = self.call(|s| Box::pin(s.journal())).await?;
        // Instance ids and links the journal names: each operation's victim,
        // and its new member (whose link is the operation's id).
        let named: BTreeSet<String> = journal
            .iter()
            .flat_map(|o| {
                let v = o.victim.as_ref();
                [
                    v.and_then(|v| v.instance.clone()),
                    v.and_then(|v| v.link.clone()),
                    Some(o.id.clone()),
                ]
            })
            .flatten()
            .collect();
        nodes
            .iter()
            .filter(|n| n.raft.as_ref().is_some_and(|r| !r.leader && r.reachable))
            .filter_map(|n| self.record_of(n))
            .filter(|r| r.tags.get(tags::GROUP).map(String::as_str) == Some("managers"))
            .filter(|r| r.tags.get(tags::CONFIG) == Some(&desired))
            .find(|r| {
                !named.contains(&r.id) && r.tags.get(tags::LINK).is_none_or(|l| !named.contains(l))
            })
    }

    /// Fault 2: the leader's engine partitioned from the other managers.
    async fn partition(&mut self) {
        self.ensure_rolling().await;
        let nodes = self.whole_raft(Duration::from_secs(120)).await;
        let leader = support::leader(&nodes).clone();
        let machine = self.record_of(&leader).expect("the leader's machine");
        let pid = nemesis::engine_pid(&machine).expect("the leader's dockerd");
        let peers: Vec<String> = nodes
            .iter()
            .filter(|n| n.id != leader.id)
            .filter_map(|n| n.raft.as_ref())
            .map(|r| r.addr.split(':').next().unwrap_or("").to_string())
            .collect();
        {
            let mut f = self.fault.lock().unwrap();
            f.on = true;
            f.skip.insert(machine.endpoint());
        }
        let tag = format!("drover-nemesis-{}", self.lab.net);
        let cut = Partition::isolate(pid, &machine.address, &peers, &tag);
        for r in &cut.report {
            eprintln!("NEMESIS partition: {r}");
        }
        self.note(format!(
            "PARTITION: leader {} ({}, {}) cut off from {peers:?}",
            leader.id, machine.id, machine.address
        ));
        // Held past an election: another manager leads, then 10 s more.
        let t = Instant::now();
        loop {
            let others: Vec<drover_local::InstanceRecord> = self
                .lab
                .records()
                .into_iter()
                .filter(|r| r.id != machine.id)
                .collect();
            if let Ok(nodes) = support::observe_any(&others).await
                && nodes
                    .iter()
                    .any(|n| n.id != leader.id && n.raft.as_ref().is_some_and(|r| r.leader))
            {
                break;
            }
            assert!(
                t.elapsed() < Duration::from_secs(90),
                "no new leader while the old one was partitioned"
            );
            self.tick().await;
            tokio::time::sleep(Duration::from_millis(300)).await;
        }
        self.note(format!(
            "PARTITION: another manager leads after {:.1}s",
            t.elapsed().as_secs_f64()
        ));
        self.sleep(Duration::from_secs(10)).await;
        cut.heal();
        self.note("PARTITION: healed (rules deleted, cgroup removed)".into());
        self.fault.lock().unwrap().skip.clear();
        // The healed engine rejoins (a re-election may follow): still a fault
        // window until the raft is whole again.
        self.whole_raft(Duration::from_secs(120)).await;
        self.sleep(Duration::from_secs(3)).await;
        self.fault.lock().unwrap().on = false;
    }
}

/// One JSON line of a controller's log (tracing's JSON format).
#[derive(Debug, Default)]
struct LogLine {
    at_ms: Option<u64>,
    message: String,
    op: String,
    /// `starting`'s step.
    step: String,
    /// `step finished`'s step and outcome.
    what: String,
    outcome: String,
    /// The instance of `instance destroyed` / `instance provisioned`.
    id: String,
    epoch: Option<u64>,
    /// `term confirmed`'s: when its lease was asked of the store.
    asked_ms: Option<u64>,
}

impl LogLine {
    fn parse(line: &str) -> Option<LogLine> {
        let v = serde_json::from_str::<serde_json::Value>(line).ok()?;
        let f = &v["fields"];
        let field = |k: &str| f[k].as_str().unwrap_or("").to_string();
        Some(LogLine {
            at_ms: rfc3339_ms(v["timestamp"].as_str().unwrap_or("")),
            message: field("message"),
            op: field("op"),
            step: field("step"),
            what: field("what"),
            outcome: field("outcome"),
            id: field("id"),
            epoch: f["epoch"].as_u64(),
            asked_ms: f["asked_ms"].as_u64(),
        })
    }
}

fn parse_log(text: &str) -> Vec<LogLine> {
    text.lines().filter_map(LogLine::parse).collect()
}

/// The calls in flight when the log ends whose lease check had passed: for
/// each operation whose last `starting` line is not followed by its `step
/// finished`, that step, if a `term confirmed` line of the operation (at
/// `epoch`) follows the `starting` one. (op, step).
fn armed_calls(lines: &[LogLine], epoch: u64) -> Vec<(String, String)> {
    let mut open: BTreeMap<String, (String, bool)> = BTreeMap::new();
    for l in lines {
        match l.message.as_str() {
            "starting" => {
                open.insert(l.op.clone(), (l.step.clone(), false));
            }
            "term confirmed" if l.epoch == Some(epoch) => {
                if let Some(o) = open.get_mut(&l.op) {
                    o.1 = true;
                }
            }
            "step finished" => {
                open.remove(&l.op);
            }
            _ => {}
        }
    }
    open.into_iter()
        .filter(|(_, (_, confirmed))| *confirmed)
        .map(|(op, (step, _))| (op, step))
        .collect()
}

/// Every `manager removed from raft cluster` line in the kept dockerd logs:
/// (node id, ms, machine).
fn raft_removals(keep: &std::path::Path) -> Vec<(String, u64, String)> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(keep).into_iter().flatten().flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        let Some(id) = name.strip_suffix(".dockerd.log") else {
            continue;
        };
        let text = std::fs::read_to_string(e.path()).unwrap_or_default();
        for l in text.lines() {
            if !l.contains("manager removed from raft cluster") {
                continue;
            }
            let at = l
                .split("time=\"")
                .nth(1)
                .and_then(|r| r.split('"').next())
                .and_then(rfc3339_ms);
            let node = l
                .split("node.id=")
                .nth(1)
                .map(|r| r.split_whitespace().next().unwrap_or("").to_string());
            if let (Some(at), Some(node)) = (at, node) {
                out.push((node, at, id.to_string()));
            }
        }
    }
    out
}

async fn nemesis(swarm: bool) {
    let (net, name) = if swarm {
        (SWARM_NET, "swarm")
    } else {
        (ETCD_NET, "etcd")
    };
    let lab = if swarm {
        Lab::with_swarm_store(net).await
    } else {
        Lab::new(net).await
    };
    // The nemesis restarts engines itself, with other labels, as
    // configuration management restarting docker would
    // (`nemesis::restart_engine`): a supervisor restarting them with their
    // old labels would race it. Its machines are their dockerds.
    let mut lab = lab;
    lab.supervise = false;
    let keep = lab.dir.join("keep");
    let stop = Arc::new(AtomicBool::new(false));
    let fault = Arc::new(Mutex::new(Fault::default()));
    let seen = Arc::new(Mutex::new(Seen::default()));
    let mut run = Run {
        _halt: nemesis::HaltControllers(lab.dir.clone()),
        lab,
        store: None,
        turn: 0,
        events: BTreeMap::new(),
        last_collect: Instant::now() - Duration::from_secs(1),
        fault: fault.clone(),
        keep: keep.clone(),
        rev: 0,
        labels: vec!["two", "three", "four", "five"],
        t0: Instant::now(),
        timeline: Vec::new(),
        failures: Vec::new(),
        windows: Vec::new(),
        demoted_by_nemesis: Vec::new(),
        restarted: Vec::new(),
        seen: seen.clone(),
        spawned: nemesis::Spawned::default(),
    };
    let saved = SaveOnFailure {
        keep: keep.clone(),
        to: PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!("nemesis-{name}")),
    };
    run.apply("one", true);
    let up = run.t0.elapsed();
    assert_converged_shape(&run.lab).await;
    run.note(format!("bring-up done in {:.1}s", up.as_secs_f64()));
    let watcher = nemesis::watch(
        run.lab.dir.clone(),
        keep.clone(),
        stop.clone(),
        fault.clone(),
        seen.clone(),
    );
    let t1 = Instant::now();
    run.roll().await;
    // Paused as its first step starts (a provision) on etcd; as it is about
    // to destroy a machine (a provider call its demoted engine cannot stop)
    // on the swarm store.
    run.pause(if swarm { Some(Step::Destroy) } else { None })
        .await;
    run.partition().await;
    run.labels_lost().await;

    // Every fault healed: the roll completes.
    let t = Instant::now();
    while !run.converged().await {
        if t.elapsed() > Duration::from_secs(240) {
            let status = run.call(|s| Box::pin(s.status())).await;
            run.abort(format!(
                "the roll did not complete after the faults; status {status:#?}"
            ));
        }
        run.tick().await;
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    let rolled = t1.elapsed();
    run.note(format!("revision {} converged", run.rev));
    // Stale nodes of replaced machines go once Down (13-16 s): the shape is
    // checked when it settles (bounded), then asserted.
    let t = Instant::now();
    while t.elapsed() < Duration::from_secs(90) {
        if settled(&run.lab).await {
            break;
        }
        run.tick().await;
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    run.tick().await;
    stop.store(true, Ordering::SeqCst);
    watcher.await.unwrap();
    let seen = std::mem::take(&mut *seen.lock().unwrap());

    // No machine destroyed while its node was a raft member.
    destroyed_members(&mut run, &seen);
    // Every raft removal the engines logged was announced or the nemesis'.
    unannounced_removals(&mut run);

    dump(&run);
    eprintln!(
        "PHASES ({name} store): bring-up {:.1}s, roll with three faults {:.1}s, whole test {:.1}s; {}",
        up.as_secs_f64(),
        rolled.as_secs_f64(),
        run.t0.elapsed().as_secs_f64(),
        seen.summary()
    );
    assert!(
        run.failures.is_empty(),
        "nemesis ({name} store) found:\n{}",
        run.failures.join("\n")
    );
    seen.watch.assert_quorum_kept();
    assert_converged_shape(&run.lab).await;
    let journal = run.call(|s| Box::pin(s.journal())).await.expect("journal");
    assert!(
        journal.is_empty(),
        "operations left in the journal: {journal:#?}"
    );
    saved.passed();
}

/// The timeline, every event seen (oldest first) and every raft removal
/// the engines logged, for the test log.
fn dump(run: &Run) {
    eprintln!("NEMESIS timeline:\n{}", run.timeline.join("\n"));
    for w in &run.windows {
        eprintln!("NEMESIS WINDOW {w}");
    }
    let mut events: Vec<&Event> = run.events.values().collect();
    events.sort_by_key(|e| e.at_ms);
    for e in events {
        eprintln!(
            "EVENT {} by {} [{}] {} {}: {} ({})",
            e.at_ms,
            e.controller,
            e.op.as_deref().unwrap_or("-"),
            e.action,
            e.target.as_deref().unwrap_or(""),
            e.reason,
            e.outcome
        );
    }
    for (node, at, machine) in raft_removals(&run.keep) {
        eprintln!(
            "ENGINE {at} {machine}: its node {node} logged \"manager removed from raft cluster\""
        );
    }
}

/// The declared shape, without asserting (see `assert_converged_shape`).
async fn settled(lab: &Lab) -> bool {
    let Some(nodes) = lab.nodes().await else {
        return false;
    };
    let members = nodes.iter().filter(|n| n.raft.is_some()).count();
    members == MANAGERS
        && nodes.len() == 5
        && nodes
            .iter()
            .all(|n| n.state == drover_core::model::NodeState::Ready)
        && lab.records().len() == 5
}

/// From the watcher's samples: for each machine that went away (its record
/// gone, or its engine stopped when the nemesis was not restarting it), the
/// raft members that were its node (same link, or its address while it
/// existed) must not be raft members in any later sample.
fn destroyed_members(run: &mut Run, seen: &Seen) {
    let mut reported = BTreeSet::new();
    let samples = &seen.samples;
    for (i, s) in samples.iter().enumerate() {
        for m in &s.machines {
            let restarting = run
                .restarted
                .iter()
                .any(|(id, from, to)| *id == m.id && s.at_ms >= *from && s.at_ms <= *to + 5_000);
            let next = samples.get(i + 1);
            let gone = next.is_some_and(|n| {
                n.machines
                    .iter()
                    .find(|x| x.id == m.id)
                    .is_none_or(|x| !x.running && m.running && !restarting)
            });
            if !gone || reported.contains(&m.id) {
                continue;
            }
            let gone_at = next.unwrap().at_ms;
            // Its nodes: raft members with its link, or at its address, in
            // the samples while it ran.
            let own: BTreeSet<String> = samples[..=i]
                .iter()
                .filter(|x| x.machines.iter().any(|y| y.id == m.id))
                .filter_map(|x| x.members.as_ref())
                .flatten()
                .filter(|mem| (m.link.is_some() && mem.link == m.link) || mem.addr == m.address)
                .map(|mem| mem.node.clone())
                .collect();
            // Later samples: one of them still a raft member?
            let later = samples[i + 1..]
                .iter()
                .filter(|x| x.at_ms >= gone_at + 1_000)
                .find_map(|x| {
                    x.members.as_ref()?.iter().find(|mem| {
                        // (Unless that machine runs again: its engine only
                        // stopped for a while. A new machine at the same
                        // address is another node, so node ids decide.)
                        own.contains(&mem.node)
                            && !x.machines.iter().any(|y| y.id == m.id && y.running)
                    })
                });
            if let Some(mem) = later {
                reported.insert(m.id.clone());
                let destroy = run
                    .events
                    .values()
                    .filter(|e| e.reason == format!("destroy instance {}", m.id))
                    .map(|e| {
                        format!(
                            "{} by controller {} in op {} at {}",
                            e.outcome,
                            e.controller,
                            e.op.as_deref().unwrap_or("-"),
                            e.at_ms
                        )
                    })
                    .collect::<Vec<_>>();
                run.failures.push(format!(
                    "machine {} ({}) went away at {gone_at} while its node {} was a raft member \
                     (still a member, reachable: {}, in a sample taken later); destroy events: {destroy:?}",
                    m.id, m.address, mem.node, mem.reachable
                ));
            }
        }
    }
}

/// Every `manager removed from raft cluster` an engine logged must follow a
/// `demote` event naming that node (a controller of a live term announced
/// it; events are fenced) or the nemesis' own demote.
fn unannounced_removals(run: &mut Run) {
    for (node, at, machine) in raft_removals(&run.keep) {
        let by_nemesis = run
            .demoted_by_nemesis
            .iter()
            .any(|(n, t)| *n == node && *t <= at + 2_000);
        let announced = run.events.values().any(|e| {
            e.at_ms <= at + 2_000
                && e.outcome == "started"
                && (e.reason == format!("demote node {node}")
                    || e.reason.starts_with(&format!("demote self ({node})")))
        });
        if !by_nemesis && !announced {
            run.failures.push(format!(
                "engine of {machine} logged its node {node} removed from the raft at {at} \
                 with no demote event for it and no nemesis demote"
            ));
        }
    }
}

/// Copies the kept logs (and nothing else) next to the test's target dir
/// when the test fails, for the diagnosis.
struct SaveOnFailure {
    keep: PathBuf,
    to: PathBuf,
}

impl SaveOnFailure {
    fn passed(self) {
        std::mem::forget(self);
    }
}

impl Drop for SaveOnFailure {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.to);
        let _ = std::fs::create_dir_all(&self.to);
        for e in std::fs::read_dir(&self.keep)
            .into_iter()
            .flatten()
            .flatten()
        {
            let _ = std::fs::copy(e.path(), self.to.join(e.file_name()));
        }
        eprintln!("NEMESIS: logs kept in {}", self.to.display());
    }
}
