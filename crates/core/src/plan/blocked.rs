//! Why a group is blocked, as a value: an operator must act before the
//! group moves again. The reason is the variant; the status text is
//! rendered from its data when the pass is summarised.

use super::refusal::Refusal;
use crate::journal::Step;
use crate::spec::{HookPoint, MaxUnhealthy};
use std::fmt;
use std::time::Duration;

/// Why a group is blocked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Blocked {
    /// Two machines carry one link: any node step could hit the wrong one.
    SharedLink {
        /// The machine listed first.
        first: String,
        /// The other.
        second: String,
        /// The link both carry.
        link: String,
    },
    /// A manager waits for its unlock key (autolock).
    ManagerLocked(String),
    /// More members are down at once than `health.max_unhealthy` allows.
    Meltdown {
        /// Unhealthy plus lost.
        down: usize,
        /// The machines there are (or the size, if more).
        base: usize,
        /// Judged unhealthy.
        unhealthy: usize,
        /// Declared slots whose machine is lost.
        lost: usize,
        /// The policy.
        policy: MaxUnhealthy,
        /// What it allows at `base`.
        limit: usize,
    },
    /// Machines for one slot kept never joining (`health.max_attempts`).
    NeverJoined {
        /// The attempt the last machine was.
        attempt: u32,
        /// `health.max_attempts`.
        max: u32,
        /// `health.startup_timeout`.
        startup_timeout: Duration,
        /// The last machine, kept for diagnosis.
        last: String,
    },
    /// [`Blocked::NeverJoined`], with what the last machine itself says
    /// (its boot log's last lines, or its engine's failed join).
    NeverJoinedSays {
        /// The block.
        blocked: Box<Blocked>,
        /// What the machine says, redacted.
        why: String,
    },
    /// A slot's provision calls used up its attempts.
    SlotSpent {
        /// The operation filling the slot.
        op: String,
        /// `health.max_attempts`.
        max: u32,
        /// Failed provision calls.
        failures: u32,
    },
    /// A blocking hook failed.
    HookFailed {
        /// Where it is called.
        point: HookPoint,
        /// The operation.
        op: String,
        /// How often it failed.
        attempts: u32,
        /// What it answered.
        message: String,
        /// When it is called again.
        retry: Duration,
    },
    /// An in-place update failed on a member's machine (its command's
    /// status and last lines): not run again for this config.
    UpdateFailed {
        /// The machine, left out of service.
        instance: String,
        /// The operation.
        op: String,
        /// How it ended ([`crate::in_place::UpdateOutcome::summary`]).
        summary: String,
    },
    /// A drain timed out with `drain.on_timeout: block`.
    DrainTimedOut {
        /// The node.
        node: String,
        /// Tasks still running on it.
        tasks: u32,
    },
    /// A service budget can never be met.
    Budget(super::budget::Block),
    /// A victim may be an unmatched raft member.
    Unmatched(Refusal),
    /// A victim no longer carries this cluster's and group's tags.
    Foreign(String),
    /// A step exceeded `step_timeout` (and the group does not roll back).
    StepTimedOut(TimedOut),
    /// A rollback's step exceeded `step_timeout`: a rollback is never rolled back.
    RollbackFailed(TimedOut),
}

/// A step that exceeded `update.step_timeout`, and what it waited on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct TimedOut {
    /// The step.
    pub(crate) step: Step,
    /// The operation.
    pub(crate) op: String,
    /// `update.step_timeout`.
    pub(crate) timeout: Duration,
    /// Why the step was still waiting.
    pub(crate) why: String,
}

impl fmt::Display for TimedOut {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "step {} of {} exceeded step_timeout ({}): {}",
            self.step.as_str(),
            self.op,
            humantime::format_duration(self.timeout),
            self.why
        )
    }
}

