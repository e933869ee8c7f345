//! The planner: `plan(desired, observed, journal, memory, now) -> Plan`.
//!
//! A pure function in the raft-rs sense: the caller observes, the planner
//! decides, the caller acts. The [`Plan`] carries
//! - `actions`, in order: a [`Action::Begin`] (journal write) always precedes
//!   the first side effect of its operation, and the caller must stop at the
//!   first action that fails;
//! - per-group and swarm status with a human explanation;
//! - the new [`Memory`] (first sightings for every timer) and `wake_at`, the
//!   earliest moment a timer expires, so the controller sleeps exactly that
//!   long rather than polling.
//!
//! # Guarantees
//! Every safety rule of the design brief is enforced here: worst-case
//! manager fault tolerance, leader last and only through the self-demotion
//! protocol, `max_in_flight`, one zone at a time, ownership by cluster id and
//! group, no conclusions from failed observations.
//!
//! # Assumptions
//! The caller acts only while it leads (or is finishing the journaled
//! self-demotion of its own machine), executes each op's action at most once
//! at a time, and passes back the `memory` of its previous pass. Memory is
//! deliberately not persisted: a new leader starts every timer from its own
//! first sighting, never from another host's clock.

mod blocked;
mod boot;
mod budget;
mod calendar;
mod cause;
mod disrupt;
mod due;
mod facts;
mod fast;
mod gate;
mod gc;
mod ghost;
mod group;
mod health;
mod hook;
mod in_flight;
mod in_place;
mod leader;
pub(crate) mod lifetime;
mod members;
mod memory;
mod op;
mod parked;
mod refusal;
mod stage;
mod status;
mod steps;
#[cfg(test)]
mod tests;
mod view;
mod waiting;
mod world;
mod zones;

pub use boot::{BootAsk, REASON_LINES};
pub use calendar::Calendar;
pub use cause::{BlockedCause, Cause, OpCause, WaitingCause};
pub use gc::GarbageState;
pub use ghost::{GHOST_BOUND, Ghost, GhostEvidence};
pub use health::Health;
pub use members::{MemberStatus, member_status};
pub use memory::Memory;
pub use refusal::{Quorum, Refusal};
pub use stage::RollEntry;
pub use status::SwarmProblem;
pub use zones::ZONE_BACKOFF;

use crate::journal::{Operation, Step};
use crate::model::{Observed, Time};
use crate::spec::{GroupSpec, Hook, HookFacts, Role};
use serde::Serialize;

/// One group as the store holds it.
#[derive(Debug, Clone, PartialEq)]
pub struct DesiredGroup {
    /// The resolved spec.
    pub spec: GroupSpec,
    /// Its config hash.
    pub hash: String,
    /// Operator paused it: no new operations start.
    pub paused: bool,
    /// This spec is itself a rollback (a failed rollback blocks, never rolls back).
    pub is_rollback: bool,
}

/// What the operator declared, as committed to the store.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Desired {
    /// The cluster id made at bootstrap.
    pub cluster_id: String,
    /// The groups in declared order.
    pub groups: Vec<DesiredGroup>,
    /// `gc.orphan_grace`: how long a machine of an undeclared group is seen
    /// before it is destroyed.
    pub orphan_grace: std::time::Duration,
    /// Instance ids an operator holds (`drover hold`): never healed,
    /// retired or rolled while held; operations already in flight finish.
    pub held: std::collections::BTreeSet<String>,
    /// Instance ids an operator asked to replace (`drover replace`): rolled
    /// like outdated members, with the same safety rules.
    pub replace: std::collections::BTreeSet<String>,
    /// Instance ids whose removal skips the drain (`drover replace
    /// --skip-drain`): the Drain step counts as done at once.
    pub skip_drain: std::collections::BTreeSet<String>,
    /// Which controllers may act (`control:`): what a controller asks
    /// before it campaigns ([`crate::control::turn`]).
    pub control: crate::control::Control,
}

impl Desired {
    /// The fault tolerance a voluntary disruption of a manager must leave:
    /// the manager group's [`roll_floor`](crate::spec::GroupSpec::roll_floor)
    /// (0 without one).
    pub fn roll_floor(&self) -> i64 {
        self.groups
            .iter()
            .filter(|g| g.spec.role == Role::Manager)
            .map(|g| i64::from(g.spec.roll_floor()))
            .max()
            .unwrap_or(0)
    }

