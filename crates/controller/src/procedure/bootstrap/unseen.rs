//! The swarm as a bootstrap sees it when it reaches none of the cluster's
//! engines (a plugin's or EC2's machines, from an operator's laptop): no
//! swarm until an operation on a manager is journaled, then a swarm it
//! cannot ask, for good. The first manager initialises the swarm by its
//! boot script, its own controller takes the store's term, and the
//! bootstrap learns so through the store (its term refused), never through
//! an engine.
//!
//! Why the journal and not the provision's success: the intent is written
//! before the machine is asked for (journal before effect), so a provision
//! that made the machine but failed to say so (a timeout) still counts,
//! and a plain group's machines never do. Once seen, it stays seen: the
//! operation leaving the journal does not make the swarm absent again (a
//! second `swarm init` would make a second swarm).

use async_trait::async_trait;
use drover_core::model::{Services, SwarmView};
use drover_core::spec::Role;
use drover_spi::{Cluster, ClusterError, Fence, JoinMaterial, Store};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

/// Why nothing here asks an engine.
const UNSEEN: &str = "no engine of this cluster is reachable from here: the first manager's own \
                      controller takes over through the store";

/// A swarm absent until a manager's operation is journaled in `store`.
pub(super) struct Unseen {
    store: Arc<dyn Store>,
    begun: AtomicBool,
}

impl Unseen {
    pub(super) fn new(store: Arc<dyn Store>) -> Self {
        Unseen {
            store,
            begun: AtomicBool::new(false),
        }
    }

    /// Whether a manager may exist: an operation on one was journaled
    /// (now or before). A journal that cannot be read is no proof of
    /// absence.
    async fn begun(&self) -> Result<bool, String> {
        if self.begun.load(Ordering::SeqCst) {
            return Ok(true);
        }
        let journal = self.store.journal().await.map_err(|e| e.to_string())?;
        let begun = journal.iter().any(|op| op.role == Role::Manager);
        if begun {
            self.begun.store(true, Ordering::SeqCst);
        }
        Ok(begun)
    }

    fn refuse<T>() -> Result<T, ClusterError> {
        Err(ClusterError::Unavailable(UNSEEN.into()))
    }
}

#[async_trait]
impl Cluster for Unseen {
    async fn observe(&self) -> SwarmView {
        match self.begun().await {
            Ok(false) => SwarmView::Absent,
            Ok(true) => SwarmView::Unavailable(UNSEEN.into()),
            Err(e) => SwarmView::Unavailable(format!("the journal cannot be read: {e}")),
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
    async fn promote(&self, _: &str, _: &dyn Fence) -> Result<(), ClusterError> {
        Self::refuse()
    }
    async fn activate(&self, _: &str, _: &dyn Fence) -> Result<(), ClusterError> {
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
    /// None: the one machine a bootstrap makes is the first manager, which
    /// initialises the swarm (its provision, retried, is the same
    /// operation's, made once by its link); nothing else is planned once
    /// the swarm may exist.
    async fn join_material(&self, _: Role) -> Result<Option<JoinMaterial>, ClusterError> {
        Ok(None)
    }
}
