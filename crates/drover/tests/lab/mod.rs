//! The lab shared by the real-engine tests: etcd, a local-provider state
//! dir and an address range, the `drover` binary pointed at them, and the
//! swarm as the first answering engine sees it. Everything started is
//! stopped by PID when the lab drops (StateGuard, Etcd), also on failure.
#![allow(dead_code)] // each test crate uses its own part of the lab

use drover_core::model::{Node, SwarmView};
use drover_local::testkit::{StateGuard, short_tempdir};
use drover_local::{InstanceRecord, LocalProvider};
use drover_spi::Store;
use drover_store::testkit::Etcd;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

/// A test cluster: etcd, a local-provider state dir, an address range.
pub struct Lab {
    // Field order = drop order: engines (and their controllers) first.
    _guard: StateGuard,
    pub etcd: Etcd,
    pub dir: PathBuf,
    pub net: u8,
}

impl Lab {
    pub async fn new(net: u8) -> Lab {
        let etcd = Etcd::start().await;
        let dir = short_tempdir("dx").expect("tempdir");
        Lab {
            _guard: StateGuard {
                state_dir: dir.clone(),
            },
            etcd,
            dir,
            net,
        }
    }

    pub fn drover(&self, args: &[&str]) -> std::process::Output {
        let out = Command::new(env!("CARGO_BIN_EXE_drover"))
            .args(args)
            .env("DROVER_STORE", &self.etcd.url)
            .env("DROVER_LOCAL_DIR", &self.dir)
            .env(
                "DROVER_LOCAL_POOL",
                format!("127.0.{}.20-127.0.{}.60", self.net, self.net),
            )
            .env("DROVER_LOG", "warn")
            .output()
            .expect("run drover");
        eprintln!(
            "$ drover {}\n{}{}",
            args.join(" "),
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        out
    }

    pub fn apply(&self, spec: &Path, wait: bool) {
        let mut args = vec!["apply", "-f", spec.to_str().unwrap(), "--timeout", "8m"];
        if wait {
            args.push("--wait");
        }
        let out = self.drover(&args);
        assert_eq!(out.status.code(), Some(0), "apply failed");
    }

    pub fn provider(&self) -> LocalProvider {
        LocalProvider::new(&self.dir, Vec::new()).expect("provider")
    }

    pub fn records(&self) -> Vec<InstanceRecord> {
        self.provider().records().expect("records")
    }

    pub async fn store(&self) -> Box<dyn Store> {
        drover_store::open(&self.etcd.url).await.expect("store")
    }

    /// The node list from the first manager engine that answers with a leader.
    pub async fn nodes(&self) -> Option<Vec<Node>> {
        observe_any(&self.records()).await.ok()
    }
}

/// Asks each machine's engine in turn; the first complete answer wins.
pub async fn observe_any(records: &[InstanceRecord]) -> Result<Vec<Node>, String> {
    let mut last = "no machine".to_string();
    for r in records {
        let Ok(Ok(engine)) = tokio::time::timeout(
            Duration::from_secs(1),
            drover_engine::Engine::connect(&r.endpoint()),
        )
        .await
        else {
            continue;
        };
        match tokio::time::timeout(Duration::from_secs(2), engine.observe()).await {
            Ok(SwarmView::Ok(nodes)) => return Ok(nodes),
            Ok(SwarmView::NoQuorum(e)) => last = format!("no leader: {e}"),
            Ok(other) => last = format!("{other:?}"),
            Err(_) => last = "timeout".into(),
        }
    }
    Err(last)
}

/// A scenario may not hang CI: past `secs` it fails, and dropping its
/// future drops the lab, which stops every process it started.
pub async fn bounded(secs: u64, scenario: impl std::future::Future<Output = ()>) {
    if tokio::time::timeout(Duration::from_secs(secs), scenario)
        .await
        .is_err()
    {
        panic!("scenario did not finish within {secs}s");
    }
}