    /// An operator declared the roll's floor (`update.min_fault_tolerance`
    /// on a manager group): a refusal that quotes it names it.
    pub fn floor_declared(&self) -> bool {
        self.groups
            .iter()
            .any(|g| g.spec.role == Role::Manager && g.spec.update.min_fault_tolerance.is_some())
    }

    /// The planner's view of a committed spec: each group with its config
    /// hash, nothing paused, held or asked for (operator controls are the
    /// store's, applied by whoever read them).
    pub fn of_spec(cluster_id: &str, spec: &crate::spec::ClusterSpec) -> Desired {
        Desired {
            cluster_id: cluster_id.to_string(),
            groups: spec
                .groups
                .iter()
                .map(|g| DesiredGroup {
                    spec: g.clone(),
                    hash: crate::hash::config_hash(g),
                    paused: false,
                    is_rollback: false,
                })
                .collect(),
            orphan_grace: spec.gc.orphan_grace,
            control: spec.control,
            ..Desired::default()
        }
    }
}

/// Everything the planner looks at.
#[derive(Debug, Clone, Copy)]
pub struct PlanInput<'a> {
    /// Declared state.
    pub desired: &'a Desired,
    /// Observed state.
    pub observed: &'a Observed,
    /// Operations in flight.
    pub journal: &'a [Operation],
    /// Timer first-sightings from this controller's previous pass.
    pub memory: &'a Memory,
    /// This controller's clock, in ms.
    pub now: Time,
    /// Wall-clock time, ms since the Unix epoch: what maintenance windows
    /// and machine ages (`created_ms`) are read against. Kept apart from
    /// `now`, which only measures timers and may start anywhere (the
    /// controller's monotonic clock, the simulator's virtual one).
    pub wall_ms: Time,
    /// A fresh random number per pass, so operation ids never collide across
    /// controllers (the planner itself has no randomness).
    pub nonce: u64,
}

/// A concrete step for the shell to take.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "action", rename_all = "snake_case")]
pub enum Action {
    /// Write the operation to the journal (before any of its side effects).
    Begin {
        /// The operation.
        op: Box<Operation>,
    },
    /// Record that a step was observed complete.
    MarkDone {
        /// Operation id.
        op: String,
        /// The step.
        step: Step,
    },
    /// Remove a finished operation from the journal.
    Complete {
        /// Operation id.
        op: String,
    },
    /// Create a machine for `group` tagged with link `op`.
    Provision {
        /// Operation id (= link = provision token).
        op: String,
        /// Group name.
        group: String,
        /// Role.
        role: Role,
        /// Slot logical id.
        logical_id: Option<String>,
        /// Slot zone.
        zone: Option<String>,
        /// Config hash to tag.
        config: String,
        /// Which machine for the slot this is (tagged `drover.attempt` when > 1).
        attempt: u32,
    },
    /// Set a worker node's availability to drain.
    Drain {
        /// Operation id.
        op: String,
        /// Node id.
        node: String,
    },
    /// Demote a manager through the leader.
    Demote {
        /// Operation id.
        op: String,
        /// Node id.
        node: String,
    },
    /// The leader's own protocol: demote self, wait until out of the raft
    /// (seen from another manager), `swarm leave` without force (retrying on
    /// the "participating as a manager" refusal), stand down.
    DemoteSelfAndLeave {
        /// Operation id.
        op: String,
        /// The controller's own node id.
        node: String,
    },
    /// The leader's own demotion for its in-place update: leadership moves
    /// on and this controller stands down; the next leader carries on.
    DemoteSelf {
        /// Operation id.
        op: String,
        /// The controller's own node id.
        node: String,
    },
    /// Run the group's in-place update on a machine, then tag it with
    /// `config` (what it now is) when the update succeeded.
    RunUpdate {
        /// Operation id.
        op: String,
        /// Provider instance id.
        instance: String,
        /// The config hash the machine is tagged with after the update.
        config: String,
        /// The rendered command and its bound.
        run: Box<crate::in_place::UpdateRun>,
    },
    /// Promote an updated node back to manager.
    Promote {
        /// Operation id.
        op: String,
        /// Node id.
        node: String,
    },
    /// Set a node's availability back to active.
    Activate {
        /// Operation id.
        op: String,
        /// Node id.
        node: String,
    },
    /// Destroy a machine.
    Destroy {
        /// Operation id.
        op: String,
        /// Provider instance id.
        instance: String,
    },
    /// `node rm`.
    RemoveNode {
        /// Operation id.
        op: String,
        /// Node id.
        node: String,
        /// Needed for a node still Ready (its machine is already gone).
        force: bool,
    },
    /// Call a lifecycle hook (its command or endpoint).
    RunHook {
        /// Operation id.
        op: String,
        /// The hook's step.
        step: Step,
        /// What to call, for how long, and what a failure does (not in a
        /// plan's JSON: an endpoint's URL is the operator's to show).
        #[serde(skip)]
        hook: Box<Hook>,
        /// What the hook is told.
        facts: Box<HookFacts>,
    },
    /// Heal a ghost raft member (`plan::ghost`): a promote, then a demote,
    /// of its node, each update on the node's spec as re-read just before
    /// it, so that swarmkit's role manager removes the member.
    HealGhost {
        /// The operation whose step waits on the ghost, or `ghost-<node>`
        /// for a ghost no operation works on (no journal entry carries it).
        op: String,
        /// The step of `op` that waits on it (its intent is recorded again).
        step: Step,
        /// The ghost's node id.
        node: String,
    },
    /// Commit the group's previous spec as a rollback revision.
    Rollback {
        /// Group name.
        group: String,
        /// Why.
        reason: String,
    },
}

