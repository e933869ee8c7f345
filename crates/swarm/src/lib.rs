//! # drover-swarm
//!
//! [`drover_spi::Cluster`] over real Docker engines: the controller's own
//! engine is asked for the node list, node updates go through it (with the
//! out-of-sequence retry of `drover-engine`), and the leader's
//! demote → leave protocol watches its node leave the raft from another
//! manager's engine when a [`PeerEndpoints`] source is given.

use async_trait::async_trait;
use drover_core::model::{Node, NodeState, SwarmView};
use drover_core::spec::Role;
use drover_engine::{Engine, EngineError, LOCKED_MESSAGE, LocalState, PeerEndpoints};
use drover_spi::{Cluster, ClusterError, JoinMaterial};
use std::sync::Arc;

/// The swarm as this controller's engine sees it.
#[derive(Clone)]
pub struct SwarmCluster {
    endpoint: String,
    peers: Option<Arc<dyn PeerEndpoints>>,
}

impl std::fmt::Debug for SwarmCluster {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SwarmCluster")
            .field("endpoint", &self.endpoint)
            .field("peers", &self.peers.is_some())
            .finish()
    }
}

impl SwarmCluster {
    /// `endpoint`: this controller's engine (`unix:///…`, a socket path or
    /// `tcp://…`); `peers`: where other managers' engines can be reached
    /// (for the leader's protocol), if known.
    pub fn new(endpoint: impl Into<String>, peers: Option<Arc<dyn PeerEndpoints>>) -> Self {
        SwarmCluster {
            endpoint: endpoint.into(),
            peers,
        }
    }

    /// The controller's engine endpoint.
    pub fn endpoint(&self) -> &str {
        &self.endpoint
    }

    /// Connects to the controller's engine.
    pub async fn engine(&self) -> Result<Engine, ClusterError> {
        Engine::connect(&self.endpoint)
            .await
            .map_err(ClusterError::from)
    }
}

impl SwarmCluster {
    /// What only a machine's own engine knows, asked of the engines the
    /// peer source names (each with a short timeout), and only when a node
    /// needs it:
    /// - an autolocked manager: the leader shows it Down/Unreachable, like a
    ///   dead one; its engine says `locked`;
    /// - a demoted manager that ran `swarm leave`: the leader lists it Ready
    ///   for another 27-34 s; its engine says it is in no swarm (`left`).
    async fn consult_own_engines(&self, nodes: &mut [Node]) {
        let unwell = |n: &Node| {
            n.manager_role
                && (n.state != NodeState::Ready || n.raft.as_ref().is_some_and(|r| !r.reachable))
        };
        // Groups with raft members are manager groups; a member of one that
        // is out of the raft and no longer a manager is a demoted manager.
        let manager_groups: Vec<Option<String>> = nodes
            .iter()
            .filter(|n| n.raft.is_some() && n.group.is_some())
            .map(|n| n.group.clone())
            .collect();
        // Its state is Ready, or Unknown: the new leader lists every node
        // Unknown at first, and an ex-leader stays so until it turns Down.
        let demoted = |n: &Node| {
            n.raft.is_none()
                && !n.manager_role
                && matches!(n.state, NodeState::Ready | NodeState::Unknown)
                && n.group.is_some()
                && manager_groups.contains(&n.group)
        };
        let Some(peers) = self
            .peers
            .as_ref()
            .filter(|_| nodes.iter().any(|n| unwell(n) || demoted(n)))
        else {
            return;
        };
        for endpoint in peers.peer_endpoints() {
            let Ok(engine) =
                Engine::connect_with_timeout(&endpoint, std::time::Duration::from_secs(2)).await
            else {
                continue;
            };
            let Ok(info) = engine.info().await else {
                continue;
            };
            let link = info.labels.get(drover_core::model::tags::LINK);
            let same_link = |n: &Node| link.is_some() && n.link.as_ref() == link;
            match info.state {
                LocalState::Locked => {
                    let host = info.node_addr.as_str();
                    for n in nodes.iter_mut().filter(|n| unwell(n)) {
                        let same_addr = !host.is_empty()
                            && n.raft.as_ref().is_some_and(|r| {
                                r.addr.rsplit_once(':').map(|(h, _)| h) == Some(host)
                            });
                        if same_link(n)
                            || (!info.node_id.is_empty() && n.id == info.node_id)
                            || same_addr
                        {
                            n.locked = true;
                        }
                    }
                }
                LocalState::Inactive => {
                    for n in nodes.iter_mut().filter(|n| demoted(n) && same_link(n)) {
                        n.left = true;
                    }
                }
                _ => {}
            }
        }
    }
}

fn locked_or<T>(info: &drover_engine::EngineInfo, ok: T) -> Result<T, ClusterError> {
    if info.state == LocalState::Locked {
        Err(ClusterError::Unavailable(LOCKED_MESSAGE.into()))
    } else {
        Ok(ok)
    }
}

#[async_trait]
impl Cluster for SwarmCluster {
    async fn observe(&self) -> SwarmView {
        let view = match Engine::connect(&self.endpoint).await {
            Ok(e) => e.observe().await,
            Err(e) => SwarmView::Unavailable(e.to_string()),
        };
        match view {
            SwarmView::Ok(mut nodes) => {
                self.consult_own_engines(&mut nodes).await;
                SwarmView::Ok(nodes)
            }
            other => other,
        }
    }

    async fn drain(&self, node: &str) -> Result<(), ClusterError> {
        Ok(self.engine().await?.drain(node).await?)
    }

    async fn demote(&self, node: &str) -> Result<(), ClusterError> {
        Ok(self.engine().await?.demote(node).await?)
    }

    async fn demote_self_and_leave(&self, node: &str) -> Result<(), ClusterError> {
        let engine = self.engine().await?;
        let peers = self
            .peers
            .as_ref()
            .map(|p| p.peer_endpoints())
            .unwrap_or_default();
        Ok(engine.demote_self_and_leave(node, &peers).await?)
    }

    async fn remove_node(&self, node: &str, force: bool) -> Result<(), ClusterError> {
        Ok(self.engine().await?.remove_node(node, force).await?)
    }

    async fn join_material(&self, role: Role) -> Result<Option<JoinMaterial>, ClusterError> {
        let engine = self.engine().await?;
        let info = engine.info().await?;
        match info.state {
            LocalState::Inactive => return Ok(None),
            LocalState::Active => {}
            _ => {
                locked_or(&info, ())?;
                return Err(ClusterError::Unavailable(format!(
                    "engine swarm state {:?}",
                    info.state
                )));
            }
        }
        let tokens = engine.join_tokens().await?;
        let addr = engine
            .leader_addr()
            .await?
            .ok_or_else(|| ClusterError::NoLeader("no leader in the node list".into()))?;
        let token = match role {
            Role::Manager => tokens.manager,
            Role::Worker => tokens.worker,
            Role::Plain => {
                return Err(ClusterError::Other(
                    "plain instances do not join the swarm".into(),
                ));
            }
        };
        Ok(Some(JoinMaterial { token, addr }))
    }
}

/// Maps an engine error to the SPI's (re-exported for callers).
pub fn cluster_error(e: EngineError) -> ClusterError {
    e.into()
}
