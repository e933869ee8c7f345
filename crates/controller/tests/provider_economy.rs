//! Provider API economy: in steady state the controller describes each
//! provider's machines once per resync interval (by cluster id, for every
//! group on it and the orphan scan alike), never once per group or per
//! instance, and makes no other provider call.

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

/// The simulated cloud, counting describes and every other call.
struct Counted {
    cloud: SimCloud,
    describes: AtomicU64,
    others: AtomicU64,
}

#[async_trait]
impl InstanceProvider for Counted {
    async fn provision(
        &self,
        req: ProvisionRequest,
        fence: &dyn drover_spi::Fence,
    ) -> Result<String, ProviderError> {
        self.others.fetch_add(1, Ordering::SeqCst);
        self.cloud.provision(req, fence).await
    }
    async fn destroy_fenced(
        &self,
        instance: &str,
        fence: &dyn drover_spi::Fence,
    ) -> Result<(), ProviderError> {
        self.others.fetch_add(1, Ordering::SeqCst);
        self.cloud.destroy_fenced(instance, fence).await
    }
    async fn describe(
        &self,
        tags: &BTreeMap<String, String>,
    ) -> Result<Vec<Instance>, ProviderError> {
        self.describes.fetch_add(1, Ordering::SeqCst);
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
    let cloud = SimCloud::new(World::new(5, Timings::default()));
    let provider = Arc::new(Counted {
        cloud: cloud.clone(),
        describes: AtomicU64::new(0),
        others: AtomicU64::new(0),
    });
    let store = seeded_store(SPEC).await;
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
    for waited in 0.. {
        let history = store.history().await.unwrap();
        if history.iter().any(|r| r.rev == rev && r.converged) {
            break;
        }
        assert!(waited < 3600, "bring-up did not converge");
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    // Let the last timers of the bring-up run out.
    tokio::time::sleep(RESYNC * 3).await;
    (provider, controller)
}

#[tokio::test(start_paused = true)]
async fn steady_state_costs_one_describe_per_provider_per_resync() {
    let (provider, controller) = settled(None).await;
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
