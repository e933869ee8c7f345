//! drover on machines that boot an OS, as operators run it (issue 22):
//! Incus system containers booting Debian with systemd, the distribution's
//! `docker.io`, the boot script run by cloud-init, and each manager's
//! controller a systemd unit its boot script installed. Only drover's
//! commands act: `apply` bootstraps 3 pet managers (fixed addresses, a
//! spare slot) and 2 cattle workers from nothing; a change rolls through
//! both groups under the 200 ms quorum watcher (its per-step split printed:
//! `split.rs`); during a second roll a follower manager loses power and a
//! worker its network, and the quorum holds while both are replaced; a
//! killed `dockerd` comes back by systemd with nothing replaced; `destroy`
//! removes every group, and no machine is left. The managers install drover as the
//! release their group pins (`flavor.drover`, served over HTTP on the
//! bridge's host address), and the roll is also an upgrade to another
//! release; the workers' image holds it (a disk device).
//!
//! The test's own bridge `drvt60` (10.203.60.0/24, NAT and routing off)
//! holds only the machines it made; the lab deletes them and the bridge
//! when it ends, also when the test fails (after printing each machine's
//! cloud-init and controller logs).

#[path = "e2e_incus/split.rs"]
mod split;
mod support;

use drover_engine::PeerEndpoints;
use drover_incus::testkit::{Lab, incus};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use support::{Watch, epoch_ms, watch_engines};

const NET: &str = "drvt60";
const SUBNET: &str = "10.203.60";

/// The cluster file: `tier` is the engine label a roll changes, `release`
/// the drover release (URL, SHA-256) the managers install.
fn spec(lab: &Lab, tier: &str, release: &(String, String)) -> String {
    let bin = env!("CARGO_BIN_EXE_drover");
    let base = format!(
        "image: {image}, network: {NET}, storage_pool: drover, memory: 1GiB",
        image = lab.image
    );
    let with_bin = format!(
        "{{{base}, devices: {{drover-bin: {{type: disk, source: {bin}, path: /usr/local/bin/drover, readonly: 'true'}}}}}}"
    );
    let (url, sha256) = release;
    format!(
        "groups:\n\
         - name: managers\n  role: manager\n  allocation:\n    logical_ids: [{SUBNET}.11, {SUBNET}.12, {SUBNET}.13]\n    spare_ids: [{SUBNET}.14]\n  instance:\n    provider: incus\n    properties: {{{base}}}\n  flavor:\n    engine_labels: {{tier: {tier}}}\n    drover: {{url: '{url}', sha256: {sha256}}}\n\
         - name: workers\n  role: worker\n  allocation: {{size: 2}}\n  instance:\n    provider: incus\n    properties: {with_bin}\n  flavor:\n    engine_labels: {{tier: {tier}}}\n"
    )
}

/// Two drover releases served over HTTP on the lab bridge's host address:
/// `a`, the binary under test, and `b`, the same with bytes appended
/// (another SHA-256, as an upgrade has). Each as (URL, SHA-256).
/// `DROVER_INCUS_RELEASE_A` and `DROVER_INCUS_RELEASE_B` name other
/// binaries instead (the longer run: the previous release's build, rolled
/// to this one's release build; docs/incus.md).
struct Releases {
    a: (String, String),
    b: (String, String),
    server: tokio::task::JoinHandle<()>,
}

impl Releases {
    async fn serve(files: &Path) -> Releases {
        let binary = |var: &str| std::env::var(var).map(|p| std::fs::read(p).expect(var));
        let a = binary("DROVER_INCUS_RELEASE_A")
            .unwrap_or_else(|_| std::fs::read(env!("CARGO_BIN_EXE_drover")).unwrap());
        let b = binary("DROVER_INCUS_RELEASE_B").unwrap_or_else(|_| {
            let mut b = a.clone();
            b.extend_from_slice(b"\ndrover e2e_incus: release b\n");
            b
        });
        let sha = |name: &str, bytes: &[u8]| {
            let path = files.join(name);
            std::fs::write(&path, bytes).unwrap();
            let out = Command::new("sha256sum").arg(&path).output().unwrap();
            String::from_utf8_lossy(&out.stdout)[..64].to_string()
        };
        let (sha_a, sha_b) = (sha("drover-a", &a), sha("drover-b", &b));
        let served = Arc::new(std::collections::BTreeMap::from([
            ("drover-a".to_string(), a),
            ("drover-b".to_string(), b),
        ]));
        let app = axum::Router::new().route(
            "/{name}",
            axum::routing::get(
                move |axum::extract::Path(name): axum::extract::Path<String>| {
                    let served = served.clone();
                    async move {
                        served
                            .get(&name)
                            .cloned()
                            .ok_or(axum::http::StatusCode::NOT_FOUND)
                    }
                },
            ),
        );
        let listener = tokio::net::TcpListener::bind(format!("{SUBNET}.1:0"))
            .await
            .unwrap();
        let at = listener.local_addr().unwrap();
        let server = tokio::spawn(async move {
            axum::serve(listener, app).await.unwrap();
        });
        Releases {
            a: (format!("http://{at}/drover-a"), sha_a),
            b: (format!("http://{at}/drover-b"), sha_b),
            server,
        }
    }
}

