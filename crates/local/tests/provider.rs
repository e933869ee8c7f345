//! The local provider against real dockerd processes (loopback 127.0.41.x
//! and 127.0.42.x; other test files use other ranges).

use drover_core::model::{SwarmView, tags};
use drover_core::spec::Role;
use drover_core::template::default_boot_script;
use drover_local::procs;
use drover_local::testkit::{self, StateGuard};
use drover_spi::{Cluster, InstanceProvider, Secret, Unfenced};
use drover_swarm::SwarmCluster;
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// Stand-in for `drover engine join` in boot scripts (see testkit).
#[tokio::test]
async fn drover_shim() {
    testkit::run_shim_from_env().await;
}

fn files_containing(dir: &Path, needle: &[u8], hits: &mut Vec<String>) {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return;
    };
    for e in rd.flatten() {
        let Ok(ft) = e.file_type() else { continue };
        let p = e.path();
        if ft.is_dir() {
            files_containing(&p, needle, hits);
        } else if ft.is_file()
            && let Ok(b) = std::fs::read(&p)
            && b.windows(needle.len()).any(|w| w == needle)
        {
            hits.push(p.display().to_string());
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn describe_kill_destroy_and_no_secret_leak() {
    let state = testkit::short_tempdir("dl").unwrap();
    let _guard = StateGuard {
        state_dir: state.clone(),
    };
    let p = testkit::shimmed_provider(&state, "127.0.41.10-127.0.41.20");
    let token = format!("SWMTKN-1-secretscan-{}", uuid::Uuid::new_v4().simple());
    let template =
        "#!/bin/sh\nset -eu\ntest -n \"$DROVER_JOIN_TOKEN\"\nsleep 2\necho booted {{ address }}\n";
    let req = testkit::request(
        "c41",
        "g",
        Role::Worker,
        template,
        "",
        false,
        vec![("DROVER_JOIN_TOKEN".into(), Secret::new(token.clone()))],
    );
    let link = req.tags[tags::LINK].clone();

    // Scan every command line while provisioning (the script sleeps 2 s).
    let stop = Arc::new(AtomicBool::new(false));
    let scanner = {
        let (stop, token) = (stop.clone(), token.clone());
        std::thread::spawn(move || {
            let (mut leaks, mut saw_script) = (Vec::new(), false);
            while !stop.load(Ordering::Relaxed) {
                for pid in std::fs::read_dir("/proc").unwrap().flatten() {
                    let Some(pid) = pid.file_name().to_str().and_then(|s| s.parse().ok()) else {
                        continue;
                    };
                    if let Some(c) = procs::cmdline(pid) {
                        saw_script |= c.contains("boot.sh");
                        if c.contains(&token) {
                            leaks.push(c);
                        }
                    }
                }
                std::thread::sleep(Duration::from_millis(20));
            }
            (leaks, saw_script)
        })
    };
    let t0 = Instant::now();
    let id = p.provision(req, &Unfenced).await.expect("provision");
    let took = t0.elapsed();
    stop.store(true, Ordering::Relaxed);
    let (leaks, saw_script) = scanner.join().unwrap();
    assert!(leaks.is_empty(), "token in a command line: {leaks:?}");
    assert!(saw_script, "the scan never saw the boot script running");
    eprintln!("provision (incl. 2 s boot script) took {took:?}");

    let dir = state.join("instances").join(&id);
    let boot_log = std::fs::read_to_string(dir.join("boot.log")).unwrap();
    assert!(boot_log.contains("booted 127.0.41.10"), "{boot_log}");
    assert!(!dir.join("boot.sh").exists(), "boot script left on disk");
    let mut hits = Vec::new();
    files_containing(&state, token.as_bytes(), &mut hits);
    assert!(hits.is_empty(), "token in files: {hits:?}");

    // Describe by tags, label.
    let by_link: BTreeMap<String, String> = [(tags::LINK.to_string(), link)].into();
    let d = p.describe(&by_link).await.unwrap();
    assert_eq!(d.len(), 1);
    assert!(d[0].running);
    assert_eq!(d[0].id, id);
    let other: BTreeMap<String, String> = [("x".to_string(), "y".to_string())].into();
    assert!(p.describe(&other).await.unwrap().is_empty());
    p.label(&id, &other, &Unfenced).await.unwrap();
    assert_eq!(p.describe(&other).await.unwrap().len(), 1);
    // The engine carries the labels given at start.
    let engine = drover_engine::Engine::connect(&p.endpoint(&id).unwrap())
        .await
        .unwrap();
    let info = engine.info().await.unwrap();
    assert_eq!(
        info.labels.get(tags::CLUSTER).map(String::as_str),
        Some("c41")
    );

    // The machine dies (supervisor and engine, kill -9) → running=false.
    let rec = p.record(&id).unwrap().unwrap();
    testkit::kill_machine(&rec);
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let d = p.describe(&by_link).await.unwrap();
        if !d[0].running {
            break;
        }
        assert!(Instant::now() < deadline, "describe still says running");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    // Destroy: every process naming the dir ends, the dir goes; again is Ok.
    p.destroy(&id).await.unwrap();
    assert!(!dir.exists());
    assert!(procs::pids_matching(&format!("{}/", dir.display())).is_empty());
    p.destroy(&id).await.unwrap();
    let left = p
        .describe(&BTreeMap::new())
        .await
        .expect("describe after destroy");
    assert!(left.is_empty(), "{left:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn destroy_running_engine_and_describe_errors() {
    let state = testkit::short_tempdir("dl").unwrap();
    let _guard = StateGuard {
        state_dir: state.clone(),
    };
    let p = testkit::shimmed_provider(&state, "127.0.44.10-127.0.44.20");
    let mut req = testkit::request(
        "c44",
        "g",
        Role::Plain,
        default_boot_script(drover_core::spec::LOCAL_PROVIDER, Role::Plain),
        "",
        false,
        vec![],
    );
    req.logical_id = Some("127.0.44.99".into());
    let t0 = Instant::now();
    let id = p.provision(req, &Unfenced).await.unwrap();
    eprintln!("plain provision took {:?}", t0.elapsed());
    assert_eq!(p.record(&id).unwrap().unwrap().address, "127.0.44.99");
    // Same logical id again: refused, not a second engine.
    let mut again = testkit::request("c44", "g", Role::Plain, "true", "", false, vec![]);
    again.logical_id = Some("127.0.44.99".into());
    assert!(p.provision(again, &Unfenced).await.is_err());
    // A non-loopback logical id is refused.
    let mut bad = testkit::request("c44", "g", Role::Plain, "true", "", false, vec![]);
    bad.logical_id = Some("10.1.2.3".into());
    assert!(p.provision(bad, &Unfenced).await.is_err());
    // A failing boot script: provision error, but the record stays.
    let failing = testkit::request("c44", "g", Role::Plain, "exit 3", "", false, vec![]);
    assert!(p.provision(failing, &Unfenced).await.is_err());
    let all = p.describe(&BTreeMap::new()).await.unwrap();
    assert_eq!(all.len(), 2, "{all:?}");
    let t0 = Instant::now();
    for i in &all {
        p.destroy(&i.id).await.unwrap();
    }
    eprintln!("destroying 2 running engines took {:?}", t0.elapsed());
    let left = p
        .describe(&BTreeMap::new())
        .await
        .expect("describe after destroy");
    assert!(left.is_empty(), "{left:?}");
    assert!(procs::pids_matching(&format!("{}/", state.display())).is_empty());
    // An unreadable state dir is an error, never an empty list.
    std::fs::remove_dir_all(state.join("instances")).unwrap();
    assert!(p.describe(&BTreeMap::new()).await.is_err());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn drain_moves_a_real_task_off_the_worker() {
    let state = testkit::short_tempdir("dl").unwrap();
    let _guard = StateGuard {
        state_dir: state.clone(),
    };
    let p = testkit::shimmed_provider(&state, "127.0.42.10-127.0.42.20");
    let m = testkit::first_manager(&p, "c42").await;
    let cluster = SwarmCluster::new(p.endpoint(&m).unwrap(), None);
    let jm = cluster
        .join_material(Role::Worker)
        .await
        .unwrap()
        .expect("swarm exists");
    let w = p
        .provision(
            testkit::request(
                "c42",
                "w",
                Role::Worker,
                default_boot_script(drover_core::spec::LOCAL_PROVIDER, Role::Worker),
                &jm.addr,
                false,
                vec![("DROVER_JOIN_TOKEN".into(), jm.token.clone())],
            ),
            &Unfenced,
        )
        .await
        .expect("worker");
    let tar = testkit::busybox_tar().unwrap();
    for id in [&m, &w] {
        testkit::import_busybox(&p.endpoint(id).unwrap(), &tar).unwrap();
    }
    let engine = cluster.engine().await.unwrap();
    let worker_link = p.record(&w).unwrap().unwrap().tags[tags::LINK].clone();
    let worker_node = testkit::wait_for(Duration::from_secs(30), || async {
        match cluster.observe().await {
            SwarmView::Ok(nodes) => nodes
                .into_iter()
                .find(|n| n.link.as_deref() == Some(worker_link.as_str()))
                .map(|n| n.id),
            _ => None,
        }
    })
    .await
    .expect("worker node");

    use bollard::models::*;
    let spec = ServiceSpec {
        name: Some("sleeper".into()),
        mode: Some(ServiceSpecMode {
            replicated: Some(ServiceSpecModeReplicated { replicas: Some(2) }),
            ..Default::default()
        }),
        task_template: Some(TaskSpec {
            container_spec: Some(TaskSpecContainerSpec {
                image: Some(testkit::BUSYBOX_IMAGE.into()),
                command: Some(vec!["/bin/sleep".into(), "3600".into()]),
                ..Default::default()
            }),
            networks: Some(vec![NetworkAttachmentConfig {
                target: Some("host".into()),
                ..Default::default()
            }]),
            placement: Some(TaskSpecPlacement {
                max_replicas: Some(1),
                ..Default::default()
            }),
            ..Default::default()
        }),
        ..Default::default()
    };
    engine
        .docker()
        .create_service(spec, None)
        .await
        .expect("service create");
    let t0 = Instant::now();
    testkit::wait_for(Duration::from_secs(60), || async {
        let nodes = engine.nodes().await.ok()?;
        let on_worker = nodes.iter().find(|n| n.id == worker_node)?.running_tasks;
        let total: u32 = nodes.iter().map(|n| n.running_tasks).sum();
        (on_worker == 1 && total == 2).then_some(())
    })
    .await
    .expect("one task running on the worker");
    eprintln!("2 tasks running after {:?}", t0.elapsed());

    cluster.drain(&worker_node, &Unfenced).await.unwrap();
    let t0 = Instant::now();
    testkit::wait_for(Duration::from_secs(60), || async {
        let nodes = engine.nodes().await.ok()?;
        let n = nodes.iter().find(|n| n.id == worker_node)?;
        (n.running_tasks == 0 && n.availability == drover_core::model::Availability::Drain)
            .then_some(())
    })
    .await
    .expect("worker drained");
    eprintln!("worker had 0 running tasks {:?} after drain", t0.elapsed());
    // Labels survive the full-spec update.
    let node = engine.docker().inspect_node(&worker_node).await.unwrap();
    assert_eq!(node.spec.unwrap().role, Some(NodeSpecRoleEnum::WORKER));
    let _ = engine.docker().delete_service("sleeper").await;
}

/// Provisioning is idempotent on the link (the operation's provision
/// token): two concurrent calls for one operation — a crashed controller's
/// retry, or two controllers during a hand-over — make one machine.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn provision_is_idempotent_on_the_link() {
    let state = testkit::short_tempdir("dl").unwrap();
    let _guard = StateGuard {
        state_dir: state.clone(),
    };
    let p = testkit::shimmed_provider(&state, "127.0.46.10-127.0.46.20");
    let req = testkit::request(
        "c46",
        "w",
        Role::Plain,
        "#!/bin/sh\nsleep 1\n",
        "",
        false,
        vec![],
    );
    let (a, b) = tokio::join!(
        p.provision(req.clone(), &Unfenced),
        p.provision(req.clone(), &Unfenced)
    );
    let (a, b) = (a.unwrap(), b.unwrap());
    assert_eq!(a, b, "one operation, one machine");
    assert_eq!(p.records().unwrap().len(), 1);
    assert_eq!(
        p.provision(req, &Unfenced).await.unwrap(),
        a,
        "a retry finds the machine"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_whose_lease_expired_leaves_the_machines_alone() {
    use drover_spi::ProviderError;
    let state = testkit::short_tempdir("dx").unwrap();
    let _guard = StateGuard {
        state_dir: state.clone(),
    };
    let p = testkit::shimmed_provider(&state, "127.0.47.10-127.0.47.20");
    let plain = || {
        testkit::request(
            "c47",
            "g",
            Role::Plain,
            default_boot_script(drover_core::spec::LOCAL_PROVIDER, Role::Plain),
            "",
            false,
            vec![],
        )
    };
    let id = p.provision(plain(), &Unfenced).await.unwrap();
    let pid = p.record(&id).unwrap().unwrap().pid.expect("an engine pid");

    // Destroy under an expired lease: refused, the engine keeps running.
    let refused = p.destroy_fenced(&id, &testkit::Expired).await;
    assert!(
        Path::new(&format!("/proc/{pid}")).exists(),
        "the engine was stopped under an expired lease ({refused:?})"
    );
    assert!(
        matches!(refused, Err(ProviderError::Fenced(_))),
        "{refused:?}"
    );
    let all = p.describe(&BTreeMap::new()).await.unwrap();
    assert_eq!(all.len(), 1, "{all:?}");
    assert!(all[0].running, "{all:?}");

    // Provision and label under an expired lease: nothing made, nothing written.
    let mut other = plain();
    other
        .tags
        .insert(tags::LINK.to_string(), "another-op".to_string());
    let refused = p.provision(other, &testkit::Expired).await;
    assert!(
        matches!(refused, Err(ProviderError::Fenced(_))),
        "{refused:?}"
    );
    assert_eq!(p.describe(&BTreeMap::new()).await.unwrap().len(), 1);
    let x: BTreeMap<String, String> = [("x".to_string(), "y".to_string())].into();
    assert!(p.label(&id, &x, &testkit::Expired).await.is_err());
    assert!(p.describe(&x).await.unwrap().is_empty());

    p.destroy(&id).await.unwrap();
    assert!(p.describe(&BTreeMap::new()).await.unwrap().is_empty());
}
