//! The real controller over an ec2 provider, for the controller-level
//! tests and the roll benchmark: a memory store holding a plain group's
//! spec (its machines join no swarm, so the simulator plays the swarm
//! side and no secret is needed to boot), a controller running until
//! stopped, and waiting for a revision to converge.

use crate::Ec2Provider;
use crate::testkit::{AMI, REGION};
use drover_controller::{Context, Controller, Metrics};
use drover_core::spec::parse_str;
use drover_sim::{SimCloud, Timings, World};
use drover_spi::{InstanceProvider, Provenance, Store};
use drover_store::MemStore;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// A plain group `batch` of `size` `instance_type` instances in
/// us-east-1a's `subnet`, rolled `in_flight` at a time.
pub fn plain_group(size: usize, in_flight: usize, instance_type: &str, subnet: &str) -> String {
    format!(
        "groups:
- name: batch
  role: plain
  allocation: {{size: {size}, zones: [us-east-1a]}}
  update: {{max_in_flight: {in_flight}}}
  instance:
    provider: ec2
    properties: {{region: {REGION}, image_id: {AMI}, instance_type: {instance_type}, subnets: {{us-east-1a: {subnet}}}}}
"
    )
}

/// Who commits.
pub fn who() -> Provenance {
    Provenance {
        who: "test".into(),
        at_ms: 0,
        message: "test".into(),
    }
}

/// A memory store of cluster `c1` holding `spec` as revision 1.
pub async fn store(spec: &str) -> Arc<MemStore> {
    let store = Arc::new(MemStore::default());
    store.init_cluster("c1").await.expect("a memory store");
    let spec = parse_str(spec).spec.expect("a valid spec");
    store
        .commit(0, &spec, who(), false)
        .await
        .expect("the first commit");
    store
}

/// Commits `spec` over revision `expected`.
pub async fn commit(store: &MemStore, expected: u64, spec: &str) {
    let spec = parse_str(spec).spec.expect("a valid spec");
    store
        .commit(expected, &spec, who(), false)
        .await
        .expect("a commit");
}

/// A controller running until [`Running::stop`].
pub struct Running {
    stop: tokio::sync::oneshot::Sender<()>,
    task: tokio::task::JoinHandle<()>,
}

impl Running {
    /// Stops it (as a crash would: its journal stays in the store).
    pub async fn stop(self) {
        let _ = self.stop.send(());
        let _ = self.task.await;
    }
}

/// A controller over `provider` and `store`, resync 500 ms, with `metrics`.
pub fn controller(provider: Ec2Provider, store: &Arc<MemStore>, metrics: Metrics) -> Running {
    let ctx = Context {
        providers: [(
            drover_core::spec::EC2_PROVIDER.to_string(),
            Arc::new(provider) as Arc<dyn InstanceProvider>,
        )]
        .into(),
        cluster: Arc::new(SimCloud::new(World::new(5, Timings::default()))),
        store: store.clone() as Arc<dyn Store>,
        self_link: None,
        identity: "test-controller".into(),
        store_url: None,
        resync: Duration::from_millis(500),
    };
    let (stop, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let task = tokio::spawn(Controller::new(ctx).with_metrics(metrics).run(async {
        let _ = stop_rx.await;
    }));
    Running { stop, task }
}

/// Waits until revision `rev` converged, panicking after `within`.
pub async fn converged(store: &MemStore, rev: u64, within: Duration) {
    let t0 = Instant::now();
    loop {
        let history = store.history().await.expect("the history");
        if history.iter().any(|r| r.rev == rev && r.converged) {
            return;
        }
        assert!(
            t0.elapsed() < within,
            "revision {rev} did not converge within {within:?}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}
