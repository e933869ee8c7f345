//! The real controller loop rolling a swarm whose machines all come
//! through the plugin protocol: its only provider is drover's client of a
//! plugin (`plugin:sim`), which is drover's server over the simulated
//! cloud, on a real unix socket and the real clock. Bring-up from nothing,
//! then a roll of 3 managers (leader last) and 2 workers; then the plugin
//! goes away (every describe fails) and nothing is destroyed.

mod support;

use drover_controller::{Context, Controller};
use drover_core::hash::config_hash;
use drover_core::spec::parse_str;
use drover_plugin::Timeouts;
use drover_sim::{SimCloud, Timings, World};
use drover_spi::{InstanceProvider, Store};
use drover_store::MemStore;
use std::sync::Arc;
use std::time::{Duration, Instant};

const SPEC: &str = "groups:
- name: managers
  role: manager
  allocation: {size: 3}
  instance: {provider: plugin, plugin: sim, properties: {image: v1}}
- name: workers
  role: worker
  allocation: {size: 2}
  instance: {provider: plugin, plugin: sim, properties: {image: v1}}
";

/// The simulator at a tenth of real engines' pace (it runs on the real clock).
fn quick() -> Timings {
    Timings {
        provision: 40,
        join: 60,
        api: 2,
        out_of_raft: 30,
        down_after: 1500,
        election: 1200,
        drain: 100,
        tasks_per_worker: 1,
    }
}

async fn converge(store: &MemStore, rev: u64, limit: Duration) {
    let t0 = Instant::now();
    loop {
        let history = store.history().await.unwrap();
        if history.iter().any(|r| r.rev == rev && r.converged) {
            return;
        }
        assert!(
            t0.elapsed() < limit,
            "revision {rev} did not converge: {:?}",
            store.status().await.unwrap()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_controller_brings_up_and_rolls_a_swarm_through_the_plugin_protocol() {
    let cloud = SimCloud::new(World::new(5, quick()));
    let served = support::ServedSim::serve(cloud.clone());
    let store = Arc::new(MemStore::default());
    store.init_cluster("c1").await.unwrap();
    let v1 = parse_str(SPEC).spec.expect("valid spec");
    let who = drover_spi::Provenance {
        who: "test".into(),
        at_ms: 0,
        message: "test".into(),
    };
    store.commit(0, &v1, who.clone(), false).await.unwrap();
    let ctx = Context {
        providers: [(
            "plugin:sim".to_string(),
            Arc::new(served.client(Timeouts::default())) as Arc<dyn InstanceProvider>,
        )]
        .into(),
        cluster: Arc::new(cloud.clone()),
        store: store.clone(),
        self_link: None,
        identity: "plugin-test".into(),
        store_url: None,
        resync: Duration::from_millis(200),
    };
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let running = tokio::spawn(Controller::new(ctx).run(async {
        let _ = stopped.await;
    }));

    let t0 = Instant::now();
    converge(&store, 1, Duration::from_secs(90)).await;
    eprintln!("bring-up through the plugin: {:?}", t0.elapsed());
    let v2 = parse_str(&SPEC.replace("image: v1", "image: v2"))
        .spec
        .unwrap();
    let rev2 = store.commit(1, &v2, who, false).await.unwrap();
    let t1 = Instant::now();
    converge(&store, rev2, Duration::from_secs(150)).await;
    eprintln!("roll through the plugin: {:?}", t1.elapsed());

    // The plugin goes away: its describes fail, which is never "none".
    let machines = || cloud.world().instances.keys().cloned().collect::<Vec<_>>();
    let (before, seen) = (machines(), store.events(0).await.unwrap().len());
    served.stop().await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(
        machines(),
        before,
        "a machine went while its plugin was away"
    );
    let later = store.events(0).await.unwrap();
    assert!(
        later[seen..]
            .iter()
            .all(|e| !e.reason.contains("destroy") && !e.reason.contains("provision")),
        "{:?}",
        &later[seen..]
    );
    let _ = stop.send(());
    running.await.unwrap();

    let events = store.events(0).await.unwrap();
    assert!(
        events.iter().any(|e| e.reason.contains("demote")),
        "no demotion in the audit log"
    );
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
    assert_eq!(world.raft(), (3, 3), "three managers, all in the raft");
}
