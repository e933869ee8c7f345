//! # drover-spi
//!
//! The seams between drover's controller and the world, mirroring the
//! classic InfraKit SPI so external plugins can be added without touching
//! the core:
//! - [`InstanceProvider`]: provision, destroy, describe (by tags), label;
//! - [`Cluster`]: the swarm side of a flavor: observe nodes, drain, demote,
//!   the leader's self-demotion protocol, node removal, join material;
//! - [`Store`]: desired specs with history, the journal, status, events and
//!   controller leadership, every write conditional (backends, and an
//!   in-memory one, live in `drover-store`).
//!
//! Both the simulator (`drover-sim`) and the real adapters (`drover-local`,
//! `drover-swarm`) implement these traits; the controller only sees them.

// Production functions stay short enough to read at once (clippy.toml:
// 80 lines); tests may be long scenarios.
#![cfg_attr(not(test), deny(clippy::too_many_lines))]

mod engines;
mod secret;
mod store;

pub use engines::EngineReport;
pub use secret::Secret;
pub use store::{
    Controls, Epoch, Event, EventAction, FORMAT, HEARTBEAT_TTL_MS, Heartbeat, Imported,
    OLDEST_FORMAT, Provenance, Reach, Revision, Seat, StatusJson, Store, StoreError, Write,
    write_format,
};

use async_trait::async_trait;
use drover_core::boot::{BootLog, JoinFailed};
use drover_core::in_place::{UpdateOutcome, UpdateRun};
use drover_core::model::{Instance, Services, SwarmView};
use drover_core::spec::Role;
use std::collections::BTreeMap;

/// Where a store kept in the swarm's raft is found again: it is read
/// through one manager's engine, and the shell's off-cluster procedures
/// (creating the first manager, retiring the last) outlive the engine they
/// started on. Implemented over the provider's machines by the binary's
/// wiring.
#[async_trait]
pub trait SwarmStores: Send + Sync {
    /// The swarm store read through the first running manager engine that
    /// answers and, when `cluster` is given, holds that cluster's id.
    async fn on_a_manager(&self, cluster: Option<&str>) -> Option<std::sync::Arc<dyn Store>>;
}

/// Why a fenced call did nothing: the lease on the caller's term had run
/// out when the call was about to act.
#[derive(Debug, Clone, thiserror::Error)]
#[error("the lease on the controller's term had expired: {0}")]
pub struct LeaseExpired(pub String);

/// The caller's permission to act, checked by every side-effect call
/// **immediately before its irreversible operation** (signalling or starting
/// a process, sending a node update or removal): a call whose `check` fails
/// must do nothing and return the failure. A controller passes a lease on
/// its term, valid for a short time after the store confirmed it (see
/// `drover_controller`'s `execute::Lease`); a process stopped (SIGSTOP) in
/// between finds it expired when it resumes, since the monotonic clock runs
/// on while it is stopped. A call's own retries check before each attempt.
pub trait Fence: Send + Sync {
    /// `Ok` while the caller may still act.
    fn check(&self) -> Result<(), LeaseExpired>;
}

/// No fence: for callers that hold no controller term (an operator's own
/// command, tests, the simulator's setup).
#[derive(Debug, Clone, Copy, Default)]
pub struct Unfenced;

impl Fence for Unfenced {
    fn check(&self) -> Result<(), LeaseExpired> {
        Ok(())
    }
}

/// What a provider needs to create one machine.
#[derive(Debug, Clone)]
pub struct ProvisionRequest {
    /// Tags the machine must carry (drover's ownership tags included).
    pub tags: BTreeMap<String, String>,
    /// The slot's logical id (for `local`: the loopback address to use).
    pub logical_id: Option<String>,
    /// The group's opaque `instance.properties`.
    pub properties: serde_json::Value,
    /// Labels the machine's engine must carry (drover.link among them).
    pub engine_labels: BTreeMap<String, String>,
    /// The boot script template and its context; the provider fills in the
    /// address it allocated and renders it (see `drover_core::template`).
    pub boot_template: String,
    /// Template context (address filled in by the provider).
    pub boot_context: drover_core::template::BootContext,
    /// Secret environment for the boot script (e.g. `DROVER_JOIN_TOKEN`):
    /// reaches the script's environment only, never argv, disk or logs.
    pub boot_env: Vec<(String, Secret)>,
}

