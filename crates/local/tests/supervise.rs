//! Supervised engines (issue 18, "machines that behave like machines"):
//! a machine's dockerd runs under a supervisor that restarts it when it
//! exits, as systemd's `Restart=always` restarts a VM's dockerd. Real
//! engines on loopback 127.0.130.x–127.0.134.x (one range per test).
//!
//! The two faults a test can choose (`drover_local::testkit`):
//! `crash_engine` (kill -9 of dockerd alone: restarted) and `kill_machine`
//! (the machine's whole tree: nothing comes back).

use drover_core::spec::Role;
use drover_core::template::default_boot_script;
use drover_engine::Engine;
use drover_local::launcher::{self, EnginePaths, MAX_RESTART_DELAY};
use drover_local::testkit::{self, StateGuard};
use drover_local::{InstanceRecord, LocalProvider, procs};
use drover_spi::{InstanceProvider, Unfenced};
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

/// Stand-in for `drover engine join` in boot scripts (see testkit).
#[tokio::test]
async fn drover_shim() {
    testkit::run_shim_from_env().await;
}

/// Longer than any restart delay, with the engine's own start on top: an
/// engine that has not answered by then was not restarted.
fn longer_than_any_restart() -> Duration {
    MAX_RESTART_DELAY * 2 + Duration::from_secs(2)
}

fn paths(r: &InstanceRecord) -> EnginePaths {
    EnginePaths::new(r.socket.parent().expect("socket in a directory"))
}

async fn plain_machine(p: &LocalProvider, cluster: &str) -> InstanceRecord {
    let req = testkit::request(
        cluster,
        "g",
        Role::Plain,
        default_boot_script(drover_core::spec::LOCAL_PROVIDER, Role::Plain),
        "",
        false,
        vec![],
    );
    let id = p.provision(req, &Unfenced).await.expect("provision");
    p.record(&id).unwrap().expect("record")
}

/// The engine at `r`'s socket answers `info` within `limit`: its node id.
async fn answers_within(r: &InstanceRecord, limit: Duration) -> Option<String> {
    testkit::wait_for(limit, || async {
        let e = Engine::connect_with_timeout(&r.endpoint(), Duration::from_secs(1))
            .await
            .ok()?;
        e.info().await.ok().map(|i| i.node_id)
    })
    .await
}

async fn described_running(p: &LocalProvider, r: &InstanceRecord) -> bool {
    let all = p.describe(&BTreeMap::new()).await.expect("describe");
    all.iter()
        .find(|i| i.id == r.id)
        .expect("described")
        .running
}

/// Nothing of machine `r` runs: no supervisor, no dockerd, nothing naming
/// its pidfile, no engine at its socket — checked again after longer than
/// any restart delay, so an engine a supervisor was about to start again
/// would have been seen.
async fn stays_dead(r: &InstanceRecord) {
    let paths = paths(r);
    for round in 0..2 {
        if round == 1 {
            tokio::time::sleep(longer_than_any_restart()).await;
        }
        assert!(
            r.supervisor.is_none_or(|s| !procs::is_alive(s)),
            "supervisor {:?} of {} still runs",
            r.supervisor,
            r.id
        );
        assert_eq!(launcher::running_engine_pid(&paths, r.pid), None);
        assert!(
            procs::pids_matching(&paths.needle()).is_empty(),
            "processes of {} still run: {:?}",
            r.id,
            procs::pids_matching(&paths.needle())
        );
        let answered = Engine::connect_with_timeout(&r.endpoint(), Duration::from_secs(1))
            .await
            .ok();
        let info = match answered {
            Some(e) => e.info().await.ok(),
            None => None,
        };
        assert!(info.is_none(), "an engine answers at {}", r.endpoint());
    }
}

