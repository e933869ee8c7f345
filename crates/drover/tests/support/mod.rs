//! A lab for the end-to-end tests on real engines: etcd, a local-provider
//! state dir and an address range; a 200 ms quorum watcher; the checks of
//! a converged cluster. Everything started is stopped by PID (StateGuard,
//! Etcd drop), also on failure.

#![allow(dead_code)]

pub mod budgeted;
pub mod crash;
pub mod in_place;
pub mod nemesis;

use drover_core::model::{Node, NodeState, SwarmView};
use drover_core::quorum::quorum;
use drover_local::testkit::{StateGuard, short_tempdir};
use drover_local::{InstanceRecord, LocalProvider};
use drover_spi::Store;
use drover_store::testkit::Etcd;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// A test cluster: etcd, a local-provider state dir, an address range.
pub struct Lab {
    // Field order = drop order: engines (and their controllers) first.
    _guard: StateGuard,
    pub etcd: Etcd,
    pub dir: PathBuf,
    pub net: u8,
    /// The store is the swarm's own (on a manager's engine), not etcd.
    pub swarm_store: bool,
    /// The machines' engines run under a supervisor that restarts them
    /// (`--local-supervise`, passed on to the controllers on the machines):
    /// on, as by default, unless a lab turns it off.
    pub supervise: bool,
}

impl Lab {
    pub async fn new(net: u8) -> Lab {
        let etcd = Etcd::start().await;
        let dir = short_tempdir("dx").expect("tempdir");
        Lab {
            _guard: StateGuard {
                state_dir: dir.clone(),
            },
            etcd,
            dir,
            net,
            swarm_store: false,
            supervise: true,
        }
    }

    /// A lab whose store is the swarm's own raft (`--store swarm:…`).
    pub async fn with_swarm_store(net: u8) -> Lab {
        Lab {
            swarm_store: true,
            ..Lab::new(net).await
        }
    }

    /// The store address for the CLI: etcd, or the swarm store on a running
    /// manager machine (a socket that does not exist before the first one).
    pub fn store_url(&self) -> String {
        if !self.swarm_store {
            return self.etcd.url.clone();
        }
        self.manager_endpoints()
            .into_iter()
            .next()
            .map(|e| format!("swarm:{e}"))
            .unwrap_or_else(|| format!("swarm:unix://{}/no-swarm-yet.sock", self.dir.display()))
    }

    /// Engines of running manager machines.
    pub fn manager_endpoints(&self) -> Vec<String> {
        let provider = self.provider();
        self.records()
            .into_iter()
            .filter(|r| {
                r.tags.get("drover.group").map(String::as_str) == Some("managers")
                    && provider.is_running(r)
            })
            .map(|r| r.endpoint())
            .collect()
    }

    /// The store, if one answers (a swarm store needs a manager that is one).
    pub async fn try_store(&self) -> Option<Box<dyn Store>> {
        if !self.swarm_store {
            return drover_store::open(&self.etcd.url).await.ok();
        }
        for e in self.manager_endpoints() {
            if let Ok(s) = drover_store::open(&format!("swarm:{e}")).await {
                return Some(s);
            }
        }
        None
    }

    pub fn spec(&self, label: &str) -> PathBuf {
        self.spec_watching(label, "3s")
    }

    /// The head of a manager group of 3 pets, 127.0.NET.11–13 (YAML lines
    /// of a group list, `allocation` last but for its own lines).
    pub fn pet_managers(&self) -> String {
        let n = self.net;
        format!(
            "- name: managers\n  role: manager\n  allocation:\n    logical_ids: [127.0.{n}.11, 127.0.{n}.12, 127.0.{n}.13]\n"
        )
    }

    /// A spec whose managers are watched `watch` after joining (the window
    /// in which the raft is whole again between two replacements).
    pub fn spec_watching(&self, label: &str, watch: &str) -> PathBuf {
        let managers = self.pet_managers();
        let text = format!(
            "groups:
{managers}  instance: {{provider: local}}
  flavor: {{engine_labels: {{release: {label}}}}}
  update: {{watch: {watch}}}
  health: {{startup_timeout: 60s}}
- name: workers
  role: worker
  allocation: {{size: 2}}
  instance: {{provider: local}}
  flavor: {{engine_labels: {{release: {label}}}}}
  update: {{watch: 2s}}
  health: {{startup_timeout: 60s}}
"
        );
        let path = self.dir.join(format!("spec-{label}.yaml"));
        std::fs::write(&path, text).expect("write spec");
        path
    }

