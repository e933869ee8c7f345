//! Why a group waits, as a value: the stage that holds a group back says
//! so with a variant carrying its data; the text `plan` and `status` show
//! is rendered from it when the pass is summarised. A group keeps its
//! first reason; no decision reads one back.

use super::blocked::Blocked;
use super::budget;
use super::calendar::WindowClosed;
use super::refusal::Refusal;
use crate::journal::Operation;
use crate::model::{Node, NodeState};
use std::fmt;
use std::time::Duration;

/// Why the group another waits behind does not move: an operator acts on
/// it, and the waiting group says so with its own reason.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Stuck {
    /// It is blocked, for this reason.
    Blocked(Blocked),
    /// An operator paused it.
    Paused,
}

/// Why a group waits.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Waiting<'a> {
    /// Another zone is being disrupted.
    ZoneBusy(String),
    /// A member may not be disrupted now.
    Member { member: String, no: Refusal },
    /// A manager may not be disrupted now.
    Manager { member: String, no: Refusal },
    /// As many disruptions are in flight as the rollout allows.
    InFlight {
        in_flight: usize,
        /// Counted against the canaries (else `update.max_in_flight`).
        canaries: bool,
        limit: usize,
    },
    /// A member's services' budgets hold it.
    Budget { member: String, why: budget::Wait },
    /// The leader goes last and `other` is not current and healthy.
    LeaderLast { other: String },
    /// A node no listed machine carries holds additions.
    Unlisted(Unlisted),
    /// A member's heal waits on such a node.
    HealAfterUnlisted { member: String, node: Unlisted },
    /// A pet's slot has not read empty for `bound`.
    EmptySlot { slot: String, bound: Duration },
    /// A spare slot has not read empty for `bound`.
    EmptySpareSlot { slot: String, bound: Duration },
    /// Members are added only through a leader.
    NoLeaderToAdd,
    /// A manager may not be added now.
    CannotAddManager(Refusal),
    /// The temporary manager may not be added now.
    CannotAddSpare(Refusal),
    /// Another group rolls first; `stuck` says why it does not move, when
    /// it is blocked or paused (filled when the pass is summarised, so a
    /// group ahead in any order is seen): the waiting group says so,
    /// never only "waiting".
    GroupAhead { group: String, stuck: Option<Stuck> },
    /// Over the declared size: the excess is retired first.
    OverSize(usize),
    /// Every maintenance window is closed.
    Window(WindowClosed<'a>),
    /// The swarm's last manager is removed from outside it.
    LastManager { member: String, group: String },
    /// Members an operator holds are not current and healthy.
    Held(Vec<String>),
    /// A member's heal may not begin now.
    CannotHeal { member: String, no: Refusal },
    /// A node with no machine is not Down yet.
    NotDownYet(String),
    /// A node with no machine is in its grace period.
    InGrace(String),
    /// A dead manager's removal may not begin now.
    DeadManager { node: String, no: Refusal },
    /// An operation in flight waits.
    Op { op: String, why: OpWait },
}

impl Waiting<'_> {
    /// `op` waits: `why`.
    pub(crate) fn op(op: &Operation, why: OpWait) -> Waiting<'static> {
        Waiting::Op {
            op: op.id.clone(),
            why,
        }
    }
}

/// Why an operation in flight waits.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum OpWait {
    /// A step is held by the services' budgets.
    Hold(budget::Wait),
    /// A step waits: its reason, rendered when quoted (a step's reason
    /// borrows from the pass and is read for one group only).
    Step(String),
    /// Its group is no longer declared.
    Undeclared,
    /// Its group cannot be described.
    Undescribed(String),
    /// The swarm cannot be observed, so no step on a member is judged.
    Unobserved,
}

impl OpWait {
    fn fmt(&self, op: &str, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            OpWait::Hold(why) => write!(f, "{op}: {why}"),
            OpWait::Step(why) => write!(f, "{op}: {why}"),
            OpWait::Undeclared => {
                write!(f, "operation {op} belongs to a group no longer declared")
            }
            OpWait::Undescribed(error) => {
                write!(f, "operation {op} waits: provider describe failed: {error}")
            }
            OpWait::Unobserved => write!(f, "operation {op} waits: the swarm cannot be observed"),
        }
    }
}

/// A node that may be a member of the group and that no listed machine
/// carries (live, or for pets Down and not yet reaped).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Unlisted {
    node: String,
    link: Option<String>,
    down: bool,
}

