//! What the controller tests share: a memory store seeded with a spec, a
//! context over the simulated cloud, a controller running until stopped.

#![allow(dead_code)]

use drover_controller::{Context, Controller};
use drover_core::spec::parse_str;
use drover_sim::SimCloud;
use drover_spi::{Provenance, Store};
use drover_store::MemStore;
use std::sync::Arc;
use std::time::Duration;

/// Who commits in tests.
pub fn who() -> Provenance {
    Provenance {
        who: "test".into(),
        at_ms: 0,
        message: "test".into(),
    }
}

/// A memory store for cluster `c1` with `spec` committed as revision 1.
pub async fn seeded_store(spec: &str) -> Arc<MemStore> {
    let store = Arc::new(MemStore::default());
    store.init_cluster("c1").await.unwrap();
    let spec = parse_str(spec).spec.expect("valid spec");
    store.commit(0, &spec, who(), false).await.unwrap();
    store
}

/// An off-cluster controller's context: `cloud` is provider `sim` and the
/// swarm, `store` the store, resync 2 s (tests change fields as they need).
pub fn sim_context(cloud: &SimCloud, store: Arc<dyn Store>) -> Context {
    Context {
        providers: [(
            "sim".to_string(),
            Arc::new(cloud.clone()) as Arc<dyn drover_spi::InstanceProvider>,
        )]
        .into(),
        cluster: Arc::new(cloud.clone()),
        store,
        self_link: None,
        identity: "test-controller".into(),
        store_url: None,
        resync: Duration::from_secs(2),
    }
}

/// A controller running in a task until [`Running::stop`].
pub struct Running {
    stop: tokio::sync::oneshot::Sender<()>,
    task: tokio::task::JoinHandle<()>,
}

impl Running {
    pub fn start(controller: Controller) -> Running {
        let (stop, stop_rx) = tokio::sync::oneshot::channel::<()>();
        let task = tokio::spawn(controller.run(async {
            let _ = stop_rx.await;
        }));
        Running { stop, task }
    }

    pub async fn stop(self) {
        let _ = self.stop.send(());
        self.task.await.unwrap();
    }
}
