//! Joining through any of several managers. Docker's join takes a list of
//! remote addresses but uses only the first (`RemoteAddrs[0]`), and a
//! first join that failed is never retried by swarmkit: an engine told to
//! join through a manager that was cut off mid-join stays in swarm state
//! `error` for good (measured on Incus, drover issue 36). So the addresses
//! are tried in turn here, a failed attempt (swarm state `error`) cleared
//! (`leave --force`) before the next.

use crate::{Engine, EngineError, JOIN_BACKGROUND, JOIN_BEFORE_NEXT, LocalState};
use bollard::models::{ManagerStatus, Reachability};
use drover_spi::Secret;

/// How one address's join attempt ended, for the caller to report.
#[derive(Debug)]
pub struct JoinAttempt {
    /// The manager's address tried.
    pub remote: String,
    /// Why the join through it failed.
    pub error: EngineError,
}

impl Engine {
    /// Joins through the first of `remotes` that takes the join, each
    /// tried in turn (a join that goes on in the background waited for
    /// [`JOIN_BEFORE_NEXT`] while others remain); `tried` is told of every
    /// address that failed, before the next is tried. Returns the address joined through, or, when
    /// none took it, every attempt's failure.
    pub async fn join_any(
        &self,
        token: &Secret,
        remotes: &[String],
        addr: &str,
        tried: &(dyn Fn(&JoinAttempt) + Send + Sync),
    ) -> Result<String, Vec<JoinAttempt>> {
        let mut failed = Vec::new();
        for (i, remote) in remotes.iter().enumerate() {
            let wait = match i + 1 == remotes.len() {
                true => JOIN_BACKGROUND,
                false => JOIN_BEFORE_NEXT,
            };
            let one = std::slice::from_ref(remote);
            match self.join_within(token, one, addr, wait).await {
                Ok(()) => return Ok(remote.clone()),
                Err(error) => {
                    let attempt = JoinAttempt {
                        remote: remote.clone(),
                        error,
                    };
                    tried(&attempt);
                    failed.push(attempt);
                    // The last failure stays for the controller to see
                    // (the engine's swarm state `error`): it replaces the
                    // machine without waiting out its startup_timeout.
                    if i + 1 < remotes.len() {
                        self.clear_failed_join().await;
                    }
                }
            }
        }
        Err(failed)
    }

    /// After a failed join: an engine in swarm state `error` leaves
    /// (forced), so the next join starts clean ("already part of a swarm"
    /// otherwise). One still joining (`pending`) is left alone: a manager's
    /// join may already count in the raft while it is pending (an election
    /// holds manager calls for seconds), and a manager that leaves by force
    /// stays a raft member, unreachable, costing the quorum a vote; its
    /// join goes on in the background, and the next addresses' joins fail
    /// with the engine's own words. A failure here shows in the next
    /// join's error.
    async fn clear_failed_join(&self) {
        let stuck = self
            .info()
            .await
            .is_ok_and(|i| matches!(i.state, LocalState::Error));
        if stuck && let Err(e) = self.leave(true).await {
            tracing::debug!(error = %e, "clearing a failed join");
        }
    }

    /// The managers' advertise addresses, the leader's first, then every
    /// other reachable one: what a new machine may join through.
    pub async fn manager_addrs(&self) -> Result<Vec<String>, EngineError> {
        let nodes = self.raw_nodes().await?;
        let managers: Vec<ManagerStatus> =
            nodes.into_iter().filter_map(|n| n.manager_status).collect();
        let leader = managers.iter().filter(|m| m.leader == Some(true));
        let others = managers
            .iter()
            .filter(|m| m.leader != Some(true) && m.reachability == Some(Reachability::REACHABLE));
        Ok(leader
            .chain(others)
            .filter_map(|m| m.addr.clone())
            .collect())
    }
}
