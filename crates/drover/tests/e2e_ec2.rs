//! The leader-last roll of 3 managers and 2 workers through the EC2 API
//! (issue 19): moto holds the control plane behind the test kit's proxy,
//! and the data plane (`e2e_ec2/dataplane.rs`) boots a real `dockerd` on
//! loopback for each instance moto reports running, runs its user data,
//! and stops it when moto says terminated. The machines' own controllers
//! (started by their user data, with the ec2 provider and etcd as the
//! store) do the roll with `RunInstances`/`TerminateInstances`, watched
//! every 200 ms for the quorum.
//!
//! The cluster is made from nothing by one `drover apply --wait` given the
//! store, the region, moto's endpoint and the credentials, and no engine:
//! it makes the first manager, whose own controller takes over through the
//! store (issue 38, item 3); the roll is another `apply --wait`.
//!
//! The managers are cattle: moto keeps a terminated instance's private
//! address in use for good (`RunInstances` with it fails), where EC2 frees
//! it once the instance is terminated, so a pet could not be launched again
//! at its address here.
//!
//! Join tokens: each joining machine gets its role's token in its user data;
//! at the end, every token that was ever placed there has been rotated away,
//! and none appears in the store's events, status or journal.

#[path = "e2e_ec2/dataplane.rs"]
mod dataplane;
mod support;

use dataplane::DataPlane;
use drover_ec2::api::Credentials;
use drover_ec2::testkit::{AMI, Moto, Proxy, REGION};
use drover_spi::Store;
use drover_store::testkit::Etcd;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use support::{Watch, bounded, watch_engines};

fn spec(subnet: &str, release: &str) -> String {
    let instance = format!(
        "{{provider: ec2, properties: {{region: {REGION}, image_id: {AMI}, instance_type: t3.micro, subnets: {{us-east-1a: {subnet}}}}}}}"
    );
    format!(
        "groups:
- name: managers
  role: manager
  allocation: {{size: 3, zones: [us-east-1a]}}
  instance: {instance}
  flavor: {{engine_labels: {{release: {release}}}}}
  update: {{watch: 3s}}
  health: {{startup_timeout: 90s}}
- name: workers
  role: worker
  allocation: {{size: 2, zones: [us-east-1a]}}
  instance: {instance}
  flavor: {{engine_labels: {{release: {release}}}}}
  update: {{watch: 2s}}
  health: {{startup_timeout: 90s}}
"
    )
}

/// Every join token placed in some instance's user data.
async fn placed_tokens(moto: &Moto) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for i in moto.instances().await.expect("the instances") {
        let text = moto.user_data(&i.id).await.expect("the user data");
        for line in text.lines() {
            if let Some(t) = line.strip_prefix("export DROVER_JOIN_TOKEN='") {
                out.insert(t.trim_end_matches('\'').to_string());
            }
        }
    }
    out
}

