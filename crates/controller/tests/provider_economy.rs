//! Provider API economy: in steady state the controller describes each
//! provider's machines once per resync interval (by cluster id, for every
//! group on it and the orphan scan alike), never once per group or per
//! instance, and makes no other provider call; during a roll, the pass
//! after one that started a step waits for that step's call (a describe
//! made before it returns could not show its effect).

mod support;

use async_trait::async_trait;
use drover_controller::Controller;
use drover_core::model::Instance;
use drover_core::spec::parse_str;
use drover_sim::{SimCloud, Timings, World};
use drover_spi::{InstanceProvider, ProviderError, ProvisionRequest, Store};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;
use support::{Running, seeded_store, sim_context};
use tokio::sync::mpsc::{UnboundedReceiver, unbounded_channel};

const SPEC: &str = "groups:
- name: managers
  role: manager
  allocation: {size: 3}
  instance: {provider: sim, properties: {image: v1}}
- name: workers
  role: worker
  allocation: {size: 20}
  instance: {provider: sim, properties: {image: v1}}
";
const RESYNC: Duration = Duration::from_secs(2);

/// The simulated cloud, counting describes and every other call; its
/// launches and terminations take `call_time`.
struct Counted {
    cloud: SimCloud,
    describes: AtomicU64,
    /// Describes asked to list now ([`InstanceProvider::describe_fresh`]).
    fresh: AtomicU64,
    others: AtomicU64,
    call_time: Duration,
}

impl Counted {
    fn new(cloud: &SimCloud, call_time: Duration) -> Counted {
        Counted {
            cloud: cloud.clone(),
            describes: AtomicU64::new(0),
            fresh: AtomicU64::new(0),
            others: AtomicU64::new(0),
            call_time,
        }
    }

    /// Counts a launch or termination, which takes `call_time`.
    async fn call<T>(&self, call: impl std::future::Future<Output = T>) -> T {
        self.others.fetch_add(1, Ordering::SeqCst);
        tokio::time::sleep(self.call_time).await;
        call.await
    }
}

#[async_trait]
impl InstanceProvider for Counted {
    async fn provision(
        &self,
        req: ProvisionRequest,
        fence: &dyn drover_spi::Fence,
    ) -> Result<String, ProviderError> {
        self.call(self.cloud.provision(req, fence)).await
    }
    async fn destroy_fenced(
        &self,
        instance: &str,
        fence: &dyn drover_spi::Fence,
    ) -> Result<(), ProviderError> {
        self.call(self.cloud.destroy_fenced(instance, fence)).await
    }
    async fn describe(
        &self,
        tags: &BTreeMap<String, String>,
    ) -> Result<Vec<Instance>, ProviderError> {
        self.describes.fetch_add(1, Ordering::SeqCst);
        self.cloud.describe(tags).await
    }
    async fn describe_fresh(
        &self,
        tags: &BTreeMap<String, String>,
    ) -> Result<Vec<Instance>, ProviderError> {
        self.fresh.fetch_add(1, Ordering::SeqCst);
        self.cloud.describe(tags).await
    }
    async fn label(
        &self,
        instance: &str,
        labels: &BTreeMap<String, String>,
        fence: &dyn drover_spi::Fence,
    ) -> Result<(), ProviderError> {
        self.others.fetch_add(1, Ordering::SeqCst);
        self.cloud.label(instance, labels, fence).await
    }
}

/// A controller over [`SPEC`]'s cluster (woken by `triggers` too, when
/// given), brought up and settled; its provider counts the calls.
async fn settled(triggers: Option<UnboundedReceiver<()>>) -> (Arc<Counted>, Running) {
    let (provider, running, _) = settled_with(SPEC, triggers, Duration::ZERO).await;
    (provider, running)
}