/// 1. `kill -9` of a supervised machine's dockerd: the engine answers
///    again at the same socket, as the same swarm node (same data root),
///    within a few seconds; the machine reads as running throughout; each
///    restart is a line in the machine's log, and a second crash soon
///    after waits longer (backoff).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crashed_engine_comes_back_as_the_same_node() {
    let state = testkit::short_tempdir("su").unwrap();
    let _guard = StateGuard {
        state_dir: state.clone(),
    };
    let p = testkit::shimmed_provider(&state, "127.0.130.10-127.0.130.20");
    assert!(p.supervises(), "supervision is on by default");
    let id = testkit::first_manager(&p, "c130").await;
    let r = p.record(&id).unwrap().unwrap();
    let supervisor = r
        .supervisor
        .expect("a supervised machine records its supervisor");
    assert_eq!(r.pgid, Some(supervisor), "the supervisor leads the group");
    assert_eq!(procs::pgid_of(r.pid.unwrap()), Some(supervisor));
    let node = answers_within(&r, Duration::from_secs(5))
        .await
        .expect("engine answers");
    assert!(!node.is_empty(), "the first manager is a swarm node");

    let mut latencies = Vec::new();
    for (crash, delay) in [(1, "0.500"), (2, "1.000")] {
        let killed = testkit::crash_engine(&r);
        let t0 = Instant::now();
        // The engine is down; the machine is not.
        assert!(p.is_running(&r), "crash {crash}: machine reads as stopped");
        assert!(described_running(&p, &r).await);
        let again = answers_within(&r, Duration::from_secs(10))
            .await
            .unwrap_or_else(|| {
                panic!(
                    "crash {crash}: no engine within 10 s; log: {}",
                    launcher::log_tail(&paths(&r).log, 5)
                )
            });
        let took = t0.elapsed();
        latencies.push(took);
        // Right after its start the engine may not have loaded its swarm
        // state yet: an empty node id is "not yet", any other is an answer.
        let again = if again.is_empty() {
            testkit::wait_for(Duration::from_secs(10), || async {
                let e = Engine::connect(&r.endpoint()).await.ok()?;
                Some(e.info().await.ok()?.node_id).filter(|n| !n.is_empty())
            })
            .await
            .unwrap_or_default()
        } else {
            again
        };
        assert_eq!(again, node, "crash {crash}: a different swarm node");
        let now = launcher::running_engine_pid(&paths(&r), r.pid).expect("engine pid");
        assert_ne!(now, killed);
        assert_eq!(procs::pgid_of(now), Some(supervisor), "same machine group");
        let log = std::fs::read_to_string(&paths(&r).log).unwrap();
        let said = format!("drover-supervise: dockerd (pid {killed}) exited with status 137 after");
        let line = log
            .lines()
            .find(|l| l.contains(&said))
            .unwrap_or_else(|| panic!("crash {crash}: restart not logged: {log}"));
        assert!(line.ends_with(&format!("restarting in {delay}s")), "{line}");
    }
    eprintln!("MEASURED: kill -9 → engine answers again: {latencies:?}");
    // Swarm still active on the same node, with its raft (a manager).
    let info = Engine::connect(&r.endpoint())
        .await
        .unwrap()
        .info()
        .await
        .unwrap();
    assert!(info.control_available, "{info:?}");

    // teardown (`drover demo down`, the tests' guards) ends the supervisor
    // with its engine: nothing comes back.
    drover_local::teardown(&state);
    assert!(!state.exists());
    stays_dead(&r).await;
    assert!(procs::pids_matching(&format!("{}/", state.display())).is_empty());
}

/// 2. A machine killed for good (supervisor and engine): nothing comes
///    back, and the provider no longer reports it running.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_machine_killed_for_good_stays_dead() {
    let state = testkit::short_tempdir("su").unwrap();
    let _guard = StateGuard {
        state_dir: state.clone(),
    };
    let p = testkit::shimmed_provider(&state, "127.0.131.10-127.0.131.20");
    let r = plain_machine(&p, "c131").await;
    // Supervised: a crash alone is survived...
    testkit::crash_engine(&r);
    answers_within(&r, Duration::from_secs(10))
        .await
        .expect("the crashed engine is restarted");
    // ...the machine's death is not, even right after a crash (the
    // supervisor waiting out its delay).
    testkit::crash_engine(&r);
    testkit::kill_machine(&r);
    assert!(!p.is_running(&r));
    assert!(!described_running(&p, &r).await);
    stays_dead(&r).await;
    assert!(!p.is_running(&r));
    assert!(!described_running(&p, &r).await);
    // Its directory is still there for destroy (the provider's job).
    p.destroy(&r.id).await.unwrap();
    assert!(p.describe(&BTreeMap::new()).await.unwrap().is_empty());
}

