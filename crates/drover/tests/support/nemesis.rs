//! Fault injection on real engines (issue 15, the nemesis): a quorum watcher
//! that knows when a fault is on, the acting controller's PID, an engine
//! restarted with other labels, a network partition of one engine made of
//! iptables rules that a guard removes, and the engines' and controllers'
//! logs kept past their machines' destruction.
//!
//! Everything here undoes what it did by the exact thing it recorded: the
//! partition deletes exactly the rules it added (by their spec) and the
//! cgroup it made, on drop, also when the test panics.

use super::observe_any;
use drover_core::model::tags;
use drover_core::quorum::quorum;
use drover_local::{InstanceRecord, LocalProvider};
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// Wall-clock ms since the Unix epoch (the events' clock).
pub fn wall_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

/// An RFC 3339 UTC time (dockerd's `time="…"`, tracing's JSON
/// `timestamp`) as ms since the Unix epoch.
pub fn rfc3339_ms(s: &str) -> Option<u64> {
    let t = humantime::parse_rfc3339(s).ok()?;
    Some(t.duration_since(UNIX_EPOCH).ok()?.as_millis() as u64)
}

/// What the nemesis has broken right now, as the watcher must know it.
#[derive(Debug, Default, Clone)]
pub struct Fault {
    /// A fault is on (or just healed): answers without a leader are an
    /// election in progress, not yet a lost quorum. Such a stretch longer
    /// than [`ELECTION_BOUND`] is a violation.
    pub on: bool,
    /// Engines not to ask: a partitioned minority's own view ("1 of 3
    /// reachable") is not the swarm's.
    pub skip: BTreeSet<String>,
}

/// The longest leaderless stretch that is still an election (measured here:
/// 9–24 s after the leader's engine dies, ~9 s after a partition).
pub const ELECTION_BOUND: Duration = Duration::from_secs(45);

/// One raft member in one sample.
#[derive(Debug, Clone)]
pub struct Member {
    pub node: String,
    pub link: Option<String>,
    /// Its advertise address without the port.
    pub addr: String,
    pub reachable: bool,
    pub leader: bool,
}

/// One machine in one sample.
#[derive(Debug, Clone)]
pub struct Machine {
    pub id: String,
    pub link: Option<String>,
    pub address: String,
    pub running: bool,
}

/// One watcher sample: the raft members (when a manager answered) and the
/// machines, at `at_ms`.
#[derive(Debug, Clone)]
pub struct Sample {
    pub at_ms: u64,
    pub members: Option<Vec<Member>>,
    pub machines: Vec<Machine>,
}

/// What the nemesis watcher saw.
#[derive(Default)]
pub struct Seen {
    /// The quorum judgement, as the other suites' watcher makes it.
    pub watch: super::Watch,
    /// Samples answered by nobody with a leader while a fault was on.
    pub leaderless: u64,
    /// The longest such stretch.
    pub longest_leaderless: Duration,
    /// Samples below quorum only because a member that has just joined was
    /// not yet contacted by the leader, beside one fault (see [`record`]).
    pub join_windows: u64,
    /// Such a sample's violation, kept back until the next sample shows
    /// the quorum again (or counted as one if it does not).
    pending_join: Option<String>,
    pub samples: Vec<Sample>,
}

impl Seen {
    pub fn summary(&self) -> String {
        format!(
            "{}; leaderless samples during faults {} (longest stretch {:.1}s); join windows {}",
            self.watch.summary(),
            self.leaderless,
            self.longest_leaderless.as_secs_f64(),
            self.join_windows
        )
    }
}

