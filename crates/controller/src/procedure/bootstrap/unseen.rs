//! The swarm as a bootstrap sees it when it reaches none of the cluster's
//! engines (a plugin's or EC2's machines, from an operator's laptop): no
//! swarm until the first manager's provision ends, then a swarm it cannot
//! ask. The first manager initialises the swarm by its boot script, its
//! own controller takes the store's term, and the bootstrap learns so
//! through the store (its term refused), never through an engine.

use async_trait::async_trait;
use drover_core::model::{Services, SwarmView};
use drover_core::spec::Role;
use drover_spi::{Cluster, ClusterError, Fence, JoinMaterial};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

/// Why nothing here asks an engine.
const UNSEEN: &str = "no engine of this cluster is reachable from here: the first manager's own \
                      controller takes over through the store";

/// A swarm that exists once [`Unseen::booted`] is set, and is never asked.
#[derive(Default)]
pub(super) struct Unseen {
    booted: Arc<AtomicBool>,
}

impl Unseen {
    /// Set when the first manager was made: from then on a swarm may exist.
    pub(super) fn booted(&self) -> Arc<AtomicBool> {
        self.booted.clone()
    }

    fn refuse<T>() -> Result<T, ClusterError> {
        Err(ClusterError::Unavailable(UNSEEN.into()))
    }
}

#[async_trait]
impl Cluster for Unseen {
    async fn observe(&self) -> SwarmView {
        match self.booted.load(Ordering::SeqCst) {
            false => SwarmView::Absent,
            true => SwarmView::Unavailable(UNSEEN.into()),
        }
    }
    async fn services(&self) -> Services {
        Services::Unknown(UNSEEN.into())
    }
    async fn drain(&self, _: &str, _: &dyn Fence) -> Result<(), ClusterError> {
        Self::refuse()
    }
    async fn demote(&self, _: &str, _: &dyn Fence) -> Result<(), ClusterError> {
        Self::refuse()
    }
    async fn demote_self_and_leave(
        &self,
        _: &str,
        _: &dyn Fence,
        _: &(dyn Fn() + Send + Sync),
    ) -> Result<(), ClusterError> {
        Self::refuse()
    }
    async fn remove_node(&self, _: &str, _: bool, _: &dyn Fence) -> Result<(), ClusterError> {
        Self::refuse()
    }
    /// None before the first manager (it initialises the swarm); after it,
    /// none that this process could give.
    async fn join_material(&self, _: Role) -> Result<Option<JoinMaterial>, ClusterError> {
        match self.booted.load(Ordering::SeqCst) {
            false => Ok(None),
            true => Self::refuse(),
        }
    }
}
