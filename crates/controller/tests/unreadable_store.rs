//! A controller that meets a store record it cannot read (damaged, or in a
//! newer drover's format) acts on nothing, writes nothing over it, and says
//! so; once the record is readable again it carries on.

use async_trait::async_trait;
use drover_controller::{Context, Controller};
use drover_core::journal::Operation;
use drover_core::spec::{ClusterSpec, parse_str};
use drover_sim::{SimCloud, Timings, World};
use drover_spi::{Controls, Epoch, Event, Heartbeat, Provenance, Revision, Store, StoreError};
use drover_store::MemStore;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

const SPEC: &str = "groups:
- name: managers
  role: manager
  allocation: {size: 3}
  instance: {provider: sim, properties: {image: v1}}
- name: workers
  role: worker
  allocation: {size: 2}
  instance: {provider: sim, properties: {image: v1}}
";

/// A store whose journal record reads as written by a newer drover while
/// `newer` is set (the backends' own refusal is tested in drover-store).
#[derive(Default)]
struct NewerJournal {
    inner: MemStore,
    newer: AtomicBool,
}

#[async_trait]
impl Store for NewerJournal {
    async fn cluster_id(&self) -> Result<Option<String>, StoreError> {
        self.inner.cluster_id().await
    }
    async fn init_cluster(&self, id: &str) -> Result<(), StoreError> {
        self.inner.init_cluster(id).await
    }
    async fn desired(&self) -> Result<Option<Revision>, StoreError> {
        self.inner.desired().await
    }
    async fn history(&self) -> Result<Vec<Revision>, StoreError> {
        self.inner.history().await
    }
    async fn commit(
        &self,
        expected: u64,
        spec: &ClusterSpec,
        provenance: Provenance,
        is_rollback: bool,
    ) -> Result<u64, StoreError> {
        self.inner
            .commit(expected, spec, provenance, is_rollback)
            .await
    }
    async fn mark_converged(&self, epoch: Epoch, rev: u64) -> Result<(), StoreError> {
        self.inner.mark_converged(epoch, rev).await
    }
    async fn controls(&self) -> Result<Controls, StoreError> {
        self.inner.controls().await
    }
    async fn set_controls(&self, controls: &Controls) -> Result<(), StoreError> {
        self.inner.set_controls(controls).await
    }
    async fn campaign(&self, holder: &str) -> Result<Epoch, StoreError> {
        self.inner.campaign(holder).await
    }
    async fn leader(&self) -> Result<Option<(Epoch, String)>, StoreError> {
        self.inner.leader().await
    }
    async fn journal(&self) -> Result<Vec<Operation>, StoreError> {
        if self.newer.load(Ordering::SeqCst) {
            return Err(StoreError::NewerFormat {
                record: "store section journal".into(),
                found: 3,
                supported: drover_spi::FORMAT,
            });
        }
        self.inner.journal().await
    }
    async fn journal_put(&self, epoch: Epoch, op: &Operation) -> Result<(), StoreError> {
        self.journal().await?;
        self.inner.journal_put(epoch, op).await
    }
    async fn journal_remove(&self, epoch: Epoch, op: &str) -> Result<(), StoreError> {
        self.journal().await?;
        self.inner.journal_remove(epoch, op).await
    }
    async fn publish_status(
        &self,
        epoch: Epoch,
        status: &serde_json::Value,
    ) -> Result<(), StoreError> {
        self.inner.publish_status(epoch, status).await
    }
    async fn status(&self) -> Result<Option<serde_json::Value>, StoreError> {
        self.inner.status().await
    }
    async fn append_event(&self, epoch: Epoch, event: &Event) -> Result<(), StoreError> {
        self.inner.append_event(epoch, event).await
    }
    async fn events(&self, since_ms: u64) -> Result<Vec<Event>, StoreError> {
        self.inner.events(since_ms).await
    }
    async fn heartbeat(&self, beat: &Heartbeat) -> Result<(), StoreError> {
        self.inner.heartbeat(beat).await
    }
    async fn heartbeats(&self) -> Result<Vec<Heartbeat>, StoreError> {
        self.inner.heartbeats().await
    }
    fn write_format(&self) -> u32 {
        self.inner.write_format()
    }
    fn set_write_format(&self, format: u32) {
        self.inner.set_write_format(format);
    }
}

#[tokio::test(start_paused = true)]
async fn controller_refuses_a_newer_format_record_and_says_so() {
    let cloud = SimCloud::new(World::new(3, Timings::default()));
    let store = Arc::new(NewerJournal::default());
    store.init_cluster("c1").await.unwrap();
    let who = Provenance {
        who: "t".into(),
        at_ms: 0,
        message: "t".into(),
    };
    let spec = parse_str(SPEC).spec.unwrap();
    let rev = store.commit(0, &spec, who, false).await.unwrap();
    let ctx = Context {
        providers: [(
            "sim".to_string(),
            Arc::new(cloud.clone()) as Arc<dyn drover_spi::InstanceProvider>,
        )]
        .into(),
        cluster: Arc::new(cloud.clone()),
        store: store.clone(),
        self_link: None,
        identity: "ctl".into(),
        store_url: None,
        resync: Duration::from_secs(2),
    };
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let task = tokio::spawn(Controller::new(ctx).run(async {
        let _ = stop_rx.await;
    }));
    // Bring-up under way: operations in the journal.
    while store.inner.journal().await.unwrap().is_empty() {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    store.newer.store(true, Ordering::SeqCst);
    let journal = store.inner.journal().await.unwrap();
    tokio::time::sleep(Duration::from_secs(600)).await;

    let events = store.inner.events(0).await.unwrap();
    let refusals: Vec<_> = events.iter().filter(|e| e.action == "refuse").collect();
    assert_eq!(refusals.len(), 1, "said once, not every pass: {refusals:?}");
    assert!(
        refusals[0].reason.contains("record format 3") && refusals[0].reason.contains("upgrade"),
        "{:?}",
        refusals[0]
    );
    let after = events.iter().position(|e| e.action == "refuse").unwrap();
    assert!(
        events[after + 1..]
            .iter()
            .all(|e| e.action != "begin" && e.outcome != "started"),
        "acted while refusing: {:?}",
        &events[after..]
    );
    assert_eq!(
        store.inner.journal().await.unwrap(),
        journal,
        "journal touched"
    );
    assert!(!store.history().await.unwrap()[0].converged);

    // Readable again (e.g. drover upgraded): the controller carries on.
    store.newer.store(false, Ordering::SeqCst);
    let mut waited = 0;
    while !store
        .history()
        .await
        .unwrap()
        .iter()
        .any(|r| r.rev == rev && r.converged)
    {
        tokio::time::sleep(Duration::from_secs(1)).await;
        waited += 1;
        assert!(waited < 3600, "did not resume");
    }
    let _ = stop_tx.send(());
    task.await.unwrap();
}