/// The 200 ms quorum watcher of the other suites (fewer reachable managers
/// than quorum is a violation), aware of the nemesis: the engines in
/// `fault.skip` are not asked, and while `fault.on` a leaderless answer
/// counts as an election unless it lasts longer than [`ELECTION_BOUND`].
/// It also records every sample (raft members and machines) for the
/// "no machine destroyed while a raft member" check, and hard-links each
/// machine's dockerd and controller logs into `keep` so they outlive it.
pub fn watch(
    dir: PathBuf,
    keep: PathBuf,
    stop: Arc<AtomicBool>,
    fault: Arc<Mutex<Fault>>,
    out: Arc<Mutex<Seen>>,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let provider = LocalProvider::new(&dir, Vec::new()).expect("provider");
        let _ = std::fs::create_dir_all(&keep);
        let mut last_ok = Instant::now();
        let mut leaderless_since: Option<Instant> = None;
        while !stop.load(Ordering::SeqCst) {
            let f = fault.lock().unwrap().clone();
            let records = provider.records().unwrap_or_default();
            keep_logs(&records, &keep);
            let machines: Vec<Machine> = records
                .iter()
                .map(|r| Machine {
                    id: r.id.clone(),
                    link: r.tags.get(tags::LINK).cloned(),
                    address: r.address.clone(),
                    running: provider.is_running(r),
                })
                .collect();
            let asked: Vec<InstanceRecord> = records
                .into_iter()
                .filter(|r| !f.skip.contains(&r.endpoint()))
                .collect();
            let at_ms = wall_ms();
            let result = observe_any(&asked).await;
            record(
                &out,
                result,
                &f,
                at_ms,
                machines,
                &mut last_ok,
                &mut leaderless_since,
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        let mut s = out.lock().unwrap();
        if let Some(v) = s.pending_join.take() {
            s.watch.violations.push(v);
        }
    })
}

/// Judges and records one sample.
fn record(
    out: &Mutex<Seen>,
    result: Result<Vec<drover_core::model::Node>, String>,
    f: &Fault,
    at_ms: u64,
    machines: Vec<Machine>,
    last_ok: &mut Instant,
    leaderless_since: &mut Option<Instant>,
) {
    let mut s = out.lock().unwrap();
    s.watch.samples += 1;
    let mut sample = Sample {
        at_ms,
        members: None,
        machines,
    };
    match result {
        Ok(nodes) => {
            let members: Vec<Member> = nodes
                .iter()
                .filter_map(|n| {
                    let r = n.raft.as_ref()?;
                    Some(Member {
                        node: n.id.clone(),
                        link: n.link.clone(),
                        addr: r.addr.split(':').next().unwrap_or("").to_string(),
                        reachable: r.reachable,
                        leader: r.leader,
                    })
                })
                .collect();
            let reachable = members.iter().filter(|m| m.reachable).count();
            let margin = reachable as i64 - quorum(members.len()) as i64;
            let joining = join_window(&s.samples, &members, reachable);
            let below = (margin < 0)
                .then(|| format!("{reachable} of {} managers reachable", members.len()));
            match (below, s.pending_join.take()) {
                (None, _) => {}
                // Once, and shown again by the next sample: the join instant.
                (Some(v), None) if joining => {
                    s.join_windows += 1;
                    s.pending_join = Some(v);
                }
                (Some(v), pending) => s.watch.violations.extend(pending.into_iter().chain([v])),
            }
            let w = &mut s.watch;
            if !joining {
                w.min_margin = Some(w.min_margin.map_or(margin, |m| m.min(margin)));
            }
            w.largest_gap = w.largest_gap.max(last_ok.elapsed());
            w.last_members = Some(members.len());
            *last_ok = Instant::now();
            *leaderless_since = None;
            sample.members = Some(members);
        }
        Err(_) if s.watch.last_members == Some(1) => s.watch.ended += 1,
        Err(e) if f.on => {
            s.leaderless += 1;
            let since = *leaderless_since.get_or_insert_with(Instant::now);
            s.longest_leaderless = s.longest_leaderless.max(since.elapsed());
            if since.elapsed() > ELECTION_BOUND {
                s.watch.violations.push(format!(
                    "no leader for {:.0}s during a fault: {e}",
                    since.elapsed().as_secs_f64()
                ));
                *leaderless_since = None;
            }
        }
        Err(e) if !e.starts_with("no leader") && last_ok.elapsed() < super::SILENCE_BOUND => {
            s.watch.silent += 1
        }
        Err(e) => s.watch.violations.push(e),
    }
    s.samples.push(sample);
}

