//! External controllers (issue 38): any number off the cluster, one acting
//! at a time by the store's lease. The one acting is killed mid-roll; a
//! standby acts once the lease lapses and finishes the roll, and no machine
//! is made or destroyed twice. The declared `control:` decides who may act
//! at all: an external controller under `in-cluster` holds no term and says
//! why, and one acting gives its term up at once when the file stops
//! admitting it.

mod support;

use async_trait::async_trait;
use drover_controller::{Context, Controller};
use drover_core::model::{Instance, tags};
use drover_core::spec::parse_str;
use drover_sim::{SimCloud, Timings, World};
use drover_spi::{Fence, InstanceProvider, ProviderError, ProvisionRequest, Store};
use drover_store::MemStore;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use support::{Running, seeded_store, sim_context, who};

const PLAIN: &str = "groups:
- name: edge
  role: plain
  allocation: {size: 5}
  instance: {provider: sim, properties: {image: v1}}
  update: {max_in_flight: 1, canaries: 0, watch: 0s}
";

/// The simulated cloud, recording which machines each provision token
/// made and which machines were destroyed while they existed.
#[derive(Clone)]
struct Ledger {
    cloud: SimCloud,
    made: Arc<Mutex<BTreeMap<String, BTreeSet<String>>>>,
    destroyed: Arc<Mutex<Vec<String>>>,
}

impl Ledger {
    fn new(cloud: &SimCloud) -> Self {
        Ledger {
            cloud: cloud.clone(),
            made: Arc::default(),
            destroyed: Arc::default(),
        }
    }

    /// Every machine made, with the token it was made for.
    fn made(&self) -> BTreeMap<String, BTreeSet<String>> {
        self.made.lock().unwrap().clone()
    }
}

