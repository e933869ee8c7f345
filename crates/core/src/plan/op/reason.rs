//! Why a step waits and why an operation steps aside, as values: the
//! walk decides on the variant; the text (a group's first reason, a timed
//! out step's quote, an abandonment's explanation) is rendered from the
//! data only when read. A pass has a waiting step in most operations in
//! flight and reads few of the reasons, so nothing is formatted ahead.

use super::super::refusal::{Quorum, Refusal};
use std::fmt;
use std::time::Duration;

/// Why a step of an operation in flight waits.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum StepWait<'x> {
    /// A provision needs a leader to take the member.
    NoLeaderToProvision,
    /// A slot backs off after a machine that never joined or a failed call.
    Backoff {
        backoff: Duration,
        attempt: u32,
        max: u32,
    },
    /// The new member is healthy and watched for `update.watch`.
    Watching {
        member: &'x str,
        so_far: Duration,
        watch: Duration,
    },
    /// The new member is unhealthy, not yet for `unhealthy_after`.
    NewUnhealthy { member: &'x str, why: &'static str },
    /// The new member has not joined, not yet for `startup_timeout`.
    Joining { member: &'x str },
    /// [`StepWait::Joining`], with the tail of its boot log.
    JoiningSays {
        member: &'x str,
        log: &'x crate::boot::BootLog,
    },
    /// Whether the new member joined cannot be told yet.
    JoinUnknown { member: &'x str },
    /// The node is draining.
    Draining { node: &'x str, tasks: u32 },
    /// The node's demotion waits on a gate.
    Demote { node: &'x str, no: Refusal },
    /// A manager found in the node's place waits on a gate to be demoted.
    ManagerDemote { node: &'x str, no: Refusal },
    /// The demoted node is still a raft member.
    LeavingRaft { node: &'x str },
    /// This controller's own demotion waits on a gate.
    SelfDemotion { no: Refusal },
    /// The former leader, no manager any more, is still a raft member.
    FormerLeaderInRaft { node: &'x str },
    /// The former leader's demotion waits on a gate.
    DemoteFormerLeader { node: &'x str, no: Refusal },
    /// The former leader's leave is not seen yet (believed after `bound`).
    FormerLeaderLeave { node: &'x str, bound: Duration },
    /// This controller's own machine is destroyed by the next leader.
    StandingDown,
    /// The machine is unlisted, not destroyed by the operation, and not
    /// yet for `bound`.
    Unlisted { instance: String, bound: Duration },
    /// The node to remove is still a manager.
    StillManager { node: &'x str },
    /// The updated node is not back (Ready) yet.
    NodeBack { node: &'x str },
    /// The updated node's promotion back into the raft waits on a gate.
    Promote { node: &'x str, no: Refusal },
    /// The node is a ghost raft member (`plan::ghost`) whose heal waits on
    /// a gate.
    GhostHeal { node: &'x str, no: Refusal },
    /// The node is a ghost raft member healed less than `every` ago:
    /// swarmkit removes the member within seconds of a heal.
    GhostHealed { node: &'x str, every: Duration },
}

impl fmt::Display for StepWait<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StepWait::NoLeaderToProvision => {
                f.write_str("waiting for the swarm to have a leader before provisioning")
            }
            StepWait::Backoff {
                backoff,
                attempt,
                max,
            } => write!(
                f,
                "backing off {} before attempt {attempt} of {max}",
                humantime::format_duration(*backoff)
            ),
            StepWait::Watching {
                member,
                so_far,
                watch,
            } => write!(
                f,
                "watching {member}: healthy for {}s of {}s",
                so_far.as_secs(),
                watch.as_secs()
            ),
            StepWait::NewUnhealthy { member, why } => {
                write!(f, "new member {member} is unhealthy: {why}")
            }
            StepWait::Joining { member } => write!(f, "waiting for {member} to join"),
            StepWait::JoiningSays { member, log } => write!(
                f,
                "waiting for {member} to join; its boot log ends: {}",
                log.last(crate::plan::REASON_LINES)
            ),
            StepWait::JoinUnknown { member } => {
                write!(f, "cannot tell yet whether {member} joined")
            }
            StepWait::Draining { node, tasks } => {
                write!(f, "node {node} draining: {tasks} tasks still running")
            }
            StepWait::Demote { node, no } => write!(f, "demote of {node} waits: {no}"),
            StepWait::ManagerDemote { node, no } => {
                write!(f, "node {node} is a manager: its demotion waits: {no}")
            }
            StepWait::LeavingRaft { node } => {
                write!(f, "waiting for node {node} to leave the raft")
            }
            StepWait::SelfDemotion { no } => write!(f, "self-demotion waits: {no}"),
            StepWait::FormerLeaderInRaft { node } => {
                write!(f, "waiting for former leader {node} to leave the raft")
            }
            StepWait::DemoteFormerLeader { node, no } => {
                write!(f, "demote of former leader {node} waits: {no}")
            }
            StepWait::FormerLeaderLeave { node, bound } => write!(
                f,
                "waiting (at most {}s) for former leader {node} to leave",
                bound.as_secs()
            ),
            StepWait::StandingDown => {
                f.write_str("standing down: the next leader destroys this machine")
            }
            StepWait::Unlisted { instance, bound } => write!(
                f,
                "{instance} is not listed but was not destroyed by this operation: gone only once unlisted for {}s (a describe can be partial)",
                bound.as_secs()
            ),
            StepWait::StillManager { node } => {
                write!(f, "node {node} is still a manager: demote first")
            }
            StepWait::NodeBack { .. }
            | StepWait::Promote { .. }
            | StepWait::GhostHeal { .. }
            | StepWait::GhostHealed { .. } => self.fmt_node_back(f),
        }
    }
}

impl StepWait<'_> {
    /// The waits on a node coming back: into service after its update,
    /// or out of the raft as a ghost.
    fn fmt_node_back(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StepWait::NodeBack { node } => {
                write!(f, "waiting for node {node} to be Ready after its update")
            }
            StepWait::Promote { node, no } => {
                write!(f, "promotion of {node} back into the raft waits: {no}")?;
                // The heal that refusal asks for waits for this operation
                // (one manager operation at a time): say what ends the wait.
                if matches!(no, Refusal::Quorum(Quorum::AddWhileUnreachable { .. })) {
                    write!(
                        f,
                        " (drover heals it only after this operation: bring it back, or demote it by hand with `docker node demote`, and the promotion goes on)"
                    )?;
                }
                Ok(())
            }
            StepWait::GhostHeal { node, no } => write!(
                f,
                "node {node} is a ghost raft member (a worker by spec, unreachable, no manager behind it): its heal waits: {no}"
            ),
            StepWait::GhostHealed { node, every } => write!(
                f,
                "node {node} is a ghost raft member, healed: waiting for swarmkit to remove it (healed again after {}s)",
                every.as_secs()
            ),
            _ => Ok(()),
        }
    }
}

/// Why an operation steps aside before it disrupted anything.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Abandon {
    /// A provision's manager may not be added now: the slot goes back to
    /// the fill stage.
    CannotAddManager(Refusal),
    /// A surge's new member is not a healthy manager.
    SurgeMemberUnready { op: String },
    /// The victim's demotion is no longer safe.
    DemotionUnsafe { node: String, no: Refusal },
    /// This controller's own demotion is no longer safe.
    SelfDemotionUnsafe(Refusal),
    /// The former leader's demotion is no longer safe.
    FormerLeaderUnsafe { node: String, no: Refusal },
    /// The victim leads and another raft member is to be rolled first.
    LeaderGoesLast { node: String, other: String },
    /// An operator asked to replace the machine whose in-place update
    /// failed: the update ends here and the roll replaces the machine.
    ReplaceRequested { instance: String },
}

impl fmt::Display for Abandon {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Abandon::CannotAddManager(no) => write!(f, "{no}"),
            Abandon::SurgeMemberUnready { op } => write!(
                f,
                "the surge member of {op} is not a healthy manager: the old one stays"
            ),
            Abandon::DemotionUnsafe { node, no } => {
                write!(f, "demotion of {node} no longer safe: {no}")
            }
            Abandon::SelfDemotionUnsafe(no) => write!(f, "self-demotion no longer safe: {no}"),
            Abandon::FormerLeaderUnsafe { node, no } => {
                write!(f, "demotion of former leader {node} no longer safe: {no}")
            }
            Abandon::ReplaceRequested { instance } => write!(
                f,
                "its update failed and an operator asked to replace {instance}: a new machine takes its place"
            ),
            Abandon::LeaderGoesLast { node, other } => write!(
                f,
                "node {node} leads and {other} is not current and healthy yet: the leader goes last"
            ),
        }
    }
}

#[cfg(test)]
mod tests;