    /// A spec of one manager and a worker group `workers` of `size`
    /// whose further lines are `workers` (YAML at the group's indent),
    /// written as `spec-{label}.yaml`: its path, as text.
    pub fn one_manager_spec(&self, label: &str, size: u32, workers: &str) -> String {
        let text = format!(
            "groups:
- name: managers
  role: manager
  allocation: {{size: 1}}
  instance: {{provider: local}}
  health: {{startup_timeout: 60s}}
- name: workers
  role: worker
  allocation: {{size: {size}}}
  instance: {{provider: local}}
  health: {{startup_timeout: 60s}}
{workers}"
        );
        let path = self.dir.join(format!("spec-{label}.yaml"));
        std::fs::write(&path, text).expect("write spec");
        path.to_str().expect("a UTF-8 path").to_string()
    }

    pub fn drover(&self, args: &[&str]) -> std::process::Output {
        self.drover_with(args, &[])
    }

    /// `drover` with extra environment (e.g. `DROVER_LOG=info`, which the
    /// controllers a bootstrapping `apply` starts inherit).
    pub fn drover_with(&self, args: &[&str], env: &[(&str, &str)]) -> std::process::Output {
        let mut cmd = self.drover_command(args);
        cmd.envs(env.iter().copied());
        run_printed(cmd, args)
    }

    /// `drover ARGS` against this lab's store and machines, to run or spawn.
    pub fn drover_command(&self, args: &[&str]) -> Command {
        let mut c = Command::new(env!("CARGO_BIN_EXE_drover"));
        c.args(args)
            .env("DROVER_STORE", self.store_url())
            .env("DROVER_LOCAL_DIR", &self.dir)
            .env(
                "DROVER_LOCAL_POOL",
                format!("127.0.{}.20-127.0.{}.60", self.net, self.net),
            )
            .env("DROVER_LOG", "warn")
            .env("DROVER_LOCAL_SUPERVISE", self.supervise.to_string());
        c
    }

    pub fn apply(&self, spec: &Path, wait: bool) {
        let mut args = vec!["apply", "-f", spec.to_str().unwrap(), "--timeout", "8m"];
        if wait {
            args.push("--wait");
        }
        let out = self.drover(&args);
        assert_eq!(out.status.code(), Some(0), "apply failed");
    }

    pub fn provider(&self) -> LocalProvider {
        LocalProvider::new(&self.dir, Vec::new()).expect("provider")
    }

    pub fn records(&self) -> Vec<InstanceRecord> {
        self.provider().records().expect("records")
    }

    pub async fn store(&self) -> Box<dyn Store> {
        self.try_store().await.expect("store")
    }

    /// The node list from the first manager engine that answers with a leader.
    pub async fn nodes(&self) -> Option<Vec<Node>> {
        observe_any(&self.records()).await.ok()
    }
}

/// Now, in ms since the Unix epoch (the clock drover's events use).
pub fn epoch_ms() -> u64 {
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH);
    u64::try_from(now.map_or(0, |d| d.as_millis())).unwrap_or(u64::MAX)
}

/// `drover ARGS` run from the repository's root (where `examples/` is),
/// with none of `unset` in its environment (variables that would point it
/// at another store, provider or engine), stdin closed: what it said.
pub fn drover_at_root(args: &[&str], unset: &[&str]) -> std::process::Output {
    let mut c = Command::new(env!("CARGO_BIN_EXE_drover"));
    c.args(args)
        .current_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/../.."))
        .stdin(std::process::Stdio::null());
    for var in unset {
        c.env_remove(var);
    }
    c.output().expect("run drover")
}

/// Runs `cmd` (`drover ARGS`), printing what it said for the test log.
pub fn run_printed(mut cmd: Command, args: &[&str]) -> std::process::Output {
    let out = cmd.output().expect("run drover");
    eprintln!(
        "$ drover {}\n{}{}",
        args.join(" "),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// Runs `drover ARGS --incus-engines ENGINES` (the incus provider's
/// machines' engine sockets), printing what it said.
pub fn drover_incus(engines: &Path, args: &[&str]) -> std::process::Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_drover"));
    cmd.args(args)
        .arg("--incus-engines")
        .arg(engines)
        .env("RUST_LOG", "warn");
    run_printed(cmd, args)
}

/// Brings the cluster in `file` up from nothing on Incus machines: one
/// `apply --wait` on the swarm store (the first manager through the
/// provider, then its own controller), which must succeed.
pub fn incus_bootstrap(engines: &Path, file: &str) {
    let args = [
        "apply",
        "-f",
        file,
        "--store",
        "swarm",
        "--wait",
        "--timeout",
        "15m",
    ];
    let out = drover_incus(engines, &args);
    assert!(out.status.success(), "bootstrap failed");
}

/// Prints each Incus machine's boot output and controller journal when
/// the test fails (before the lab deletes the machines).
pub struct IncusLogsOnFailure<'a>(pub &'a drover_incus::testkit::Lab);