/// Why a provider call failed.
#[derive(Debug, thiserror::Error)]
pub enum ProviderError {
    /// Worth retrying (throttling, a busy host, a timeout).
    #[error("provider temporarily failed: {0}")]
    Transient(String),
    /// Retrying the same call will not help (bad properties, a quota).
    #[error("provider refused: {0}")]
    Permanent(String),
    /// The provider has no capacity for this machine where it was asked
    /// (a zone out of the instance type): retrying at once in the same
    /// zone rarely helps, the same machine in another zone may. Kept apart
    /// from [`ProviderError::Permanent`] so the planner can move a slot to
    /// another of its group's zones (docs/spec.md, zone fallback).
    #[error("no capacity: {0}")]
    Capacity(String),
    /// The instance is not there (destroying it again is success).
    #[error("no such instance: {0}")]
    NotFound(String),
    /// Nothing was done: the caller's [`Fence`] refused right before the act.
    #[error("not done: {0}")]
    Fenced(#[from] LeaseExpired),
}

impl ProviderError {
    /// True when the same call may succeed later.
    pub fn is_transient(&self) -> bool {
        matches!(self, ProviderError::Transient(_))
    }

    /// True when the provider lacked capacity where the call asked.
    pub fn is_capacity(&self) -> bool {
        matches!(self, ProviderError::Capacity(_))
    }
}

/// A machine drover did not create, as its provider sees it (for adoption).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Foreign {
    /// The provider-specific reference, normalised (local: the engine's directory).
    pub reference: String,
    /// The swarm node id its engine reports, when the provider can ask it.
    pub node_id: Option<String>,
    /// The address its engine advertises, when known (pets' logical ids).
    pub address: Option<String>,
    /// The id of the instance already made from it, if it was adopted before.
    pub adopted_as: Option<String>,
}

/// A side-effect call a controller is about to make (see
/// [`InstanceProvider::ready`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProviderCall {
    /// [`InstanceProvider::provision`].
    Provision,
    /// [`InstanceProvider::destroy_fenced`].
    Destroy,
}

