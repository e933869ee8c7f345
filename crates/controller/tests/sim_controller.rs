//! The real controller loop against the simulated cloud and swarm, with
//! tokio's clock paused: bring-up from nothing, then a rolling update; a
//! commit wakes the controller without waiting for its resync.

mod support;

use drover_controller::Controller;
use drover_core::hash::config_hash;
use drover_core::model::tags;
use drover_core::spec::{ClusterSpec, parse_str};
use drover_sim::{SimCloud, Timings, World};
use drover_spi::Store;
use drover_store::MemStore;
use std::sync::Arc;
use std::time::Duration;
use support::{Running, seeded_store, sim_context, who};

const SPEC: &str = "groups:
- name: managers
  role: manager
  allocation: {size: 3}
  instance: {provider: sim, properties: {image: v1}}
- name: workers
  role: worker
  allocation: {size: 4}
  instance: {provider: sim, properties: {image: v1}}
  update: {max_in_flight: 2}
";

fn spec(text: &str) -> ClusterSpec {
    parse_str(text).spec.expect("valid spec")
}

async fn converged(store: &MemStore, rev: u64) -> bool {
    store
        .history()
        .await
        .unwrap()
        .iter()
        .any(|r| r.rev == rev && r.converged)
}

/// A controller (resync `resync`) running over a fresh simulated cloud and
/// memory store, with `SPEC` committed as revision 1.
struct Cluster {
    cloud: SimCloud,
    store: Arc<MemStore>,
    controller: Running,
}

impl Cluster {
    async fn start(resync: Duration) -> Cluster {
        let cloud = SimCloud::new(World::new(3, Timings::default()));
        let store = seeded_store(SPEC).await;
        let mut ctx = sim_context(&cloud, store.clone());
        ctx.resync = resync;
        Cluster {
            cloud,
            store,
            controller: Running::start(Controller::new(ctx)),
        }
    }

    /// Waits (virtual time) until `rev` converged, at most `limit` seconds.
    async fn converge(&self, rev: u64, limit: u64) {
        let mut waited = 0;
        while !converged(&self.store, rev).await {
            tokio::time::sleep(Duration::from_secs(1)).await;
            waited += 1;
            assert!(
                waited < limit,
                "revision {rev} did not converge: {:?}",
                self.store.status().await.unwrap()
            );
        }
    }
}

#[tokio::test(start_paused = true)]
async fn controller_brings_a_cluster_up_and_rolls_a_change_through_it() {
    let _ = tracing_subscriber::fmt().with_test_writer().try_init();
    let run = Cluster::start(Duration::from_secs(2)).await;
    run.converge(1, 3600).await;
    let v2 = spec(&SPEC.replace("image: v1", "image: v2"));
    let rev2 = run.store.commit(1, &v2, who(), false).await.unwrap();
    run.converge(rev2, 7200).await;
    let (store, cloud) = (run.store.clone(), run.cloud.clone());
    run.controller.stop().await;

    let events = store.events(0).await.unwrap();
    let status = serde_json::to_string(&store.status().await.unwrap()).unwrap();
    let world = cloud.world();
    for g in &v2.groups {
        let members: Vec<_> = world
            .instances
            .values()
            .filter(|i| i.inst.owned_by("c1", &g.name))
            .collect();
        assert_eq!(members.len(), g.allocation.size(), "{}", g.name);
        assert!(
            members
                .iter()
                .all(|i| i.inst.config() == Some(config_hash(g).as_str())),
            "{} not all current",
            g.name
        );
    }
    assert_eq!(world.raft(), (3, 3));
    assert!(
        world.nodes.values().all(|n| world
            .instances
            .values()
            .any(|i| i.inst.link() == n.node.link.as_deref())),
        "stale nodes left"
    );
    assert!(
        events.iter().any(|e| e.reason.contains("demote")),
        "no demotion in the audit log"
    );
    // Every operation's end is in the audit log once, after its steps.
    for begin in events.iter().filter(|e| e.action == "begin") {
        let of_op = |action: &'static str| {
            events
                .iter()
                .filter(move |e| e.action == action && e.op == begin.op)
                .map(|e| (e.at_ms, e.group.clone()))
        };
        let ends: Vec<_> = of_op("end").collect();
        assert_eq!(ends.len(), 1, "{:?} ended {ends:?}", begin.op);
        let last_step = of_op("step").map(|(at, _)| at).max();
        assert!(ends[0].0 >= last_step.unwrap_or(begin.at_ms));
        assert_eq!(ends[0].1, begin.group);
    }
    assert!(
        events
            .iter()
            .all(|e| !format!("{e:?}").contains("simulated-secret")),
        "a join token reached the events"
    );
    assert!(
        !status.contains("simulated-secret"),
        "a join token reached the status"
    );
    assert!(
        world
            .instances
            .values()
            .all(|i| i.inst.tag(tags::CLUSTER) == Some("c1"))
    );
}

/// With a resync of 10 minutes, a converged controller sleeps; a commit must
/// wake it at once (the store's change watch), not at the next resync.
#[tokio::test(start_paused = true)]
async fn a_commit_wakes_a_sleeping_controller_before_its_resync() {
    let run = Cluster::start(Duration::from_secs(600)).await;
    run.converge(1, 36_000).await;
    // Let it settle into its long sleep.
    tokio::time::sleep(Duration::from_secs(30)).await;
    let v2 = spec(&SPEC.replace("image: v1", "image: v2"));
    let rev2 = run.store.commit(1, &v2, who(), false).await.unwrap();
    tokio::time::sleep(Duration::from_secs(1)).await;
    let status = run.store.status().await.unwrap().unwrap_or_default();
    assert_eq!(
        status["revision"], rev2,
        "the controller did not plan the new revision within 1 s of (virtual) time"
    );
    assert!(
        !run.store.journal().await.unwrap().is_empty(),
        "nothing was begun for the new revision"
    );
    run.controller.stop().await;
}
