//! # drover-engine
//!
//! A thin client for one Docker Engine (bollard): the swarm and node calls
//! drover needs, with the engine's answers classified ([`EngineError`]) and
//! node lists converted to drover's observation types
//! ([`drover_core::model::Node`], [`SwarmView`]).
//!
//! Engines are reached as the docker CLI reaches them ([`docker_client`],
//! [`DockerEnv`]: `DOCKER_HOST`, `DOCKER_TLS_VERIFY`, `DOCKER_CERT_PATH`).
//!
//! Node updates always re-read the node right before the update and send
//! its full spec (labels, role, availability) with the current version,
//! retrying a bounded number of times on "update out of sequence".

// Production functions stay short enough to read at once (clippy.toml:
// 80 lines); tests may be long scenarios.
#![cfg_attr(not(test), deny(clippy::too_many_lines))]

mod convert;
mod endpoint;
mod error;
mod ghost;
mod join;
mod leave;
pub mod probe;

pub use join::JoinAttempt;

pub use convert::convert_node;
pub use endpoint::{DEFAULT_HOST, DockerEnv, docker_client};
pub use error::EngineError;
pub use leave::{LEAVE_ATTEMPT_TIMEOUT, LEAVE_TOTAL_TIMEOUT, LEFT_POLL, PeerEndpoints};

use backon::{ExponentialBuilder, Retryable};
use bollard::Docker;
use bollard::models::{
    LocalNodeState, NodeSpecAvailabilityEnum, NodeSpecRoleEnum, SwarmInitRequest, SwarmJoinRequest,
    TaskState,
};
use bollard::query_parameters::{
    DeleteNodeOptionsBuilder, ListServicesOptions, ListTasksOptionsBuilder,
    UpdateNodeOptionsBuilder, UpdateSwarmOptionsBuilder,
};
use convert::{convert_service, parse_labels};
use drover_core::model::{Node, NodeState, Service, SwarmView};
use drover_spi::Secret;
use drover_spi::{Fence, Unfenced};
use std::collections::{BTreeMap, HashMap};
use std::future::Future;
use std::time::{Duration, Instant};

/// Default bound for one ordinary API call.
pub const CALL_TIMEOUT: Duration = Duration::from_secs(30);
/// The message surfaced when the controller's own engine is autolocked.
pub const LOCKED_MESSAGE: &str = "swarm is locked: unlock it with docker swarm unlock";

/// The engine's local swarm state (`docker info .Swarm.LocalNodeState`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LocalState {
    /// Not in a swarm.
    Inactive,
    /// Joining.
    Pending,
    /// In a swarm.
    Active,
    /// In error (see [`EngineInfo::swarm_error`]).
    Error,
    /// Autolocked: needs `docker swarm unlock`.
    Locked,
    /// Not reported.
    Unknown,
}

/// What `docker info` says about the engine and its swarm membership.
#[derive(Debug, Clone)]
pub struct EngineInfo {
    /// Local swarm state.
    pub state: LocalState,
    /// This engine's swarm node id (empty when not in a swarm).
    pub node_id: String,
    /// `Swarm.ControlAvailable`: this engine runs a manager.
    pub control_available: bool,
    /// `Swarm.Error`, when non-empty.
    pub swarm_error: Option<String>,
    /// `Swarm.NodeAddr`: the advertise address.
    pub node_addr: String,
    /// `Swarm.Managers` (present only on managers with a working control plane).
    pub managers: Option<i64>,
    /// `Swarm.RemoteManagers`: the raft members this engine knows, each
    /// `(node id, address:port)`. A manager reports them even while its
    /// swarm has no leader (measured), which is how `drover recover` learns
    /// the raft's membership when no node list can be read.
    pub raft_peers: Vec<(String, String)>,
    /// Engine labels (`k=v`), as given to `dockerd --label`.
    pub labels: BTreeMap<String, String>,
}

/// The join tokens of a swarm (never printed: both are [`Secret`]s).
#[derive(Debug, Clone)]
pub struct JoinTokens {
    /// Worker token.
    pub worker: Secret,
    /// Manager token.
    pub manager: Secret,
}

