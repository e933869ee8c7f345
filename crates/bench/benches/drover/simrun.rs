//! The real controller against the simulated cloud, on the real clock.
//!
//! The simulator's latencies are real sleeps and its world follows real
//! time, so everything drover does (planning, journal writes, task
//! scheduling) is charged to the rollout: a virtual clock would hide it.
//! Like the engine's node events in production, a feed nudges the
//! controller whenever the simulated swarm changes (a node joins, leaves the
//! raft, goes down).

use async_trait::async_trait;
use drover_controller::{Context, Controller};
use drover_core::hash::config_hash;
use drover_core::model::Instance;
use drover_core::spec::{ClusterSpec, parse_str};
use drover_sim::{SimCloud, Timings, World};
use drover_spi::{InstanceProvider, Provenance, ProviderError, ProvisionRequest, Store};
use drover_store::MemStore;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

pub const CLUSTER: &str = "bench";

/// Images of the two groups.
pub struct Images<'a> {
    pub managers: &'a str,
    pub workers: &'a str,
}

/// A 2-group spec: `managers` managers and `workers` workers (group left
/// out when 0) rolled `m` at a time, each group on its image.
pub fn spec(managers: usize, workers: usize, m: usize, watch: &str, images: Images) -> ClusterSpec {
    let mut text = format!(
        "groups:
- name: managers
  role: manager
  allocation: {{size: {managers}}}
  instance: {{provider: sim, properties: {{image: {image}}}}}
  update: {{canaries: 0, watch: {mwatch}}}
",
        image = images.managers,
        mwatch = if watch == "0s" { "1ms" } else { watch }
    );
    if workers > 0 {
        text.push_str(&format!(
            "- name: workers
  role: worker
  allocation: {{size: {workers}}}
  instance: {{provider: sim, properties: {{image: {image}}}}}
  update: {{max_in_flight: {m}, canaries: 0, watch: {watch}}}
",
            image = images.workers
        ));
    }
    let loaded = parse_str(&text);
    loaded
        .spec
        .unwrap_or_else(|| panic!("bench spec: {:?}", loaded.diagnostics))
}

/// Provider calls the controller made, by kind.
#[derive(Default)]
pub struct Calls {
    pub describe: AtomicU64,
    pub provision: AtomicU64,
    pub destroy: AtomicU64,
    pub label: AtomicU64,
}

impl Calls {
    pub fn get(c: &AtomicU64) -> u64 {
        c.load(Ordering::Relaxed)
    }
}

/// The simulated cloud, counting the calls it gets.
struct Counted {
    cloud: SimCloud,
    calls: Arc<Calls>,
    /// Every describe blocks this long, as that much computation would (a
    /// virtual clock never sees it, a real one does). The controller
    /// describes each provider once per pass, so this makes every pass
    /// that much slower: the control proving the benchmark's clock charges
    /// the controller's own time.
    delay: Duration,
}

#[async_trait]
impl InstanceProvider for Counted {
    async fn provision(
        &self,
        req: ProvisionRequest,
        fence: &dyn drover_spi::Fence,
    ) -> Result<String, ProviderError> {
        self.calls.provision.fetch_add(1, Ordering::Relaxed);
        self.cloud.provision(req, fence).await
    }
    async fn destroy_fenced(
        &self,
        instance: &str,
        fence: &dyn drover_spi::Fence,
    ) -> Result<(), ProviderError> {
        self.calls.destroy.fetch_add(1, Ordering::Relaxed);
        self.cloud.destroy_fenced(instance, fence).await
    }
    async fn describe(
        &self,
        tags: &BTreeMap<String, String>,
    ) -> Result<Vec<Instance>, ProviderError> {
        self.calls.describe.fetch_add(1, Ordering::Relaxed);
        if !self.delay.is_zero() {
            std::thread::sleep(self.delay);
        }
        self.cloud.describe(tags).await
    }
    async fn label(
        &self,
        instance: &str,
        labels: &BTreeMap<String, String>,
        fence: &dyn drover_spi::Fence,
    ) -> Result<(), ProviderError> {
        self.calls.label.fetch_add(1, Ordering::Relaxed);
        self.cloud.label(instance, labels, fence).await
    }
}

/// A running controller over a simulated cluster already at `spec`.
pub struct Bench {
    pub cloud: SimCloud,
    pub store: Arc<MemStore>,
    pub calls: Arc<Calls>,
    rev: u64,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    task: Option<tokio::task::JoinHandle<()>>,
}

