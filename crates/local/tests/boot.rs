//! A machine that never joins says why (drover issue 36), against real
//! dockerd processes on loopback 127.0.152.x (other test files use other
//! ranges): its boot log's tail through the provider seam, bounded and
//! redacted; its engine's failed join reported; and a manager told to join
//! through a manager that is down joining through the next one it was
//! given.

use drover_core::model::{SwarmView, tags};
use drover_core::spec::Role;
use drover_core::template::default_boot_script;
use drover_local::testkit::{self, StateGuard};
use drover_spi::{Cluster, InstanceProvider, ProviderError, Secret, Unfenced};
use drover_swarm::SwarmCluster;
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

/// Stand-in for `drover engine join` in boot scripts (see testkit).
#[tokio::test]
async fn drover_shim() {
    testkit::run_shim_from_env().await;
}

fn by_cluster(cluster: &str) -> BTreeMap<String, String> {
    BTreeMap::from([(tags::CLUSTER.to_string(), cluster.to_string())])
}

/// A boot script that prints 40 lines, its join token and an error, and
/// fails: the provider hands back its last 20 lines, the token redacted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_machines_boot_log_tail_is_bounded_and_redacted() {
    let state = testkit::short_tempdir("bl").unwrap();
    let _guard = StateGuard {
        state_dir: state.clone(),
    };
    let p = testkit::shimmed_provider(&state, "127.0.152.10-127.0.152.12");
    let token = format!("SWMTKN-1-bootlog-{}", uuid::Uuid::new_v4().simple());
    let template = "#!/bin/sh\nfor i in $(seq 1 40); do echo line $i; done\necho \"joining with $DROVER_JOIN_TOKEN\"\necho 'dial tcp 127.0.152.99:2377: connect: connection refused' >&2\nexit 1\n";
    let req = testkit::request(
        "c152a",
        "g",
        Role::Worker,
        template,
        "",
        false,
        vec![("DROVER_JOIN_TOKEN".into(), Secret::new(token.clone()))],
    );
    let failed = p.provision(req, &Unfenced).await;
    assert!(
        matches!(failed, Err(ProviderError::Permanent(_))),
        "{failed:?}"
    );
    let listed = p.describe(&by_cluster("c152a")).await.unwrap();
    assert_eq!(listed.len(), 1, "{listed:?}");
    let id = &listed[0].id;

    let log = p.boot_log(id).await.unwrap().expect("a boot log");
    let lines = log.lines();
    assert_eq!(lines.len(), drover_core::boot::TAIL_LINES, "{lines:?}");
    assert_eq!(lines[0], "line 23");
    assert_eq!(lines[18], "joining with <redacted>");
    assert_eq!(
        lines[19],
        "dial tcp 127.0.152.99:2377: connect: connection refused"
    );
    assert!(!lines.iter().any(|l| l.contains(&token)), "{lines:?}");
    // Its engine never tried to join: no failed join to report.
    assert_eq!(p.join_failed(id).await, None);
    // A machine that does not exist is said so.
    let gone = p.boot_log("i00000000").await;
    assert!(matches!(gone, Err(ProviderError::NotFound(_))), "{gone:?}");
}

/// An engine told to join a swarm that has no leader (its second manager
/// killed): the join times out (~20 s, swarm-facts) and the engine's swarm
/// state is `error`, which the provider reports with the engine's words;
/// the boot script, given one manager, leaves the failure for the
/// controller to see.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_engine_whose_join_failed_is_reported_as_such() {
    let state = testkit::short_tempdir("jf").unwrap();
    let _guard = StateGuard {
        state_dir: state.clone(),
    };
    let p = testkit::shimmed_provider(&state, "127.0.152.20-127.0.152.29");
    let m1 = testkit::first_manager(&p, "c152b").await;
    let swarm = SwarmCluster::new(p.endpoint(&m1).unwrap(), None);
    let m2 = testkit::joined_member(&p, &swarm, "c152b", "m", Role::Manager).await;
    let jm = swarm
        .join_material(Role::Manager)
        .await
        .unwrap()
        .expect("a swarm");
    testkit::kill_machine(&p.record(&m2).unwrap().unwrap());

    let t0 = Instant::now();
    let req = testkit::request(
        "c152b",
        "m",
        Role::Manager,
        default_boot_script(drover_core::spec::LOCAL_PROVIDER, Role::Manager),
        &jm.addr,
        false,
        vec![("DROVER_JOIN_TOKEN".into(), jm.token.clone())],
    );
    let link = req.tags[tags::LINK].clone();
    let joined = p.provision(req, &Unfenced).await;
    eprintln!(
        "the join through a leaderless manager ended after {:?}: {joined:?}",
        t0.elapsed()
    );
    assert!(joined.is_err(), "no leader, yet the join succeeded");
    let m3 = p
        .describe(&by_cluster("c152b"))
        .await
        .unwrap()
        .into_iter()
        .find(|i| i.link() == Some(link.as_str()))
        .expect("the third machine is listed")
        .id;
    let failed = testkit::wait_for(Duration::from_secs(60), || p.join_failed(&m3))
        .await
        .expect("the engine's failed join is reported");
    eprintln!("reported after {:?}: {failed}", t0.elapsed());
    assert!(
        failed
            .to_string()
            .starts_with("its engine reports swarm state error"),
        "{failed}"
    );
    let log = p.boot_log(&m3).await.unwrap().expect("a boot log");
    assert!(
        log.lines()
            .iter()
            .any(|l| l.contains(&format!("joining through {} failed", jm.addr))),
        "{:?}",
        log.lines()
    );
}