impl Drop for Releases {
    fn drop(&mut self) {
        self.server.abort();
    }
}

/// The SHA-256 of the drover each manager machine runs.
fn installed_releases(lab: &Lab, managers: &[String]) -> Vec<String> {
    managers
        .iter()
        .map(|m| {
            let out = lab.exec(m, "sha256sum /usr/local/bin/drover");
            String::from_utf8_lossy(&out.stdout)
                .split_whitespace()
                .next()
                .unwrap_or_default()
                .to_string()
        })
        .collect()
}

/// The machines running a controller (the managers).
fn manager_machines(lab: &Lab) -> Vec<String> {
    lab.machines()
        .into_iter()
        .filter(|m| {
            lab.exec(m, "test -f /etc/drover/controller.env")
                .status
                .success()
        })
        .collect()
}

/// Prints each machine's boot and controller logs when the test fails,
/// before the lab deletes the machines.
struct LogsOnFailure<'a>(&'a Lab);

impl Drop for LogsOnFailure<'_> {
    fn drop(&mut self) {
        if !std::thread::panicking() {
            return;
        }
        // Each controller's whole journal is kept under the target
        // directory (the printed tail is all a CI log shows).
        let kept = Path::new(env!("CARGO_TARGET_TMPDIR")).join("e2e_incus-logs");
        let _ = std::fs::create_dir_all(&kept);
        for m in self.0.machines() {
            let out = self.0.exec(
                &m,
                "tail -n 40 /var/log/cloud-init-output.log; journalctl -u drover-controller --no-pager -n 80",
            );
            eprintln!(
                "==== {m}\n{}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
            let whole = self
                .0
                .exec(&m, "journalctl -u drover-controller --no-pager");
            let _ = std::fs::write(kept.join(format!("{m}.log")), &whole.stdout);
        }
        // Last, so a log cut in the middle still shows it: each machine's
        // swarm state and its controller's decisions, in brief.
        for m in self.0.machines() {
            let out = self.0.exec(
                &m,
                "hostname -I; docker info --format '{{.Swarm.LocalNodeState}} manager={{.Swarm.ControlAvailable}} managers={{.Swarm.Managers}} error={{.Swarm.Error}}'; \
                 timeout 10 docker node ls 2>&1 | head -n 12; \
                 journalctl -u drover-controller --no-pager -o cat | grep -E 'acting|starting|step finished|stood|standing|blocked|deposed' | cut -c1-240 | tail -n 25",
            );
            eprintln!(
                "==== {m} in brief\n{}",
                String::from_utf8_lossy(&out.stdout)
            );
        }
    }
}

/// The `tier` label of each machine whose engine is an active swarm member.
async fn tiers(engines: &Path) -> Vec<(String, Option<String>)> {
    let mut out = Vec::new();
    for sock in std::fs::read_dir(engines).unwrap().flatten() {
        let name = sock.file_name().to_string_lossy().replace(".sock", "");
        let endpoint = format!("unix://{}", sock.path().display());
        let Ok(engine) = drover_engine::Engine::connect(&endpoint).await else {
            continue;
        };
        if let Ok(info) = engine.info().await
            && info.state == drover_engine::LocalState::Active
        {
            out.push((name, info.labels.get("tier").cloned()));
        }
    }
    out.sort();
    out
}

