//! A take-over never holds two worlds (issue 37): a new term looks at the
//! world afresh, and the pass's own first look is dropped before it does.
//! At 10 000 simulated members the two coexisting were the controller's
//! peak heap (26.7 MB where one world takes 17.2). This test binary counts
//! its heap with dhat's allocator: when the new term's fresh describe is
//! asked, what is live must be below what was live when the first look's
//! describe was asked plus half a world.

mod support;

use async_trait::async_trait;
use drover_controller::{Context, Controller};
use drover_core::model::{Instance, tags};
use drover_core::spec::parse_str;
use drover_sim::{SimCloud, Timings, World};
use drover_spi::{Cluster, Fence, InstanceProvider, ProviderError, ProvisionRequest};
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use support::{seeded_store, sim_context};

/// The heap counted by dhat's allocator (testing mode: nothing written).
#[global_allocator]
static ALLOCATOR: dhat::Alloc = dhat::Alloc;

/// Bytes allocated and not yet freed, since the profiler started.
fn live() -> usize {
    dhat::HeapStats::get().curr_bytes
}

const WORKERS: usize = 1000;

fn spec() -> String {
    format!(
        "groups:
- name: managers
  role: manager
  allocation: {{size: 3}}
  instance: {{provider: sim}}
- name: workers
  role: worker
  allocation: {{size: {WORKERS}}}
  instance: {{provider: sim}}
"
    )
}

/// The simulated cloud, noting the live heap as each listing is asked.
struct Sampling {
    cloud: SimCloud,
    /// (fresh, live bytes) at each describe's start.
    asked: Mutex<Vec<(bool, usize)>>,
}

#[async_trait]
impl InstanceProvider for Sampling {
    async fn provision(
        &self,
        req: ProvisionRequest,
        fence: &dyn Fence,
    ) -> Result<String, ProviderError> {
        self.cloud.provision(req, fence).await
    }
    async fn destroy_fenced(&self, instance: &str, fence: &dyn Fence) -> Result<(), ProviderError> {
        self.cloud.destroy_fenced(instance, fence).await
    }
    async fn describe(
        &self,
        tags: &BTreeMap<String, String>,
    ) -> Result<Vec<Instance>, ProviderError> {
        let bytes = live();
        self.asked.lock().unwrap().push((false, bytes));
        self.cloud.describe(tags).await
    }
    async fn describe_fresh(
        &self,
        tags: &BTreeMap<String, String>,
    ) -> Result<Vec<Instance>, ProviderError> {
        let bytes = live();
        self.asked.lock().unwrap().push((true, bytes));
        self.cloud.describe(tags).await
    }
    async fn label(
        &self,
        instance: &str,
        labels: &BTreeMap<String, String>,
        fence: &dyn Fence,
    ) -> Result<(), ProviderError> {
        self.cloud.label(instance, labels, fence).await
    }
}

/// The spec's members, joined and current, in a new simulated world.
fn seeded_world(text: &str) -> World {
    let spec = parse_str(text).spec.expect("valid spec");
    let mut world = World::new(7, Timings::default());
    world.seed("c1", &spec);
    world
}

#[tokio::test(start_paused = true)]
async fn a_take_over_drops_the_passs_first_look_before_it_looks_again() {
    let _profiler = dhat::Profiler::builder().testing().build();
    let text = spec();
    let cloud = SimCloud::new(seeded_world(&text));
    let store = seeded_store(&text).await;
    let sampling = Arc::new(Sampling {
        cloud: cloud.clone(),
        asked: Mutex::new(Vec::new()),
    });

    // One world's size: a listing and a node list held at once.
    let before = live();
    let filter = BTreeMap::from([(tags::CLUSTER.to_string(), "c1".to_string())]);
    let listing = cloud.describe(&filter).await.unwrap();
    let nodes = cloud.observe().await;
    let world = live() - before;
    drop((listing, nodes));

    let leader = cloud.world().leader_link().expect("a leader");
    let mut ctx: Context = sim_context(&cloud, store.clone());
    ctx.providers = [(
        "sim".to_string(),
        sampling.clone() as Arc<dyn InstanceProvider>,
    )]
    .into();
    ctx.identity = leader.clone();
    ctx.self_link = Some(leader);
    let mut controller = Controller::new(ctx);
    controller.pass().await.unwrap();

    let asked = sampling.asked.lock().unwrap().clone();
    let first = asked
        .iter()
        .find(|(fresh, _)| !fresh)
        .expect("the pass's first look")
        .1;
    let fresh = asked
        .iter()
        .find(|(fresh, _)| *fresh)
        .expect("the new term's fresh look")
        .1;
    eprintln!(
        "one world: {world} bytes; live at the first look's describe {first}, at the new term's {fresh} (+{})",
        fresh.saturating_sub(first)
    );
    assert!(
        fresh < first + world / 2,
        "the first look was still alive when the new term looked again: {} bytes more than at the first look, one world is {world}",
        fresh.saturating_sub(first)
    );
}