/// 3. Destroying a supervised machine ends supervisor and engine together,
///    also while the supervisor waits to restart a crashed engine; no
///    engine comes back afterwards; the directory is gone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn destroy_ends_supervision_and_no_engine_comes_back() {
    let state = testkit::short_tempdir("su").unwrap();
    let _guard = StateGuard {
        state_dir: state.clone(),
    };
    let p = testkit::shimmed_provider(&state, "127.0.132.10-127.0.132.20");
    let running = plain_machine(&p, "c132").await;
    let crashed = plain_machine(&p, "c132").await;
    for r in [&running, &crashed] {
        let s = r.supervisor.expect("supervised");
        assert!(launcher::is_supervisor(s, &paths(r)), "supervisor {s} runs");
    }
    // One destroyed while its engine runs, one in its restart delay.
    testkit::crash_engine(&crashed);
    let t0 = Instant::now();
    p.destroy(&crashed.id).await.unwrap();
    eprintln!("destroy during the restart delay took {:?}", t0.elapsed());
    let t0 = Instant::now();
    p.destroy(&running.id).await.unwrap();
    eprintln!(
        "destroy of a running supervised engine took {:?}",
        t0.elapsed()
    );
    for r in [&running, &crashed] {
        assert!(
            !state.join("instances").join(&r.id).exists(),
            "directory of {} left",
            r.id
        );
    }
    for r in [&running, &crashed] {
        stays_dead(r).await;
    }
    assert!(p.describe(&BTreeMap::new()).await.unwrap().is_empty());
    assert!(procs::pids_matching(&format!("{}/", state.display())).is_empty());
}

/// 4. With supervision off, a machine is its dockerd: kill -9 leaves the
///    engine dead and the machine stopped.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_supervision_a_crashed_engine_stays_dead() {
    let state = testkit::short_tempdir("su").unwrap();
    let _guard = StateGuard {
        state_dir: state.clone(),
    };
    let p = testkit::shimmed_provider_with(&state, "127.0.133.10-127.0.133.20", false);
    assert!(!p.supervises());
    let r = plain_machine(&p, "c133").await;
    assert_eq!(r.supervisor, None);
    assert_eq!(r.pgid, r.pid, "dockerd leads its own group");
    testkit::crash_engine(&r);
    assert!(!p.is_running(&r));
    assert!(!described_running(&p, &r).await);
    stays_dead(&r).await;
    assert!(!described_running(&p, &r).await);
    p.destroy(&r.id).await.unwrap();
}

/// When `DROVER_TEST_PROVISION=STATE_DIR` is set: provisions one plain
/// machine (pool 127.0.134.10-20) and returns, so the process that made it
/// exits (see `a_machine_outlives_the_process_that_made_it`).
#[tokio::test]
async fn provisioner() {
    let Ok(state) = std::env::var("DROVER_TEST_PROVISION") else {
        return;
    };
    let pool = drover_local::parse_pool("127.0.134.10-127.0.134.20").unwrap();
    let p = LocalProvider::new(&state, pool).expect("provider");
    let r = plain_machine(&p, "c134").await;
    println!("\nPROVISIONED {}", r.id);
}

/// 5. The supervisor outlives the process that provisioned the machine
///    (a controller that exits or crashes): made by a process that has
///    exited since, the machine still restarts its crashed engine.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_machine_outlives_the_process_that_made_it() {
    let state = testkit::short_tempdir("su").unwrap();
    let _guard = StateGuard {
        state_dir: state.clone(),
    };
    let out = std::process::Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "provisioner", "--nocapture", "--test-threads=1"])
        .env("DROVER_TEST_PROVISION", &state)
        .output()
        .expect("run the provisioner");
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(out.status.success(), "{text}");
    let id = text
        .lines()
        .find_map(|l| l.strip_prefix("PROVISIONED "))
        .unwrap_or_else(|| panic!("no machine made: {text}"))
        .trim()
        .to_string();
    let p = LocalProvider::new(&state, Vec::new()).unwrap();
    let r = p.record(&id).unwrap().expect("record");
    let supervisor = r.supervisor.expect("supervised");
    // Its parent, the provisioner, is gone: the supervisor was handed on.
    assert!(launcher::is_supervisor(supervisor, &paths(&r)));
    assert!(described_running(&p, &r).await);
    testkit::crash_engine(&r);
    answers_within(&r, Duration::from_secs(10))
        .await
        .expect("the orphaned supervisor restarted the engine");
    p.destroy(&id).await.unwrap();
    stays_dead(&r).await;
}
