//! The leader's way out of the swarm it leads: demote self, wait until a
//! peer sees it out of the raft, then leave without force (swarm-facts).

use crate::{Engine, EngineError, LocalState, bounded};
use bollard::query_parameters::LeaveSwarmOptionsBuilder;
use drover_spi::Fence;
use std::time::{Duration, Instant};

/// Bound for one `swarm leave` attempt (measured: it can block 0.7–9 s).
pub const LEAVE_ATTEMPT_TIMEOUT: Duration = Duration::from_secs(45);
/// How often a leaving engine is asked whether it is out of the swarm while
/// its `swarm leave` call runs: the next leader destroys its machine on
/// that news, within 0.1 s of the leave is the aim.
pub const LEFT_POLL: Duration = Duration::from_millis(25);

/// Overall bound for the leave retries of [`Engine::demote_self_and_leave`].
pub const LEAVE_TOTAL_TIMEOUT: Duration = Duration::from_secs(90);

/// Something that can name other managers' engine endpoints (for the
/// leader's demote → leave protocol, which must watch its own node leave
/// the raft from ANOTHER manager).
pub trait PeerEndpoints: Send + Sync {
    /// Engine endpoints (`unix:///…` or socket paths) of the swarm's other
    /// engines, as best known. May include workers and self; both are skipped.
    fn peer_endpoints(&self) -> Vec<String>;
}

impl PeerEndpoints for Vec<String> {
    fn peer_endpoints(&self) -> Vec<String> {
        self.clone()
    }
}

impl Engine {
    /// `docker swarm leave [--force]`, bounded by `timeout`.
    pub async fn leave_with_timeout(
        &self,
        force: bool,
        timeout: Duration,
    ) -> Result<(), EngineError> {
        let opts = LeaveSwarmOptionsBuilder::default().force(force).build();
        bounded(timeout, self.docker.leave_swarm(Some(opts))).await
    }

    /// `docker swarm leave [--force]`.
    pub async fn leave(&self, force: bool) -> Result<(), EngineError> {
        self.leave_with_timeout(force, LEAVE_ATTEMPT_TIMEOUT).await
    }

    /// The leader's protocol for leaving the swarm it leads (swarm-facts):
    /// 1. demote self through the own engine;
    /// 2. wait until `node` has no `ManagerStatus` as seen from ANOTHER
    ///    manager (`peers`); with no reachable peer, poll the own engine
    ///    gently (every 1 s: aggressive polling slows the manager shutdown)
    ///    until the node is out of the raft or `ControlAvailable` is false;
    /// 3. `swarm leave` without force, each attempt allowed 45 s, retrying
    ///    on exactly the "participating as a manager" refusal, 90 s overall.
    ///
    /// `fence` is checked before the demote (step 1) only: once demoted, the
    /// protocol must finish with its leave.
    ///
    /// While a leave call runs, the engine is asked for its state every
    /// [`LEFT_POLL`], and `left` is called once it reads inactive: the node
    /// has left, and the call returns only after the engine's own clean-up
    /// (~1 s here, BENCHMARKS.md §4). Its manager is shut down by then (a
    /// peer saw it out of the raft), so the questions no longer slow that
    /// shutdown (swarm-facts).
    pub async fn demote_self_and_leave(
        &self,
        node: &str,
        peers: &[String],
        fence: &dyn Fence,
        left: &(dyn Fn() + Send + Sync),
    ) -> Result<(), EngineError> {
        let info = self.info().await?;
        if info.state == LocalState::Inactive {
            return Ok(()); // already left: replaying the step is success
        }
        if info.node_id != node {
            return Err(EngineError::Other(format!(
                "node {node} is not this engine's node ({})",
                info.node_id
            )));
        }
        if info.control_available {
            self.demote(node, fence).await?;
        }
        self.wait_out_of_raft(node, peers, Duration::from_secs(30))
            .await;
        let deadline = Instant::now() + LEAVE_TOTAL_TIMEOUT;
        loop {
            let remaining = deadline.saturating_duration_since(Instant::now());
            let attempt = LEAVE_ATTEMPT_TIMEOUT
                .min(remaining)
                .max(Duration::from_secs(1));
            // The call is never cut short: the questions run beside it.
            let leave = self.leave_with_timeout(false, attempt);
            tokio::pin!(leave);
            let mut told = false;
            let outcome = loop {
                tokio::select! {
                    r = &mut leave => break r,
                    () = self.until_inactive(), if !told => {
                        left();
                        told = true;
                    }
                }
            };
            match outcome {
                Ok(()) => return Ok(()),
                Err(e) if e.is_still_manager_refusal() && Instant::now() < deadline => {
                    tracing::info!("leave refused while still a manager; retrying");
                    tokio::time::sleep(Duration::from_secs(1)).await;
                }
                Err(e) => {
                    // The call may have timed out while the leave went through.
                    if let Ok(i) = self.info().await
                        && i.state == LocalState::Inactive
                    {
                        return Ok(());
                    }
                    return Err(e);
                }
            }
        }
    }

    /// Resolves once this engine's state reads inactive (in no swarm),
    /// asking every [`LEFT_POLL`].
    async fn until_inactive(&self) {
        loop {
            tokio::time::sleep(LEFT_POLL).await;
            if let Ok(i) = self.info().await
                && i.state == LocalState::Inactive
            {
                return;
            }
        }
    }

    /// Waits (bounded) until `node` is out of the raft; returns whether seen so.
    async fn wait_out_of_raft(&self, node: &str, peers: &[String], limit: Duration) -> bool {
        let deadline = Instant::now() + limit;
        let mut peer_engines = Vec::new();
        for p in peers {
            if p == &self.endpoint {
                continue;
            }
            if let Ok(e) = Engine::connect_with_timeout(p, Duration::from_secs(3)).await
                && let Ok(i) = e.info().await
                && i.control_available
                && i.node_id != node
            {
                peer_engines.push(e);
            }
        }
        while Instant::now() < deadline {
            if !peer_engines.is_empty() {
                let mut answered = false;
                for p in &peer_engines {
                    match bounded(Duration::from_secs(5), p.docker.inspect_node(node)).await {
                        Ok(n) if n.manager_status.is_none() => return true,
                        Ok(_) => answered = true,
                        Err(EngineError::NotFound(_)) => return true,
                        Err(_) => {}
                    }
                }
                if answered {
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
                // No peer answered: fall back to the own engine, gently.
            }
            tokio::time::sleep(Duration::from_secs(1)).await;
            match self.info().await {
                Ok(i) if !i.control_available || i.state != LocalState::Active => return true,
                _ => {}
            }
        }
        false
    }
}