/// Waits until revision `rev` converged.
async fn converged(store: &drover_store::MemStore, rev: u64) {
    for waited in 0.. {
        let history = store.history().await.unwrap();
        if history.iter().any(|r| r.rev == rev && r.converged) {
            return;
        }
        assert!(waited < 3600, "revision {rev} did not converge");
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}

/// [`settled`] for `spec`, launches and terminations taking `call_time`;
/// also the store.
async fn settled_with(
    spec: &str,
    triggers: Option<UnboundedReceiver<()>>,
    call_time: Duration,
) -> (Arc<Counted>, Running, Arc<drover_store::MemStore>) {
    let cloud = SimCloud::new(World::new(5, Timings::default()));
    let provider = Arc::new(Counted::new(&cloud, call_time));
    let store = seeded_store(spec).await;
    let rev = 1;
    let mut ctx = sim_context(&cloud, store.clone());
    ctx.providers.insert(
        "sim".to_string(),
        provider.clone() as Arc<dyn InstanceProvider>,
    );
    ctx.resync = RESYNC;
    let mut controller = Controller::new(ctx);
    if let Some(rx) = triggers {
        controller = controller.with_triggers(rx);
    }
    let controller = Running::start(controller);
    converged(&store, rev).await;
    // Let the last timers of the bring-up run out.
    tokio::time::sleep(RESYNC * 3).await;
    (provider, controller, store)
}

#[tokio::test(start_paused = true)]
async fn a_roll_does_not_describe_while_the_step_it_just_started_runs() {
    // Each launch and termination takes 300 ms (an API call); one member
    // at a time. Per member: the pass that starts its termination, the
    // one that sees it gone and launches, the one that sees the new
    // machine (its 1 s watch starts), the one after the watch, and a
    // resync at most. Planning again at once after a pass that started a
    // call would describe before the call returned: 26 describes here
    // (6.5 a member), against 18 when the pass waits for it.
    let spec = |image: &str| {
        format!(
            "groups:\n- name: batch\n  role: plain\n  allocation: {{size: 4}}\n  \
             instance: {{provider: sim, properties: {{image: {image}}}}}\n  \
             update: {{max_in_flight: 1, canaries: 0, watch: 1s}}\n"
        )
    };
    let (provider, controller, store) =
        settled_with(&spec("v1"), None, Duration::from_millis(300)).await;
    let before = provider.describes.load(Ordering::SeqCst);
    let v2 = parse_str(&spec("v2")).spec.expect("valid spec");
    store
        .commit(1, &v2, support::who(), false)
        .await
        .expect("the roll's commit");
    converged(&store, 2).await;
    let describes = provider.describes.load(Ordering::SeqCst) - before;
    let members = 4;
    assert!(
        describes <= 5 * members,
        "{describes} describes to roll {members} members one at a time"
    );
    controller.stop().await;
}

#[tokio::test(start_paused = true)]
async fn steady_state_costs_one_describe_per_provider_per_resync() {
    let (provider, controller) = settled(None).await;
    // The term's first look lists now (a provider's newest listing may be
    // older than what the term before did); passes plan on the newest.
    assert_eq!(provider.fresh.load(Ordering::SeqCst), 1);
    let spec = parse_str(SPEC).spec.expect("valid spec");
    let (describes, others) = (
        provider.describes.load(Ordering::SeqCst),
        provider.others.load(Ordering::SeqCst),
    );
    let intervals = 30;
    tokio::time::sleep(RESYNC * intervals).await;
    let describes = provider.describes.load(Ordering::SeqCst) - describes;
    let others = provider.others.load(Ordering::SeqCst) - others;
    // Per resync: one describe by cluster id of the one provider, which
    // lists both groups' machines and those of groups no longer declared
    // (orphans).
    assert_eq!(spec.groups.len(), 2);
    let per_resync = 1;
    let intervals = u64::from(intervals);
    assert!(
        (per_resync * (intervals - 1)..=per_resync * (intervals + 1)).contains(&describes),
        "{describes} describes over {intervals} resyncs: expected {per_resync} per resync \
         (one provider, two groups; 23 instances)"
    );
    assert_eq!(others, 0, "no provider call but describe in steady state");
    assert_eq!(provider.fresh.load(Ordering::SeqCst), 1);
    controller.stop().await;
}

#[tokio::test(start_paused = true)]
async fn a_burst_of_node_events_costs_one_pass_not_one_per_event() {
    let (nudge, triggers) = unbounded_channel();
    let (provider, controller) = settled(Some(triggers)).await;
    let before = provider.describes.load(Ordering::SeqCst);
    // E.g. a batch of machines joining at once: many engine events.
    for _ in 0..50 {
        nudge.send(()).unwrap();
    }
    tokio::time::sleep(RESYNC / 4).await;
    // One describe per pass: the burst, and at most one resync.
    let passes = provider.describes.load(Ordering::SeqCst) - before;
    assert!(
        (1..=2).contains(&passes),
        "{passes} passes for a burst of 50 node events"
    );
    controller.stop().await;
}
