//! The controller against a store that misbehaves on purpose:
//! - a record it cannot read (damaged, or in a newer drover's format): it
//!   acts on nothing, writes nothing over it, and says so; once the record is
//!   readable again it carries on;
//! - deposed between its leadership check and its side effect: the intent it
//!   writes, fenced, just before the side effect is refused and it starts
//!   nothing.

mod support;

use async_trait::async_trait;
use drover_controller::{Context, Controller};
use drover_core::journal::Operation;
use drover_core::model::Instance;
use drover_core::spec::{ClusterSpec, parse_str};
use drover_sim::{SimCloud, Timings, World};
use drover_spi::{
    Controls, Epoch, Event, Heartbeat, InstanceProvider, Provenance, ProviderError,
    ProvisionRequest, Revision, StatusJson, Store, StoreError,
};
use drover_store::MemStore;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;
use support::{Running, sim_context, who};

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
/// `newer` is set (the backends' own refusal is tested in drover-store), and
/// which, while `usurp` is set, lets another controller win a term right
/// after each campaign and hides that term from `leader()` (the race between
/// a controller's leadership check and its writes).
#[derive(Default)]
struct Faulty {
    inner: MemStore,
    newer: AtomicBool,
    usurp: AtomicBool,
    /// The term `leader()` reports while usurped.
    shown: std::sync::Mutex<Option<(Epoch, String)>>,
}

#[async_trait]
impl Store for Faulty {
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
        let e = self.inner.campaign(holder).await?;
        if self.usurp.load(Ordering::SeqCst) {
            *self.shown.lock().unwrap() = Some((e, holder.to_string()));
            self.inner.campaign("usurper").await?;
        }
        Ok(e)
    }
    async fn leader(&self) -> Result<Option<(Epoch, String)>, StoreError> {
        if self.usurp.load(Ordering::SeqCst) {
            return Ok(self.shown.lock().unwrap().clone());
        }
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
    async fn publish_status(&self, epoch: Epoch, status: StatusJson) -> Result<(), StoreError> {
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
    let store = Arc::new(Faulty::default());
    store.init_cluster("c1").await.unwrap();
    let spec = parse_str(SPEC).spec.unwrap();
    let rev = store.commit(0, &spec, who(), false).await.unwrap();
    let mut ctx = sim_context(&cloud, store.clone());
    ctx.identity = "ctl".into();
    let controller = Running::start(Controller::new(ctx));
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
    controller.stop().await;
}

/// A provider whose machines never finish booting (`provision` hangs), and
/// that counts the provisions started.
#[derive(Default)]
struct Hanging {
    provisions: AtomicUsize,
}

#[async_trait]
impl InstanceProvider for Hanging {
    async fn provision(&self, _: ProvisionRequest) -> Result<String, ProviderError> {
        self.provisions.fetch_add(1, Ordering::SeqCst);
        std::future::pending().await
    }
    async fn destroy(&self, _: &str) -> Result<(), ProviderError> {
        Ok(())
    }
    async fn describe(&self, _: &BTreeMap<String, String>) -> Result<Vec<Instance>, ProviderError> {
        Ok(vec![])
    }
    async fn label(&self, _: &str, _: &BTreeMap<String, String>) -> Result<(), ProviderError> {
        Ok(())
    }
}

#[tokio::test(start_paused = true)]
async fn a_deposed_controller_starts_no_side_effect() {
    let cloud = SimCloud::new(World::new(1, Timings::default()));
    let store = Arc::new(Faulty::default());
    store.init_cluster("c1").await.unwrap();
    let one = SPEC.replace("size: 3", "size: 1");
    let spec = parse_str(&one).spec.unwrap();
    store.commit(0, &spec, who(), false).await.unwrap();
    let ctx = |provider: Arc<Hanging>, identity: &str| Context {
        providers: [("sim".to_string(), provider as Arc<dyn InstanceProvider>)].into(),
        cluster: Arc::new(cloud.clone()),
        store: store.clone(),
        self_link: None,
        identity: identity.into(),
        store_url: None,
        resync: Duration::from_secs(2),
    };
    // Controller A journals the first manager's operation and starts its
    // provision, which never finishes.
    let a_provider = Arc::new(Hanging::default());
    let mut a = Controller::new(ctx(a_provider.clone(), "a"));
    a.pass().await.unwrap();
    tokio::time::sleep(Duration::from_millis(10)).await; // let the task start
    assert_eq!(a_provider.provisions.load(Ordering::SeqCst), 1);
    let journal = store.inner.journal().await.unwrap();
    assert_eq!(journal.len(), 1, "{journal:?}");
    assert!(journal[0].intent.is_some(), "intent journaled: {journal:?}");

    // Controller B wins a term, is deposed at once, and does not see it:
    // its plan provisions the op's machine again (A's never appeared). The
    // intent write is refused and the provision never starts.
    store.usurp.store(true, Ordering::SeqCst);
    let b_provider = Arc::new(Hanging::default());
    let mut b = Controller::new(ctx(b_provider.clone(), "b"));
    let report = b.pass().await.unwrap();
    tokio::time::sleep(Duration::from_millis(10)).await;
    assert!(report.fenced, "{report:?}");
    let planned = report.plan.as_ref().unwrap();
    assert!(
        planned.actions.iter().any(|x| x.step().is_some()),
        "B planned no side effect, the test proves nothing: {:?}",
        planned.actions
    );
    assert_eq!(b_provider.provisions.load(Ordering::SeqCst), 0);
    assert_eq!(store.inner.journal().await.unwrap(), journal);
}
