//! Adopting a swarm built by hand, on real engines (127.0.101.x): a manager
//! and three workers are started and joined without drover; `drover adopt
//! --dry-run` shows the matches and changes nothing; `drover adopt` takes
//! the manager and two workers under management (the third, unnamed, is
//! left alone); a controller next to the manager's engine then replaces
//! nothing until the workers' spec changes, and rolls exactly the adopted
//! workers when it does. Everything started is stopped by PID on drop.

use drover_core::model::{Node, SwarmView};
use drover_engine::Engine;
use drover_local::testkit::{StateGuard, short_tempdir, wait_for};
use drover_local::{EngineProcess, LocalProvider};
use drover_store::testkit::Etcd;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::time::{Duration, Instant};

const NET: &str = "127.0.101";

/// A child process killed (by PID) and reaped on drop.
struct Reaped(Child);

impl Drop for Reaped {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

struct Lab {
    // Drop order: the controller, then the provider's machines, then the
    // engines started by hand, then etcd.
    controller: Option<Reaped>,
    _machines: StateGuard,
    _hand: StateGuard,
    etcd: Etcd,
    state: PathBuf,
    hand: PathBuf,
}

impl Lab {
    fn drover(&self, args: &[&str]) -> std::process::Output {
        let out = self.command(args).output().expect("run drover");
        eprintln!(
            "$ drover {}\n{}{}",
            args.join(" "),
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        out
    }

    fn command(&self, args: &[&str]) -> Command {
        let mut c = Command::new(env!("CARGO_BIN_EXE_drover"));
        c.args(args)
            .env("DROVER_STORE", &self.etcd.url)
            .env("DROVER_LOCAL_DIR", &self.state)
            .env("DROVER_LOCAL_POOL", format!("{NET}.20-{NET}.40"))
            .env("DROVER_LOG", "warn");
        c
    }

    fn spec(&self, release: &str) -> PathBuf {
        let text = format!(
            "groups:
- name: managers
  role: manager
  allocation: {{size: 1}}
  instance: {{provider: local}}
  update: {{strategy: surge}}
- name: workers
  role: worker
  allocation: {{size: 2}}
  instance: {{provider: local}}
  flavor: {{engine_labels: {{release: {release}}}}}
  update: {{watch: 2s}}
  health: {{startup_timeout: 60s}}
"
        );
        let path = self.state.join(format!("spec-{release}.yaml"));
        std::fs::write(&path, text).expect("write spec");
        path
    }

    fn engine_dir(&self, name: &str) -> PathBuf {
        self.hand.join("instances").join(name)
    }

    async fn nodes(&self) -> Vec<Node> {
        let e = Engine::connect(&endpoint(&self.engine_dir("m1")))
            .await
            .expect("manager engine");
        match e.observe().await {
            SwarmView::Ok(n) => n,
            other => panic!("swarm unreadable: {other:?}"),
        }
    }

    fn machines(&self) -> Vec<drover_local::InstanceRecord> {
        LocalProvider::new(&self.state, Vec::new())
            .expect("provider")
            .records()
            .expect("records")
    }

    fn phases(&self) -> BTreeMap<String, String> {
        let out = self
            .command(&["status", "--output", "json"])
            .output()
            .unwrap();
        let Ok(doc) = serde_json::from_slice::<serde_json::Value>(&out.stdout) else {
            return BTreeMap::new();
        };
        doc["groups"]
            .as_array()
            .map(|gs| {
                gs.iter()
                    .map(|g| {
                        (
                            g["name"].as_str().unwrap_or("").to_string(),
                            g["phase"].as_str().unwrap_or("").to_string(),
                        )
                    })
                    .collect()
            })
            .unwrap_or_default()
    }
}

fn endpoint(dir: &Path) -> String {
    format!("unix://{}/sock", dir.display())
}

/// Starts an engine by hand (no labels, as an operator would) and leaves it
/// running; the hand StateGuard stops it by its directory.
async fn start_engine(dir: &Path) -> Engine {
    let e = EngineProcess::start(dir, &BTreeMap::new()).expect("start dockerd");
    let engine = e
        .wait_ready(Duration::from_secs(30))
        .await
        .expect("dockerd ready");
    e.detach();
    engine
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn adopts_a_hand_built_swarm_and_rolls_it_only_when_its_spec_changes() {
    let scenario = async {
        let etcd = Etcd::start().await;
        let state = short_tempdir("da").unwrap();
        let hand = short_tempdir("dh").unwrap();
        let mut lab = Lab {
            controller: None,
            _machines: StateGuard {
                state_dir: state.clone(),
            },
            _hand: StateGuard {
                state_dir: hand.clone(),
            },
            etcd,
            state,
            hand,
        };
        let t0 = Instant::now();
        // The hand-built swarm: m1 inits, w1..w3 join.
        let m1 = start_engine(&lab.engine_dir("m1")).await;
        m1.init(&format!("{NET}.10")).await.expect("swarm init");
        let tokens = m1.join_tokens().await.unwrap();
        for (i, w) in ["w1", "w2", "w3"].iter().enumerate() {
            let e = start_engine(&lab.engine_dir(w)).await;
            e.join(
                &tokens.worker,
                &[format!("{NET}.10:2377")],
                &format!("{NET}.{}", 11 + i),
            )
            .await
            .expect("worker join");
        }
        let before = wait_for(Duration::from_secs(30), || async {
            let n = lab.nodes().await;
            (n.len() == 4
                && n.iter()
                    .all(|n| n.state == drover_core::model::NodeState::Ready))
            .then_some(n)
        })
        .await
        .expect("4 Ready nodes");
        eprintln!("hand-built swarm: {:?}", t0.elapsed());

        let spec = lab.spec("v1");
        let spec = spec.to_str().unwrap();
        let m1_ep = endpoint(&lab.engine_dir("m1"));
        let dirs: Vec<String> = ["m1", "w1", "w2"]
            .iter()
            .map(|n| lab.engine_dir(n).display().to_string())
            .collect();
        let mut adopt = vec!["adopt", "-f", spec, "--engine", &m1_ep];
        for d in &dirs {
            adopt.extend(["--machine", d.as_str()]);
        }

        // Dry run: the matches are shown, nothing changes.
        let mut dry = adopt.clone();
        dry.push("--dry-run");
        let out = lab.drover(&dry);
        assert_eq!(out.status.code(), Some(0));
        let text = String::from_utf8_lossy(&out.stdout);
        assert_eq!(text.matches("adopt /").count(), 3, "{text}");
        assert_eq!(text.matches("unmatched: left alone").count(), 1, "{text}");
        assert!(lab.machines().is_empty(), "dry run made instances");
        assert!(lab.nodes().await.iter().all(|n| n.link.is_none()));
        let store = drover_store::open(&lab.etcd.url).await.expect("store");
        assert!(
            store.desired().await.unwrap().is_none(),
            "dry run committed a spec"
        );

        // A machine that is not an engine is refused, naming it; nothing changes.
        let mut bad = adopt.clone();
        bad.extend(["--machine", "/nonexistent/engine"]);
        let out = lab.drover(&bad);
        assert_eq!(out.status.code(), Some(2));
        assert!(String::from_utf8_lossy(&out.stderr).contains("/nonexistent/engine"));
        assert!(lab.machines().is_empty());

        let out = lab.drover(&adopt);
        assert_eq!(out.status.code(), Some(0), "adopt failed");
        let adopted = lab.machines();
        assert_eq!(adopted.len(), 3, "{adopted:#?}");
        assert!(adopted.iter().all(
            |r| r.tags.contains_key("drover.adopted") && !r.tags.contains_key("drover.config")
        ));
        // Adopting again is a no-op.
        let out = lab.drover(&adopt);
        assert_eq!(out.status.code(), Some(0));
        assert_eq!(lab.machines(), adopted);

        // The controller next to the manager's engine: converged, nothing replaced.
        let child = lab
            .command(&["controller", "--engine", &m1_ep])
            .env("DROVER_LOG", "info")
            .stdout(std::process::Stdio::null())
            .stderr(std::fs::File::create(lab.state.join("controller.log")).unwrap())
            .spawn()
            .expect("start controller");
        lab.controller = Some(Reaped(child));
        let t1 = Instant::now();
        wait_for(Duration::from_secs(60), || async {
            let p = lab.phases();
            (p.get("managers").map(String::as_str) == Some("converged")
                && p.get("workers").map(String::as_str) == Some("converged"))
            .then_some(())
        })
        .await
        .expect("adopted cluster converged");
        tokio::time::sleep(Duration::from_secs(3)).await;
        assert_eq!(lab.machines(), adopted, "an adopted machine was replaced");
        let ids = |ns: &[Node]| ns.iter().map(|n| n.id.clone()).collect::<Vec<_>>();
        let mut now = ids(&lab.nodes().await);
        let mut was = ids(&before);
        now.sort();
        was.sort();
        assert_eq!(now, was, "the swarm changed without a spec change");
        eprintln!(
            "controller converged on the adopted cluster: {:?}",
            t1.elapsed()
        );

        // A spec change rolls exactly the adopted workers.
        let v2 = lab.spec("v2");
        let t2 = Instant::now();
        let out = lab.drover(&[
            "apply",
            "-f",
            v2.to_str().unwrap(),
            "--wait",
            "--timeout",
            "5m",
        ]);
        assert_eq!(out.status.code(), Some(0), "rollout failed");
        eprintln!("workers rolled: {:?}", t2.elapsed());
        let machines = lab.machines();
        let manager: Vec<_> = machines
            .iter()
            .filter(|r| r.tags["drover.group"] == "managers")
            .collect();
        assert_eq!(manager.len(), 1);
        assert!(
            manager[0].tags.contains_key("drover.adopted"),
            "the manager was rolled"
        );
        let workers: Vec<_> = machines
            .iter()
            .filter(|r| r.tags["drover.group"] == "workers")
            .collect();
        assert_eq!(workers.len(), 2);
        assert!(workers.iter().all(|r| r.tags.contains_key("drover.config")));
        for gone in ["w1", "w2"] {
            assert!(
                !lab.engine_dir(gone).exists(),
                "adopted worker {gone} was not destroyed"
            );
            assert!(
                drover_local::procs::pids_matching(&format!("{}/", lab.engine_dir(gone).display()))
                    .is_empty()
            );
        }
        let nodes = wait_for(Duration::from_secs(60), || async {
            let n = lab.nodes().await;
            (n.len() == 4).then_some(n)
        })
        .await
        .expect("old worker nodes removed");
        assert!(
            nodes
                .iter()
                .all(|n| n.state == drover_core::model::NodeState::Ready),
            "{nodes:#?}"
        );
        let w3 = Engine::connect(&endpoint(&lab.engine_dir("w3")))
            .await
            .expect("the unmatched worker's engine still runs")
            .info()
            .await
            .unwrap()
            .node_id;
        assert!(
            nodes.iter().any(|n| n.id == w3 && n.link.is_none()),
            "the unmatched worker was touched: {nodes:#?}"
        );
        eprintln!("total: {:?}", t0.elapsed());
    };
    if tokio::time::timeout(Duration::from_secs(600), scenario)
        .await
        .is_err()
    {
        panic!("scenario did not finish within 600s");
    }
}
