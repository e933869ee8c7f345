//! The heal of a ghost raft member (`drover_core::plan::Ghost`): a node
//! that is a worker by spec yet still a raft member with no manager behind
//! it, which swarmkit never removes by itself.
//!
//! Why two updates: swarmkit's role manager (`manager/role_manager.go`,
//! `reconcileRole`, unchanged since 2018, so the same in Docker 20.10 and
//! 26) acts on a node update only when the node's observed role
//! (`Node.Role`) differs from its spec (`Spec.DesiredRole`). A ghost reads
//! worker for both, so any update keeping the role (a label, a bumped
//! version) is ignored. A promote makes the role manager set the observed
//! role to manager at once; the demote that follows then finds a manager
//! asked to be a worker with a raft member, and removes the member
//! (`removeMember`, behind its own quorum check; the control API checks
//! quorum before accepting the demote too). The observed role returns to
//! worker on the role manager's next round (5 s).

use crate::{Engine, EngineError, bounded};
use bollard::models::NodeSpecRoleEnum;
use drover_spi::{Fence, Unfenced};
use std::time::Duration;

/// How many times the demote that ends a heal is tried: once promoted, the
/// node must not stay a manager by spec.
const DEMOTE_ATTEMPTS: u32 = 5;

impl Engine {
    /// Heals ghost raft member `node`: a promote, then a demote, each on
    /// the node's spec as re-read just before it (see the module). Sends
    /// nothing unless the node is still a worker by spec with a raft member
    /// (`ManagerStatus`). `fence` is checked before the promote; the demote
    /// that undoes it is unfenced and retried (bounded): a node left a
    /// manager by spec would become one again.
    pub async fn heal_ghost(&self, node: &str, fence: &dyn Fence) -> Result<(), EngineError> {
        let n = bounded(crate::CALL_TIMEOUT, self.docker.inspect_node(node)).await?;
        let worker = n
            .spec
            .as_ref()
            .is_some_and(|s| s.role == Some(NodeSpecRoleEnum::WORKER));
        if !worker || n.manager_status.is_none() {
            tracing::info!(node, worker, "not a ghost (any more): nothing sent");
            return Ok(());
        }
        self.update_node_spec_fenced(node, fence, |s| s.role = Some(NodeSpecRoleEnum::MANAGER))
            .await?;
        // From here the demote undoes drover's own promote, so it runs to
        // its end whatever becomes of the caller: unfenced (a lease that
        // expired since the promote must not leave the node a manager by
        // spec, as the leader's own leave runs unfenced), in a task of its
        // own (a controller standing down drops the caller's future, not
        // this task).
        let engine = self.clone();
        let node = node.to_string();
        tokio::spawn(async move { engine.demote_after_promote(&node).await })
            .await
            .map_err(|e| EngineError::Other(format!("the demote ending a ghost's heal: {e}")))?
    }

    /// The demote that ends a heal, retried (bounded) on any failure.
    async fn demote_after_promote(&self, node: &str) -> Result<(), EngineError> {
        let mut last = None;
        for attempt in 0..DEMOTE_ATTEMPTS {
            if attempt > 0 {
                tokio::time::sleep(Duration::from_millis(200 << attempt)).await;
            }
            match self.demote(node, &Unfenced).await {
                Ok(()) => return Ok(()),
                Err(e) => {
                    tracing::warn!(node, error = %e, attempt, "the demote ending a ghost's heal failed");
                    last = Some(e);
                }
            }
        }
        Err(last.unwrap_or_else(|| EngineError::Other("no demote was tried".into())))
    }
}