/// What the engine says when its join timed out but goes on.
const JOIN_GOES_ON: &str = "will continue in the background";
/// How long a join that goes on in the background is waited for.
const JOIN_BACKGROUND: Duration = Duration::from_secs(120);
/// How long a join through one manager that goes on in the background is
/// waited for while other managers remain to be tried ([`Engine::join_any`]).
const JOIN_BEFORE_NEXT: Duration = Duration::from_secs(30);

/// How long [`Engine::observe_known`] waits for the node and task lists: a
/// manager with a leader answers in milliseconds (1-20 ms here, loaded);
/// past it (leadership moving, or a task list too long to read so fast)
/// `info` is asked, as every pass did before.
const KNOWN_VIEW_BOUND: Duration = Duration::from_millis(150);

/// One Docker Engine.
#[derive(Debug, Clone)]
pub struct Engine {
    docker: Docker,
    endpoint: String,
}

async fn bounded<T, F>(d: Duration, f: F) -> Result<T, EngineError>
where
    F: Future<Output = Result<T, bollard::errors::Error>>,
{
    match tokio::time::timeout(d, f).await {
        Ok(r) => r.map_err(EngineError::from),
        Err(_) => Err(EngineError::Unavailable(format!(
            "no answer within {} s",
            d.as_secs()
        ))),
    }
}

fn backoff() -> ExponentialBuilder {
    ExponentialBuilder::default()
        .with_min_delay(Duration::from_millis(50))
        .with_max_delay(Duration::from_secs(1))
        .with_max_times(8)
        .with_jitter()
}

impl Engine {
    /// Connects to `endpoint` (a socket path, `unix:///path`, `tcp://host:port`
    /// — TLS when `DOCKER_TLS_VERIFY` is set, as for the docker CLI —,
    /// `http://…` or `https://…`) and negotiates the API version.
    pub async fn connect(endpoint: &str) -> Result<Engine, EngineError> {
        Self::connect_with_timeout(endpoint, CALL_TIMEOUT).await
    }

    /// Like [`Engine::connect`] with a bound on the version negotiation.
    pub async fn connect_with_timeout(
        endpoint: &str,
        timeout: Duration,
    ) -> Result<Engine, EngineError> {
        // The client-side timeout is a backstop; every call is bounded
        // explicitly (leave needs longer than an ordinary call).
        let docker = docker_client(
            Some(endpoint),
            &DockerEnv::from_process(),
            Duration::from_secs(120),
            timeout,
        )
        .await?;
        Ok(Engine {
            docker,
            endpoint: endpoint.to_string(),
        })
    }

    /// The endpoint this engine was reached at.
    pub fn endpoint(&self) -> &str {
        &self.endpoint
    }

