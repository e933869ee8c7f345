//! The swarm as an off-cluster process sees it: through whichever machine
//! of the local provider runs a manager that answers. Before the first
//! manager exists this reports no swarm, which is what lets `apply`
//! bootstrap one.

use async_trait::async_trait;
use drover_core::model::SwarmView;
use drover_core::spec::Role;
use drover_engine::PeerEndpoints;
use drover_local::LocalProvider;
use drover_spi::{Cluster, ClusterError, Fence, JoinMaterial};
use drover_swarm::SwarmCluster;
use std::sync::Arc;

/// A [`Cluster`] over the provider's machines.
pub struct ProviderSwarm {
    local: Option<Arc<LocalProvider>>,
}

impl ProviderSwarm {
    /// Over `local`'s machines (none: there is never a swarm).
    pub fn new(local: Option<Arc<LocalProvider>>) -> Self {
        ProviderSwarm { local }
    }

    /// The first running machine whose engine answers as a manager.
    async fn manager(&self) -> Option<SwarmCluster> {
        let local = self.local.as_ref()?;
        let peers: Arc<dyn PeerEndpoints> = local.clone();
        for endpoint in local.peer_endpoints() {
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
            None => match &self.local {
                // No running machine answers as a manager: no swarm yet (or all
                // managers down, which describe will show as not running).
                Some(l)
                    if l.records()
                        .map(|r| r.iter().any(|r| l.is_running(r)))
                        .unwrap_or(true) =>
                {
                    SwarmView::Unavailable("no manager machine answers".into())
                }
                _ => SwarmView::Absent,
            },
        }
    }
    async fn drain(&self, node: &str, fence: &dyn Fence) -> Result<(), ClusterError> {
        self.with().await?.drain(node, fence).await
    }
    async fn demote(&self, node: &str, fence: &dyn Fence) -> Result<(), ClusterError> {
        self.with().await?.demote(node, fence).await
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
    async fn join_material(&self, role: Role) -> Result<Option<JoinMaterial>, ClusterError> {
        match self.manager().await {
            Some(c) => c.join_material(role).await,
            None => Ok(None),
        }
    }
}
