//! The leader's controller hands its engine's leadership over without
//! asking the swarm or the store anything meanwhile: its engine (through
//! which the swarm store is read and written), asked while it stops its
//! manager, holds that stop 5-8 s (swarm-facts), and with it the next
//! leader's first step.

mod support;

use async_trait::async_trait;
use drover_controller::Controller;
use drover_core::model::SwarmView;
use drover_core::spec::{Role, parse_str};
use drover_sim::{SimCloud, Timings, World};
use drover_spi::{Cluster, ClusterError, JoinMaterial, Store};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use support::{Running, Tapped, seeded_store, sim_context, who};
use tokio::sync::Notify;

const SPEC: &str = "groups:
- name: managers
  role: manager
  allocation: {size: 3}
  instance: {provider: sim, properties: {image: v1}}
";

/// The simulated swarm, counting observations while its engine demotes
/// itself and leaves (held open until released).
struct Watched {
    cloud: SimCloud,
    leaving: AtomicBool,
    observed_while_leaving: AtomicUsize,
    observed: AtomicUsize,
    /// The store calls made while leaving.
    stored_while_leaving: Mutex<Vec<&'static str>>,
    started: Notify,
    release: Notify,
}

#[async_trait]
impl Cluster for Watched {
    async fn observe(&self) -> SwarmView {
        self.observed.fetch_add(1, Ordering::SeqCst);
        if self.leaving.load(Ordering::SeqCst) {
            self.observed_while_leaving.fetch_add(1, Ordering::SeqCst);
        }
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
        _left: &(dyn Fn() + Send + Sync),
    ) -> Result<(), ClusterError> {
        // The real protocol checks the lease before its demote, its first
        // call; the hold below stands for the wait and the leave after it,
        // which the lease does not govern.
        fence.check()?;
        self.leaving.store(true, Ordering::SeqCst);
        self.started.notify_one();
        self.release.notified().await;
        let result = self
            .cloud
            .demote_self_and_leave(node, &drover_spi::Unfenced, &|| {})
            .await;
        self.leaving.store(false, Ordering::SeqCst);
        result
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
        self.cloud.join_material(role).await
    }
}

#[tokio::test(start_paused = true)]
async fn a_controller_observes_nothing_while_its_engine_hands_leadership_over() {
    let cloud = SimCloud::new(World::new(11, Timings::default()));
    let store = seeded_store(SPEC).await;

    // Bring-up by an off-cluster controller (no swarm yet).
    let bootstrap = Running::start(Controller::new(sim_context(&cloud, store.clone())));
    let mut waited = 0;
    while !store.history().await.unwrap().iter().any(|r| r.converged) {
        tokio::time::sleep(Duration::from_secs(1)).await;
        waited += 1;
        assert!(waited < 3600, "bring-up did not converge");
    }
    bootstrap.stop().await;

    // The leader's own controller rolls the managers; its engine goes last.
    let leader = cloud.world().leader_link().expect("a leader");
    let watched = Arc::new(Watched {
        cloud: cloud.clone(),
        leaving: AtomicBool::new(false),
        observed_while_leaving: AtomicUsize::new(0),
        observed: AtomicUsize::new(0),
        stored_while_leaving: Mutex::new(Vec::new()),
        started: Notify::new(),
        release: Notify::new(),
    });
    let tapped = Tapped {
        inner: store.clone(),
        tap: Box::new({
            let watched = watched.clone();
            move |call| {
                if watched.leaving.load(Ordering::SeqCst) {
                    watched.stored_while_leaving.lock().unwrap().push(call);
                }
            }
        }),
    };
    let mut ctx = sim_context(&cloud, Arc::new(tapped));
    ctx.cluster = watched.clone();
    ctx.identity = leader.clone();
    ctx.self_link = Some(leader);
    let own = Running::start(Controller::new(ctx));
    let v2 = parse_str(&SPEC.replace("image: v1", "image: v2"))
        .spec
        .expect("valid spec");
    store.commit(1, &v2, who(), false).await.unwrap();
    tokio::time::timeout(Duration::from_secs(3600), watched.started.notified())
        .await
        .expect("the leader's controller never handed over");

    // Many resyncs and a heartbeat interval while it leaves.
    tokio::time::sleep(Duration::from_secs(70)).await;
    assert_eq!(
        watched.observed_while_leaving.load(Ordering::SeqCst),
        0,
        "the swarm was observed while this controller's engine left it"
    );
    assert_eq!(
        *watched.stored_while_leaving.lock().unwrap(),
        Vec::<&str>::new(),
        "the store was used while this controller's engine left"
    );
    let started = store.events(0).await.unwrap();
    assert!(
        started
            .iter()
            .any(|e| e.outcome == "started" && e.reason.contains("demote")),
        "the hand-over was not recorded before it started: {started:#?}"
    );

    // Once the step ends, the controller looks again (and stands down).
    let before = watched.observed.load(Ordering::SeqCst);
    watched.release.notify_one();
    tokio::time::sleep(Duration::from_secs(10)).await;
    assert!(
        watched.observed.load(Ordering::SeqCst) > before,
        "the controller never looked again after the hand-over"
    );
    own.stop().await;
}
