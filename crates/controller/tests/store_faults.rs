//! The controller against a store that misbehaves on purpose:
//! - a record it cannot read (damaged, or in a newer drover's format): it
//!   acts on nothing, writes nothing over it, and says so; once the record is
//!   readable again it carries on;
//! - deposed between its leadership check and its side effect: the intent it
//!   writes, fenced, just before the side effect is refused and it starts
//!   nothing;
//! - deposed between its intent and its side effect, or stopped while the
//!   store answered its last check of the term: the side effect's own
//!   check, fresh, refuses it;
//! - deposed while a side effect runs: standing down cancels it;
//! - deposed right before its automatic rollback: the store refuses it;
//! - asked for an automatic rollback to a spec that is not valid (stored
//!   by an older drover): it commits nothing and blocks the group;
//! - taking over while the controller it deposes still writes: it plans
//!   with what that one wrote up to its last refused write.

mod support;

use async_trait::async_trait;
use drover_controller::{Context, Controller, PassReport};
use drover_core::journal::Operation;
use drover_core::model::Instance;
use drover_core::model::SwarmView;
use drover_core::plan::Action;
use drover_core::spec::{ClusterSpec, Role, parse_str};
use drover_sim::{SimCloud, Timings, World};
use drover_spi::{
    Cluster, ClusterError, Controls, Epoch, Event, Heartbeat, InstanceProvider, JoinMaterial,
    Provenance, ProviderError, ProvisionRequest, Revision, StatusJson, Store, StoreError,
};
use drover_store::MemStore;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;
use support::{ProvisionHook, Provisioning, Running, sim_context, who};

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

/// When another controller wins a term behind the acting one's back.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
enum Usurp {
    #[default]
    Never,
    /// Right after each campaign, hidden from `leader()` (the race between
    /// a controller's leadership check and its writes).
    AtCampaign,
    /// When the history is read: the controller's rollback reads it
    /// right before committing (once).
    AtHistory,
    /// While the controller's process is stopped, after the store answered
    /// its check of the term but before it read the answer (once).
    DuringCheck,
}

/// A store whose journal record reads as written by a newer drover while
/// `newer` is set (the backends' own refusal is tested in drover-store),
/// where another controller ("usurper") wins a term as `usurp` says, and
/// where `deposed`, when set, runs one pass of its own just before the next
/// campaign by anyone (its last writes landing between the campaigner's
/// first reads and its winning the term).
#[derive(Default)]
struct Faulty {
    inner: MemStore,
    newer: AtomicBool,
    usurp: std::sync::Mutex<Usurp>,
    /// The term `leader()` reports while usurped at campaign.
    shown: std::sync::Mutex<Option<(Epoch, String)>>,
    deposed: tokio::sync::Mutex<Option<Controller>>,
}

impl Faulty {
    fn usurp(&self, when: Usurp) {
        *self.usurp.lock().unwrap() = when;
    }

    /// True (once) when the usurper strikes `now`.
    fn strikes(&self, now: Usurp) -> bool {
        let mut when = self.usurp.lock().unwrap();
        if *when != now {
            return false;
        }
        if now != Usurp::AtCampaign {
            *when = Usurp::Never;
        }
        true
    }

    async fn usurper(&self) {
        self.inner.campaign("usurper").await.unwrap();
    }
}