/// Whether a sample below quorum is the instant a manager joins, beside
/// one fault: exactly one unreachable member is new since the last sample
/// that listed members, and without it the raft has its quorum. Swarm adds
/// a joining manager as a voter at once, and its leader counts it
/// unreachable until its first message reaches it (~70 ms measured): a
/// surge join is a fault-tolerance-0 instant the raft itself imposes. Only
/// a sample of it alone is forgiven; the next must show the quorum again.
fn join_window(samples: &[Sample], members: &[Member], reachable: usize) -> bool {
    let Some(before) = samples.iter().rev().find_map(|x| x.members.as_ref()) else {
        return false;
    };
    let new_unreachable = members
        .iter()
        .filter(|m| !m.reachable && !before.iter().any(|b| b.node == m.node))
        .count();
    new_unreachable == 1 && reachable >= quorum(members.len() - 1)
}

/// Hard-links each machine's `log` (dockerd) and `controller.log` into
/// `keep` (same file system): the provider removes a destroyed machine's
/// directory, the link keeps the file, and writes after the link show too.
fn keep_logs(records: &[InstanceRecord], keep: &Path) {
    for r in records {
        let Some(dir) = r.socket.parent() else {
            continue;
        };
        for (name, kept) in [("log", "dockerd.log"), ("controller.log", "controller.log")] {
            let to = keep.join(format!("{}.{kept}", r.id));
            let from = dir.join(name);
            if !to.exists() && from.exists() {
                let _ = std::fs::hard_link(&from, &to);
            }
        }
    }
}

/// A kept log of machine `id` (`dockerd.log` or `controller.log`).
pub fn kept_log(keep: &Path, id: &str, kind: &str) -> String {
    std::fs::read_to_string(keep.join(format!("{id}.{kind}"))).unwrap_or_default()
}

/// The PID of the `drover controller` process running for machine `r`
/// (found by its command line, which names the machine's engine socket;
/// the restart loop around it, `sh -c …`, is not it).
pub fn controller_pid(r: &InstanceRecord) -> Option<i32> {
    let sock = r.socket.display().to_string();
    drover_local::procs::pids_matching(&sock)
        .into_iter()
        .find(|&p| super::is_controller(p))
}

/// Ends every machine's controller, and the restart loop around it, by
/// verified PID, when dropped: declared before the lab in a run, so it
/// drops first. The lab's teardown lists the machines' directories once;
/// a controller still running then (a failed run stops mid-roll) could
/// provision a machine after the listing, whose engine nothing would stop.
pub struct HaltControllers(pub PathBuf);

/// A lab whose machines' controllers are halted ([`HaltControllers`])
/// before the lab's teardown, also when the test fails.
pub struct Halted {
    // Field order = drop order: the controllers first, then the lab.
    _halt: HaltControllers,
    pub lab: super::Lab,
}

impl Halted {
    pub fn new(lab: super::Lab) -> Halted {
        Halted {
            _halt: HaltControllers(lab.dir.clone()),
            lab,
        }
    }
}

impl Drop for HaltControllers {
    fn drop(&mut self) {
        let provider = match LocalProvider::new(&self.0, Vec::new()) {
            Ok(p) => p,
            Err(_) => return,
        };
        let records = provider.records().unwrap_or_default();
        let mut loops = Vec::new();
        let mut controllers = Vec::new();
        for r in &records {
            let sock = r.socket.display().to_string();
            for p in drover_local::procs::pids_matching(&sock) {
                let Some(c) = drover_local::procs::cmdline(p) else {
                    continue;
                };
                let mut argv = c.split(' ');
                let (a0, a1) = (argv.next().unwrap_or(""), argv.next().unwrap_or(""));
                if a0.ends_with("sh") && a1 == "-c" && c.contains("drover controller") {
                    loops.push((p, sock.clone()));
                } else if a0.ends_with("drover") && a1 == "controller" {
                    controllers.push((p, sock.clone()));
                }
            }
        }
        // The loops first, so that no controller is started again.
        for set in [loops, controllers] {
            for (p, sock) in &set {
                if drover_local::procs::is_ours(*p, sock) {
                    let _ = nix::sys::signal::kill(
                        nix::unistd::Pid::from_raw(*p),
                        nix::sys::signal::Signal::SIGKILL,
                    );
                }
            }
            let t = Instant::now();
            while set.iter().any(|(p, _)| drover_local::procs::is_alive(*p))
                && t.elapsed() < Duration::from_secs(5)
            {
                std::thread::sleep(Duration::from_millis(50));
            }
        }
    }
}