/// The swarm's current join tokens (worker, manager), through `endpoints`.
async fn current_tokens(endpoints: &[String]) -> Option<[String; 2]> {
    for e in endpoints {
        let Ok(engine) = drover_engine::Engine::connect(e).await else {
            continue;
        };
        if let Ok(t) = engine.join_tokens().await {
            return Some([
                t.worker.expose().to_string(),
                t.manager.expose().to_string(),
            ]);
        }
    }
    None
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_leader_last_roll_of_managers_and_workers_runs_through_the_ec2_api() {
    let etcd = Etcd::start().await;
    let moto = Arc::new(Moto::start().await);
    let proxy = Proxy::start(&moto).await;
    let root = drover_local::testkit::short_tempdir("dx-ec2").expect("a directory");
    let Credentials::Static {
        access_key,
        secret_key,
    } = moto.credentials()
    else {
        unreachable!("the test kit's user has a static key")
    };
    let (key, secret) = (access_key.clone(), secret_key.clone());
    let plane = DataPlane::start(
        moto.clone(),
        root.clone(),
        env!("CARGO_BIN_EXE_drover").into(),
        (access_key, secret_key),
    );
    bounded(400, async {
        let subnet = moto.subnets().await["us-east-1a"].clone();
        // From nothing, one command, as from an operator's laptop: the
        // store, the region, moto's endpoint and the credentials in the
        // environment; no engine endpoint or socket.
        let apply = |release: &'static str| {
            let path = root.join(format!("cluster-{release}.yaml"));
            std::fs::write(&path, spec(&subnet, release)).expect("the cluster file");
            let mut cmd = tokio::process::Command::new(env!("CARGO_BIN_EXE_drover"));
            cmd.args([
                "apply",
                "-f",
                path.to_str().unwrap(),
                "--wait",
                "--timeout",
                "4m",
            ])
            .env_clear()
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .env("HOME", &root)
            .env("DROVER_LOG", "warn")
            .env("DROVER_STORE", &etcd.url)
            .env("DROVER_EC2", "true")
            .env("AWS_REGION", REGION)
            .env("DROVER_EC2_ENDPOINT", &proxy.endpoint)
            .env("AWS_ACCESS_KEY_ID", &key)
            .env("AWS_SECRET_ACCESS_KEY", &secret);
            async move {
                let out = cmd.output().await.expect("drover apply");
                eprintln!(
                    "$ drover apply (release {release})\n{}{}",
                    String::from_utf8_lossy(&out.stdout),
                    String::from_utf8_lossy(&out.stderr)
                );
                assert_eq!(out.status.code(), Some(0), "apply of {release} failed");
                String::from_utf8_lossy(&out.stdout).into_owned()
            }
        };
        let t0 = Instant::now();
        let said = apply("v1").await;
        eprintln!("bring-up by apply: {:.1}s", t0.elapsed().as_secs_f64());
        assert!(
            said.contains("the first manager's controller took over"),
            "{said}"
        );
        let store: Arc<dyn Store> = Arc::from(drover_store::open(&etcd.url).await.expect("etcd"));
        let states = moto.states().await;
        assert_eq!(
            states,
            BTreeMap::from([("running".to_string(), 5)]),
            "{states:?}"
        );

        // The roll, watched every 200 ms.
        let stop = Arc::new(AtomicBool::new(false));
        let watch = Arc::new(Mutex::new(Watch::default()));
        let watcher = watch_engines(plane.engines(), stop.clone(), watch.clone());
        apply("v2").await;
        stop.store(true, std::sync::atomic::Ordering::SeqCst);
        let _ = watcher.await;
        {
            let w = watch.lock().unwrap();
            eprintln!("{}", w.summary());
            w.assert_quorum_kept();
        }

        // No duplicate, nothing lost: 5 running, the 5 old ones terminated.
        let t0 = Instant::now();
        let rolled = BTreeMap::from([("running".to_string(), 5), ("terminated".to_string(), 5)]);
        while moto.states().await != rolled {
            assert!(
                t0.elapsed() < Duration::from_secs(30),
                "{:?}",
                moto.states().await
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        let nodes = support::observe_endpoints(&plane.endpoints())
            .await
            .expect("the swarm");
        assert_eq!(
            nodes.iter().filter(|n| n.raft.is_some()).count(),
            3,
            "{nodes:#?}"
        );
        assert_eq!(nodes.len(), 5, "{nodes:#?}");

        // Every token placed in user data is useless now.
        let placed = placed_tokens(&moto).await;
        assert!(
            placed.len() >= 2,
            "tokens of both roles were placed: {} found",
            placed.len()
        );
        let t0 = Instant::now();
        loop {
            let now = current_tokens(&plane.endpoints())
                .await
                .expect("the tokens");
            if now.iter().all(|t| !placed.contains(t)) {
                break;
            }
            assert!(
                t0.elapsed() < Duration::from_secs(30),
                "a placed token is still current"
            );
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
        let events = store.events(0).await.expect("the events");
        // Leader last: the acting leader demoted itself after every other
        // manager was demoted.
        let at = |prefix: &str| -> Vec<usize> {
            let steps = events.iter().filter(|e| e.action == "step");
            steps
                .enumerate()
                .filter(|(_, e)| e.reason.starts_with(prefix))
                .map(|(i, _)| i)
                .collect()
        };
        let (own, others) = (at("demote self ("), at("demote node "));
        assert_eq!(own.len(), 1, "one hand-over: {own:?}");
        assert!(
            others.len() >= 2 && others.iter().all(|i| *i < own[0]),
            "{others:?} / {own:?}"
        );
        let rotations = events
            .iter()
            .filter(|e| e.action == "rotate-join-token")
            .count();
        assert!(rotations >= 2, "{rotations} rotations");
        let said = format!(
            "{} {} {}",
            serde_json::to_string(&events).unwrap(),
            serde_json::to_string(&store.status().await.unwrap()).unwrap(),
            serde_json::to_string(&store.journal().await.unwrap()).unwrap(),
        );
        for t in &placed {
            assert!(
                !said.contains(t.as_str()),
                "a join token in the store's records"
            );
        }
        eprintln!(
            "API calls: run {}, terminate {}, describe {}; {rotations} rotations; machines {:?}",
            proxy.calls("RunInstances"),
            proxy.calls("TerminateInstances"),
            proxy.calls("DescribeInstances"),
            plane.addresses(),
        );
    })
    .await;
    drop(plane);
    let _ = std::fs::remove_dir_all(&root);
}