fn who() -> Provenance {
    Provenance {
        who: "bench".into(),
        at_ms: 0,
        message: "bench".into(),
    }
}

/// The simulated cloud holding `spec`'s members, joined and current.
pub fn seeded_cloud(spec: &ClusterSpec, timings: Timings) -> SimCloud {
    let mut world = World::new(7, timings);
    world.seed(CLUSTER, spec);
    SimCloud::new(world)
}

impl Bench {
    /// Starts a controller (resync `resync`, `delay` added to every pass)
    /// over a converged cluster at `spec`; returns once it saw it converged.
    pub async fn start(
        spec: &ClusterSpec,
        timings: Timings,
        resync: Duration,
        delay: Duration,
    ) -> Bench {
        let cloud = seeded_cloud(spec, timings);
        let calls = Arc::new(Calls::default());
        let store = Arc::new(MemStore::default());
        store.init_cluster(CLUSTER).await.expect("init");
        let rev = store.commit(0, spec, who(), false).await.expect("commit");
        let provider = Counted {
            cloud: cloud.clone(),
            calls: calls.clone(),
            delay,
        };
        let ctx = Context {
            providers: [(
                "sim".to_string(),
                Arc::new(provider) as Arc<dyn InstanceProvider>,
            )]
            .into(),
            cluster: Arc::new(cloud.clone()),
            store: store.clone(),
            self_link: None,
            identity: "bench".into(),
            store_url: None,
            resync,
        };
        let (nudge_tx, nudge_rx) = tokio::sync::mpsc::unbounded_channel();
        tokio::spawn(node_events(cloud.clone(), nudge_tx));
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let controller = Controller::new(ctx).with_triggers(nudge_rx);
        let task = tokio::spawn(controller.run(async {
            let _ = stopped.await;
        }));
        let mut b = Bench {
            cloud,
            store,
            calls,
            rev,
            stop: Some(stop),
            task: Some(task),
        };
        b.wait_converged(Duration::from_secs(600)).await;
        b
    }

    /// Commits `spec` and returns the wall time until it converged. The
    /// controller notices the commit through the store's change watch
    /// (`Store::changed`), as it does in production: nothing nudges it.
    pub async fn roll(&mut self, spec: &ClusterSpec, limit: Duration) -> Duration {
        let started = Instant::now();
        self.rev = self
            .store
            .commit(self.rev, spec, who(), false)
            .await
            .expect("commit");
        self.wait_converged(limit).await;
        started.elapsed()
    }

    async fn wait_converged(&mut self, limit: Duration) {
        let started = Instant::now();
        loop {
            let history = self.store.history().await.expect("history");
            if history.iter().any(|r| r.rev == self.rev && r.converged) {
                return;
            }
            assert!(
                started.elapsed() < limit,
                "revision {} did not converge within {limit:?}: {:?}",
                self.rev,
                self.store.status().await
            );
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
    }

    /// Members of `group` on `spec`'s config (a sanity check on the result).
    pub fn current(&self, spec: &ClusterSpec, group: &str) -> usize {
        let g = spec.group(group).expect("group");
        let hash = config_hash(g);
        self.cloud
            .world()
            .instances
            .values()
            .filter(|i| i.inst.owned_by(CLUSTER, group) && i.inst.config() == Some(&hash))
            .count()
    }

    pub async fn stop(mut self) {
        if let Some(s) = self.stop.take() {
            let _ = s.send(());
        }
        if let Some(t) = self.task.take() {
            let _ = t.await;
        }
    }
}

/// The simulated swarm's stand-in for the engine's node events: a nudge
/// whenever a node joins, leaves the raft, drains or goes down.
async fn node_events(cloud: SimCloud, tx: tokio::sync::mpsc::UnboundedSender<()>) {
    loop {
        let (now, next) = {
            let w = cloud.world();
            (w.now, w.next_event())
        };
        // New machines add events: look again at least every 20 ms.
        let wait = next.map_or(20, |t| t.saturating_sub(now).min(20));
        tokio::time::sleep(Duration::from_millis(wait)).await;
        // `world()` applies what is due; then the controller is told.
        if next.is_some_and(|t| cloud.world().now >= t) && tx.send(()).is_err() {
            return;
        }
    }
}
