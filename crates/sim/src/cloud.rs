//! The simulated world behind the same seams as the real adapters
//! ([`InstanceProvider`] and [`Cluster`]), on tokio's clock, so the real
//! controller can be run against it (with paused time in tests).

use crate::world::World;
use async_trait::async_trait;
use drover_core::in_place::{UpdateOutcome, UpdateRun};
use drover_core::model::{Instance, Services, SwarmView};
use drover_core::spec::Role;
use drover_spi::{
    Cluster, ClusterError, Fence, InstanceProvider, JoinMaterial, ProviderError, ProvisionRequest,
    Secret,
};
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;
use tokio::time::Instant;

/// A shared simulated cloud and swarm.
#[derive(Clone)]
pub struct SimCloud {
    world: Arc<Mutex<World>>,
    origin: Instant,
}

impl SimCloud {
    /// Wraps `world`; its clock follows tokio's from now on.
    pub fn new(world: World) -> Self {
        SimCloud {
            world: Arc::new(Mutex::new(world)),
            origin: Instant::now(),
        }
    }

    /// The world, advanced to the present.
    pub fn world(&self) -> MutexGuard<'_, World> {
        let mut w = self.world.lock().unwrap_or_else(|e| e.into_inner());
        let now = self.origin.elapsed().as_millis() as u64;
        w.advance(now);
        w
    }

    fn latency(&self, pick: impl Fn(&World) -> u64) -> Duration {
        Duration::from_millis(pick(&self.world()))
    }
}

#[async_trait]
impl InstanceProvider for SimCloud {
    async fn provision(
        &self,
        req: ProvisionRequest,
        fence: &dyn Fence,
    ) -> Result<String, ProviderError> {
        // Checked when the call is made, like a real provider's before it
        // starts the machine: the latency is the machine's boot.
        fence.check()?;
        tokio::time::sleep(self.latency(|w| w.timings.provision)).await;
        let mut w = self.world();
        let link = req.tags.get(drover_core::model::tags::LINK).cloned();
        // Idempotent on the link (the provision token).
        if let Some(existing) = w
            .instances
            .values()
            .find(|i| i.inst.link().is_some() && i.inst.link() == link.as_deref())
        {
            return Ok(existing.inst.id.clone());
        }
        let role = match req.boot_context.role.as_str() {
            "manager" => Role::Manager,
            "plain" => Role::Plain,
            _ => Role::Worker,
        };
        Ok(w.provision(req.tags, role, false))
    }

    async fn destroy_fenced(&self, instance: &str, fence: &dyn Fence) -> Result<(), ProviderError> {
        fence.check()?;
        self.world().destroy(instance);
        Ok(())
    }

    async fn describe(
        &self,
        tags: &BTreeMap<String, String>,
    ) -> Result<Vec<Instance>, ProviderError> {
        let w = self.world();
        Ok(w.instances
            .values()
            .filter(|i| tags.iter().all(|(k, v)| i.inst.tag(k) == Some(v.as_str())))
            .map(|i| i.inst.clone())
            .collect())
    }

    async fn label(
        &self,
        instance: &str,
        labels: &BTreeMap<String, String>,
        fence: &dyn Fence,
    ) -> Result<(), ProviderError> {
        fence.check()?;
        let mut w = self.world();
        let i = w
            .instances
            .get_mut(instance)
            .ok_or_else(|| ProviderError::NotFound(instance.into()))?;
        i.inst.tags.extend(labels.clone());
        Ok(())
    }

    /// The simulated machines are updated in place (`sim` is one of
    /// [`drover_core::spec::IN_PLACE_PROVIDERS`]).
    fn updates_in_place(&self) -> bool {
        true
    }

    /// An update that succeeds after an API call's latency; the machine's
    /// new config is the controller's tag after it, as on a real provider.
    async fn run_update(
        &self,
        instance: &str,
        run: &UpdateRun,
        fence: &dyn Fence,
    ) -> Result<UpdateOutcome, ProviderError> {
        fence.check()?;
        if !self.world().instances.contains_key(instance) {
            return Err(ProviderError::NotFound(instance.into()));
        }
        tokio::time::sleep(self.latency(|w| w.timings.api)).await;
        Ok(UpdateOutcome::new(
            Some(0),
            &format!("updated ({})", run.mark),
        ))
    }
}

#[async_trait]
impl Cluster for SimCloud {
    async fn observe(&self) -> SwarmView {
        // Only the node list: building a whole observation would copy every
        // machine on every swarm observation (the describes do that).
        self.world().swarm()
    }

    /// The simulated swarm runs no services (budgets are the planner's
    /// unit tests' and the real-engine tests' subject).
    async fn services(&self) -> Services {
        Services::default()
    }

    async fn drain(&self, node: &str, fence: &dyn Fence) -> Result<(), ClusterError> {
        fence.check()?;
        self.world().drain(node).map_err(ClusterError::from)
    }

    async fn demote(&self, node: &str, fence: &dyn Fence) -> Result<(), ClusterError> {
        fence.check()?;
        self.world().demote(node).map_err(ClusterError::from)
    }

    async fn promote(&self, node: &str, fence: &dyn Fence) -> Result<(), ClusterError> {
        fence.check()?;
        self.world().promote_back(node).map_err(ClusterError::from)
    }

    async fn activate(&self, node: &str, fence: &dyn Fence) -> Result<(), ClusterError> {
        fence.check()?;
        self.world().activate(node).map_err(ClusterError::from)
    }

    async fn demote_self_and_leave(
        &self,
        node: &str,
        fence: &dyn Fence,
        _left: &(dyn Fn() + Send + Sync),
    ) -> Result<(), ClusterError> {
        fence.check()?;
        self.world().demote(node).map_err(ClusterError::from)?;
        loop {
            tokio::time::sleep(self.latency(|w| w.timings.out_of_raft)).await;
            // Leave is refused while the node is still in the raft: retry.
            if self.world().leave(node).is_ok() {
                return Ok(());
            }
        }
    }

    async fn remove_node(
        &self,
        node: &str,
        force: bool,
        fence: &dyn Fence,
    ) -> Result<(), ClusterError> {
        fence.check()?;
        self.world()
            .remove_node(node, force)
            .map_err(ClusterError::from)
    }

    /// The simulated swarm's token is not modelled: rotating it changes
    /// nothing a simulated machine needs.
    async fn rotate_join_token(&self, _role: Role, fence: &dyn Fence) -> Result<(), ClusterError> {
        fence.check()?;
        if !self.world().swarm_exists {
            return Err(ClusterError::NoLeader("no swarm".into()));
        }
        Ok(())
    }

    async fn join_material(&self, _role: Role) -> Result<Option<JoinMaterial>, ClusterError> {
        let w = self.world();
        if !w.swarm_exists {
            return Ok(None);
        }
        let leader = w
            .leader
            .clone()
            .ok_or_else(|| ClusterError::NoLeader("no leader".into()))?;
        Ok(Some(JoinMaterial {
            others: Vec::new(),
            token: Secret::new("SWMTKN-1-simulated-secret"),
            addr: format!("{leader}:2377"),
        }))
    }
}