/// The running dockerd of machine `r` (the recorded PID or the pidfile's,
/// verified by command line).
pub fn engine_pid(r: &InstanceRecord) -> Option<i32> {
    let paths = drover_local::EnginePaths::new(r.socket.parent()?);
    drover_local::launcher::running_engine_pid(&paths, r.pid)
}

/// What [`restart_engine`] did.
#[derive(Debug)]
pub enum Restart {
    /// The engine runs again, with the given labels, as this PID.
    Running(i32),
    /// The machine went away (drover destroyed it) during the restart:
    /// nothing the nemesis started is left running; the reason said.
    Replaced(String),
}

/// The processes the nemesis itself started (restarted engines, keepers),
/// with the needle that identifies them: whatever is still alive and still
/// theirs when the run ends (passed or failed) is stopped by its PID. A
/// machine drover destroys takes its processes with it (they carry its
/// mark); this is for one whose directory went while the nemesis was
/// starting something in it.
#[derive(Default)]
pub struct Spawned(Mutex<Vec<(i32, String)>>);

impl Spawned {
    fn add(&self, pid: i32, needle: String) {
        self.0.lock().unwrap().push((pid, needle));
    }
}

impl Drop for Spawned {
    fn drop(&mut self) {
        for (pid, needle) in self.0.lock().unwrap().drain(..) {
            stop_pid(pid, &needle);
        }
    }
}

