//! The liveness oracle: every roll ends (docs/safety.md, "Liveness
//! contract"). Once the transient faults stop, and for the faults that
//! stay ([`Stuck`], and a ghost raft member), every group ends — converged,
//! or blocked with a reason that names the fault that really holds it, or
//! waiting behind a blocked group and saying so — within [`bound`] of the
//! faults' end; no slot is given more machines than `health.max_attempts`
//! per zone tried; and no join token placed in a machine's boot
//! environment is left valid once nothing awaits a join with it.
//!
//! Like the safety oracle it judges by the simulator's own state and by the
//! plan's typed reasons ([`Cause`]), never by a reason's text.

use crate::runner::RESYNC;
use drover_core::journal::Step;
use drover_core::model::Time;
use drover_core::plan::{BlockedCause, Cause, Phase, Plan, WaitingCause};
use drover_core::spec::ClusterSpec;
use std::time::Duration;

/// A fault that stays after the others stop: it holds one group for good,
/// and that group must end blocked saying so.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(tag = "kind", content = "group", rename_all = "snake_case")]
pub enum Stuck {
    /// Every provision call for the group fails (a provider refusing it).
    ProvisionFails(String),
    /// No new machine of the group ever joins (a broken boot script).
    NeverJoins(String),
    /// Every call of the group's hooks fails (an endpoint gone).
    HookFails(String),
    /// A service with a task on every member of the group and a budget
    /// no drain can meet (`drover.min-available` equal to its replicas):
    /// an operator's budget the group's roll can never satisfy.
    BudgetNever(String),
}

impl Stuck {
    /// The group it holds.
    pub fn group(&self) -> &str {
        match self {
            Stuck::ProvisionFails(g)
            | Stuck::NeverJoins(g)
            | Stuck::HookFails(g)
            | Stuck::BudgetNever(g) => g,
        }
    }

    /// The blocked reasons that name this fault: a refused provision uses
    /// the slot's attempts, or the provision step's `step_timeout` runs
    /// out first while it backs off; a machine that never joins uses the
    /// attempts too, or outlasts the wait for its health; a hook's failure
    /// is its own; so is a budget's (refused at once, or held past the
    /// group's `step_timeout`).
    pub fn true_causes(&self) -> &'static [BlockedCause] {
        use BlockedCause::{Budget, HookFailed, NeverJoined, SlotSpent, StepTimedOut};
        match self {
            Stuck::ProvisionFails(_) => &[SlotSpent, StepTimedOut(Step::Provision)],
            Stuck::NeverJoins(_) => &[NeverJoined, StepTimedOut(Step::AwaitHealthy)],
            Stuck::HookFails(_) => &[HookFailed],
            Stuck::BudgetNever(_) => &[Budget],
        }
    }
}

/// Steps one member's replacement takes at most, each within
/// `update.step_timeout`: pre-drain hook, drain or demote, leave, destroy,
/// node removal, post-join hook.
const STEPS_PER_MEMBER: u32 = 6;

/// How long after the faults stop every group must have ended, from the
/// spec alone:
///
/// ```text
/// bound = Σ over groups g of
///           slots(g) × ( max_attempts(g) × (startup_timeout(g) + RESYNC)
///                        + STEPS_PER_MEMBER × step_timeout(g) )
///         + the wait for the second opening of the earliest window, if any
///         + max_age(g), for a group that has one
///         + RESYNC
/// ```
///
/// where `slots(g)` is the larger of its sizes before and after, plus its
/// spare slots: groups roll one after another, each member's replacement
/// tries at most `max_attempts` machines, each waited for at most
/// `startup_timeout` (noticed within a resync), and each of its steps
/// takes at most `step_timeout`. A window may make a roll wait for its next
/// opening and, if one opening is too short, for the one after; a member
/// comes due by age at most `max_age` after the roll starts.
pub fn bound(before: &ClusterSpec, after: &ClusterSpec, wall_now: Time) -> Time {
    let ms = |d: Duration| d.as_millis() as Time;
    let mut total = RESYNC;
    for g in &after.groups {
        let size_before = before.group(&g.name).map_or(0, |b| b.allocation.size());
        let slots = (g.allocation.size().max(size_before) + g.spares.len()) as Time;
        let attempt = ms(g.health.startup_timeout) + RESYNC;
        let per_slot = Time::from(g.health.max_attempts) * attempt
            + Time::from(STEPS_PER_MEMBER) * ms(g.update.step_timeout);
        total += slots * per_slot + g.health.max_age.map_or(0, ms);
    }
    total + window_wait(after, wall_now)
}

/// The wait until the second opening of the earliest window after `now`.
fn window_wait(spec: &ClusterSpec, now: Time) -> Time {
    let now = now as i64;
    spec.groups
        .iter()
        .flat_map(|g| &g.update.windows)
        .filter_map(|w| w.next_start(now).and_then(|first| w.next_start(first)))
        .max()
        .map_or(0, |second| (second - now).max(0) as Time)
}

/// A group has ended in `plan`: converged, blocked, or waiting behind a
/// blocked group (whether it says so is judged by [`judge_end`]).
pub fn group_ended(plan: &Plan, group: &str) -> bool {
    let Some(st) = plan.groups.iter().find(|g| g.name == group) else {
        return true;
    };
    match st.phase {
        Phase::Converged | Phase::Blocked => true,
        _ => behind_blocked(plan, group).is_some(),
    }
}

/// The blocked group `group` waits behind, if it waits for one, and
/// whether its reason says that group is blocked.
fn behind_blocked<'a>(plan: &'a Plan, group: &str) -> Option<(&'a str, bool)> {
    let Some(Cause::Waiting(WaitingCause::GroupAhead {
        group: other,
        says_blocked,
    })) = plan.causes.get(group)
    else {
        return None;
    };
    plan.groups
        .iter()
        .find(|g| g.name == *other && g.phase == Phase::Blocked)
        .map(|g| (g.name.as_str(), *says_blocked))
}

/// Judges how a run ended: `plan` is its last plan, `stuck` the fault that
/// stayed. Each group converged, or blocked by a cause that names a fault
/// that stayed (a group no such fault holds may not block), or waits behind
/// a blocked group with a reason that says that group is blocked.
pub fn judge_end(plan: &Plan, stuck: Option<&Stuck>) -> Vec<String> {
    let mut wrong = Vec::new();
    for st in &plan.groups {
        let cause = plan.causes.get(&st.name);
        let reason = st.reason.as_deref().unwrap_or("");
        match st.phase {
            Phase::Converged => {}
            Phase::Blocked => {
                let allowed = stuck
                    .filter(|s| s.group() == st.name)
                    .map_or(&[][..], Stuck::true_causes);
                let named = matches!(cause, Some(Cause::Blocked(c)) if allowed.contains(c));
                if !named {
                    wrong.push(format!(
                        "{} blocked by {cause:?} ({reason}), not by the fault that stayed ({stuck:?})",
                        st.name
                    ));
                }
            }
            phase => match behind_blocked(plan, &st.name) {
                Some((_, true)) => {}
                Some((other, false)) => wrong.push(format!(
                    "{} waits behind blocked group {other} without saying it is blocked ({:?}: {reason})",
                    st.name, phase
                )),
                None => wrong.push(format!(
                    "{} never ended: {:?} by {cause:?} ({reason})",
                    st.name, phase
                )),
            },
        }
    }
    wrong
}
