//! Autolocked swarms on real engines (127.0.100.x): a manager whose engine
//! restarts into the `locked` state is reported as locked (not merely Down),
//! its machine still counts as running, and the planner blocks the manager
//! group with that reason instead of replacing the machine.

use bollard::query_parameters::UpdateSwarmOptionsBuilder;
use drover_core::model::{SwarmView, tags};
use drover_core::spec::Role;
use drover_engine::{Engine, LOCKED_MESSAGE, PeerEndpoints};
use drover_local::testkit::{self, StateGuard};
use drover_local::{EngineProcess, procs};
use drover_spi::{Cluster, InstanceProvider};
use drover_swarm::SwarmCluster;
use std::sync::Arc;
use std::time::Duration;

/// Stand-in for `drover engine join` in boot scripts (see testkit).
#[tokio::test]
async fn drover_shim() {
    testkit::run_shim_from_env().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_locked_manager_is_reported_locked_and_blocks_manager_steps() {
    let state = testkit::short_tempdir("dl").unwrap();
    let _guard = StateGuard {
        state_dir: state.clone(),
    };
    let p = testkit::shimmed_provider(&state, "127.0.100.10-127.0.100.20");
    let peers: Arc<dyn PeerEndpoints> = p.clone();
    let m1 = testkit::first_manager(&p, "c100").await;
    let c1 = SwarmCluster::new(p.endpoint(&m1).unwrap(), Some(peers.clone()));
    let mut followers = Vec::new();
    for _ in 0..2 {
        followers.push(testkit::joined_member(&p, &c1, "c100", "m", Role::Manager).await);
    }

    // Turn autolock on (the unlock key is never fetched: drover never needs it).
    let leader = Engine::connect(&p.endpoint(&m1).unwrap()).await.unwrap();
    let swarm = leader.docker().inspect_swarm().await.unwrap();
    let mut spec = swarm.spec.unwrap();
    spec.encryption_config = Some(bollard::models::SwarmSpecEncryptionConfig {
        auto_lock_managers: Some(true),
    });
    let version = swarm.version.unwrap().index.unwrap() as i64;
    leader
        .docker()
        .update_swarm(
            spec,
            UpdateSwarmOptionsBuilder::default()
                .version(version)
                .build(),
        )
        .await
        .expect("enable autolock");

    // Restart one follower's engine in place (kill -9, start again in the
    // same directory with the same labels): it comes back locked once it has
    // applied the autolock change (asynchronous on followers: retried).
    let victim = followers[0].clone();
    let rec = p.record(&victim).unwrap().unwrap();
    let dir = rec.socket.parent().unwrap().to_path_buf();
    let mut locked_after = None;
    for attempt in 1..=5 {
        tokio::time::sleep(Duration::from_secs(2)).await;
        let own = restart_in_place(&p, &victim, &dir).await;
        if own.observe().await == SwarmView::Unavailable(LOCKED_MESSAGE.into()) {
            locked_after = Some(attempt);
            break;
        }
    }
    let attempts = locked_after.expect("the restarted engine itself says it is locked");
    eprintln!("locked after {attempts} restart(s)");
    let described = p
        .describe(&[(tags::CLUSTER.to_string(), "c100".to_string())].into())
        .await
        .unwrap();
    assert!(
        described.iter().all(|i| i.running),
        "a restarted engine's machine is still running: {described:?}"
    );

    // Through the leader, the node is flagged locked.
    let nodes = testkit::wait_for(Duration::from_secs(60), || async {
        match c1.observe().await {
            SwarmView::Ok(ns) if ns.iter().any(|n| n.locked) => Some(ns),
            _ => None,
        }
    })
    .await
    .expect("the locked manager is reported as locked");
    let locked: Vec<_> = nodes.iter().filter(|n| n.locked).collect();
    assert_eq!(locked.len(), 1, "{nodes:?}");
    assert_eq!(
        locked[0].link.as_deref(),
        Some(rec.tags[tags::LINK].as_str())
    );

    // The planner, given this world and a changed manager config, replaces
    // nothing and blocks the group with the reason.
    let spec = drover_core::spec::load_bytes(
        b"groups:\n  - name: m\n    role: manager\n    allocation: {size: 3}\n    instance: {provider: local}\n",
    )
    .spec
    .expect("valid spec");
    let desired = drover_core::plan::Desired {
        cluster_id: "c100".into(),
        groups: vec![drover_core::plan::DesiredGroup {
            hash: drover_core::hash::config_hash(&spec.groups[0]),
            spec: spec.groups[0].clone(),
            paused: false,
            is_rollback: false,
        }],
        orphan_grace: spec.gc.orphan_grace,
        ..Default::default()
    };
    let observed = drover_core::model::Observed {
        instances: [(
            "m".to_string(),
            drover_core::model::Described::Ok(described),
        )]
        .into(),
        swarm: SwarmView::Ok(nodes),
        self_link: None,
        left_reports: Vec::new(),
        services: Default::default(),
        boots: Default::default(),
        complete_listings: Default::default(),
    };
    let plan = drover_core::plan::plan(drover_core::plan::PlanInput {
        desired: &desired,
        observed: &observed,
        journal: &[],
        memory: &Default::default(),
        now: 0,
        wall_ms: 0,
        nonce: 1,
    });
    assert!(plan.actions.is_empty(), "{:?}", plan.actions);
    let why = plan.groups[0].reason.clone().unwrap_or_default();
    assert!(why.contains("locked"), "{why}");
}

/// Kills an instance's machine (`testkit::kill_machine`: its supervisor,
/// engine and process group; containerd follows its dockerd) and starts
/// the engine again in the same directory with the same labels, as a
/// reboot would.
async fn restart_in_place(
    p: &drover_local::LocalProvider,
    id: &str,
    dir: &std::path::Path,
) -> Engine {
    let rec = p.record(id).unwrap().unwrap();
    testkit::kill_machine(&rec);
    let needle = format!("{}/", dir.display());
    testkit::wait_for(Duration::from_secs(20), || async {
        procs::pids_matching(&needle).is_empty().then_some(())
    })
    .await
    .expect("engine and containerd died");
    // A reboot empties the runtime directory (on a VM it is a tmpfs).
    procs::unmount_under(&dir.join("exec")).unwrap();
    std::fs::remove_dir_all(dir.join("exec")).unwrap();
    let labels = [tags::CLUSTER, tags::GROUP, tags::LINK]
        .iter()
        .map(|k| (k.to_string(), rec.tags[*k].clone()))
        .collect();
    let engine = EngineProcess::start(dir, &labels).unwrap();
    let own = match engine.wait_ready(Duration::from_secs(20)).await {
        Ok(e) => e,
        Err(e) => panic!(
            "restart: {e}\n{}",
            std::fs::read_to_string(dir.join("log")).unwrap_or_default()
        ),
    };
    engine.detach();
    own
}