impl Drop for IncusLogsOnFailure<'_> {
    fn drop(&mut self) {
        if !std::thread::panicking() {
            return;
        }
        for m in self.0.machines() {
            let out = self.0.exec(
                &m,
                "tail -n 30 /var/log/cloud-init-output.log; journalctl -u drover-controller --no-pager -n 60 -o cat | cut -c1-240",
            );
            eprintln!("==== {m}\n{}", String::from_utf8_lossy(&out.stdout));
        }
    }
}

/// The engine sockets in `dir` (a lab's forwarded engines), as endpoints.
pub fn socket_endpoints(dir: &Path) -> Vec<String> {
    std::fs::read_dir(dir)
        .map(|d| {
            d.flatten()
                .map(|e| format!("unix://{}", e.path().display()))
                .collect()
        })
        .unwrap_or_default()
}

/// Calls `f` until it gives something (every 300 ms), at most `limit`.
pub fn wait_for<T>(limit: Duration, mut f: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + limit;
    loop {
        if let Some(t) = f() {
            return t;
        }
        assert!(Instant::now() < deadline, "waited {limit:?} in vain");
        std::thread::sleep(Duration::from_millis(300));
    }
}

/// Until every group of `lab`'s cluster is converged on its current spec,
/// at most `limit`.
pub fn wait_converged(lab: &Lab, limit: Duration) {
    wait_for(limit, || {
        let out = lab.drover(&["status", "--output", "json"]);
        let doc: serde_json::Value = serde_json::from_slice(&out.stdout).ok()?;
        let groups = doc["groups"].as_array()?;
        groups
            .iter()
            .all(|g| g["phase"] == "converged" && g["current"] == g["desired"])
            .then_some(())
    });
}

/// The raft's fault tolerance in a node list.
pub fn fault_tolerance(nodes: &[Node]) -> i64 {
    let members = nodes.iter().filter(|n| n.raft.is_some()).count();
    let reachable = nodes
        .iter()
        .filter(|n| n.raft.as_ref().is_some_and(|r| r.reachable))
        .count();
    drover_core::quorum::fault_tolerance(members, reachable)
}

/// Asks each machine's engine in turn; the first complete answer wins.
pub async fn observe_any(records: &[InstanceRecord]) -> Result<Vec<Node>, String> {
    let endpoints: Vec<String> = records.iter().map(InstanceRecord::endpoint).collect();
    observe_endpoints(&endpoints).await
}

/// Asks each engine in turn; the first complete answer wins.
pub async fn observe_endpoints(endpoints: &[String]) -> Result<Vec<Node>, String> {
    let mut last = "no machine".to_string();
    for endpoint in endpoints {
        let Ok(Ok(engine)) = tokio::time::timeout(
            Duration::from_secs(1),
            drover_engine::Engine::connect(endpoint),
        )
        .await
        else {
            continue;
        };
        match tokio::time::timeout(Duration::from_secs(2), engine.observe()).await {
            Ok(SwarmView::Ok(nodes)) => return Ok(nodes),
            Ok(SwarmView::NoQuorum(e)) => last = format!("no leader: {e}"),
            Ok(other) => last = format!("{other:?}"),
            Err(_) => last = "timeout".into(),
        }
    }
    Err(last)
}

/// Samples the swarm every 200 ms: fewer reachable managers than quorum
/// and "no leader" answers are violations, and so is a silence (no engine
/// answering at all) longer than [`SILENCE_BOUND`], except once the swarm
/// was last seen with a single manager (a teardown's final step: there is
/// no quorum left to keep, only that machine to remove).
#[derive(Default)]
pub struct Watch {
    pub samples: u64,
    pub violations: Vec<String>,
    pub largest_gap: Duration,
    pub min_margin: Option<i64>,
    /// Raft members in the last answer.
    pub last_members: Option<usize>,
    /// Failed samples after the last manager was left alone.
    pub ended: u64,
    /// Samples no engine answered, within [`SILENCE_BOUND`] of the last
    /// answer.
    pub silent: u64,
}

