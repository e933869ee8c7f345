//! What the controller tests share: a memory store seeded with a spec, a
//! context over the simulated cloud, a controller running until stopped.

#![allow(dead_code)]

use async_trait::async_trait;
use drover_controller::{Context, Controller};
use drover_core::journal::Operation;
use drover_core::spec::{ClusterSpec, parse_str};
use drover_sim::SimCloud;
use drover_spi::{
    Controls, Epoch, Event, Heartbeat, Provenance, Revision, StatusJson, Store, StoreError, Write,
};
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

    /// Ends its loop without a word, as `kill -9` would: no more passes,
    /// writes or beats. A step it already started runs on, as a call a
    /// killed process already sent may still take effect.
    pub fn kill(self) {
        self.task.abort();
    }
}

/// A memory store that tells `tap` the name of every call made to it
/// before passing it on (to see what a controller asks when).
pub struct Tapped {
    pub inner: Arc<MemStore>,
    pub tap: Box<dyn Fn(&'static str) + Send + Sync>,
}

#[async_trait]
impl Store for Tapped {
    async fn cluster_id(&self) -> Result<Option<String>, StoreError> {
        (self.tap)("cluster_id");
        self.inner.cluster_id().await
    }
    async fn init_cluster(&self, id: &str) -> Result<(), StoreError> {
        (self.tap)("init_cluster");
        self.inner.init_cluster(id).await
    }
    async fn import(&self, cluster: &drover_spi::Imported) -> Result<(), StoreError> {
        (self.tap)("import");
        self.inner.import(cluster).await
    }
    async fn desired(&self) -> Result<Option<Revision>, StoreError> {
        (self.tap)("desired");
        self.inner.desired().await
    }
    async fn history(&self) -> Result<Vec<Revision>, StoreError> {
        (self.tap)("history");
        self.inner.history().await
    }
    async fn commit(
        &self,
        expected: u64,
        spec: &ClusterSpec,
        provenance: Provenance,
        is_rollback: bool,
    ) -> Result<u64, StoreError> {
        (self.tap)("commit");
        self.inner
            .commit(expected, spec, provenance, is_rollback)
            .await
    }
    async fn commit_rollback(
        &self,
        epoch: Epoch,
        expected: u64,
        spec: &ClusterSpec,
        provenance: Provenance,
    ) -> Result<u64, StoreError> {
        (self.tap)("commit_rollback");
        self.inner
            .commit_rollback(epoch, expected, spec, provenance)
            .await
    }
    async fn mark_converged(&self, epoch: Epoch, rev: u64) -> Result<(), StoreError> {
        (self.tap)("mark_converged");
        self.inner.mark_converged(epoch, rev).await
    }
    async fn changed(&self) -> Result<(), StoreError> {
        (self.tap)("changed");
        self.inner.changed().await
    }
    async fn controls(&self) -> Result<Controls, StoreError> {
        (self.tap)("controls");
        self.inner.controls().await
    }
    async fn set_controls(&self, controls: &Controls) -> Result<(), StoreError> {
        (self.tap)("set_controls");
        self.inner.set_controls(controls).await
    }
    async fn campaign(&self, holder: &str) -> Result<Epoch, StoreError> {
        (self.tap)("campaign");
        self.inner.campaign(holder).await
    }
    async fn leader(&self) -> Result<Option<(Epoch, String)>, StoreError> {
        (self.tap)("leader");
        self.inner.leader().await
    }
    async fn acquire(&self, holder: &str) -> Result<Option<Epoch>, StoreError> {
        (self.tap)("acquire");
        self.inner.acquire(holder).await
    }
    async fn resign(&self, epoch: Epoch) -> Result<(), StoreError> {
        (self.tap)("resign");
        self.inner.resign(epoch).await
    }
    fn reach(&self) -> drover_spi::Reach {
        self.inner.reach()
    }
    async fn check_epoch(&self, epoch: Epoch) -> Result<(), StoreError> {
        (self.tap)("check_epoch");
        self.inner.check_epoch(epoch).await
    }
    async fn journal(&self) -> Result<Vec<Operation>, StoreError> {
        (self.tap)("journal");
        self.inner.journal().await
    }
    async fn journal_put(&self, epoch: Epoch, op: &Operation) -> Result<(), StoreError> {
        (self.tap)("journal_put");
        self.inner.journal_put(epoch, op).await
    }
    async fn journal_remove(&self, epoch: Epoch, op: &str) -> Result<(), StoreError> {
        (self.tap)("journal_remove");
        self.inner.journal_remove(epoch, op).await
    }
    async fn write_batch(&self, epoch: Epoch, writes: &[Write]) -> Result<(), StoreError> {
        (self.tap)("write_batch");
        self.inner.write_batch(epoch, writes).await
    }
    async fn publish_status(&self, epoch: Epoch, status: StatusJson) -> Result<(), StoreError> {
        (self.tap)("publish_status");
        self.inner.publish_status(epoch, status).await
    }
    async fn status(&self) -> Result<Option<serde_json::Value>, StoreError> {
        (self.tap)("status");
        self.inner.status().await
    }
    async fn append_event(&self, epoch: Epoch, event: &Event) -> Result<(), StoreError> {
        (self.tap)("append_event");
        self.inner.append_event(epoch, event).await
    }
    async fn events(&self, since_ms: u64) -> Result<Vec<Event>, StoreError> {
        (self.tap)("events");
        self.inner.events(since_ms).await
    }
    async fn heartbeat(&self, beat: &Heartbeat) -> Result<(), StoreError> {
        (self.tap)("heartbeat");
        self.inner.heartbeat(beat).await
    }
    async fn heartbeats(&self) -> Result<Vec<Heartbeat>, StoreError> {
        (self.tap)("heartbeats");
        self.inner.heartbeats().await
    }
    fn write_format(&self) -> u32 {
        self.inner.write_format()
    }
    fn set_write_format(&self, format: u32) {
        self.inner.set_write_format(format)
    }
}

/// A test's own provision over the simulated cloud; everything else is the
/// cloud's ([`Provisioning`]).
#[async_trait]
pub trait ProvisionHook: Send + Sync {
    /// Provisions through `cloud` (or not), as the test needs.
    async fn provision(
        &self,
        cloud: &SimCloud,
        req: drover_spi::ProvisionRequest,
        fence: &dyn drover_spi::Fence,
    ) -> Result<String, drover_spi::ProviderError>;
}

/// The simulated cloud with `hook` deciding provisions: a test provider
/// that differs from the cloud in one call only.
pub struct Provisioning<H> {
    /// The cloud behind every call.
    pub cloud: SimCloud,
    /// The test's provision.
    pub hook: H,
}

#[async_trait]
impl<H: ProvisionHook> drover_spi::InstanceProvider for Provisioning<H> {
    async fn provision(
        &self,
        req: drover_spi::ProvisionRequest,
        fence: &dyn drover_spi::Fence,
    ) -> Result<String, drover_spi::ProviderError> {
        self.hook.provision(&self.cloud, req, fence).await
    }
    async fn destroy_fenced(
        &self,
        instance: &str,
        fence: &dyn drover_spi::Fence,
    ) -> Result<(), drover_spi::ProviderError> {
        self.cloud.destroy_fenced(instance, fence).await
    }
    async fn describe(
        &self,
        tags: &std::collections::BTreeMap<String, String>,
    ) -> Result<Vec<drover_core::model::Instance>, drover_spi::ProviderError> {
        self.cloud.describe(tags).await
    }
    async fn label(
        &self,
        instance: &str,
        labels: &std::collections::BTreeMap<String, String>,
        fence: &dyn drover_spi::Fence,
    ) -> Result<(), drover_spi::ProviderError> {
        self.cloud.label(instance, labels, fence).await
    }
}

/// A provider whose provision calls fail with `why` (transient): every
/// other call too when `everything` is set (a plugin gone, nothing
/// answering on its socket), else they succeed doing nothing (a provider
/// out of quota).
pub struct Refusing {
    /// The error's message.
    pub why: &'static str,
    /// Whether destroy, describe and label fail too.
    pub everything: bool,
}

impl Refusing {
    fn answer<T>(&self, ok: T) -> Result<T, drover_spi::ProviderError> {
        if self.everything {
            Err(drover_spi::ProviderError::Transient(self.why.into()))
        } else {
            Ok(ok)
        }
    }
}

#[async_trait]
impl drover_spi::InstanceProvider for Refusing {
    async fn provision(
        &self,
        _req: drover_spi::ProvisionRequest,
        _fence: &dyn drover_spi::Fence,
    ) -> Result<String, drover_spi::ProviderError> {
        Err(drover_spi::ProviderError::Transient(self.why.into()))
    }
    async fn destroy_fenced(
        &self,
        _instance: &str,
        _fence: &dyn drover_spi::Fence,
    ) -> Result<(), drover_spi::ProviderError> {
        self.answer(())
    }
    async fn describe(
        &self,
        _tags: &std::collections::BTreeMap<String, String>,
    ) -> Result<Vec<drover_core::model::Instance>, drover_spi::ProviderError> {
        self.answer(Vec::new())
    }
    async fn label(
        &self,
        _instance: &str,
        _labels: &std::collections::BTreeMap<String, String>,
        _fence: &dyn drover_spi::Fence,
    ) -> Result<(), drover_spi::ProviderError> {
        self.answer(())
    }
}