/// Three managers, the first one's machine killed; a fourth is told to
/// join through it first, then through the second: it joins through the
/// second within the stated bound (the first attempt's refused connection,
/// at most `JOIN_BEFORE_NEXT` (30 s) of a join going on in the background,
/// a forced leave, and a manager join), and its boot log says which
/// manager failed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_manager_told_to_join_through_a_dead_manager_joins_through_the_next() {
    const BOUND: Duration = Duration::from_secs(90);
    let state = testkit::short_tempdir("jn").unwrap();
    let _guard = StateGuard {
        state_dir: state.clone(),
    };
    let p = testkit::shimmed_provider(&state, "127.0.152.30-127.0.152.39");
    let m1 = testkit::first_manager(&p, "c152c").await;
    let first = SwarmCluster::new(p.endpoint(&m1).unwrap(), None);
    let m2 = testkit::joined_member(&p, &first, "c152c", "m", Role::Manager).await;
    testkit::joined_member(&p, &first, "c152c", "m", Role::Manager).await;
    let jm = first
        .join_material(Role::Manager)
        .await
        .unwrap()
        .expect("a swarm");
    let dead = format!("{}:2377", p.record(&m1).unwrap().unwrap().address);
    let alive = format!("{}:2377", p.record(&m2).unwrap().unwrap().address);
    testkit::kill_machine(&p.record(&m1).unwrap().unwrap());
    // The two left elect a leader (9-24 s, swarm-facts).
    let second = SwarmCluster::new(p.endpoint(&m2).unwrap(), None);
    testkit::wait_for(Duration::from_secs(60), || async {
        matches!(second.observe().await, SwarmView::Ok(_)).then_some(())
    })
    .await
    .expect("a new leader");

    let t0 = Instant::now();
    let req = testkit::request(
        "c152c",
        "m",
        Role::Manager,
        default_boot_script(drover_core::spec::LOCAL_PROVIDER, Role::Manager),
        &format!("{dead},{alive}"),
        false,
        vec![("DROVER_JOIN_TOKEN".into(), jm.token.clone())],
    );
    let link = req.tags[tags::LINK].clone();
    let m4 = p
        .provision(req, &Unfenced)
        .await
        .expect("the fourth manager joins");
    let took = t0.elapsed();
    eprintln!("joined through the second manager after {took:?}");
    assert!(took < BOUND, "{took:?}");
    let joined = testkit::wait_for(Duration::from_secs(30), || async {
        match second.observe().await {
            SwarmView::Ok(nodes) => nodes
                .into_iter()
                .find(|n| n.link.as_deref() == Some(link.as_str()) && n.raft.is_some()),
            _ => None,
        }
    })
    .await;
    assert!(joined.is_some(), "the fourth machine is no raft member");
    let log = p.boot_log(&m4).await.unwrap().expect("a boot log");
    assert!(
        log.lines()
            .iter()
            .any(|l| l.contains(&format!("joining through {dead} failed"))),
        "{:?}",
        log.lines()
    );
}

/// A provision cut short while its boot script runs (the controller that
/// asked stood down, as the bootstrapping CLI does when the first
/// manager's controller takes over): the script still runs to its end, as
/// cloud-init would on the machine, and the same operation's provision
/// asked again answers the same machine.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_boot_outlives_the_provision_that_started_it() {
    let state = testkit::short_tempdir("bo").unwrap();
    let _guard = StateGuard {
        state_dir: state.clone(),
    };
    let p = testkit::shimmed_provider(&state, "127.0.152.40-127.0.152.42");
    let template = "#!/bin/sh\ntouch started\nsleep 2\ntouch booted\n";
    let req = testkit::request("c152d", "g", Role::Worker, template, "", false, vec![]);
    let again = req.clone();
    let asked = tokio::spawn({
        let p = p.clone();
        async move { p.provision(req, &Unfenced).await }
    });
    let dir = testkit::wait_for(Duration::from_secs(60), || async {
        let listed = p.describe(&by_cluster("c152d")).await.ok()?;
        let dir = state.join("instances").join(&listed.first()?.id);
        dir.join("started").exists().then_some(dir)
    })
    .await
    .expect("the boot script started");
    asked.abort();
    assert!(asked.await.is_err_and(|e| e.is_cancelled()));
    assert!(
        !dir.join("booted").exists(),
        "the boot ended before the cut"
    );
    let booted = testkit::wait_for(Duration::from_secs(15), || async {
        dir.join("booted").exists().then_some(())
    })
    .await;
    assert!(booted.is_some(), "the boot script died with its provision");
    let id = p.provision(again, &Unfenced).await.expect("asked again");
    assert_eq!(state.join("instances").join(&id), dir);
}