/// How long no engine may answer the watcher before the silence counts as
/// a violation. A lost quorum answers at once (`info` says there is no
/// leader: a violation in itself); a silence is the watcher not getting
/// through (each engine given 1 s to connect and 2 s to list), which a
/// loaded machine causes for seconds (6.4 s seen with builds beside the
/// suites).
pub const SILENCE_BOUND: Duration = Duration::from_secs(15);

impl Watch {
    /// One line for the test log.
    pub fn summary(&self) -> String {
        format!(
            "watcher: {} samples, largest gap {:.2}s, min reachable-minus-quorum {:?}, violations {:?}, after the last manager {}, silent {}",
            self.samples,
            self.largest_gap.as_secs_f64(),
            self.min_margin,
            self.violations,
            self.ended,
            self.silent
        )
    }

    /// The watcher really watched, and never saw the quorum lost.
    pub fn assert_quorum_kept(&self) {
        assert!(self.samples > 10, "the watcher barely sampled");
        assert!(
            self.violations.is_empty(),
            "quorum watcher saw: {:?}",
            self.violations
        );
        assert!(self.min_margin.is_some_and(|m| m >= 0));
    }
}

/// [`watch_engines`] over the local provider's machines in `dir`.
pub fn watch(
    dir: PathBuf,
    stop: Arc<AtomicBool>,
    out: Arc<Mutex<Watch>>,
) -> tokio::task::JoinHandle<()> {
    let provider = LocalProvider::new(&dir, Vec::new()).expect("provider");
    let engines = move || {
        let records = provider.records().unwrap_or_default();
        records.iter().map(InstanceRecord::endpoint).collect()
    };
    watch_engines(engines, stop, out)
}

/// The 200 ms quorum watcher over the engines `engines` names each time.
pub fn watch_engines(
    engines: impl Fn() -> Vec<String> + Send + 'static,
    stop: Arc<AtomicBool>,
    out: Arc<Mutex<Watch>>,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let mut last_ok = Instant::now();
        while !stop.load(Ordering::SeqCst) {
            let result = observe_endpoints(&engines()).await;
            {
                let mut w = out.lock().unwrap();
                w.samples += 1;
                match result {
                    Ok(nodes) => {
                        let members = nodes.iter().filter(|n| n.raft.is_some()).count();
                        let reachable = nodes
                            .iter()
                            .filter(|n| n.raft.as_ref().is_some_and(|r| r.reachable))
                            .count();
                        let margin = reachable as i64 - quorum(members) as i64;
                        w.min_margin = Some(w.min_margin.map_or(margin, |m| m.min(margin)));
                        if margin < 0 {
                            w.violations
                                .push(format!("{reachable} of {members} managers reachable"));
                        }
                        w.largest_gap = w.largest_gap.max(last_ok.elapsed());
                        w.last_members = Some(members);
                        last_ok = Instant::now();
                    }
                    Err(_) if w.last_members == Some(1) => w.ended += 1,
                    Err(e) if !e.starts_with("no leader") && last_ok.elapsed() < SILENCE_BOUND => {
                        w.silent += 1
                    }
                    Err(e) => {
                        let silent = last_ok.elapsed().as_secs_f64();
                        let at = epoch_ms();
                        w.violations
                            .push(format!("{e} ({silent:.1} s without an answer, at_ms {at})"));
                    }
                }
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    })
}

/// SIGKILLs the `drover controller` process of the machine whose link is
/// `link` (found among its process group's members by command line; the
/// restart loop around it, `sh -c ...`, is left alone). The PID it killed.
pub fn kill_controller(lab: &Lab, link: &str) -> Option<i32> {
    let pid = controller_pid(lab, link)?;
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(pid),
        nix::sys::signal::Signal::SIGKILL,
    )
    .ok()?;
    Some(pid)
}

/// The PID of the `drover controller` process of the machine whose link is
/// `link`, if one runs (one SIGKILLed a moment ago may still be listed).
pub fn controller_pid(lab: &Lab, link: &str) -> Option<i32> {
    let record = lab
        .records()
        .into_iter()
        .find(|r| r.tags.get("drover.link").map(String::as_str) == Some(link))?;
    let pgid = record.pgid?;
    drover_local::procs::group_members(pgid)
        .into_iter()
        .find(|&p| is_controller(p))
}