impl Unlisted {
    pub(crate) fn of(n: &Node) -> Unlisted {
        Unlisted {
            node: n.id.clone(),
            link: n.link.clone(),
            down: n.state == NodeState::Down,
        }
    }
}

impl fmt::Display for Unlisted {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let id = &self.node;
        match &self.link {
            Some(link) if self.down => write!(
                f,
                "node {id} (link {link}) is Down and no listed machine carries its link: its stopped machine may have been left out of the describe, so no pet is added until that node is matched or reaped"
            ),
            Some(link) => write!(
                f,
                "node {id} (link {link}) is live but no listed machine carries its link: the describe may be incomplete, so no machine is added until that node is matched or Down"
            ),
            None => write!(
                f,
                "raft member {id} carries no drover.link label (its engine lost drover's labels?): it may be the member of the empty slot, so no manager is added until its labels are back or it is demoted (docker node demote {id}; a dead cattle member also once it is Down)"
            ),
        }
    }
}

impl Waiting<'_> {
    /// The group this one waits behind, blocked or paused, if it does.
    pub(crate) fn behind_stuck(&self) -> Option<&str> {
        match self {
            Waiting::GroupAhead {
                group,
                stuck: Some(_),
            } => Some(group),
            _ => None,
        }
    }
}

impl fmt::Display for Waiting<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Waiting::ZoneBusy(zone) => {
                write!(f, "zone {zone} is being disrupted: one zone at a time")
            }
            Waiting::Member { member, no } => write!(f, "{member} waits: {no}"),
            Waiting::Manager { member, no } => write!(f, "manager {member} waits: {no}"),
            Waiting::InFlight {
                in_flight,
                canaries,
                limit,
            } => {
                let what = if *canaries {
                    "canaries"
                } else {
                    "max_in_flight"
                };
                write!(f, "{in_flight} in flight ({what} = {limit})")
            }
            Waiting::Budget { member, why } => write!(f, "{member} waits: {why}"),
            Waiting::LeaderLast { other } => write!(
                f,
                "the leader goes last: other managers are not all current yet ({other} is not current and healthy)"
            ),
            Waiting::Unlisted(n) => write!(f, "{n}"),
            Waiting::HealAfterUnlisted { member, node } => {
                write!(f, "cannot heal {member} yet: {node}")
            }
            Waiting::EmptySlot { slot, bound } => write!(
                f,
                "slot {slot} reads empty: filled once it has for {}s (a describe can be partial)",
                bound.as_secs()
            ),
            Waiting::EmptySpareSlot { slot, bound } => write!(
                f,
                "spare slot {slot} reads empty: the temporary manager is added once it has for {}s (a describe can be partial)",
                bound.as_secs()
            ),
            Waiting::NoLeaderToAdd => {
                f.write_str("waiting for the swarm to have a leader before adding members")
            }
            Waiting::CannotAddManager(no) => write!(f, "cannot add a manager: {no}"),
            Waiting::CannotAddSpare(no) => write!(f, "cannot add the temporary manager: {no}"),
            Waiting::GroupAhead { group, stuck } => {
                write!(
                    f,
                    "waiting for group {group} to finish its rollout (groups roll one after another, managers first)"
                )?;
                match stuck {
                    Some(Stuck::Blocked(why)) => write!(f, "; {group} is blocked: {why}"),
                    Some(Stuck::Paused) => write!(f, "; {group} is paused by an operator"),
                    None => Ok(()),
                }
            }
            Waiting::OverSize(n) => write!(
                f,
                "{n} member(s) over the declared size: retired before the roll adds another"
            ),
            Waiting::Window(w) => write!(f, "{w}"),
            Waiting::LastManager { member, group } => write!(
                f,
                "{member} is the swarm's last manager: `drover destroy {group}` removes it from outside the swarm"
            ),
            Waiting::Held(ids) => write!(f, "held by an operator: {}", ids.join(", ")),
            Waiting::CannotHeal { member, no } => write!(f, "cannot heal {member}: {no}"),
            Waiting::NotDownYet(node) => write!(
                f,
                "node {node} has no machine; it is removed once it has been Down for the grace period"
            ),
            Waiting::InGrace(node) => write!(
                f,
                "node {node} is Down and no machine carries its link: removed once its grace period ends"
            ),
            Waiting::DeadManager { node, no } => {
                write!(f, "dead manager node {node} waits: {no}")
            }
            Waiting::Op { op, why } => why.fmt(op, f),
        }
    }
}

#[cfg(test)]
mod tests;
