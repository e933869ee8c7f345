//! The swarm as an off-cluster process sees it: through whichever machine
//! of a provider runs a manager that answers. Before the first
//! manager exists this reports no swarm, which is what lets `apply`
//! bootstrap one.

use super::Machines;
use async_trait::async_trait;
use drover_core::model::{Services, SwarmView};
use drover_core::spec::Role;
use drover_spi::{Cluster, ClusterError, Fence, JoinMaterial};
use drover_swarm::SwarmCluster;

/// A [`Cluster`] over the provider's machines.
pub struct ProviderSwarm {
    machines: Machines,
}

impl ProviderSwarm {
    /// Over `machines` (no provider: there is never a swarm).
    pub fn new(machines: Machines) -> Self {
        ProviderSwarm { machines }
    }

    /// The first running machine whose engine answers as a manager.
    async fn manager(&self) -> Option<SwarmCluster> {
        // The engines given and the providers' machines alike.
        let peers: std::sync::Arc<dyn drover_engine::PeerEndpoints> =
            std::sync::Arc::new(self.machines.clone());
        for endpoint in peers.peer_endpoints() {
            let c = SwarmCluster::new(endpoint, Some(peers.clone()));
            if matches!(c.observe().await, SwarmView::Ok(_)) {
                return Some(c);
            }
        }
        None
    }

    async fn with(&self) -> Result<SwarmCluster, ClusterError> {
        self.manager()
            .await
            .ok_or_else(|| ClusterError::Unavailable("no manager machine answers".into()))
    }
}

#[async_trait]
impl Cluster for ProviderSwarm {
    async fn observe(&self) -> SwarmView {
        match self.manager().await {
            Some(c) => c.observe().await,
            // No running machine answers as a manager: no swarm yet (or all
            // managers down, which describe will show as not running).
            None if !self.machines.engines.is_empty() || self.machines.may_run().await => {
                SwarmView::Unavailable("no manager machine answers".into())
            }
            None => SwarmView::Absent,
        }
    }
    async fn services(&self) -> Services {
        match self.with().await {
            Ok(c) => c.services().await,
            Err(e) => Services::Unknown(e.to_string()),
        }
    }
    async fn drain(&self, node: &str, fence: &dyn Fence) -> Result<(), ClusterError> {
        self.with().await?.drain(node, fence).await
    }
    async fn demote(&self, node: &str, fence: &dyn Fence) -> Result<(), ClusterError> {
        self.with().await?.demote(node, fence).await
    }
    async fn promote(&self, node: &str, fence: &dyn Fence) -> Result<(), ClusterError> {
        self.with().await?.promote(node, fence).await
    }
    async fn activate(&self, node: &str, fence: &dyn Fence) -> Result<(), ClusterError> {
        self.with().await?.activate(node, fence).await
    }
    async fn heal_ghost(&self, node: &str, fence: &dyn Fence) -> Result<(), ClusterError> {
        self.with().await?.heal_ghost(node, fence).await
    }
    async fn demote_self_and_leave(
        &self,
        node: &str,
        fence: &dyn Fence,
        left: &(dyn Fn() + Send + Sync),
    ) -> Result<(), ClusterError> {
        self.with()
            .await?
            .demote_self_and_leave(node, fence, left)
            .await
    }
    async fn remove_node(
        &self,
        node: &str,
        force: bool,
        fence: &dyn Fence,
    ) -> Result<(), ClusterError> {
        self.with().await?.remove_node(node, force, fence).await
    }
    async fn rotate_join_token(&self, role: Role, fence: &dyn Fence) -> Result<(), ClusterError> {
        self.with().await?.rotate_join_token(role, fence).await
    }
    async fn join_material(&self, role: Role) -> Result<Option<JoinMaterial>, ClusterError> {
        match self.manager().await {
            Some(c) => c.join_material(role).await,
            None => Ok(None),
        }
    }
}