/// Process `pid` is a `drover controller` (not the `sh -c …` restart loop
/// around it, whose command line names the same socket).
pub fn is_controller(pid: i32) -> bool {
    drover_local::procs::cmdline(pid).is_some_and(|c| {
        let mut argv = c.split(' ');
        argv.next().is_some_and(|a| a.ends_with("drover")) && argv.next() == Some("controller")
    })
}

pub fn leader(nodes: &[Node]) -> &Node {
    nodes
        .iter()
        .find(|n| n.raft.as_ref().is_some_and(|r| r.leader))
        .expect("a leader")
}

/// One group's entry in a status document (`null` when absent).
pub fn group_of(doc: &serde_json::Value, group: &str) -> serde_json::Value {
    doc["groups"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|g| g["name"] == group)
        .cloned()
        .unwrap_or_default()
}

/// The desired config hash per group, from the published status.
pub fn desired_hashes(lab: &Lab) -> BTreeMap<String, String> {
    let out = lab.drover(&["status", "--output", "json"]);
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).expect("status json");
    doc["groups"]
        .as_array()
        .unwrap()
        .iter()
        .map(|g| {
            (
                g["name"].as_str().unwrap().to_string(),
                g["desired_hash"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

/// The declared shape holds: 3 reachable managers with one leader, 2 Ready
/// workers, every node backed by a machine, every machine current.
pub async fn assert_converged_shape(lab: &Lab) -> Vec<Node> {
    let nodes = lab.nodes().await.expect("the swarm answers");
    let managers: Vec<&Node> = nodes.iter().filter(|n| n.raft.is_some()).collect();
    assert_eq!(managers.len(), 3, "{nodes:#?}");
    assert!(
        managers.iter().all(|n| n.raft.as_ref().unwrap().reachable),
        "{nodes:#?}"
    );
    assert_eq!(
        managers
            .iter()
            .filter(|n| n.raft.as_ref().unwrap().leader)
            .count(),
        1
    );
    let workers: Vec<&Node> = nodes.iter().filter(|n| n.raft.is_none()).collect();
    assert_eq!(workers.len(), 2, "{nodes:#?}");
    assert!(
        nodes.iter().all(|n| n.state == NodeState::Ready),
        "Down/Unknown nodes left: {nodes:#?}"
    );
    let records = lab.records();
    for n in &nodes {
        assert!(
            records
                .iter()
                .any(|r| r.tags.get("drover.link") == n.link.as_ref()),
            "node {} has no machine",
            n.id
        );
    }
    let hashes = desired_hashes(lab);
    for r in &records {
        let group = &r.tags["drover.group"];
        assert_eq!(
            r.tags.get("drover.config"),
            hashes.get(group),
            "{} not on the new config",
            r.id
        );
    }
    assert_eq!(records.len(), 5, "machines: {records:#?}");
    nodes
}

/// A scenario may not hang CI: past `secs` it fails, and dropping its
/// future drops the lab, which stops every process it started.
pub async fn bounded(secs: u64, scenario: impl std::future::Future<Output = ()>) {
    if tokio::time::timeout(Duration::from_secs(secs), scenario)
        .await
        .is_err()
    {
        panic!("scenario did not finish within {secs}s");
    }
}

/// `GET /metrics` on ADDRESS:9464; the body, when it answers 200.
pub fn scrape(address: &str) -> Option<String> {
    let addr: std::net::SocketAddr = format!("{address}:9464").parse().ok()?;
    let mut s = std::net::TcpStream::connect_timeout(&addr, Duration::from_secs(1)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(3))).ok()?;
    use std::io::{Read, Write};
    write!(
        s,
        "GET /metrics HTTP/1.1\r\nHost: {address}\r\nConnection: close\r\n\r\n"
    )
    .ok()?;
    let mut text = String::new();
    s.read_to_string(&mut text).ok()?;
    let (head, body) = text.split_once("\r\n\r\n")?;
    head.starts_with("HTTP/1.1 200").then(|| body.to_string())
}

/// The two faults of a machine (`drover_local::testkit`): "the engine
/// crashed" (`kill -9` of dockerd alone; a supervised machine restarts it)
/// and "the machine died for good" (its supervisor, engine and what its boot
/// script started, SIGKILLed by recorded PIDs and group: nothing restarts it).
// Not every suite that includes this module uses them.
#[allow(unused_imports)]
pub use drover_local::testkit::{crash_engine, kill_machine, kill_machines};
