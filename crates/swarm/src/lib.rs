//! # drover-swarm
//!
//! [`drover_spi::Cluster`] over real Docker engines: the controller's own
//! engine is asked for the node list, node updates go through it (with the
//! out-of-sequence retry of `drover-engine`), and the leader's
//! demote → leave protocol watches its node leave the raft from another
//! manager's engine when a [`PeerEndpoints`] source is given.

// Production functions stay short enough to read at once (clippy.toml:
// 80 lines); tests may be long scenarios.
#![cfg_attr(not(test), deny(clippy::too_many_lines))]

use async_trait::async_trait;
use drover_core::model::{Node, Services, SwarmView};
use drover_core::own_engine;
use drover_core::spec::Role;
use drover_engine::{Engine, EngineInfo, LOCKED_MESSAGE, LocalState, PeerEndpoints};
use drover_spi::{Cluster, ClusterError, Fence, JoinMaterial};
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

/// The swarm as this controller's engine sees it.
#[derive(Clone)]
pub struct SwarmCluster {
    endpoint: String,
    peers: Option<Arc<dyn PeerEndpoints>>,
    asked: Arc<Mutex<Asked>>,
    /// Set while this engine demotes itself and leaves: it is not asked
    /// anything else meanwhile (see [`Cluster::observe`] below).
    leaving: Arc<AtomicBool>,
    /// See [`SwarmCluster::acting_only_as_leader`].
    only_as_leader: bool,
    /// The engine's client and what its last view showed, kept between
    /// passes so that a pass asks one thing, the node list (see
    /// [`Connected`]).
    client: Arc<Mutex<Option<Connected>>>,
}

/// The controller's engine, its API version negotiated once (a `version`
/// call: 6 ms on an idle engine here, tens under load), and its own node id
/// while its last view showed it a manager with a leader
/// ([`Engine::observe_known`]), with when `info` last said so: it is asked
/// again at least every [`ASK_INFO_EVERY`]. Forgotten when the engine cannot
/// be asked, so a restarted or replaced engine is negotiated with again.
#[derive(Clone)]
struct Connected {
    engine: Engine,
    manager_as: Option<(String, std::time::Instant)>,
}

/// The longest a kept own node id is trusted without `info`.
const ASK_INFO_EVERY: std::time::Duration = std::time::Duration::from_secs(10);