impl fmt::Display for Blocked {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Blocked::SharedLink {
                first,
                second,
                link,
            } => write!(
                f,
                "instances {first} and {second} carry the same link {link}: destroy the one that should not exist; drover will not guess"
            ),
            Blocked::ManagerLocked(node) => write!(
                f,
                "manager node {node} is locked (autolock): unlock it with `docker swarm unlock` on that machine"
            ),
            Blocked::Meltdown {
                down,
                base,
                unhealthy,
                lost,
                policy,
                limit,
            } => write!(
                f,
                "meltdown guard: {down} of {base} members are down at once ({unhealthy} unhealthy, {lost} machines lost), more than health.max_unhealthy = {policy} allows ({limit}): nothing is replaced or reaped. Bring the machines back, or raise max_unhealthy to let drover replace them"
            ),
            Blocked::NeverJoined {
                attempt,
                max,
                startup_timeout,
                last,
            } => write!(
                f,
                "{attempt} machines in a row never joined within startup_timeout ({}) or stopped before joining (health.max_attempts = {max}); the last one, {last}, is kept for diagnosis: fix the boot script or the instance properties and apply, or destroy it to try again",
                humantime::format_duration(*startup_timeout)
            ),
            Blocked::NeverJoinedSays { blocked, why } => write!(f, "{blocked}; {why}"),
            Blocked::SlotSpent { op, max, failures } => write!(
                f,
                "the slot of {op} used its {max} attempts (health.max_attempts): {failures} failed provision calls (see `drover events`); fix the cause and apply, or raise max_attempts"
            ),
            Blocked::HookFailed {
                point,
                op,
                attempts,
                message,
                retry,
            } => write!(
                f,
                "hook {} of {op} failed ({attempts} time(s)): {message}; called again within {}s",
                point.as_str(),
                retry.as_secs()
            ),
            Blocked::UpdateFailed {
                instance,
                op,
                summary,
            } => write!(
                f,
                "the in-place update of {instance} ({op}) failed: {summary}; the machine is left out of service and nothing else is touched: fix update.in_place and apply (it runs again), or `drover replace {instance}`"
            ),
            Blocked::DrainTimedOut { node, tasks } => write!(
                f,
                "drain of node {node} timed out with {tasks} tasks still running (drain.on_timeout: block)"
            ),
            Blocked::Budget(why) => write!(f, "{why}"),
            Blocked::Unmatched(no) => write!(f, "{no}"),
            Blocked::Foreign(id) => write!(
                f,
                "instance {id} no longer carries this cluster's and group's tags: not destroying it"
            ),
            Blocked::StepTimedOut(t) => write!(f, "{t}"),
            Blocked::RollbackFailed(t) => {
                write!(f, "rollback failed (a rollback is never rolled back): {t}")
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{Blocked, TimedOut};
    use crate::journal::Step;
    use std::time::Duration;

    /// The texts status shows for a blocked group are rendered from the
    /// reason's data exactly as the planner wrote them.
    #[test]
    fn messages_are_rendered_from_the_data() {
        let t = TimedOut {
            step: Step::Drain,
            op: "w-1".into(),
            timeout: Duration::from_secs(600),
            why: "node n1 draining: 2 tasks still running".into(),
        };
        assert_eq!(
            Blocked::StepTimedOut(t.clone()).to_string(),
            "step drain of w-1 exceeded step_timeout (10m): node n1 draining: 2 tasks still running"
        );
        assert_eq!(
            Blocked::RollbackFailed(t).to_string(),
            "rollback failed (a rollback is never rolled back): step drain of w-1 exceeded step_timeout (10m): node n1 draining: 2 tasks still running"
        );
        assert_eq!(
            Blocked::SlotSpent {
                op: "w-1".into(),
                max: 3,
                failures: 2
            }
            .to_string(),
            "the slot of w-1 used its 3 attempts (health.max_attempts): 2 failed provision calls (see `drover events`); fix the cause and apply, or raise max_attempts"
        );
        assert_eq!(
            Blocked::NeverJoined {
                attempt: 3,
                max: 3,
                startup_timeout: Duration::from_secs(300),
                last: "i-9".into()
            }
            .to_string(),
            "3 machines in a row never joined within startup_timeout (5m) or stopped before joining (health.max_attempts = 3); the last one, i-9, is kept for diagnosis: fix the boot script or the instance properties and apply, or destroy it to try again"
        );
    }
}