impl Action {
    /// Its kind, as the serialised action's tag spells it (`provision`,
    /// `demote_self_and_leave`, …): a metric label, an audit field.
    pub fn kind(&self) -> &'static str {
        match self {
            Action::Begin { .. } => "begin",
            Action::MarkDone { .. } => "mark_done",
            Action::Complete { .. } => "complete",
            Action::Provision { .. } => "provision",
            Action::Drain { .. } => "drain",
            Action::Demote { .. } => "demote",
            Action::DemoteSelfAndLeave { .. } => "demote_self_and_leave",
            Action::DemoteSelf { .. } => "demote_self",
            Action::RunUpdate { .. } => "run_update",
            Action::Promote { .. } => "promote",
            Action::Activate { .. } => "activate",
            Action::Destroy { .. } => "destroy",
            Action::RemoveNode { .. } => "remove_node",
            Action::RunHook { .. } => "run_hook",
            Action::HealGhost { .. } => "heal_ghost",
            Action::Rollback { .. } => "rollback",
        }
    }

    /// The operation the action belongs to, if any.
    pub fn op_id(&self) -> Option<&str> {
        match self {
            Action::Begin { op } => Some(&op.id),
            Action::MarkDone { op, .. }
            | Action::Complete { op }
            | Action::Provision { op, .. }
            | Action::Drain { op, .. }
            | Action::Demote { op, .. }
            | Action::DemoteSelfAndLeave { op, .. }
            | Action::DemoteSelf { op, .. }
            | Action::RunUpdate { op, .. }
            | Action::Promote { op, .. }
            | Action::Activate { op, .. }
            | Action::Destroy { op, .. }
            | Action::RemoveNode { op, .. }
            | Action::RunHook { op, .. }
            | Action::HealGhost { op, .. } => Some(op),
            Action::Rollback { .. } => None,
        }
    }

    /// The journal step a side effect performs.
    pub fn step(&self) -> Option<Step> {
        match self {
            Action::Provision { .. } => Some(Step::Provision),
            Action::Drain { .. } => Some(Step::Drain),
            Action::Demote { .. } => Some(Step::Demote),
            Action::DemoteSelfAndLeave { .. } => Some(Step::DemoteSelfAndLeave),
            Action::DemoteSelf { .. } => Some(Step::DemoteSelf),
            Action::RunUpdate { .. } => Some(Step::Update),
            Action::Promote { .. } => Some(Step::Promote),
            Action::Activate { .. } => Some(Step::Activate),
            Action::Destroy { .. } => Some(Step::Destroy),
            Action::RemoveNode { .. } => Some(Step::RemoveNode),
            Action::RunHook { step, .. } | Action::HealGhost { step, .. } => Some(*step),
            Action::Begin { .. }
            | Action::MarkDone { .. }
            | Action::Complete { .. }
            | Action::Rollback { .. } => None,
        }
    }

    /// True for actions that touch machines or the swarm (not only the store).
    pub fn is_side_effect(&self) -> bool {
        !matches!(
            self,
            Action::Begin { .. }
                | Action::MarkDone { .. }
                | Action::Complete { .. }
                | Action::Rollback { .. }
        )
    }

    /// One line for logs and plan output.
    pub fn describe(&self) -> String {
        match self {
            Action::Begin { op } => format!("begin {} {:?} in {}", op.id, op.kind, op.group),
            Action::MarkDone { op, step } => format!("{op}: {} done", step.as_str()),
            Action::Complete { op } => format!("{op}: complete"),
            Action::Provision {
                op,
                group,
                logical_id,
                zone,
                ..
            } => format!(
                "provision {group}{}{} (link {op})",
                logical_id
                    .as_ref()
                    .map(|l| format!(" {l}"))
                    .unwrap_or_default(),
                zone.as_ref()
                    .map(|z| format!(" in zone {z}"))
                    .unwrap_or_default()
            ),
            Action::Drain { node, .. } => format!("drain node {node}"),
            Action::Demote { node, .. } => format!("demote node {node}"),
            Action::DemoteSelfAndLeave { node, .. } => {
                format!("demote self ({node}), wait out of raft, leave, stand down")
            }
            Action::DemoteSelf { node, .. } => {
                format!("demote self ({node}) for its in-place update, stand down")
            }
            Action::RunUpdate {
                instance, config, ..
            } => format!("update instance {instance} in place (to config {config})"),
            Action::Promote { node, .. } => format!("promote node {node}"),
            Action::Activate { node, .. } => format!("activate node {node}"),
            Action::Destroy { instance, .. } => format!("destroy instance {instance}"),
            Action::RemoveNode { node, force, .. } => {
                format!("remove node {node}{}", if *force { " (force)" } else { "" })
            }
            Action::RunHook { facts, .. } => format!(
                "hook {} for {}",
                facts.hook.as_str(),
                facts
                    .instance
                    .as_deref()
                    .or(facts.node.as_deref())
                    .unwrap_or(&facts.operation)
            ),
            Action::HealGhost { node, .. } => format!(
                "heal ghost raft member {node} (a worker by spec, unreachable, no manager behind it): promote, then demote, so that swarmkit removes the member"
            ),
            Action::Rollback { group, reason } => format!("roll back {group}: {reason}"),
        }
    }
}