#[async_trait]
impl Store for Faulty {
    async fn cluster_id(&self) -> Result<Option<String>, StoreError> {
        self.inner.cluster_id().await
    }
    async fn init_cluster(&self, id: &str) -> Result<(), StoreError> {
        self.inner.init_cluster(id).await
    }
    async fn import(&self, cluster: &drover_spi::Imported) -> Result<(), StoreError> {
        self.inner.import(cluster).await
    }
    async fn desired(&self) -> Result<Option<Revision>, StoreError> {
        self.inner.desired().await
    }
    async fn history(&self) -> Result<Vec<Revision>, StoreError> {
        if self.strikes(Usurp::AtHistory) {
            self.usurper().await;
        }
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
    async fn commit_rollback(
        &self,
        epoch: Epoch,
        expected: u64,
        spec: &ClusterSpec,
        provenance: Provenance,
    ) -> Result<u64, StoreError> {
        self.inner
            .commit_rollback(epoch, expected, spec, provenance)
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
        if let Some(mut deposed) = self.deposed.lock().await.take() {
            deposed.pass().await?;
        }
        let e = self.inner.campaign(holder).await?;
        if self.strikes(Usurp::AtCampaign) {
            *self.shown.lock().unwrap() = Some((e, holder.to_string()));
            self.usurper().await;
        }
        Ok(e)
    }
    async fn resign(&self, epoch: Epoch) -> Result<(), StoreError> {
        self.inner.resign(epoch).await
    }
    async fn leader(&self) -> Result<Option<(Epoch, String)>, StoreError> {
        if *self.usurp.lock().unwrap() == Usurp::AtCampaign {
            return Ok(self.shown.lock().unwrap().clone());
        }
        self.inner.leader().await
    }
    async fn check_epoch(&self, epoch: Epoch) -> Result<(), StoreError> {
        let answer = self.inner.check_epoch(epoch).await;
        if self.strikes(Usurp::DuringCheck) {
            self.usurper().await;
            tokio::time::sleep(Duration::from_secs(30)).await;
        }
        answer
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

/// A provider whose provisions take `takes` (`None`: they never end), and
/// that counts the provisions started and those that ended.
#[derive(Default)]
struct Hanging {
    takes: Option<Duration>,
    provisions: AtomicUsize,
    provisioned: AtomicUsize,
}

#[async_trait]
impl InstanceProvider for Hanging {
    async fn provision(
        &self,
        _: ProvisionRequest,
        _fence: &dyn drover_spi::Fence,
    ) -> Result<String, ProviderError> {
        self.provisions.fetch_add(1, Ordering::SeqCst);
        let Some(takes) = self.takes else {
            return std::future::pending().await;
        };
        tokio::time::sleep(takes).await;
        self.provisioned.fetch_add(1, Ordering::SeqCst);
        Ok("i-slow".into())
    }
    async fn destroy_fenced(
        &self,
        _: &str,
        _fence: &dyn drover_spi::Fence,
    ) -> Result<(), ProviderError> {
        Ok(())
    }
    async fn describe(&self, _: &BTreeMap<String, String>) -> Result<Vec<Instance>, ProviderError> {
        Ok(vec![])
    }
    async fn label(
        &self,
        _: &str,
        _: &BTreeMap<String, String>,
        _fence: &dyn drover_spi::Fence,
    ) -> Result<(), ProviderError> {
        Ok(())
    }
}

/// A store with `spec` committed as revision 1 for cluster `c1`.
async fn faulty(spec: &str) -> Arc<Faulty> {
    let store = Arc::new(Faulty::default());
    store.init_cluster("c1").await.unwrap();
    let spec = parse_str(spec).spec.unwrap();
    store.commit(0, &spec, who(), false).await.unwrap();
    store
}

/// [`SPEC`] with one manager: a first pass provisions it.
fn one_manager() -> String {
    SPEC.replace("size: 3", "size: 1")
}

/// An off-cluster controller's context over `store`, the simulated swarm
/// and `provider`.
fn context(
    cloud: &SimCloud,
    store: &Arc<Faulty>,
    provider: Arc<dyn InstanceProvider>,
    identity: &str,
) -> Context {
    let mut ctx = sim_context(cloud, store.clone());
    ctx.providers = [("sim".to_string(), provider)].into();
    ctx.identity = identity.into();
    ctx
}

#[tokio::test(start_paused = true)]
async fn a_deposed_controller_starts_no_side_effect() {
    let cloud = SimCloud::new(World::new(1, Timings::default()));
    let store = faulty(&one_manager()).await;
    let ctx = |provider: Arc<Hanging>, identity: &str| context(&cloud, &store, provider, identity);
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
    store.usurp(Usurp::AtCampaign);
    let b_provider = Arc::new(Hanging::default());
    let mut b = Controller::new(ctx(b_provider.clone(), "b"));
    let report = b.pass().await.unwrap();
    tokio::time::sleep(Duration::from_millis(10)).await;
    assert!(report.deposed(), "{report:?}");
    let planned = report.plan.as_ref().unwrap();
    assert!(
        planned.actions.iter().any(|x| x.step().is_some()),
        "B planned no side effect, the test proves nothing: {:?}",
        planned.actions
    );
    assert_eq!(b_provider.provisions.load(Ordering::SeqCst), 0);
    assert_eq!(store.inner.journal().await.unwrap(), journal);
}

/// The simulated swarm, whose join-material call blocks for `stall` (as a
/// manager's API does through an election, 10-20 s: swarm-facts).
struct Stalling {
    cloud: SimCloud,
    stall: Duration,
}

#[async_trait]
impl Cluster for Stalling {
    async fn observe(&self) -> SwarmView {
        self.cloud.observe().await
    }
    async fn services(&self) -> drover_core::model::Services {
        self.cloud.services().await
    }
    async fn drain(&self, node: &str, fence: &dyn drover_spi::Fence) -> Result<(), ClusterError> {
        self.cloud.drain(node, fence).await
    }
    async fn demote(&self, node: &str, fence: &dyn drover_spi::Fence) -> Result<(), ClusterError> {
        self.cloud.demote(node, fence).await
    }
    async fn promote(&self, node: &str, fence: &dyn drover_spi::Fence) -> Result<(), ClusterError> {
        self.cloud.promote(node, fence).await
    }
    async fn activate(
        &self,
        node: &str,
        fence: &dyn drover_spi::Fence,
    ) -> Result<(), ClusterError> {
        self.cloud.activate(node, fence).await
    }
    async fn demote_self_and_leave(
        &self,
        node: &str,
        fence: &dyn drover_spi::Fence,
        left: &(dyn Fn() + Send + Sync),
    ) -> Result<(), ClusterError> {
        self.cloud.demote_self_and_leave(node, fence, left).await
    }
    async fn remove_node(
        &self,
        node: &str,
        force: bool,
        fence: &dyn drover_spi::Fence,
    ) -> Result<(), ClusterError> {
        self.cloud.remove_node(node, force, fence).await
    }
    async fn join_material(&self, role: Role) -> Result<Option<JoinMaterial>, ClusterError> {
        tokio::time::sleep(self.stall).await;
        self.cloud.join_material(role).await
    }
}

/// A pass whose plan starts a provision, and time for its task to run.
async fn provisioning_pass(controller: &mut Controller) {
    let report = controller.pass().await.unwrap();
    let planned = report.plan.expect("a plan");
    assert!(
        planned
            .actions
            .iter()
            .any(|a| matches!(a, Action::Provision { .. })),
        "no provision planned, the test proves nothing: {:?}",
        planned.actions
    );
    tokio::time::sleep(Duration::from_millis(10)).await;
}

#[tokio::test(start_paused = true)]
async fn a_step_whose_term_moved_while_it_prepared_starts_nothing() {
    let cloud = SimCloud::new(World::new(1, Timings::default()));
    let store = faulty(&one_manager()).await;
    let provider = Arc::new(Hanging::default());
    let mut ctx = context(&cloud, &store, provider.clone(), "a");
    ctx.cluster = Arc::new(Stalling {
        cloud: cloud.clone(),
        stall: Duration::from_secs(20),
    });
    let mut a = Controller::new(ctx);
    // Its intent journaled under its term, the provision gathers its join
    // material (blocked 20 s); meanwhile another controller takes over.
    provisioning_pass(&mut a).await;
    assert!(store.inner.journal().await.unwrap()[0].intent.is_some());
    store.inner.campaign("b").await.unwrap();
    tokio::time::sleep(Duration::from_secs(60)).await;
    assert_eq!(
        provider.provisions.load(Ordering::SeqCst),
        0,
        "a side effect started under a term the store no longer held"
    );
}

#[tokio::test(start_paused = true)]
async fn a_controller_stopped_after_the_store_confirmed_its_term_asks_again() {
    let cloud = SimCloud::new(World::new(1, Timings::default()));
    let store = faulty(&one_manager()).await;
    // The store confirms the term; the process is stopped 30 s before it
    // reads that answer, and another controller takes over meanwhile.
    store.usurp(Usurp::DuringCheck);
    let provider = Arc::new(Hanging::default());
    let mut a = Controller::new(context(&cloud, &store, provider.clone(), "a"));
    provisioning_pass(&mut a).await;
    tokio::time::sleep(Duration::from_secs(60)).await;
    assert_eq!(
        store.inner.leader().await.unwrap().map(|l| l.1).as_deref(),
        Some("usurper"),
        "nobody took over, the test proves nothing"
    );
    assert_eq!(
        provider.provisions.load(Ordering::SeqCst),
        0,
        "a side effect started on a confirmation older than the pause"
    );
}

/// A provider over the simulated cloud whose process is stopped (SIGSTOP)
/// for 30 s right after the store confirmed its term and the call began,
/// before the call acts; another controller takes over meanwhile. Then the
/// call goes on to the cloud, which checks the lease as any provider must.
struct StoppedInTheCall {
    store: Arc<Faulty>,
    calls: AtomicUsize,
}

#[async_trait]
impl ProvisionHook for StoppedInTheCall {
    async fn provision(
        &self,
        cloud: &SimCloud,
        req: ProvisionRequest,
        fence: &dyn drover_spi::Fence,
    ) -> Result<String, ProviderError> {
        if self.calls.fetch_add(1, Ordering::SeqCst) == 0 {
            tokio::time::sleep(Duration::from_secs(30)).await;
            self.store.usurper().await;
        }
        cloud.provision(req, fence).await
    }
}

#[tokio::test(start_paused = true)]
async fn a_controller_stopped_between_the_confirmation_and_the_act_does_nothing() {
    let cloud = SimCloud::new(World::new(1, Timings::default()));
    let store = faulty(&one_manager()).await;
    let provider = Arc::new(Provisioning {
        cloud: cloud.clone(),
        hook: StoppedInTheCall {
            store: store.clone(),
            calls: AtomicUsize::new(0),
        },
    });
    let mut a = Controller::new(context(&cloud, &store, provider.clone(), "a"));
    provisioning_pass(&mut a).await;
    tokio::time::sleep(Duration::from_secs(60)).await;
    assert_eq!(
        store.inner.leader().await.unwrap().map(|l| l.1).as_deref(),
        Some("usurper"),
        "nobody took over, the test proves nothing"
    );
    assert!(
        provider.hook.calls.load(Ordering::SeqCst) >= 1,
        "the provision was never called, the test proves nothing"
    );
    assert!(
        cloud.world().instances.is_empty(),
        "the deposed controller's provision reached the cloud after its pause: {:?}",
        cloud.world().instances.keys().collect::<Vec<_>>()
    );
    // It found out it was deposed when it asked the store again.
    a.pass().await.unwrap();
    assert!(cloud.world().instances.is_empty());
}

#[tokio::test(start_paused = true)]
async fn standing_down_cancels_the_side_effects_it_started() {
    let cloud = SimCloud::new(World::new(1, Timings::default()));
    let store = faulty(&one_manager()).await;
    // Provisions take 30 s (a cloud API, a boot, retries).
    let provider = Arc::new(Hanging {
        takes: Some(Duration::from_secs(30)),
        ..Hanging::default()
    });
    let a = Running::start(Controller::new(context(
        &cloud,
        &store,
        provider.clone(),
        "a",
    )));
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(provider.provisions.load(Ordering::SeqCst), 1);
    // Another controller takes over; A sees the newer term at its next pass.
    store.inner.campaign("b").await.unwrap();
    tokio::time::sleep(Duration::from_secs(60)).await;
    assert_eq!(
        provider.provisioned.load(Ordering::SeqCst),
        0,
        "a deposed controller's provision ran on after it stood down"
    );
    a.stop().await;
}

/// A provider over the simulated cloud whose machines of `image: v2` never
/// join the swarm.
struct V2NeverJoins;

#[async_trait]
impl ProvisionHook for V2NeverJoins {
    async fn provision(
        &self,
        cloud: &SimCloud,
        req: ProvisionRequest,
        fence: &dyn drover_spi::Fence,
    ) -> Result<String, ProviderError> {
        if req.properties["image"] != "v2" {
            return cloud.provision(req, fence).await;
        }
        let role = if req.boot_context.role == "manager" {
            Role::Manager
        } else {
            Role::Worker
        };
        Ok(cloud.world().provision(req.tags, role, true))
    }
}

/// Passes of `controller` every 500 ms (virtual) until `done` says so.
async fn passes_until(controller: &mut Controller, mut done: impl AsyncFnMut(&PassReport) -> bool) {
    for _ in 0..7200 {
        let report = controller.pass().await.unwrap();
        if done(&report).await {
            return;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    panic!("not done after an hour of passes");
}

#[tokio::test(start_paused = true)]
async fn a_deposed_controllers_rollback_is_refused() {
    let cloud = SimCloud::new(World::new(5, Timings::default()));
    let spec = |workers_image: &str| {
        format!(
            "groups:
- name: managers
  role: manager
  allocation: {{size: 1}}
  instance: {{provider: sim, properties: {{image: v1}}}}
- name: workers
  role: worker
  allocation: {{size: 2}}
  instance: {{provider: sim, properties: {{image: {workers_image}}}}}
  update: {{on_failure: rollback, step_timeout: 1m}}
"
        )
    };
    let store = faulty(&spec("v1")).await;
    let provider = Arc::new(Provisioning {
        cloud: cloud.clone(),
        hook: V2NeverJoins,
    });
    let mut a = Controller::new(context(&cloud, &store, provider, "a"));
    passes_until(&mut a, async |_| {
        store.history().await.unwrap().iter().any(|r| r.converged)
    })
    .await;

    // The workers' roll to v2 never gets a healthy replacement: its step
    // times out into an automatic rollback. Another controller takes over
    // right before it commits (as the rollback reads the history).
    let v2 = parse_str(&spec("v2")).spec.unwrap();
    let rev2 = store.commit(1, &v2, who(), false).await.unwrap();
    store.usurp(Usurp::AtHistory);
    passes_until(&mut a, async |r| r.deposed()).await;

    assert_eq!(
        store.inner.leader().await.unwrap().map(|l| l.1).as_deref(),
        Some("usurper"),
        "the rollback never came, the test proves nothing"
    );
    let history = store.inner.history().await.unwrap();
    assert_eq!(
        store.inner.desired().await.unwrap().map(|r| r.rev),
        Some(rev2),
        "a deposed controller's rollback was committed: {history:#?}"
    );
    assert!(history.iter().all(|r| !r.is_rollback), "{history:#?}");
}

#[tokio::test(start_paused = true)]
async fn an_automatic_rollback_to_an_invalid_spec_is_never_committed() {
    let cloud = SimCloud::new(World::new(5, Timings::default()));
    let spec = |workers_image: &str| {
        let text = format!(
            "groups:
- name: managers
  role: manager
  allocation: {{size: 1}}
  instance: {{provider: sim, properties: {{image: v1}}}}
- name: workers
  role: worker
  allocation: {{size: 2}}
  instance: {{provider: sim, properties: {{image: {workers_image}}}}}
  update: {{on_failure: rollback, step_timeout: 1m}}
"
        );
        parse_str(&text).spec.unwrap()
    };
    // Revision 1 as an older drover stored it: a reserved engine label.
    let store = Arc::new(Faulty::default());
    store.init_cluster("c1").await.unwrap();
    let mut v1 = spec("v1");
    v1.groups[1]
        .flavor
        .engine_labels
        .insert("drover.tier".into(), "web".into());
    store.commit(0, &v1, who(), false).await.unwrap();
    let provider = Arc::new(Provisioning {
        cloud: cloud.clone(),
        hook: V2NeverJoins,
    });
    let mut a = Controller::new(context(&cloud, &store, provider, "a"));
    passes_until(&mut a, async |_| {
        store.history().await.unwrap().iter().any(|r| r.converged)
    })
    .await;

    // The roll to v2 times out into an automatic rollback to revision 1.
    let rev2 = store.commit(1, &spec("v2"), who(), false).await.unwrap();
    let mut reason = String::new();
    passes_until(&mut a, async |r| {
        let workers = r
            .plan
            .as_ref()
            .and_then(|p| p.groups.iter().find(|g| g.name == "workers"));
        match workers {
            Some(g) if g.phase == drover_core::plan::Phase::Blocked => {
                reason = g.reason.clone().unwrap_or_default();
                true
            }
            _ => false,
        }
    })
    .await;
    for want in [
        "automatic rollback to revision 1 refused",
        "groups[1].flavor.engine_labels.drover.tier (group workers): labels starting with `drover.` are reserved",
        "exceeded step_timeout",
    ] {
        assert!(reason.contains(want), "`{want}` not in: {reason}");
    }
    let history = store.inner.history().await.unwrap();
    assert_eq!(
        store.inner.desired().await.unwrap().map(|r| r.rev),
        Some(rev2),
        "an invalid rollback was committed: {history:#?}"
    );
    assert!(history.iter().all(|r| !r.is_rollback), "{history:#?}");
    let events = store.inner.events(0).await.unwrap();
    assert!(
        events.iter().any(|e| e.action == "blocked"
            && e.group.as_deref() == Some("workers")
            && e.reason == reason),
        "{events:#?}"
    );
}

#[tokio::test(start_paused = true)]
async fn a_new_term_plans_with_what_the_deposed_controller_journaled_before_it() {
    let cloud = SimCloud::new(World::new(9, Timings::default()));
    let managers = "groups:
- name: managers
  role: manager
  allocation: {size: 3}
  instance: {provider: sim, properties: {image: v1}}
";
    let store = faulty(managers).await;
    let sim: Arc<dyn InstanceProvider> = Arc::new(cloud.clone());
    let mut a = Controller::new(context(&cloud, &store, sim.clone(), "a"));
    passes_until(&mut a, async |_| {
        store.history().await.unwrap().iter().any(|r| r.converged)
    })
    .await;

    // A roll of the managers. B reads the store (nothing journaled), then
    // campaigns; just before its term is won, A (still leading) journals
    // the roll's first manager operation.
    let v2 = parse_str(&managers.replace("image: v1", "image: v2"))
        .spec
        .unwrap();
    store.commit(1, &v2, who(), false).await.unwrap();
    let events_before = store.inner.events(0).await.unwrap().len();
    *store.deposed.lock().await = Some(a);
    let mut b = Controller::new(context(&cloud, &store, sim, "b"));
    let report = b.pass().await.unwrap();
    assert!(store.deposed.lock().await.is_none(), "A never ran");
    let journal = store.inner.journal().await.unwrap();
    let by_a: Vec<_> = store
        .inner
        .events(0)
        .await
        .unwrap()
        .into_iter()
        .skip(events_before)
        .filter(|e| e.controller == "a" && e.action == "begin")
        .filter_map(|e| e.op)
        .collect();
    assert_eq!(by_a.len(), 1, "A journaled no new operation: {journal:#?}");
    assert_eq!(
        journal.iter().map(|o| o.id.clone()).collect::<Vec<_>>(),
        by_a,
        "B began a manager removal beside A's: {:#?}",
        report.plan.map(|p| p.actions)
    );
}