impl std::fmt::Debug for SwarmCluster {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SwarmCluster")
            .field("endpoint", &self.endpoint)
            .field("peers", &self.peers.is_some())
            .field("only_as_leader", &self.only_as_leader)
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
            asked: Arc::new(Mutex::new(Asked {
                origin: std::time::Instant::now(),
                pacing: own_engine::Pacing::default(),
                answers: HashMap::new(),
            })),
            leaving: Arc::new(AtomicBool::new(false)),
            only_as_leader: false,
            client: Arc::new(Mutex::new(None)),
        }
    }

    /// For a manager's own controller, which acts only while its engine's
    /// node is the leader: other machines' engines are asked (autolocked?
    /// left?) only then. Off-cluster observers ask whichever manager they
    /// reach through.
    pub fn acting_only_as_leader(mut self) -> Self {
        self.only_as_leader = true;
        self
    }

    /// The controller's engine endpoint.
    pub fn endpoint(&self) -> &str {
        &self.endpoint
    }

    /// The controller's engine (connected once, see `client`).
    pub async fn engine(&self) -> Result<Engine, ClusterError> {
        Ok(self.connected().await?.engine)
    }

    async fn connected(&self) -> Result<Connected, ClusterError> {
        if let Some(c) = self.client().clone() {
            return Ok(c);
        }
        let engine = Engine::connect(&self.endpoint).await?;
        let c = Connected {
            engine,
            manager_as: None,
        };
        *self.client() = Some(c.clone());
        Ok(c)
    }

    fn client(&self) -> std::sync::MutexGuard<'_, Option<Connected>> {
        self.client.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl SwarmCluster {
    /// What only a machine's own engine knows, asked of the engines the
    /// peer source names (all at once, each bounded by `ASK_TIMEOUT`), only when a node
    /// needs it, of each engine at most once per [`own_engine::ASK_EVERY`]
    /// (the last answer is reused in between), and not until a manager
    /// demoted out of the raft has [`own_engine::SETTLE`]d:
    /// - an autolocked manager: the leader shows it Down/Unreachable, like a
    ///   dead one; its engine says `locked`;
    /// - a demoted manager that ran `swarm leave`: the leader lists it Ready
    ///   for another 27-34 s; its engine says it is in no swarm (`left`);
    /// - a worker by spec still listed an unreachable raft member: its
    ///   engine says it runs no manager (`engine_no_manager`), a ghost.
    ///
    /// The rules are `drover_core::own_engine`'s; a manager's controller
    /// (see [`SwarmCluster::acting_only_as_leader`]) asks only while `own`,
    /// its engine's node, is the leader.
    async fn consult_own_engines(&self, nodes: &mut [Node], own: &str) {
        let own = self.only_as_leader.then_some(own);
        let needed = own_engine::worth_asking(nodes, own);
        let Some(peers) = self.peers.as_ref().filter(|_| needed) else {
            return;
        };
        let endpoints = peers.peer_endpoints();
        let left = own_engine::may_have_left(nodes);
        let due: Vec<String> = {
            let mut asked = self.asked();
            let now = asked.origin.elapsed().as_millis() as u64;
            asked.pacing.retain(&endpoints);
            asked.answers.retain(|e, _| endpoints.contains(e));
            // Not while a freshly demoted manager's engine may still be
            // shutting its manager down; meanwhile the answers less than a
            // question interval old stand, older ones are dropped.
            if asked.pacing.settled(nodes, &left, now) {
                endpoints
                    .iter()
                    .filter(|e| asked.pacing.due(e, now))
                    .cloned()
                    .collect()
            } else {
                let Asked {
                    pacing, answers, ..
                } = &mut *asked;
                answers.retain(|e, _| pacing.fresh(e, now));
                Vec::new()
            }
        };
        // All at once, each bounded: one slow engine must not hold the pass.
        let mut questions = tokio::task::JoinSet::new();
        for endpoint in due {
            questions.spawn(async move {
                let ask = async {
                    let engine = Engine::connect_with_timeout(&endpoint, ASK_TIMEOUT).await?;
                    engine.info().await
                };
                let answer = tokio::time::timeout(ASK_TIMEOUT, ask).await;
                (endpoint, answer.ok().and_then(Result::ok))
            });
        }
        while let Some(Ok((endpoint, answer))) = questions.join_next().await {
            let mut asked = self.asked();
            match answer {
                Some(info) => asked.answers.insert(endpoint, info),
                None => asked.answers.remove(&endpoint),
            };
        }
        let answers: Vec<EngineInfo> = self.asked().answers.values().cloned().collect();
        mark_from_answers(nodes, &left, &answers);
    }

    fn asked(&self) -> std::sync::MutexGuard<'_, Asked> {
        self.asked.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// Marks `nodes` with what their own engines answered (`answers`): a
/// manager that is autolocked (`locked`), a demoted manager (`left`: which
/// may have left) or a ghost (see `own_engine::may_be_ghost`) whose engine
/// is in no swarm (`left`), a ghost whose engine runs no manager
/// (`engine_no_manager`). An engine is matched by its link label (or, for
/// a locked one, its node id or address).
fn mark_from_answers(nodes: &mut [Node], left: &[bool], answers: &[EngineInfo]) {
    for info in answers {
        let link = info.labels.get(drover_core::model::tags::LINK);
        let same_link = |n: &Node| link.is_some() && n.link.as_ref() == link;
        match info.state {
            LocalState::Locked => {
                let host = info.node_addr.as_str();
                for n in nodes.iter_mut().filter(|n| own_engine::may_be_locked(n)) {
                    let same_addr = !host.is_empty()
                        && n.raft
                            .as_ref()
                            .is_some_and(|r| r.addr.rsplit_once(':').map(|(h, _)| h) == Some(host));
                    if same_link(n)
                        || (!info.node_id.is_empty() && n.id == info.node_id)
                        || same_addr
                    {
                        n.locked = true;
                    }
                }
            }
            LocalState::Inactive => {
                for (n, _) in nodes
                    .iter_mut()
                    .zip(left)
                    .filter(|(n, may)| (**may || own_engine::may_be_ghost(n)) && same_link(n))
                {
                    n.left = true;
                }
            }
            LocalState::Active if !info.control_available => {
                for n in nodes
                    .iter_mut()
                    .filter(|n| own_engine::may_be_ghost(n) && same_link(n))
                {
                    n.engine_no_manager = true;
                }
            }
            _ => {}
        }
    }
}

/// Marks the engine as leaving for as long as it lives (also when the
/// protocol's future is dropped half-way).
struct Leaving<'a>(&'a AtomicBool);

impl<'a> Leaving<'a> {
    fn start(flag: &'a AtomicBool) -> Self {
        flag.store(true, Ordering::SeqCst);
        Leaving(flag)
    }
}

impl Drop for Leaving<'_> {
    fn drop(&mut self) {
        self.0.store(false, Ordering::SeqCst);
    }
}

/// Bound for asking another machine's engine (connect and `info`): a
/// healthy engine answers in milliseconds; one shutting its manager down
/// can take seconds, and then nothing is concluded from it.
const ASK_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(1);