#[async_trait]
impl InstanceProvider for Ledger {
    async fn provision(
        &self,
        req: ProvisionRequest,
        fence: &dyn Fence,
    ) -> Result<String, ProviderError> {
        let link = req.tags.get(tags::LINK).cloned().unwrap_or_default();
        let id = self.cloud.provision(req, fence).await?;
        self.made
            .lock()
            .unwrap()
            .entry(link)
            .or_default()
            .insert(id.clone());
        Ok(id)
    }
    async fn destroy_fenced(&self, instance: &str, fence: &dyn Fence) -> Result<(), ProviderError> {
        let existed = self.cloud.world().instances.contains_key(instance);
        self.cloud.destroy_fenced(instance, fence).await?;
        if existed {
            self.destroyed.lock().unwrap().push(instance.to_string());
        }
        Ok(())
    }
    async fn describe(
        &self,
        tags: &BTreeMap<String, String>,
    ) -> Result<Vec<Instance>, ProviderError> {
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

/// An external controller named `name` over `store` and `ledger`.
fn external(name: &str, ledger: &Ledger, store: Arc<dyn Store>) -> Controller {
    let mut ctx: Context = sim_context(&ledger.cloud, store);
    ctx.providers = [(
        "sim".to_string(),
        Arc::new(ledger.clone()) as Arc<dyn InstanceProvider>,
    )]
    .into();
    ctx.identity = name.into();
    ctx.resync = Duration::from_secs(1);
    Controller::new(ctx).external(true)
}

/// A cluster of 3 managers under `control`.
fn managers(control: &str) -> String {
    format!("control: {control}\n")
        + &PLAIN
            .replace("role: plain", "role: manager")
            .replace("size: 5", "size: 3")
            .replace("watch: 0s", "watch: 1s")
}

/// Virtual time until `done` holds of the store, asked every 10 ms.
async fn until<F>(store: &MemStore, what: &str, done: F) -> Duration
where
    F: AsyncFn(&MemStore) -> bool,
{
    let t0 = tokio::time::Instant::now();
    while !done(store).await {
        assert!(t0.elapsed() < Duration::from_secs(600), "never {what}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    t0.elapsed()
}

/// `ext-a` says why it waits (`why`), and for 5 s more holds no term and
/// makes no machine.
async fn waits_without_acting(store: &MemStore, ledger: &Ledger, why: &str) {
    until(store, "said why it waits", async |s| {
        waiting(s, "ext-a").await.is_some_and(|w| w.contains(why))
    })
    .await;
    tokio::time::sleep(Duration::from_secs(5)).await;
    assert_eq!(holder(store).await, None, "it holds a term");
    assert!(ledger.made().is_empty(), "it made machines");
}

async fn converged(store: &MemStore) -> bool {
    let history = store.history().await.unwrap();
    history.last().is_some_and(|r| r.converged)
}

async fn holder(store: &MemStore) -> Option<String> {
    store.leader().await.unwrap().map(|(_, h)| h)
}

/// What `name` last said in its heartbeat about why it does not act.
async fn waiting(store: &MemStore, name: &str) -> Option<String> {
    let beats = store.heartbeats().await.unwrap();
    let beat = beats.into_iter().find(|b| b.holder == name)?;
    beat.waiting
}

#[tokio::test(start_paused = true)]
async fn a_standby_finishes_the_roll_of_an_external_controller_killed_mid_roll() {
    let cloud = SimCloud::new(World::new(7, Timings::default()));
    let ledger = Ledger::new(&cloud);
    let store = seeded_store(PLAIN).await;
    let a = Running::start(external("ext-a", &ledger, store.clone()));
    until(&store, "acted", async |s| holder(s).await.is_some()).await;
    let b = Running::start(external("ext-b", &ledger, store.clone()));
    until(&store, "converged", converged).await;
    assert_eq!(holder(&store).await.as_deref(), Some("ext-a"));
    until(&store, "said why it waits", async |s| {
        waiting(s, "ext-b")
            .await
            .is_some_and(|w| w.contains("ext-a holds the term"))
    })
    .await;
    let first: BTreeSet<String> = cloud.world().instances.keys().cloned().collect();

    let v2 = parse_str(&PLAIN.replace("image: v1", "image: v2"))
        .spec
        .unwrap();
    store.commit(1, &v2, who(), false).await.unwrap();
    until(&store, "rolled two", async |_| {
        ledger.destroyed.lock().unwrap().len() >= 2
    })
    .await;
    // kill -9: no goodbye, and its lease lapses only at its expiry.
    a.kill();
    store.lapse_lease();
    let took = until(&store, "taken over", async |s| {
        holder(s).await.as_deref() == Some("ext-b")
    })
    .await;
    assert!(
        took <= Duration::from_millis(600),
        "the standby asks every 500 ms, yet acted {took:?} after the lapse"
    );
    until(&store, "converged again", converged).await;
    b.stop().await;

    let made = ledger.made();
    for (link, ids) in &made {
        assert_eq!(ids.len(), 1, "provision token {link} made {ids:?}");
    }
    let destroyed = ledger.destroyed.lock().unwrap().clone();
    let unique: BTreeSet<&String> = destroyed.iter().collect();
    assert_eq!(
        unique.len(),
        destroyed.len(),
        "destroyed twice: {destroyed:?}"
    );
    assert_eq!(
        unique.into_iter().cloned().collect::<BTreeSet<_>>(),
        first,
        "exactly the first machines went"
    );
    let world = cloud.world();
    assert_eq!(world.instances.len(), 5);
    let v2_hash = drover_core::hash::config_hash(&v2.groups[0]);
    assert!(
        world
            .instances
            .values()
            .all(|i| i.inst.config() == Some(v2_hash.as_str())),
        "every machine is of the new revision"
    );
}

#[tokio::test(start_paused = true)]
async fn an_external_controller_waits_under_in_cluster_control_and_resigns_when_it_returns() {
    let cloud = SimCloud::new(World::new(8, Timings::instant()));
    let ledger = Ledger::new(&cloud);
    let managed = managers("in-cluster");
    let store = seeded_store(&managed).await;
    let ext = Running::start(external("ext-a", &ledger, store.clone()));
    waits_without_acting(&store, &ledger, "control: in-cluster").await;

    // Admitted: it acts.
    let both = parse_str(&managed.replace("in-cluster", "both"))
        .spec
        .unwrap();
    store.commit(1, &both, who(), false).await.unwrap();
    until(&store, "acted", async |s| {
        holder(s).await.as_deref() == Some("ext-a")
    })
    .await;
    until(&store, "made a machine", async |_| {
        !ledger.made().is_empty()
    })
    .await;

    // No longer admitted: it gives the term up at once (no lease to wait
    // out) and says why.
    let inside = parse_str(&managed).spec.unwrap();
    store.commit(2, &inside, who(), false).await.unwrap();
    until(&store, "resigned", async |s| holder(s).await.is_none()).await;
    until(&store, "said why", async |s| {
        waiting(s, "ext-a")
            .await
            .is_some_and(|w| w.contains("control: in-cluster"))
    })
    .await;
    ext.stop().await;
}

#[tokio::test(start_paused = true)]
async fn an_external_controller_that_reaches_no_engine_never_acts_for_a_swarm() {
    let cloud = SimCloud::new(World::new(9, Timings::instant()));
    let ledger = Ledger::new(&cloud);
    let managed = managers("both");
    let store = seeded_store(&managed).await;
    let mut blind = external("ext-a", &ledger, store.clone());
    blind = blind.external(false);
    let ext = Running::start(blind);
    waits_without_acting(&store, &ledger, "reaches none of the swarm's engines").await;
    ext.stop().await;
}

/// A revision committed between a standby's look and its acquisition that
/// no longer admits it: the new term, read afresh, is given up unused.
#[tokio::test(start_paused = true)]
async fn a_term_won_under_a_revision_that_no_longer_admits_it_is_given_up_unused() {
    use futures_util::FutureExt;
    let cloud = SimCloud::new(World::new(10, Timings::instant()));
    let ledger = Ledger::new(&cloud);
    let store = seeded_store(&managers("both")).await;
    let inside = parse_str(&managers("in-cluster")).spec.unwrap();
    let raced = store.clone();
    let tapped = support::Tapped {
        inner: store.clone(),
        tap: Box::new(move |call| {
            if call == "acquire" {
                // The memory store answers without waiting.
                let _ = raced.commit(1, &inside, who(), false).now_or_never();
            }
        }),
    };
    let ext = Running::start(external("ext-a", &ledger, Arc::new(tapped)));
    waits_without_acting(&store, &ledger, "control: in-cluster").await;
    ext.stop().await;
}