    /// The swarm's node events (joins, leaves, role, availability and
    /// status changes) as they happen: a prompt nudge to look again. The
    /// stream stalls during elections and ends on errors; callers must still
    /// resync on a timer ("no event" never means "no change").
    pub fn node_events(&self) -> impl futures_util::Stream<Item = Result<(), EngineError>> + '_ {
        use futures_util::StreamExt;
        let filters = std::collections::HashMap::from([("type", vec!["node"])]);
        let opts = bollard::query_parameters::EventsOptionsBuilder::new()
            .filters(&filters)
            .build();
        self.docker.events(Some(opts)).map(|e| {
            e.map(|_| ())
                .map_err(|e| EngineError::Unavailable(e.to_string()))
        })
    }

    /// The underlying bollard client (for calls this crate does not wrap).
    pub fn docker(&self) -> &Docker {
        &self.docker
    }

    /// `GET /_ping`.
    pub async fn ping(&self) -> Result<(), EngineError> {
        bounded(CALL_TIMEOUT, self.docker.ping()).await.map(|_| ())
    }

    /// `docker info`, reduced to what drover needs.
    pub async fn info(&self) -> Result<EngineInfo, EngineError> {
        let i = bounded(CALL_TIMEOUT, self.docker.info()).await?;
        let s = i.swarm.unwrap_or_default();
        let state = match s.local_node_state {
            Some(LocalNodeState::INACTIVE) => LocalState::Inactive,
            Some(LocalNodeState::PENDING) => LocalState::Pending,
            Some(LocalNodeState::ACTIVE) => LocalState::Active,
            Some(LocalNodeState::ERROR) => LocalState::Error,
            Some(LocalNodeState::LOCKED) => LocalState::Locked,
            _ => LocalState::Unknown,
        };
        Ok(EngineInfo {
            state,
            node_id: s.node_id.unwrap_or_default(),
            control_available: s.control_available.unwrap_or(false),
            swarm_error: s.error.filter(|e| !e.is_empty()),
            node_addr: s.node_addr.unwrap_or_default(),
            managers: s.managers.filter(|m| *m > 0),
            raft_peers: s
                .remote_managers
                .unwrap_or_default()
                .into_iter()
                .filter_map(|p| Some((p.node_id?, p.addr?)))
                .collect(),
            labels: parse_labels(i.labels),
        })
    }

    /// Running tasks per node id: desired state running AND status running.
    pub async fn running_tasks(&self) -> Result<HashMap<String, u32>, EngineError> {
        let mut out = HashMap::new();
        for (node, _) in self.running_task_list().await? {
            *out.entry(node).or_insert(0) += 1;
        }
        Ok(out)
    }

    /// Each running task (desired state running AND status running) as
    /// its node id and service id.
    async fn running_task_list(&self) -> Result<Vec<(String, String)>, EngineError> {
        let mut filters = HashMap::new();
        filters.insert("desired-state", vec!["running"]);
        let opts = ListTasksOptionsBuilder::default().filters(&filters).build();
        let tasks = bounded(CALL_TIMEOUT, self.docker.list_tasks(Some(opts))).await?;
        Ok(tasks
            .into_iter()
            .filter(|t| {
                t.desired_state == Some(TaskState::RUNNING)
                    && t.status.as_ref().and_then(|s| s.state) == Some(TaskState::RUNNING)
            })
            .filter_map(|t| Some((t.node_id?, t.service_id.unwrap_or_default())))
            .collect())
    }

    /// The swarm's services with their running tasks per node, for the
    /// roll's service budgets. Replicated and global services only: a
    /// job's tasks are meant to end.
    pub async fn services(&self) -> Result<Vec<Service>, EngineError> {
        let (listed, running) = tokio::try_join!(
            bounded(
                CALL_TIMEOUT,
                self.docker.list_services(None::<ListServicesOptions>)
            ),
            self.running_task_list()
        )?;
        let mut services: Vec<Service> = listed.iter().filter_map(convert_service).collect();
        let at: HashMap<String, usize> = services
            .iter()
            .enumerate()
            .map(|(k, s)| (s.id.clone(), k))
            .collect();
        for (node, service) in running {
            if let Some(&k) = at.get(&service) {
                *services[k].running.entry(node).or_insert(0) += 1;
            }
        }
        Ok(services)
    }

    /// The raw engine node list.
    pub async fn raw_nodes(&self) -> Result<Vec<bollard::models::Node>, EngineError> {
        bounded(CALL_TIMEOUT, self.docker.list_nodes(None)).await
    }

    /// The node list as drover's model (with running task counts).
    pub async fn nodes(&self) -> Result<Vec<Node>, EngineError> {
        let (raw, running) = tokio::try_join!(self.raw_nodes(), self.running_tasks())?;
        Ok(raw.iter().map(|n| convert_node(n, &running)).collect())
    }

    /// One node, converted (without task counts).
    pub async fn node(&self, id: &str) -> Result<Node, EngineError> {
        let n = bounded(CALL_TIMEOUT, self.docker.inspect_node(id)).await?;
        Ok(convert_node(&n, &HashMap::new()))
    }

    /// The swarm as this engine sees it. `Unavailable` when the engine
    /// cannot be asked (or is locked, pending, in error, or a worker),
    /// `Absent` when it is in no swarm, `NoQuorum` when the swarm has no
    /// leader (from `Swarm.Error` / a missing manager count or the API's
    /// answer — not from `ControlAvailable`, which stays true then).
    pub async fn observe(&self) -> SwarmView {
        self.observe_as().await.0
    }

    /// [`Engine::observe`], with this engine's own node id (empty when it
    /// is in no swarm or could not be asked): which node of the list is its own.
    pub async fn observe_as(&self) -> (SwarmView, String) {
        let info = match self.info().await {
            Ok(i) => i,
            Err(e) => return (SwarmView::Unavailable(e.to_string()), String::new()),
        };
        let own = info.node_id.clone();
        (self.view_from(info).await, own)
    }

    /// [`Engine::observe_as`] of an engine whose last answer showed it a
    /// manager as node `known`: the node list alone while that holds, with
    /// no `info` first. `info` is the costliest call of a pass (the engine
    /// gathers every subsystem's state: 8 ms idle here, 30-100 ms on the
    /// new leader's busy engine in a hand-over, measured), and the node
    /// list answers only a manager whose swarm has a leader. Anything else
    /// (an error, its own node missing) is asked again in full: `info`
    /// tells a locked, pending or departed engine from one with no leader.
    /// So does a node list that takes longer than [`KNOWN_VIEW_BOUND`]: a
    /// follower's blocks while leadership moves (1.0 s in 4 of 4 planned
    /// hand-overs measured), where `info` says at once that there is no
    /// leader yet.
    /// The kept id must still be a reachable raft member that is not Down:
    /// an engine that left and joined again is a new node, and its old one
    /// lingers in the list (unreachable, later Down).
    pub async fn observe_known(&self, known: Option<&str>) -> (SwarmView, String) {
        if let Some(own) = known {
            let is_own = |n: &Node| {
                n.id == own
                    && n.state != NodeState::Down
                    && n.raft.as_ref().is_some_and(|r| r.reachable)
            };
            // The bound covers both lists: the task list blocks as the node
            // list does while leadership moves, and the bound is there so
            // that `info` is asked then.
            match tokio::time::timeout(KNOWN_VIEW_BOUND, self.nodes()).await {
                Ok(Ok(nodes)) if nodes.iter().any(is_own) => {
                    return (SwarmView::Ok(nodes), own.to_string());
                }
                // As `view_from` would conclude after `info`.
                Ok(Err(EngineError::NoLeader(m))) => {
                    return (SwarmView::NoQuorum(m), own.to_string());
                }
                _ => {}
            }
        }
        self.observe_as().await
    }

    /// The swarm as this engine's `info` (already read) and, for a manager
    /// with a leader, its node list say it is.
    pub async fn view_from(&self, info: EngineInfo) -> SwarmView {
        match info.state {
            LocalState::Inactive => return SwarmView::Absent,
            LocalState::Locked => return SwarmView::Unavailable(LOCKED_MESSAGE.into()),
            LocalState::Active => {}
            other => {
                return SwarmView::Unavailable(format!(
                    "engine swarm state {other:?}{}",
                    info.swarm_error
                        .map(|e| format!(": {e}"))
                        .unwrap_or_default()
                ));
            }
        }
        if !info.control_available {
            return SwarmView::Unavailable("this engine is not a swarm manager".into());
        }
        if let Some(e) = info.swarm_error {
            return SwarmView::NoQuorum(e);
        }
        if info.managers.is_none() {
            return SwarmView::NoQuorum("the manager count is missing from info".into());
        }
        match self.nodes().await {
            Ok(nodes) => SwarmView::from_manager_list(nodes, &info.node_id),
            Err(EngineError::NoLeader(m)) => SwarmView::NoQuorum(m),
            Err(e) => SwarmView::Unavailable(e.to_string()),
        }
    }

    /// Re-reads the node and sends its full spec with `change` applied and
    /// the current version; retries (bounded, jittered) on "update out of
    /// sequence". A no-op change is not sent. Unfenced: for callers holding
    /// no controller term (see [`Engine::update_node_spec_fenced`]).
    pub async fn update_node_spec<F>(&self, node: &str, change: F) -> Result<(), EngineError>
    where
        F: Fn(&mut bollard::models::NodeSpec) + Send + Sync,
    {
        self.update_node_spec_fenced(node, &Unfenced, change).await
    }

    /// [`Engine::update_node_spec`] under `fence`, checked in every attempt
    /// after the node is re-read and immediately before the update is sent:
    /// a refusal sends nothing and is not retried.
    pub async fn update_node_spec_fenced<F>(
        &self,
        node: &str,
        fence: &dyn Fence,
        change: F,
    ) -> Result<(), EngineError>
    where
        F: Fn(&mut bollard::models::NodeSpec) + Send + Sync,
    {
        let attempt = || async {
            let n = bounded(CALL_TIMEOUT, self.docker.inspect_node(node)).await?;
            let version = n
                .version
                .and_then(|v| v.index)
                .ok_or_else(|| EngineError::Other(format!("node {node} has no version")))?;
            let old = n.spec.unwrap_or_default();
            let mut spec = old.clone();
            change(&mut spec);
            if spec == old {
                return Ok(());
            }
            // Full spec: keep labels/role/availability the engine requires.
            if spec.labels.is_none() {
                spec.labels = Some(HashMap::new());
            }
            let opts = UpdateNodeOptionsBuilder::default()
                .version(version as i64)
                .build();
            fence.check()?;
            bounded(CALL_TIMEOUT, self.docker.update_node(node, spec, opts)).await
        };
        attempt
            .retry(backoff())
            .sleep(tokio::time::sleep)
            .when(EngineError::is_out_of_sequence)
            .notify(|e, d| tracing::debug!(node, error = %e, delay = ?d, "retrying node update"))
            .await
    }

    /// `docker node update --availability drain`, under `fence`.
    pub async fn drain(&self, node: &str, fence: &dyn Fence) -> Result<(), EngineError> {
        self.update_node_spec_fenced(node, fence, |s| {
            s.availability = Some(NodeSpecAvailabilityEnum::DRAIN)
        })
        .await
    }

    /// `docker node demote`, under `fence`.
    pub async fn demote(&self, node: &str, fence: &dyn Fence) -> Result<(), EngineError> {
        self.update_node_spec_fenced(node, fence, |s| s.role = Some(NodeSpecRoleEnum::WORKER))
            .await
    }

    /// `docker node promote`, under `fence`.
    pub async fn promote(&self, node: &str, fence: &dyn Fence) -> Result<(), EngineError> {
        self.update_node_spec_fenced(node, fence, |s| s.role = Some(NodeSpecRoleEnum::MANAGER))
            .await
    }

    /// `docker node update --availability active`, under `fence`.
    pub async fn activate(&self, node: &str, fence: &dyn Fence) -> Result<(), EngineError> {
        self.update_node_spec_fenced(node, fence, |s| {
            s.availability = Some(NodeSpecAvailabilityEnum::ACTIVE)
        })
        .await
    }

    /// `docker node rm [--force]`, under `fence` (checked right before the
    /// request is sent). Absent is success.
    pub async fn remove_node(
        &self,
        node: &str,
        force: bool,
        fence: &dyn Fence,
    ) -> Result<(), EngineError> {
        let opts = DeleteNodeOptionsBuilder::default().force(force).build();
        fence.check()?;
        match bounded(CALL_TIMEOUT, self.docker.delete_node(node, Some(opts))).await {
            Err(EngineError::NotFound(_)) => Ok(()),
            r => r,
        }
    }

    /// `docker swarm init --listen-addr A --advertise-addr A`; returns the node id.
    pub async fn init(&self, addr: &str) -> Result<String, EngineError> {
        let req = SwarmInitRequest {
            listen_addr: Some(addr.to_string()),
            advertise_addr: Some(addr.to_string()),
            ..Default::default()
        };
        bounded(CALL_TIMEOUT, self.docker.init_swarm(req)).await
    }

    /// `docker swarm init --force-new-cluster`, listening and advertising
    /// on `addr` (`host:port`: the raft address the engine had, so the
    /// workers, which know the managers by it, find it again). Keeps the
    /// cluster id, its objects and the join tokens; measured ~0.6–1.2 s.
    /// Only `drover recover` calls it, and only on evidence that the other
    /// raft members are gone for good (design rule 11).
    pub async fn force_new_cluster(&self, addr: &str) -> Result<String, EngineError> {
        let req = SwarmInitRequest {
            listen_addr: Some(addr.to_string()),
            advertise_addr: Some(addr.to_string()),
            force_new_cluster: Some(true),
            ..Default::default()
        };
        bounded(Duration::from_secs(60), self.docker.init_swarm(req)).await
    }

    /// `docker swarm join` with listen AND advertise address always set
    /// (workers too: a worker joined without `--listen-addr` binds
    /// 0.0.0.0:2377 when later promoted and fails).
    pub async fn join(
        &self,
        token: &Secret,
        remotes: &[String],
        addr: &str,
    ) -> Result<(), EngineError> {
        self.join_within(token, remotes, addr, JOIN_BACKGROUND)
            .await
    }

    /// [`Self::join`], a join that goes on in the background waited for
    /// up to `background`.
    pub(crate) async fn join_within(
        &self,
        token: &Secret,
        remotes: &[String],
        addr: &str,
        background: Duration,
    ) -> Result<(), EngineError> {
        let req = SwarmJoinRequest {
            listen_addr: Some(addr.to_string()),
            advertise_addr: Some(addr.to_string()),
            remote_addrs: Some(remotes.to_vec()),
            join_token: Some(token.expose().to_string()),
            ..Default::default()
        };
        // Joining a swarm without a leader times out after ~20 s.
        match bounded(Duration::from_secs(40), self.docker.join_swarm(req)).await {
            Err(e) if e.to_string().contains(JOIN_GOES_ON) => {
                self.joined_in_background(e, background).await
            }
            other => other,
        }
    }

    /// After the engine answered that its join "will continue in the
    /// background" (measured on Incus machines: the manager it was joining
    /// through lost power mid-join; the node joined through another one
    /// seconds later): waits, up to `bound`, for the engine to be in the
    /// swarm, and fails with `refused` if it never is or gives up.
    async fn joined_in_background(
        &self,
        refused: EngineError,
        bound: Duration,
    ) -> Result<(), EngineError> {
        let deadline = Instant::now() + bound;
        while Instant::now() < deadline {
            match self.info().await.map(|i| i.state) {
                Ok(LocalState::Active) => return Ok(()),
                Ok(LocalState::Inactive | LocalState::Error) => return Err(refused),
                _ => tokio::time::sleep(Duration::from_millis(500)).await,
            }
        }
        Err(refused)
    }

    /// The swarm's join tokens (from swarm inspect). Never logged.
    pub async fn join_tokens(&self) -> Result<JoinTokens, EngineError> {
        let s = bounded(CALL_TIMEOUT, self.docker.inspect_swarm()).await?;
        let t = s
            .join_tokens
            .ok_or_else(|| EngineError::Other("swarm inspect carries no join tokens".into()))?;
        match (t.worker, t.manager) {
            (Some(w), Some(m)) => Ok(JoinTokens {
                worker: Secret::new(w),
                manager: Secret::new(m),
            }),
            _ => Err(EngineError::Other("a join token is missing".into())),
        }
    }

    /// `docker swarm join-token --rotate worker|manager`, under `fence`:
    /// the swarm's own spec sent back unchanged at its version with the
    /// rotate flag, re-read and sent again when another update came first
    /// ("update out of sequence"). Joined nodes are unaffected.
    pub async fn rotate_join_token(
        &self,
        manager: bool,
        fence: &dyn Fence,
    ) -> Result<(), EngineError> {
        let attempt = || async {
            let s = bounded(CALL_TIMEOUT, self.docker.inspect_swarm()).await?;
            let version = s
                .version
                .and_then(|v| v.index)
                .ok_or_else(|| EngineError::Other("the swarm has no version".into()))?;
            let opts = UpdateSwarmOptionsBuilder::default()
                .version(version as i64)
                .rotate_manager_token(manager)
                .rotate_worker_token(!manager)
                .build();
            fence.check()?;
            // Never a default spec: it would turn autolock off and reset
            // the raft, dispatcher and CA settings.
            let spec = s
                .spec
                .ok_or_else(|| EngineError::Other("the swarm has no spec".into()))?;
            bounded(CALL_TIMEOUT, self.docker.update_swarm(spec, opts)).await
        };
        attempt
            .retry(backoff())
            .sleep(tokio::time::sleep)
            .when(EngineError::is_out_of_sequence)
            .await
    }
}