/// The questions put to machines' own engines: when each was asked, and
/// its last answer.
#[derive(Debug)]
struct Asked {
    origin: std::time::Instant,
    pacing: own_engine::Pacing,
    answers: HashMap<String, EngineInfo>,
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
    /// While this engine demotes itself and leaves, the view is
    /// `Unavailable` without asking it: polling an engine that shuts its
    /// manager down stretches its leave from 0.1-0.6 s to 5-8 s
    /// (swarm-facts), and its controller cannot lead then anyway.
    async fn observe(&self) -> SwarmView {
        if self.leaving.load(Ordering::SeqCst) {
            return SwarmView::Unavailable(
                "this engine is leaving the swarm (it demoted itself); not asked until it is done"
                    .into(),
            );
        }
        let mut trusted = None;
        let (view, own) = match self.connected().await {
            Ok(c) => {
                let known = c
                    .manager_as
                    .as_ref()
                    .filter(|(_, at)| at.elapsed() < ASK_INFO_EVERY);
                trusted = known.map(|(_, at)| *at);
                c.engine
                    .observe_known(known.map(|(id, _)| id.as_str()))
                    .await
            }
            Err(e) => (SwarmView::Unavailable(e.to_string()), String::new()),
        };
        {
            let mut client = self.client();
            match &view {
                SwarmView::Unavailable(_) => *client = None,
                SwarmView::Ok(_) => {
                    if let Some(c) = client.as_mut() {
                        // When `info` last said so: now, unless this view
                        // came from the kept id (the fast path may still
                        // have asked `info`; then it is merely older).
                        let since = trusted.unwrap_or_else(std::time::Instant::now);
                        c.manager_as = Some((own.clone(), since));
                    }
                }
                SwarmView::Absent | SwarmView::NoQuorum(_) => {
                    if let Some(c) = client.as_mut() {
                        c.manager_as = None;
                    }
                }
            }
        }
        match view {
            SwarmView::Ok(mut nodes) => {
                self.consult_own_engines(&mut nodes, &own).await;
                SwarmView::Ok(nodes)
            }
            other => other,
        }
    }

    /// The fence is checked in the engine, after the node is re-read and
    /// right before the update is sent (`Engine::update_node_spec_fenced`).
    async fn drain(&self, node: &str, fence: &dyn Fence) -> Result<(), ClusterError> {
        Ok(self.engine().await?.drain(node, fence).await?)
    }

    async fn demote(&self, node: &str, fence: &dyn Fence) -> Result<(), ClusterError> {
        Ok(self.engine().await?.demote(node, fence).await?)
    }

    async fn promote(&self, node: &str, fence: &dyn Fence) -> Result<(), ClusterError> {
        Ok(self.engine().await?.promote(node, fence).await?)
    }

    async fn activate(&self, node: &str, fence: &dyn Fence) -> Result<(), ClusterError> {
        Ok(self.engine().await?.activate(node, fence).await?)
    }

    async fn heal_ghost(&self, node: &str, fence: &dyn Fence) -> Result<(), ClusterError> {
        Ok(self.engine().await?.heal_ghost(node, fence).await?)
    }

    async fn demote_self_and_leave(
        &self,
        node: &str,
        fence: &dyn Fence,
        left: &(dyn Fn() + Send + Sync),
    ) -> Result<(), ClusterError> {
        let engine = self.engine().await?;
        let peers = self
            .peers
            .as_ref()
            .map(|p| p.peer_endpoints())
            .unwrap_or_default();
        let _leaving = Leaving::start(&self.leaving);
        Ok(engine
            .demote_self_and_leave(node, &peers, fence, left)
            .await?)
    }

    async fn remove_node(
        &self,
        node: &str,
        force: bool,
        fence: &dyn Fence,
    ) -> Result<(), ClusterError> {
        Ok(self.engine().await?.remove_node(node, force, fence).await?)
    }

    async fn services(&self) -> Services {
        let listed = match self.connected().await {
            Ok(c) => c.engine.services().await.map_err(ClusterError::from),
            Err(e) => Err(e),
        };
        listed.map_or_else(|e| Services::Unknown(e.to_string()), Services::Known)
    }

    async fn rotate_join_token(&self, role: Role, fence: &dyn Fence) -> Result<(), ClusterError> {
        if role == Role::Plain {
            return Err(ClusterError::Other(
                "plain instances have no join token".into(),
            ));
        }
        Ok(self
            .engine()
            .await?
            .rotate_join_token(role == Role::Manager, fence)
            .await?)
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
        let mut addrs = engine.manager_addrs().await?.into_iter();
        let addr = addrs
            .next()
            .ok_or_else(|| ClusterError::NoLeader("no leader in the node list".into()))?;
        let others = addrs.collect();
        let token = match role {
            Role::Manager => tokens.manager,
            Role::Worker => tokens.worker,
            Role::Plain => {
                return Err(ClusterError::Other(
                    "plain instances do not join the swarm".into(),
                ));
            }
        };
        Ok(Some(JoinMaterial {
            token,
            addr,
            others,
        }))
    }
}