/// Stops `pid` and its process group (it leads one) if it is alive and its
/// command line still contains `needle` (a recycled PID is never touched):
/// SIGTERM, SIGKILL after 10 s.
fn stop_pid(pid: i32, needle: &str) {
    use nix::sys::signal::{Signal, kill, killpg};
    let p = nix::unistd::Pid::from_raw(pid);
    if !drover_local::procs::is_ours(pid, needle) {
        return;
    }
    let group = drover_local::procs::pgid_of(pid) == Some(pid);
    let send = |sig| {
        if group {
            let _ = killpg(p, sig);
        } else {
            let _ = kill(p, sig);
        }
    };
    send(Signal::SIGTERM);
    let t = Instant::now();
    while drover_local::procs::is_alive(pid) {
        if t.elapsed() > Duration::from_secs(10) {
            send(Signal::SIGKILL);
        }
        if t.elapsed() > Duration::from_secs(15) {
            eprintln!("NEMESIS: process {pid} ({needle}) survived SIGKILL");
            return;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Sets the PID (and process group) machine `inst`'s record names, as the
/// provider writes it (a whole new file renamed into place), only while the
/// record exists: false when it is gone (drover destroyed the machine), and
/// never re-created.
fn set_record_pid(inst: &Path, pid: i32) -> bool {
    let file = inst.join("instance.json");
    let Ok(text) = std::fs::read_to_string(&file) else {
        return false;
    };
    let Ok(mut rec) = serde_json::from_str::<InstanceRecord>(&text) else {
        return false;
    };
    rec.pid = Some(pid);
    rec.pgid = Some(pid);
    let tmp = inst.join("instance.json.nemesis");
    if std::fs::write(&tmp, serde_json::to_vec_pretty(&rec).unwrap()).is_err() {
        let _ = std::fs::remove_file(&tmp);
        return false;
    }
    if !file.exists() {
        let _ = std::fs::remove_file(&tmp);
        return false;
    }
    std::fs::rename(&tmp, &file).is_ok()
}

/// A stand-in for "the machine is up" while its engine restarts: a `sleep`
/// whose command line names the machine's pidfile (what the local provider
/// recognises its engine by) and that carries the machine's mark, recorded
/// as the machine's PID for the few hundred ms between the old dockerd's
/// exit and the new one's start. On a cloud a docker restart leaves the VM
/// running; on the local provider the machine *is* its dockerd, and a
/// describe in that gap reads "machine not running", which drover heals
/// at once (correctly): the scenario would then be "a manager stopped", not
/// "an engine restarted without its labels", and the heal would race the
/// restart. A destroy stops the keeper with the machine's other processes.
struct Keeper {
    pid: i32,
    needle: String,
}

impl Keeper {
    fn start(inst: &Path) -> Result<Keeper, String> {
        use std::os::unix::process::CommandExt;
        let paths = drover_local::EnginePaths::new(inst);
        let needle = paths.needle();
        let mut child = Command::new("sleep")
            .arg0(format!("drover-nemesis-keeper {needle}"))
            .arg("600")
            .env(drover_local::procs::MACHINE_ENV, paths.dir_needle())
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .process_group(0)
            .spawn()
            .map_err(|e| format!("start a keeper: {e}"))?;
        let pid = child.id() as i32;
        std::thread::spawn(move || {
            let _ = child.wait();
        });
        Ok(Keeper { pid, needle })
    }
}

impl Drop for Keeper {
    fn drop(&mut self) {
        stop_pid(self.pid, &self.needle);
    }
}

/// Restarts machine `r`'s engine with `labels` instead of the ones it was
/// made with, as configuration management rewriting `daemon.json` and
/// restarting docker on a running VM would: the machine stays up (a
/// [`Keeper`] is its recorded PID meanwhile), SIGTERM goes to dockerd alone
/// (by its verified PID; the controller beside it keeps running, as a
/// systemd unit would), SIGKILL after 10 s, then a new dockerd on the same
/// data root, which the record then names, as the provider writes it.
///
/// Drover may still destroy the machine meanwhile (a roll or heal that had
/// chosen it): then [`Restart::Replaced`], with whatever the nemesis started
/// for it stopped by PID. Everything it starts is also in `spawned`.
pub async fn restart_engine(
    dir: &Path,
    r: &InstanceRecord,
    labels: &BTreeMap<String, String>,
    spawned: &Spawned,
) -> Result<Restart, String> {
    let inst = dir.join("instances").join(&r.id);
    let record = inst.join("instance.json");
    let needle = drover_local::EnginePaths::new(&inst).needle();
    let Some(pid) = engine_pid(r) else {
        return gone_within(&record, "its engine had stopped before the restart").await;
    };
    let keeper = Keeper::start(&inst)?;
    spawned.add(keeper.pid, keeper.needle.clone());
    if !set_record_pid(&inst, keeper.pid) {
        return Ok(Restart::Replaced(
            "its record went before the restart".into(),
        ));
    }
    let p = nix::unistd::Pid::from_raw(pid);
    let _ = nix::sys::signal::kill(p, nix::sys::signal::Signal::SIGTERM);
    let t = Instant::now();
    while drover_local::procs::is_alive(pid) {
        if t.elapsed() > Duration::from_secs(10) {
            let _ = nix::sys::signal::kill(p, nix::sys::signal::Signal::SIGKILL);
        }
        if t.elapsed() > Duration::from_secs(20) {
            return Err(format!("dockerd {pid} of {} did not stop", r.id));
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    if !record.exists() {
        return Ok(Restart::Replaced(
            "destroyed while its engine stopped".into(),
        ));
    }
    let engine = drover_local::launcher::EngineProcess::start(&inst, labels)
        .map_err(|e| format!("restart the engine of {}: {e}", r.id))?;
    let (_, new) = engine.detach();
    spawned.add(new, needle.clone());
    let ready = drover_local::launcher::wait_ready(
        &drover_local::EnginePaths::new(&inst),
        new,
        Duration::from_secs(30),
    )
    .await;
    match ready {
        Ok(_) if set_record_pid(&inst, new) => {
            drop(keeper);
            Ok(Restart::Running(new))
        }
        Ok(_) => {
            stop_blocking(new, needle).await;
            Ok(Restart::Replaced(
                "its record went while its engine restarted".into(),
            ))
        }
        Err(e) => {
            // Destroyed by drover while it started (a destroy stops what
            // it finds and removes the directory under it)?
            stop_blocking(new, needle).await;
            drop(keeper);
            gone_within(
                &record,
                &format!("the restarted engine {new} does not answer: {e}"),
            )
            .await
        }
    }
}

/// [`stop_pid`] off the runtime's worker threads (it may wait 15 s).
async fn stop_blocking(pid: i32, needle: String) {
    let _ = tokio::task::spawn_blocking(move || stop_pid(pid, &needle)).await;
}

/// `Replaced` if the machine's record goes within 30 s (a destroy under
/// way), else the error `why`.
async fn gone_within(record: &Path, why: &str) -> Result<Restart, String> {
    let t = Instant::now();
    while t.elapsed() < Duration::from_secs(30) {
        if !record.exists() {
            return Ok(Restart::Replaced(format!("destroyed by drover ({why})")));
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    Err(format!("{}: {why}", record.display()))
}

/// The `--label k=v` arguments machine `r`'s running dockerd was started with.
pub fn engine_labels(r: &InstanceRecord) -> BTreeMap<String, String> {
    let pid = engine_pid(r).expect("the engine runs");
    let argv = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
    let argv: Vec<String> = argv
        .split(|b| *b == 0)
        .map(|a| String::from_utf8_lossy(a).into_owned())
        .collect();
    argv.windows(2)
        .filter(|w| w[0] == "--label")
        .filter_map(|w| w[1].split_once('='))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

/// A process stopped with SIGSTOP; SIGCONT when resumed or dropped (so a
/// failing test never leaves it stopped).
pub struct Stopped(Option<i32>);

impl Stopped {
    pub fn stop(pid: i32) -> Stopped {
        nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(pid),
            nix::sys::signal::Signal::SIGSTOP,
        )
        .expect("SIGSTOP");
        Stopped(Some(pid))
    }

    /// Stops every process of the process group `pgid` (a machine's
    /// engine and what its boot script started), as a frozen VM. The kernel
    /// continues them by itself when the group becomes orphaned (POSIX: its
    /// stopped members get SIGHUP, then SIGCONT): that happens when the
    /// process that started the machine's dockerd — the controller that
    /// provisioned it — exits. Measured: a paused engine whose machine the
    /// leader's controller had made answered again once the leader's machine
    /// was destroyed. Stop again after such an exit ([`Stopped::again`]).
    pub fn stop_group(pgid: i32) -> Stopped {
        Stopped::stop(-pgid)
    }

    /// Sends SIGSTOP once more (after something may have continued it).
    pub fn again(&self) {
        if let Some(pid) = self.0 {
            let _ = nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(pid),
                nix::sys::signal::Signal::SIGSTOP,
            );
        }
    }

    pub fn resume(mut self) {
        self.cont();
    }

    fn cont(&mut self) {
        if let Some(pid) = self.0.take() {
            let _ = nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(pid),
                nix::sys::signal::Signal::SIGCONT,
            );
        }
    }
}

impl Drop for Stopped {
    fn drop(&mut self) {
        self.cont();
    }
}

/// `iptables` with `args`; the error text when it fails.
fn iptables(args: &[String]) -> Result<(), String> {
    let out = Command::new("iptables")
        .arg("-w")
        .args(args)
        .output()
        .map_err(|e| format!("iptables: {e}"))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "iptables {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

/// Where the cgroup v2 hierarchy is mounted (`/sys/fs/cgroup` on Debian 12,
/// `/sys/fs/cgroup/unified` on a hybrid host).
fn cgroup2_root() -> Option<PathBuf> {
    let mounts = std::fs::read_to_string("/proc/self/mounts").ok()?;
    mounts.lines().find_map(|l| {
        let f: Vec<&str> = l.split(' ').collect();
        (f.len() > 2 && f[2] == "cgroup2").then(|| PathBuf::from(f[1]))
    })
}

/// `pid`'s cgroup v2 path (`0::/…`).
fn cgroup_of(pid: i32) -> Option<String> {
    std::fs::read_to_string(format!("/proc/{pid}/cgroup"))
        .ok()?
        .lines()
        .find_map(|l| l.strip_prefix("0::").map(str::to_string))
}

/// The TCP connections `pid` holds to `peer:2377`, as `(local addr, local
/// port)`, from `ss -tnp`.
pub fn connections_to(pid: i32, peer: &str) -> Vec<(String, u16)> {
    let out = Command::new("ss").args(["-tnpH"]).output().expect("ss");
    let text = String::from_utf8_lossy(&out.stdout);
    let owner = format!("pid={pid},");
    text.lines()
        .filter(|l| l.contains(&owner))
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            let (local, remote) = (f.get(3)?, f.get(4)?);
            if *remote != format!("{peer}:2377") {
                return None;
            }
            let (a, p) = local.rsplit_once(':')?;
            Some((a.to_string(), p.parse().ok()?))
        })
        .collect()
}

/// A network partition of one engine from its peers' swarm ports, made of
/// iptables rules in OUTPUT (on loopback every packet passes OUTPUT once).
///
/// Measured here with `ss -tnp` (docker.io 20.10.24, three managers on
/// 127.0.86.201-203): every outgoing swarm connection leaves from
/// **127.0.0.1** (the loopback route's preferred source), whatever address
/// the engine advertises; only the listening side shows the advertise
/// address. So a source-address rule cannot tell one engine's outgoing
/// traffic from another's, and a destination rule on a peer's `:2377` would
/// cut every engine's connections to that peer. The rules are therefore:
/// - `-d L --dport 2377` and `-s L --sport 2377`: nothing reaches the
///   isolated engine's swarm port (its peers' connections to it);
/// - `-m cgroup --path C -d P --dport 2377` for each peer P: connections the
///   isolated engine opens from now on (its dockerd is moved into a cgroup C
///   made for it; a socket belongs to the cgroup of the process that made it);
/// - for each connection it already holds to a peer (read from `ss -tnp` by
///   its PID): `-s 127.0.0.1 --sport S -d P --dport 2377` and the reverse.
///
/// Every address is checked to be in 127.0.0.0/8. Each rule is recorded as
/// soon as it is added; drop deletes exactly those (`iptables -D` with the
/// same spec), moves the engine back to its cgroup and removes C — also
/// when the test panics.
pub struct Partition {
    rules: Vec<Vec<String>>,
    cgroup: Option<PathBuf>,
    original: Option<PathBuf>,
    pid: i32,
    /// What was measured and added, for the log.
    pub report: Vec<String>,
}

fn loopback(a: &str) -> bool {
    a.parse::<std::net::Ipv4Addr>()
        .is_ok_and(|ip| ip.is_loopback())
}

impl Partition {
    /// Cuts engine `pid` (advertising `addr`) off from `peers`' swarm ports.
    pub fn isolate(pid: i32, addr: &str, peers: &[String], tag: &str) -> Partition {
        assert!(loopback(addr), "{addr} is not a loopback address");
        for p in peers {
            assert!(loopback(p), "{p} is not a loopback address");
        }
        let mut part = Partition {
            rules: Vec::new(),
            cgroup: None,
            original: None,
            pid,
            report: Vec::new(),
        };
        let root = cgroup2_root().expect("a cgroup v2 hierarchy is mounted");
        let original = cgroup_of(pid).expect("the engine's cgroup");
        let cg_rel = format!("{tag}-{}", std::process::id());
        let cg = root.join(&cg_rel);
        std::fs::create_dir(&cg).expect("make the partition's cgroup");
        part.cgroup = Some(cg.clone());
        part.original = Some(root.join(original.trim_start_matches('/')));
        std::fs::write(cg.join("cgroup.procs"), pid.to_string()).expect("move dockerd");
        let comment = |mut r: Vec<String>| {
            r.extend(["-m", "comment", "--comment", tag, "-j", "DROP"].map(String::from));
            r
        };
        let s = |v: &[&str]| v.iter().map(|x| x.to_string()).collect::<Vec<String>>();
        let mut specs = vec![
            comment(s(&["-p", "tcp", "-d", addr, "--dport", "2377"])),
            comment(s(&["-p", "tcp", "-s", addr, "--sport", "2377"])),
        ];
        for p in peers {
            specs.push(comment(s(&[
                "-p", "tcp", "-d", p, "--dport", "2377", "-m", "cgroup", "--path", &cg_rel,
            ])));
            for (local, port) in connections_to(pid, p) {
                assert!(loopback(&local), "a swarm connection from {local}");
                part.report.push(format!(
                    "engine {pid} holds {local}:{port} -> {p}:2377 (source {local}, not {addr})"
                ));
                let port = port.to_string();
                specs.push(comment(s(&[
                    "-p", "tcp", "-s", &local, "--sport", &port, "-d", p, "--dport", "2377",
                ])));
                specs.push(comment(s(&[
                    "-p", "tcp", "-s", p, "--sport", "2377", "-d", &local, "--dport", &port,
                ])));
            }
        }
        for spec in specs {
            let mut add = s(&["-I", "OUTPUT", "1"]);
            add.extend(spec.iter().cloned());
            iptables(&add).expect("add a partition rule");
            part.report
                .push(format!("added: iptables -I OUTPUT {}", spec.join(" ")));
            part.rules.push(spec);
        }
        part
    }

    /// Removes the partition now (what drop does).
    pub fn heal(self) {}
}

impl Drop for Partition {
    fn drop(&mut self) {
        for spec in self.rules.drain(..).rev() {
            let mut del = vec!["-D".to_string(), "OUTPUT".to_string()];
            del.extend(spec);
            if let Err(e) = iptables(&del) {
                eprintln!("NEMESIS: could not delete a partition rule: {e}");
            }
        }
        if let (Some(orig), Some(cg)) = (&self.original, &self.cgroup) {
            // Everything in it (the engine, anything it started since) goes back.
            let procs = std::fs::read_to_string(cg.join("cgroup.procs")).unwrap_or_default();
            for p in procs.lines() {
                let _ = std::fs::write(orig.join("cgroup.procs"), p);
            }
            let _ = self.pid;
            // Processes leave a cgroup asynchronously: retry the rmdir briefly.
            for _ in 0..50 {
                if std::fs::remove_dir(cg).is_ok() || !cg.exists() {
                    break;
                }
                std::thread::sleep(Duration::from_millis(100));
            }
            if cg.exists() {
                eprintln!("NEMESIS: cgroup {} left behind", cg.display());
            }
        }
    }
}

#[cfg(test)]
mod join_window_tests {
    use super::*;

    fn member(node: &str, reachable: bool) -> Member {
        Member {
            node: node.into(),
            link: None,
            addr: String::new(),
            reachable,
            leader: node == "a",
        }
    }

    fn sample(members: Vec<Member>) -> Sample {
        Sample {
            at_ms: 0,
            members: Some(members),
            machines: Vec::new(),
        }
    }

    /// Only the joining instant beside one fault is forgiven: two members
    /// that were already there unreachable, or two newcomers, are not.
    #[test]
    fn only_a_newcomer_not_yet_contacted_beside_one_fault_is_a_join_window() {
        let before = [sample(vec![
            member("a", true),
            member("b", true),
            member("c", true),
        ])];
        let joining = [
            member("a", true),
            member("b", true),
            member("c", false),
            member("d", false),
        ];
        assert!(join_window(&before, &joining, 2));
        let two_old_down = [
            member("a", true),
            member("b", false),
            member("c", false),
            member("d", true),
        ];
        assert!(!join_window(&before, &two_old_down, 2));
        let two_new = [
            member("a", true),
            member("b", true),
            member("d", false),
            member("e", false),
        ];
        assert!(!join_window(&before, &two_new, 2));
        assert!(
            !join_window(&[], &joining, 2),
            "no earlier sample to compare"
        );
    }
}