/// A group's phase.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Phase {
    /// At the declared shape, every member current and healthy.
    Converged,
    /// Rolling a new config through.
    Rolling,
    /// Replacing, adding or removing members.
    Changing,
    /// Waiting on something outside drover (a join, a leader, quorum).
    Waiting,
    /// Operator paused it.
    Paused,
    /// Stuck: an explicit reason says why.
    Blocked,
    /// The provider describe failed: nothing concluded.
    Unobservable,
}

impl Phase {
    /// Its name, as the status document spells it.
    pub fn as_str(self) -> &'static str {
        match self {
            Phase::Converged => "converged",
            Phase::Rolling => "rolling",
            Phase::Changing => "changing",
            Phase::Waiting => "waiting",
            Phase::Paused => "paused",
            Phase::Blocked => "blocked",
            Phase::Unobservable => "unobservable",
        }
    }
}

/// Status of one group after a planning pass.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct GroupStatus {
    /// Group name.
    pub name: String,
    /// Role.
    pub role: Role,
    /// Phase.
    pub phase: Phase,
    /// Why it is blocked, waiting or unobservable.
    pub reason: Option<String>,
    /// Desired config hash.
    pub desired_hash: String,
    /// Declared size.
    pub desired: usize,
    /// Members (not being removed).
    pub members: usize,
    /// Members on the desired config.
    pub current: usize,
    /// Members healthy.
    pub healthy: usize,
    /// Operations in flight.
    pub in_flight: usize,
    /// Its maintenance windows: open until when, or when next open.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub window: Option<String>,
    /// The group it waits behind (groups roll one after another) when
    /// that group is blocked or paused: `reason` gives both reasons.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub behind: Option<String>,
}

