//! The swarm store writes the whole swarm spec back: everything but
//! drover's own labels must come back exactly as the operator set it
//! (autolock, raft, CA, dispatcher, orchestration, their own labels), and
//! drover's labels stay small (they ride in every manager's `info`).

mod support;

use bollard::models::{
    SwarmSpecCaConfig, SwarmSpecDispatcher, SwarmSpecEncryptionConfig, SwarmSpecOrchestration,
    SwarmSpecRaft,
};
use bollard::query_parameters::UpdateSwarmOptionsBuilder;
use drover_core::journal::{OpKind, Operation, Target};
use drover_core::spec::Role;
use drover_spi::{Event, FORMAT, Heartbeat, Provenance, StatusJson, Store};
use drover_store::{SwarmOptions, SwarmStore};

fn drover_labels_removed(mut spec: bollard::models::SwarmSpec) -> bollard::models::SwarmSpec {
    if let Some(l) = spec.labels.as_mut() {
        l.retain(|k, _| !k.starts_with("drover.store."));
    }
    spec
}

fn op(n: usize) -> Operation {
    Operation {
        id: format!("workers-0123456789abcdef-{n}"),
        group: "workers".into(),
        kind: OpKind::Roll,
        role: Role::Worker,
        victim: None,
        target: Some(Target {
            logical_id: Some(format!("127.0.90.{n}")),
            zone: Some("a".into()),
            attempt: 1,
        }),
        surge: true,
        done: Default::default(),
        intent: None,
        collection: None,
        provision_failures: 0,
        short_zones: Vec::new(),
        hook_failure: None,
        in_place: false,
        update_failure: None,
    }
}

#[tokio::test]
async fn swarm_store_round_trips_the_operators_swarm_spec_and_stays_small() {
    let d = support::Dockerd::start_swarm("127.0.90.2").await;
    let docker =
        bollard::Docker::connect_with_unix(&d.endpoint, 30, bollard::API_DEFAULT_VERSION).unwrap();

    // The operator's settings, through the engine.
    let swarm = docker.inspect_swarm().await.unwrap();
    let mut spec = swarm.spec.unwrap();
    spec.encryption_config = Some(SwarmSpecEncryptionConfig {
        auto_lock_managers: Some(true),
    });
    let raft = spec.raft.get_or_insert_default();
    raft.snapshot_interval = Some(5000);
    raft.keep_old_snapshots = Some(2);
    raft.log_entries_for_slow_followers = Some(700);
    spec.ca_config = Some(SwarmSpecCaConfig {
        node_cert_expiry: Some(48 * 3600 * 1_000_000_000),
        ..spec.ca_config.unwrap_or_default()
    });
    spec.dispatcher = Some(SwarmSpecDispatcher {
        heartbeat_period: Some(7_000_000_000),
    });
    spec.orchestration = Some(SwarmSpecOrchestration {
        task_history_retention_limit: Some(3),
    });
    spec.labels
        .get_or_insert_default()
        .insert("team".into(), "platform".into());
    let version = swarm.version.unwrap().index.unwrap() as i64;
    let o = UpdateSwarmOptionsBuilder::default()
        .version(version)
        .build();
    docker.update_swarm(spec, o).await.unwrap();
    let before = docker.inspect_swarm().await.unwrap().spec.unwrap();
    assert_eq!(
        before
            .encryption_config
            .as_ref()
            .unwrap()
            .auto_lock_managers,
        Some(true)
    );
    assert_eq!(
        before.raft,
        Some(SwarmSpecRaft {
            snapshot_interval: Some(5000),
            keep_old_snapshots: Some(2),
            log_entries_for_slow_followers: Some(700),
            ..before.raft.clone().unwrap()
        })
    );

    // A realistic, full store: the caps' worth of revisions and events of
    // the example cluster, a status document, five operations in flight.
    let store = SwarmStore::connect_with(Some(&d.endpoint), SwarmOptions::default())
        .await
        .unwrap();
    store.negotiate_format(0).await.unwrap();
    let example = include_str!("../../../examples/cluster.yaml");
    let spec = drover_core::spec::parse_str(example).spec.expect("example");
    store.init_cluster("c-0123456789abcdef").await.unwrap();
    let epoch = store.campaign("127.0.90.2").await.unwrap();
    let limits = SwarmOptions::default().limits;
    for rev in 0..(limits.history as u64 + 5) {
        let p = Provenance {
            who: "alice@ops-host".into(),
            at_ms: 1_800_000_000_000 + rev,
            message: format!("roll image to v{rev}"),
        };
        store.commit(rev, &spec, p, false).await.unwrap();
    }
    for n in 0..5 {
        store.journal_put(epoch, &op(n)).await.unwrap();
    }
    for n in 0..(limits.events + 20) {
        let e = Event {
            at_ms: 1_800_000_000_000 + n as u64,
            controller: "127.0.90.2".into(),
            group: Some("workers".into()),
            op: Some(op(n % 5).id),
            action: drover_spi::EventAction::Step,
            target: None,
            outcome: "ok".into(),
            reason: format!("drain node x3m2k9q8r7t6y5u4w{n}"),
        };
        store.append_event(epoch, &e).await.unwrap();
    }
    let status = serde_json::json!({
        "controller": "127.0.90.2", "epoch": epoch, "revision": 25,
        "groups": [{"name": "managers", "phase": "rolling", "members": 3, "current": 2},
                   {"name": "workers", "phase": "converged", "members": 2, "current": 2}],
        "explanation": vec!["managers: rolling 1 of 3 (leader last)"; 5],
    });
    store
        .publish_status(epoch, StatusJson::new(&status).unwrap())
        .await
        .unwrap();
    for m in 1..=5 {
        let b = Heartbeat {
            holder: format!("127.0.90.{m}"),
            format: FORMAT,
            at_ms: 1_800_000_000_000,
            engine: None,
            seat: None,
            waiting: None,
        };
        store.heartbeat(&b).await.unwrap();
    }

    let after = docker.inspect_swarm().await.unwrap().spec.unwrap();
    assert_eq!(
        drover_labels_removed(after.clone()),
        drover_labels_removed(before),
        "drover's writes changed the operator's swarm settings"
    );
    let sizes: Vec<(String, usize)> = after
        .labels
        .unwrap()
        .into_iter()
        .filter(|(k, _)| k.starts_with("drover.store."))
        .map(|(k, v)| (k.clone(), k.len() + v.len()))
        .collect();
    let total: usize = sizes.iter().map(|(_, n)| n).sum();
    println!("MEASURE swarm store labels, full caps: {total} bytes; {sizes:?}");
    assert!(
        total < SwarmOptions::default().budget / 4,
        "labels grew to {total} bytes"
    );
}