/// Waits until every running machine is a member with label `tier`, 5 in
/// all, and returns how long that took.
async fn converged(lab: &Lab, tier: &str, within: Duration) -> Duration {
    let t0 = Instant::now();
    loop {
        let running = lab.machines().len();
        let seen = tiers(lab.engine_dir()).await;
        let current = seen
            .iter()
            .filter(|(_, t)| t.as_deref() == Some(tier))
            .count();
        if running == 5 && current == 5 && seen.len() == 5 {
            return t0.elapsed();
        }
        assert!(
            t0.elapsed() < within,
            "not converged to tier {tier} within {within:?}: {running} machines, engines {seen:?}"
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// True in the longer run, whose first managers run the previous release.
fn previous_release() -> bool {
    std::env::var_os("DROVER_INCUS_RELEASE_A").is_some()
}

/// The machines whose engine socket is in `engines`.
fn engine_sockets(engines: &Path) -> Vec<String> {
    let names = std::fs::read_dir(engines).unwrap().filter_map(|e| {
        let name = e.ok()?.file_name().to_string_lossy().into_owned();
        name.strip_suffix(".sock").map(str::to_string)
    });
    sorted(names.collect())
}

fn sorted(mut v: Vec<String>) -> Vec<String> {
    v.sort();
    v
}

/// The audit log of the cluster through `store`, as JSON (printed too).
fn events(store: &str) -> Vec<drover_spi::Event> {
    let args = [
        "events", "--since", "2h", "--output", "json", "--store", store,
    ];
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_drover"));
    cmd.args(args);
    let out = support::run_printed(cmd, &args);
    assert!(out.status.success(), "drover events failed");
    serde_json::from_slice(&out.stdout).expect("drover events --output json")
}

/// Each manager's idle controller: resident memory, of it anonymous, and
/// its share of mapped files (kB, `smaps_rollup`).
fn idle_controllers(lab: &Lab) -> Vec<String> {
    manager_machines(lab)
        .iter()
        .map(|m| {
            let out = lab.exec(
                m,
                "p=$(systemctl show -p MainPID --value drover-controller.service); \
                 grep -E '^(Rss|Anonymous|Pss_File)' /proc/$p/smaps_rollup | tr -s ' ' | tr '\\n' ' '",
            );
            format!("{m}: {}", String::from_utf8_lossy(&out.stdout).trim())
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bootstrap_roll_and_destroy_on_incus_machines() {
    let lab = Lab::new(NET, SUBNET);
    let _logs = LogsOnFailure(&lab);
    let engines: PathBuf = lab.engine_dir().to_path_buf();
    let files = tempfile::tempdir().unwrap();
    let releases = Releases::serve(files.path()).await;
    let v1 = files.path().join("v1.yaml");
    std::fs::write(&v1, spec(&lab, "v1", &releases.a)).unwrap();

    // Bootstrap from nothing: the first manager through the provider, then
    // its own controller (a systemd unit) builds the rest.
    let t0 = Instant::now();
    support::incus_bootstrap(&engines, v1.to_str().unwrap());
    let bootstrap = converged(&lab, "v1", Duration::from_secs(300)).await;
    let bootstrap = t0.elapsed().max(bootstrap);
    let managers = manager_machines(&lab);
    assert_eq!(managers.len(), 3, "three managers run a controller");
    assert_eq!(
        installed_releases(&lab, &managers),
        vec![releases.a.1.clone(); 3]
    );
    for m in &managers {
        let unit = lab.exec(m, "systemctl is-active drover-controller.service");
        assert_eq!(
            String::from_utf8_lossy(&unit.stdout).trim(),
            "active",
            "{m}"
        );
        let env = lab.exec(
            m,
            "stat -c %a /etc/drover/controller.env; test ! -e /var/lib/drover/boot.env",
        );
        assert!(env.status.success(), "{m}: the boot env outlived the boot");
        assert_eq!(String::from_utf8_lossy(&env.stdout).trim(), "600", "{m}");
        // Its controller reaches every machine's engine, as one on the
        // Incus host would (a former leader's included): asked from inside
        // the controller's own sandbox (its mount namespace). Not in the
        // previous-release run: releases before this one lack the mount.
        let others = if previous_release() {
            Vec::new()
        } else {
            lab.machines()
        };
        for other in others {
            let asked = lab.exec(
                m,
                &format!(
                    "nsenter -t $(systemctl show -p MainPID --value drover-controller.service) -m -- \
                     docker -H unix://{}/{other}.sock info --format '{{{{.Swarm.LocalNodeState}}}}'",
                    drover_incus::machine::ENGINES_PATH
                ),
            );
            assert_eq!(
                String::from_utf8_lossy(&asked.stdout).trim(),
                "active",
                "{m} asking {other}'s engine: {asked:?}"
            );
        }
    }

    // A roll through both groups under the quorum watcher.
    let watcher = Watcher::start(lab.provider());
    let v2 = files.path().join("v2.yaml");
    std::fs::write(&v2, spec(&lab, "v2", &releases.b)).unwrap();
    let store = format!(
        "swarm:unix://{}",
        engines.join(format!("{}.sock", managers[0])).display()
    );
    let before: Vec<String> = lab.machines();
    let recorder = split::Recorder::start(NET);
    let from_ms = epoch_ms();
    let t1 = Instant::now();
    let out = support::drover_incus(
        &engines,
        &["apply", "-f", v2.to_str().unwrap(), "--store", &store],
    );
    // Committed through one manager's engine; followed here, not with
    // --wait: the manager it reads through is itself rolled away.
    assert!(out.status.success(), "the roll was not committed");
    let roll = converged(&lab, "v2", Duration::from_secs(900))
        .await
        .max(t1.elapsed());
    let to_ms = epoch_ms();
    let boots = recorder.finish();
    watcher.assert_quorum_kept().await;
    let watch_ms = |group: &str| if group == "managers" { 10_000 } else { 5_000 };
    let split = split::Split::new(
        &events(&manager_store(&lab)),
        &boots,
        from_ms,
        to_ms,
        watch_ms,
    );
    eprintln!("{split}");
    let after = lab.machines();
    assert!(
        after.iter().all(|m| !before.contains(m)),
        "every machine was replaced: before {before:?}, after {after:?}"
    );
    assert_eq!(
        installed_releases(&lab, &manager_machines(&lab)),
        vec![releases.b.1.clone(); 3],
        "every manager runs release b"
    );
    assert!(
        previous_release() || engine_sockets(&engines) == sorted(lab.machines()),
        "a destroyed machine's engine socket is removed by the controller that destroyed it: {:?}",
        engine_sockets(&engines)
    );

    // An idle controller on each manager, settled for 20 s.
    tokio::time::sleep(Duration::from_secs(20)).await;
    eprintln!(
        "MEASURED incus idle controllers (RSS): {:?}",
        idle_controllers(&lab)
    );

    // Faults drover does not cause, during a second roll: a follower
    // manager loses power, a worker loses its network. The quorum holds,
    // the roll completes, both machines are replaced.
    let faulted = faults_during_a_roll(&lab, &engines, files.path(), &releases.b).await;

    // A crashed engine is the machine's business: systemd restarts it and
    // drover replaces nothing.
    let back = engine_restarted_by_systemd(&lab, "v3").await;

    // Destroy every group: workers first, then the managers (the last one
    // from outside the swarm).
    let t2 = Instant::now();
    let store = manager_store(&lab);
    let out = support::drover_incus(
        &engines,
        &["destroy", "workers", "--yes", "--store", &store],
    );
    assert!(out.status.success(), "destroying the workers failed");
    let out = support::drover_incus(
        &engines,
        &["destroy", "managers", "--yes", "--store", &store],
    );
    assert!(out.status.success(), "destroying the managers failed");
    let destroy = t2.elapsed();
    assert!(lab.machines().is_empty(), "left: {:?}", lab.machines());
    incus(&["image", "info", &lab.image]);
    eprintln!(
        "MEASURED incus: bootstrap 3+2 {bootstrap:?}, roll 3+2 (spare added and retired) {roll:?}, \
         roll with a power cut and a network cut {faulted:?}, dockerd back by systemd {back:?}, destroy {destroy:?}"
    );
}

/// The 200 ms quorum watcher over the provider's machines' engines.
struct Watcher {
    stop: Arc<AtomicBool>,
    seen: Arc<Mutex<Watch>>,
    task: tokio::task::JoinHandle<()>,
}

impl Watcher {
    fn start(provider: drover_incus::IncusProvider) -> Watcher {
        let stop = Arc::new(AtomicBool::new(false));
        let seen = Arc::new(Mutex::new(Watch::default()));
        let engines = move || provider.peer_endpoints();
        let task = watch_engines(engines, stop.clone(), seen.clone());
        Watcher { stop, seen, task }
    }

    /// Stops watching; the quorum was never lost.
    async fn assert_quorum_kept(self) {
        self.stop.store(true, Ordering::SeqCst);
        self.task.await.unwrap();
        let w = self.seen.lock().unwrap();
        eprintln!("{}", w.summary());
        w.assert_quorum_kept();
    }
}

/// A roll to `v3` during which a follower manager loses power and a
/// worker its network: quorum kept, the roll completes, both replaced.
async fn faults_during_a_roll(
    lab: &Lab,
    engines: &Path,
    files: &Path,
    release: &(String, String),
) -> Duration {
    let watcher = Watcher::start(lab.provider());
    let v3 = files.join("v3.yaml");
    std::fs::write(&v3, spec(lab, "v3", release)).unwrap();
    let t0 = Instant::now();
    let out = support::drover_incus(
        engines,
        &[
            "apply",
            "-f",
            v3.to_str().unwrap(),
            "--store",
            &manager_store(lab),
        ],
    );
    assert!(out.status.success(), "the second roll was not committed");
    // The faults strike once the roll's temporary manager (the spare) is
    // in the raft and reachable: not while a manager is joining, whose
    // newcomer counts in the raft before it can vote — a fault then is a
    // second one beside the join drover took on (the nemesis suite's
    // "join window"), which no roll of 3 survives by design.
    raft_whole(lab, 4).await;
    let (follower, worker) = victims(lab).await;
    incus(&["stop", "--force", &follower]);
    let cut = lab.exec(&worker, "ip link set eth0 down");
    assert!(cut.status.success(), "cutting {worker}'s network: {cut:?}");
    eprintln!("power cut {follower} (follower manager), network cut {worker} (worker)");
    let faulted = converged(lab, "v3", Duration::from_secs(900))
        .await
        .max(t0.elapsed());
    events(&manager_store(lab));
    watcher.assert_quorum_kept().await;
    let now = lab.machines();
    assert!(
        !now.contains(&follower) && !now.contains(&worker),
        "not replaced: {now:?}"
    );
    faulted
}

/// Kills a manager's dockerd (`kill -9` through systemd): systemd starts
/// it again, it is back in the swarm, and drover replaced nothing.
async fn engine_restarted_by_systemd(lab: &Lab, tier: &str) -> Duration {
    let manager = after_manager(lab);
    let machines_before = lab.machines();
    let killed = lab.exec(&manager, "systemctl kill --signal=KILL docker.service");
    assert!(killed.status.success(), "{killed:?}");
    let t0 = Instant::now();
    let back = loop {
        let up = lab.exec(&manager, "docker info --format '{{.Swarm.LocalNodeState}}'");
        if String::from_utf8_lossy(&up.stdout).trim() == "active" {
            break t0.elapsed();
        }
        assert!(
            t0.elapsed() < Duration::from_secs(120),
            "dockerd did not come back in {manager}"
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    };
    tokio::time::sleep(Duration::from_secs(30)).await;
    converged(lab, tier, Duration::from_secs(60)).await;
    assert_eq!(
        lab.machines(),
        machines_before,
        "drover replaced a machine whose engine systemd restarted"
    );
    back
}

/// The swarm store through a manager machine of the running cluster.
fn manager_store(lab: &Lab) -> String {
    let sock = drover_incus::testkit::socket_of(lab, &after_manager(lab));
    format!("swarm:unix://{}", sock.display())
}

/// Waits (up to 5 min) until the raft has `members` members, all reachable.
async fn raft_whole(lab: &Lab, members: usize) {
    let t0 = Instant::now();
    let mut last = String::from("no manager answered");
    loop {
        if let Ok(nodes) = support::observe_endpoints(&lab.provider().peer_endpoints()).await {
            let raft: Vec<_> = nodes.iter().filter_map(|n| n.raft.as_ref()).collect();
            if raft.len() == members && raft.iter().all(|r| r.reachable) {
                return;
            }
            last = format!("{raft:?}");
        }
        assert!(
            t0.elapsed() < Duration::from_secs(300),
            "the raft never had {members} reachable members; last seen: {last}; machines: {:?}",
            lab.machines()
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// A follower manager's machine and a worker's machine, as the swarm
/// and Incus see them now (matched by their link).
async fn victims(lab: &Lab) -> (String, String) {
    use drover_core::model::tags;
    use drover_spi::InstanceProvider;
    let nodes = support::observe_endpoints(&lab.provider().peer_endpoints())
        .await
        .expect("the swarm answers");
    let machines = lab
        .provider()
        .describe(&std::collections::BTreeMap::new())
        .await
        .expect("describe");
    let machine_of = |link: &Option<String>| {
        machines
            .iter()
            .find(|m| m.tag(tags::LINK) == link.as_deref())
            .map(|m| m.id.clone())
    };
    let follower = nodes
        .iter()
        .find(|n| n.raft.as_ref().is_some_and(|r| !r.leader))
        .and_then(|n| machine_of(&n.link))
        .expect("a follower manager");
    let worker = nodes
        .iter()
        .find(|n| n.raft.is_none())
        .and_then(|n| machine_of(&n.link))
        .expect("a worker");
    (follower, worker)
}

/// A manager machine of the running cluster (its controller env exists).
fn after_manager(lab: &Lab) -> String {
    lab.machines()
        .into_iter()
        .find(|m| {
            lab.exec(m, "test -f /etc/drover/controller.env")
                .status
                .success()
        })
        .expect("a manager machine")
}