/// The swarm's manager health.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, serde::Deserialize, Default)]
pub struct SwarmStatus {
    /// Raft members.
    pub members: usize,
    /// Reachable raft members.
    pub reachable: usize,
    /// Reachable minus quorum, when known.
    pub fault_tolerance: Option<i64>,
    /// The leader's link, if it carries one.
    pub leader_link: Option<String>,
    /// Set when the swarm has no leader or could not be asked.
    pub problem: Option<SwarmProblem>,
    /// Ghost raft members (`plan::ghost`): workers by spec still in the
    /// raft, unreachable, with no manager behind them; each is healed.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ghosts: Vec<Ghost>,
}

/// The planner's output.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Plan {
    /// Actions in order.
    pub actions: Vec<Action>,
    /// Per-group status.
    pub groups: Vec<GroupStatus>,
    /// Manager quorum status.
    pub swarm: SwarmStatus,
    /// Why the planner did what it did, one line per decision.
    pub explanation: Vec<String>,
    /// Timer first-sightings to pass to the next pass.
    #[serde(skip)]
    pub memory: Memory,
    /// Earliest time a timer expires (ms), if any is running.
    pub wake_at: Option<Time>,
    /// Everything garbage collection found this pass, collected or not yet.
    pub garbage: Vec<Garbage>,
    /// Each blocked or waiting group's reason by kind (read-only: what the
    /// simulator's liveness oracle matches a fault's true cause against).
    #[serde(skip)]
    pub causes: std::collections::BTreeMap<String, Cause>,
    /// The operations whose machine can no longer join (provisioned, then
    /// stopped, or not joined within `startup_timeout`): they hold back no
    /// join token's rotation ([`crate::join_token::awaiting`], issue 36).
    #[serde(skip)]
    pub parked: std::collections::BTreeSet<String>,
    /// Machines not joined yet that the controller asks their provider
    /// about before the next pass (`Observed::boots`).
    pub boot_asks: Vec<BootAsk>,
}

/// One item garbage collection found (docs/gc.md), for `drover gc` and status.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Garbage {
    /// The group whose tags it carries.
    pub group: String,
    /// Rule, item and evidence.
    #[serde(flatten)]
    pub collection: crate::journal::Collection,
    /// `collecting` (an operation was begun or is in flight), or why not yet.
    pub state: GarbageState,
}

/// Decides the next safe steps. Pure and deterministic.
pub fn plan(input: PlanInput<'_>) -> Plan {
    let mut planner = group::Planner::new(input);
    planner.run();
    planner.finish()
}

/// Every member a roll of `input`'s desired state would take, in the order
/// it would take them (`drover plan`): the same rules as [`plan`]'s roll,
/// with each member's engine version as its node reports it.
pub fn rollout(input: PlanInput<'_>) -> Vec<RollEntry> {
    group::Planner::new(input).rollout()
}

/// Tags a new machine for `op` must carry (the shell adds provider-specific ones).
pub fn instance_tags(
    cluster_id: &str,
    action: &Action,
) -> std::collections::BTreeMap<String, String> {
    use crate::model::tags;
    let mut out = std::collections::BTreeMap::new();
    if let Action::Provision {
        op,
        group,
        logical_id,
        zone,
        config,
        attempt,
        ..
    } = action
    {
        if *attempt > 1 {
            out.insert(tags::ATTEMPT.into(), attempt.to_string());
        }
        out.insert(tags::CLUSTER.into(), cluster_id.into());
        out.insert(tags::GROUP.into(), group.clone());
        out.insert(tags::LINK.into(), op.clone());
        out.insert(tags::CONFIG.into(), config.clone());
        if let Some(l) = logical_id {
            out.insert(tags::LOGICAL_ID.into(), l.clone());
        }
        if let Some(z) = zone {
            out.insert(tags::ZONE.into(), z.clone());
        }
    }
    out
}