/// A source of machines.
#[async_trait]
pub trait InstanceProvider: Send + Sync {
    /// Waits until a `call` may be sent at once. A controller awaits it
    /// before it confirms its term for the call: a provider that paces its
    /// own API calls (EC2's per-account limits) queues here, so the wait is
    /// not spent from the short lease the call's fence checks. The default:
    /// at once.
    async fn ready(&self, call: ProviderCall) {
        let _ = call;
    }
    /// True when this provider can hand a boot script its environment
    /// (`ProvisionRequest::boot_env`) only through something that stays
    /// readable for the machine's life (EC2's user data). A controller
    /// serving such a provider rotates a role's join token once no machine
    /// given the current one still awaits its join
    /// (`drover_core::join_token`), so the token left readable is useless.
    /// The default: the environment reaches the boot script only.
    fn exposes_boot_env(&self) -> bool {
        false
    }
    /// True when every successful [`describe`](Self::describe) lists every
    /// machine this provider made that still exists: its listing is its own
    /// record (the local provider's instance records, Incus's database), not
    /// an eventually consistent index. The planner then takes a pet slot
    /// that reads empty as empty at once, where otherwise it waits for the
    /// slot to read empty for a while (a describe that left a machine out
    /// would get that machine a twin on its address). The default: a
    /// listing may leave a machine out (EC2's `DescribeInstances`; a plugin,
    /// whose protocol cannot say).
    fn listing_is_complete(&self) -> bool {
        false
    }
    /// Creates a machine, boots it with the rendered boot script, returns its
    /// id. `fence` is checked right before anything is started.
    async fn provision(
        &self,
        req: ProvisionRequest,
        fence: &dyn Fence,
    ) -> Result<String, ProviderError>;
    /// Destroys a machine and everything it started. Absent is success.
    /// `fence` is checked right before the machine is stopped or removed.
    async fn destroy_fenced(&self, instance: &str, fence: &dyn Fence) -> Result<(), ProviderError>;
    /// [`destroy_fenced`](Self::destroy_fenced) for a caller that holds no
    /// controller term (an operator's `drover destroy`).
    async fn destroy(&self, instance: &str) -> Result<(), ProviderError> {
        self.destroy_fenced(instance, &Unfenced).await
    }
    /// Every machine carrying all of `tags`. A failure must be an error,
    /// never an empty list. A provider whose describes take long may answer
    /// from its newest listing (with its own changes since laid over it)
    /// while it lists again: a pass plans on that.
    async fn describe(
        &self,
        tags: &BTreeMap<String, String>,
    ) -> Result<Vec<Instance>, ProviderError>;
    /// [`describe`](Self::describe) from a listing asked for now: for a
    /// look a decision must rest on as the provider has it at this moment
    /// (a new term's first, ownership checked right before a destroy, an
    /// operator's command). The default: `describe`.
    async fn describe_fresh(
        &self,
        tags: &BTreeMap<String, String>,
    ) -> Result<Vec<Instance>, ProviderError> {
        self.describe(tags).await
    }
    /// Adds or changes tags on a machine; `fence` is checked right before
    /// they are written.
    async fn label(
        &self,
        instance: &str,
        labels: &BTreeMap<String, String>,
        fence: &dyn Fence,
    ) -> Result<(), ProviderError>;
    /// Every machine carrying all of `tags` (a fresh describe), its engine
    /// asked now, each within a bound and all at once: what the quorum
    /// verdict and `drover recover` judge by. A failed listing is an error,
    /// never "no machine". The default, for a provider whose machines'
    /// engines this process cannot reach: each machine listed, silent
    /// ([`EngineReport::unreachable`]).
    async fn ask_engines(
        &self,
        tags: &BTreeMap<String, String>,
    ) -> Result<Vec<EngineReport>, ProviderError> {
        let listed = self.describe_fresh(tags).await?;
        Ok(listed.into_iter().map(EngineReport::unreachable).collect())
    }
    /// Machine `instance`'s engine as a docker endpoint this process can
    /// reach, if this provider has one: where `recover` acts on its
    /// survivor. The default: none.
    fn engine_endpoint(&self, instance: &str) -> Option<String> {
        let _ = instance;
        None
    }
    /// The tail of machine `instance`'s boot log (its boot script's or
    /// cloud-init's output, its console): where a machine that never joins
    /// says why. At most [`drover_core::boot::TAIL_LINES`] lines within
    /// [`drover_core::boot::TAIL_BYTES`], redacted before it is returned
    /// ([`BootLog::tail`] does both): the text leaves the adapter only so.
    /// `Ok(None)` where this provider offers none (the default).
    async fn boot_log(&self, instance: &str) -> Result<Option<BootLog>, ProviderError> {
        let _ = instance;
        Ok(None)
    }
    /// Whether machine `instance`'s engine, asked now within a bound,
    /// reports its swarm state as `error`: its join failed
    /// ([`JoinFailed`], redacted). `None` when it does not, or when this
    /// provider cannot reach its engines (the default): silence is never
    /// evidence of a failed join.
    async fn join_failed(&self, instance: &str) -> Option<JoinFailed> {
        let _ = instance;
        None
    }
    /// True when this provider can run an update on a machine it keeps
    /// ([`run_update`](Self::run_update)): what `update.strategy: in_place`
    /// needs. The default: it cannot.
    fn updates_in_place(&self) -> bool {
        false
    }
    /// Runs `run` on machine `instance` as root (its command, then the
    /// engine restarted unless the command restarted it:
    /// [`drover_core::in_place::systemd_script`] on machines that run
    /// systemd), within `run.timeout`, and reports how it ended: a command
    /// that failed or ran out of time is an `Ok` outcome saying so; an
    /// `Err` means the machine could not be asked (the step is tried
    /// again). `fence` is checked right before the run starts. The
    /// default: refused, as [`updates_in_place`](Self::updates_in_place)
    /// says.
    async fn run_update(
        &self,
        instance: &str,
        run: &UpdateRun,
        fence: &dyn Fence,
    ) -> Result<UpdateOutcome, ProviderError> {
        let _ = (run, fence);
        Err(ProviderError::Permanent(format!(
            "this provider cannot update machines in place ({instance})"
        )))
    }
    /// Looks at a machine drover did not create, named by a provider-specific
    /// `reference`, without changing anything (`drover adopt --dry-run`).
    async fn inspect_foreign(&self, reference: &str) -> Result<Foreign, ProviderError> {
        Err(ProviderError::Permanent(format!(
            "this provider cannot adopt machines ({reference})"
        )))
    }
    /// Takes a foreign machine under management: from now on it is an
    /// instance carrying `tags` (destroying it destroys the machine).
    /// Idempotent: adopting the same machine again returns the same id.
    async fn adopt(
        &self,
        reference: &str,
        tags: &BTreeMap<String, String>,
    ) -> Result<String, ProviderError> {
        let _ = tags;
        Err(ProviderError::Permanent(format!(
            "this provider cannot adopt machines ({reference})"
        )))
    }
}

