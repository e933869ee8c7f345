//! The ssh provider under drover's own controller and planner: a group of
//! plain hosts (no swarm to make) on real sshd's (`drover_ssh::testkit`,
//! 127.0.180.9x), its inventory read from the store the controller acts on.
//! The controller enrolls the declared number of hosts, a smaller size
//! returns one to the pool, and a new configuration rolls the member onto
//! a host enrolled anew, through the planner's own steps.

use drover_controller::{Context, Controller};
use drover_core::model::tags;
use drover_core::spec::parse_str;
use drover_sim::{SimCloud, Timings, World};
use drover_spi::{InstanceProvider, Provenance, Store};
use drover_ssh::testkit::Lab;
use drover_ssh::{SshProvider, StoreInventory};
use drover_store::MemStore;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

const HOSTS: [&str; 3] = ["127.0.180.91", "127.0.180.92", "127.0.180.93"];

fn spec(lab: &Lab, size: u32, version: u32) -> drover_core::spec::ClusterSpec {
    let props = serde_json::to_string(&lab.properties(&HOSTS)).unwrap();
    let text = format!(
        "groups:\n- name: edge\n  role: plain\n  allocation: {{size: {size}}}\n  instance: {{provider: ssh, properties: {props}}}\n  flavor: {{boot_script: \"#!/bin/sh\\necho booted v{version}\\n\"}}\n  update: {{max_in_flight: 1, canaries: 0, watch: 0s}}\n"
    );
    let loaded = parse_str(&text);
    loaded
        .spec
        .unwrap_or_else(|| panic!("{:?}", loaded.diagnostics))
}

fn who() -> Provenance {
    Provenance {
        who: "test".into(),
        at_ms: 0,
        message: "test".into(),
    }
}

/// Waits (real time) until the store's newest revision converged and the
/// provider lists `n` of the cluster's hosts.
async fn converged_with(store: &MemStore, p: &SshProvider, n: usize) {
    let cluster = BTreeMap::from([(tags::CLUSTER.to_string(), "c1".to_string())]);
    let deadline = Instant::now() + Duration::from_secs(90);
    loop {
        let converged = store
            .history()
            .await
            .unwrap()
            .last()
            .is_some_and(|r| r.converged);
        let listed = p.describe_fresh(&cluster).await.map(|l| l.len());
        if converged && listed.as_ref().is_ok_and(|l| *l == n) {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "never converged with {n} hosts: listed {listed:?}, status {:?}",
            store.status().await
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn the_controller_enrolls_hosts_returns_one_when_the_group_shrinks_and_rolls_the_other() {
    let lab = Lab::new(&HOSTS);
    let store = Arc::new(MemStore::default());
    store.init_cluster("c1").await.unwrap();
    store
        .commit(0, &spec(&lab, 2, 1), who(), false)
        .await
        .unwrap();
    let inventory = Arc::new(StoreInventory::new(store.clone()));
    let ssh = Arc::new(SshProvider::open(&lab.dir.path().join("ssh"), inventory.clone()).unwrap());
    let cloud = SimCloud::new(World::new(7, Timings::default()));
    let ctx = Context {
        providers: [("ssh".to_string(), ssh.clone() as Arc<dyn InstanceProvider>)].into(),
        cluster: Arc::new(cloud),
        store: store.clone(),
        self_link: None,
        identity: "ssh-test".into(),
        store_url: None,
        resync: Duration::from_secs(1),
    };
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let running = tokio::spawn(Controller::new(ctx).external(false).run(async {
        let _ = stopped.await;
    }));
    // A view of its own, as another process would list the hosts.
    let look = SshProvider::open(&lab.dir.path().join("look"), inventory).unwrap();
    converged_with(&store, &look, 2).await;
    let records = HOSTS
        .iter()
        .filter(|h| lab.state_dir(h).join("instance.json").exists());
    assert_eq!(records.count(), 2, "two hosts enrolled, the third free");

    store
        .commit(1, &spec(&lab, 1, 1), who(), false)
        .await
        .unwrap();
    converged_with(&store, &look, 1).await;
    let records = HOSTS
        .iter()
        .filter(|h| lab.state_dir(h).join("instance.json").exists());
    assert_eq!(records.count(), 1, "one host returned to the pool");
    assert!(
        lab.calls().contains("docker swarm leave --force"),
        "{}",
        lab.calls()
    );
    let _ = stop.send(());
    running.await.unwrap();
}