/// A provision cut short before its boot began (while its engine was
/// starting): the machine boots all the same, as a VM's cloud-init would
/// (the planner takes a listed machine as made and never asks again), and
/// the same operation's provision asked again answers that machine: one
/// boot, one machine.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_provision_cut_before_its_boot_still_boots_its_machine() {
    let state = testkit::short_tempdir("bc").unwrap();
    let _guard = StateGuard {
        state_dir: state.clone(),
    };
    let p = testkit::shimmed_provider(&state, "127.0.152.44-127.0.152.46");
    let template = "#!/bin/sh\necho booting >> runs\nsleep 1\ntouch booted\n";
    let req = testkit::request("c152e", "g", Role::Worker, template, "", false, vec![]);
    let again = req.clone();
    let asked = tokio::spawn({
        let p = p.clone();
        async move { p.provision(req, &Unfenced).await }
    });
    let first = testkit::wait_for(Duration::from_secs(30), || async {
        let listed = p.describe(&by_cluster("c152e")).await.ok()?;
        listed.first().map(|i| i.id.clone())
    })
    .await
    .expect("the machine's record");
    asked.abort();
    let _ = asked.await;
    let dir = state.join("instances").join(&first);
    assert!(!dir.join("runs").exists(), "the boot began before the cut");
    let booted = testkit::wait_for(Duration::from_secs(20), || async {
        dir.join("booted").exists().then_some(())
    })
    .await;
    assert!(booted.is_some(), "the machine never booted");
    let id = p.provision(again, &Unfenced).await.expect("asked again");
    assert_eq!(id, first);
    let runs = std::fs::read_to_string(dir.join("runs")).unwrap();
    assert_eq!(runs.lines().count(), 1, "{runs}");
    let listed = p.describe(&by_cluster("c152e")).await.unwrap();
    assert_eq!(listed.len(), 1, "{listed:?}");
}

/// A provision asked again for a machine its operation already has, under
/// a term that ended, does nothing: refused before it could start an
/// engine or a boot.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn asked_again_under_an_ended_term_a_provision_does_nothing() {
    let state = testkit::short_tempdir("bf").unwrap();
    let _guard = StateGuard {
        state_dir: state.clone(),
    };
    let p = testkit::shimmed_provider(&state, "127.0.152.47-127.0.152.49");
    let template = "#!/bin/sh\necho booting >> runs\n";
    let req = testkit::request("c152f", "g", Role::Worker, template, "", false, vec![]);
    let id = p.provision(req.clone(), &Unfenced).await.expect("made");
    let refused = p.provision(req, &testkit::Expired).await;
    assert!(
        matches!(refused, Err(ProviderError::Fenced(_))),
        "{refused:?}"
    );
    let runs = std::fs::read_to_string(state.join("instances").join(&id).join("runs")).unwrap();
    assert_eq!(runs.lines().count(), 1, "{runs}");
}

/// A machine whose engine dies before it answers (a VM that crashes while
/// it boots): the provision answers it as made — the controller judges a
/// stopped machine from the world and replaces it — rather than failing as
/// a call to retry, which made a second machine for an operation whose
/// first was collected meanwhile (e2e_chaos).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_engine_that_dies_before_it_answers_leaves_its_machine_made() {
    let state = testkit::short_tempdir("de").unwrap();
    let _guard = StateGuard {
        state_dir: state.clone(),
    };
    let p = testkit::shimmed_provider_with(&state, "127.0.152.50-127.0.152.52", false);
    let template = "#!/bin/sh\ntouch booted\n";
    let req = testkit::request("c152g", "g", Role::Worker, template, "", false, vec![]);
    let asked = tokio::spawn({
        let p = p.clone();
        async move { p.provision(req, &Unfenced).await }
    });
    // Its engine killed the moment it is recorded, long before it answers.
    let id = testkit::wait_for(Duration::from_secs(30), || async {
        let listed = p.describe(&by_cluster("c152g")).await.ok()?;
        let id = listed.first()?.id.clone();
        let pid = p.record(&id).ok()??.pid?;
        nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), nix::sys::signal::SIGKILL).ok()?;
        Some(id)
    })
    .await
    .expect("the machine's engine");
    let answered = asked.await.unwrap().expect("answered as made");
    assert_eq!(answered, id);
    let listed = p.describe(&by_cluster("c152g")).await.unwrap();
    assert_eq!(listed.len(), 1, "{listed:?}");
    assert!(!listed[0].running, "{listed:?}");
    let dir = state.join("instances").join(&id);
    assert!(!dir.join("booted").exists(), "a boot ran on a dead machine");
}