/// Why a swarm call failed.
#[derive(Debug, thiserror::Error)]
pub enum ClusterError {
    /// Stale node version ("update out of sequence"): re-read and retry.
    #[error("update out of sequence: {0}")]
    OutOfSequence(String),
    /// The engine refused on a precondition (last manager, not demoted,
    /// would lose quorum); the engine's message is kept.
    #[error("refused by the engine: {0}")]
    Refused(String),
    /// The swarm has no leader.
    #[error("the swarm has no leader: {0}")]
    NoLeader(String),
    /// The engine could not be reached or timed out.
    #[error("engine unavailable: {0}")]
    Unavailable(String),
    /// The node does not exist (removing it again is success).
    #[error("no such node: {0}")]
    NotFound(String),
    /// Anything else the engine said.
    #[error("engine error: {0}")]
    Other(String),
    /// Nothing was sent: the caller's [`Fence`] refused right before it.
    #[error("not sent: {0}")]
    Fenced(#[from] LeaseExpired),
}

impl ClusterError {
    /// True when the same call may succeed later.
    pub fn is_transient(&self) -> bool {
        matches!(
            self,
            ClusterError::OutOfSequence(_)
                | ClusterError::NoLeader(_)
                | ClusterError::Unavailable(_)
        )
    }
}

/// What a new member needs to join: a token (secret) and a manager address.
#[derive(Debug, Clone)]
pub struct JoinMaterial {
    /// The join token for the role.
    pub token: Secret,
    /// A reachable manager's address (`host:port`), from the current leader.
    pub addr: String,
    /// The other reachable managers' addresses: a boot script tries them
    /// in turn when the join through `addr` fails (that manager cut off
    /// mid-join, say).
    pub others: Vec<String>,
}

/// The swarm, as the controller's engine sees it.
#[async_trait]
pub trait Cluster: Send + Sync {
    /// The node list, or why it could not be had (no leader, unavailable, absent).
    async fn observe(&self) -> SwarmView;
    /// The services and where their tasks run (for the roll's service
    /// budgets), or why they could not be had: never "none" on a failure.
    async fn services(&self) -> Services;
    /// Set a node's availability to drain. Every side-effect call here
    /// checks `fence` right before it sends its request (after re-reading
    /// the node, and again before each retry), and sends nothing when it
    /// refuses.
    async fn drain(&self, node: &str, fence: &dyn Fence) -> Result<(), ClusterError>;
    /// Demote a manager (through the leader).
    async fn demote(&self, node: &str, fence: &dyn Fence) -> Result<(), ClusterError>;
    /// Promote a worker to manager (an in-place update's manager, back).
    async fn promote(&self, node: &str, fence: &dyn Fence) -> Result<(), ClusterError>;
    /// Set a node's availability back to active (after its update).
    async fn activate(&self, node: &str, fence: &dyn Fence) -> Result<(), ClusterError>;
    /// The leader's own protocol: demote self, wait until out of the raft
    /// (seen from another manager), leave without force, retrying on the
    /// "participating as a manager" refusal. `fence` is checked before the
    /// demote only: once demoted, the protocol must finish with its leave.
    /// `left` is called (at most once) as soon as the engine is seen in no
    /// swarm while its leave call still runs: the engine's state turns
    /// inactive ~1 s before `swarm leave` returns (it cleans up after the
    /// node has left), and the next leader waits on that news. An adapter
    /// that cannot tell sooner never calls it (the return says the same).
    async fn demote_self_and_leave(
        &self,
        node: &str,
        fence: &dyn Fence,
        left: &(dyn Fn() + Send + Sync),
    ) -> Result<(), ClusterError>;
    /// `node rm`.
    async fn remove_node(
        &self,
        node: &str,
        force: bool,
        fence: &dyn Fence,
    ) -> Result<(), ClusterError>;
    /// Heals a ghost raft member (`drover_core::plan::Ghost`): a node that
    /// is a worker by spec and still a raft member with no manager behind
    /// it. A promote, then a demote, each on the node's spec as re-read just
    /// before it, so that swarmkit's role manager sees a manager asked to be
    /// a worker and removes the member (it ignores a node whose observed
    /// and desired roles agree). Nothing is sent unless the node is still a
    /// worker by spec in the raft; `fence` is checked before each update.
    /// The default: this adapter cannot.
    async fn heal_ghost(&self, node: &str, fence: &dyn Fence) -> Result<(), ClusterError> {
        let _ = fence;
        Err(ClusterError::Other(format!(
            "this swarm adapter cannot heal ghost raft member {node}"
        )))
    }
    /// Rotates `role`'s join token (`docker swarm join-token --rotate`):
    /// joined nodes are unaffected, and the old token stops working. Used
    /// once a token placed in readable user data has served
    /// ([`InstanceProvider::exposes_boot_env`]). `fence` is checked right
    /// before the update is sent. The default: this adapter cannot.
    async fn rotate_join_token(&self, role: Role, fence: &dyn Fence) -> Result<(), ClusterError> {
        let _ = fence;
        Err(ClusterError::Other(format!(
            "this swarm adapter cannot rotate the {} join token",
            role.as_str()
        )))
    }
    /// Join token for `role` and a reachable manager address. `None` when no
    /// swarm exists yet (the first manager initialises one).
    async fn join_material(&self, role: Role) -> Result<Option<JoinMaterial>, ClusterError>;
}
