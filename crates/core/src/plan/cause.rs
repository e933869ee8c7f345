//! Which reason holds a group, as a value a test oracle can match: the
//! variant of the group's `Blocked` or `Waiting` reason, without the
//! texts. Read-only: the planner decides nothing by it; the simulator's
//! liveness oracle checks by it that a group that ends blocked (or waits
//! for ever) names the fault that really holds it (docs/safety.md,
//! "Liveness contract").

use super::blocked::Blocked;
use super::refusal::Refusal;
use super::waiting::{OpWait, Stuck as WaitingBehind, Waiting};
use crate::journal::Step;

/// The reason a group is blocked or waits, by kind.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Cause {
    /// The group is blocked.
    Blocked(BlockedCause),
    /// The group waits.
    Waiting(WaitingCause),
}

/// The kinds of `Blocked`: each variant is the like-named one there; a
/// step that timed out is kept (which step it was names the cause).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BlockedCause {
    SharedLink,
    ManagerLocked,
    Meltdown,
    NeverJoined,
    SlotSpent,
    HookFailed,
    UpdateFailed,
    DrainTimedOut,
    Budget,
    Unmatched,
    Foreign,
    StepTimedOut(Step),
    RollbackFailed(Step),
}

/// The kinds of `Waiting`: each variant is the like-named one there; a gate's refusal is
/// kept whole, and so is the group waited on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WaitingCause {
    ZoneBusy,
    Member(Refusal),
    Manager(Refusal),
    InFlight,
    Budget,
    LeaderLast,
    Unlisted,
    HealAfterUnlisted,
    EmptySlot,
    EmptySpareSlot,
    NoLeaderToAdd,
    CannotAddManager(Refusal),
    CannotAddSpare(Refusal),
    /// Another group rolls first; `says_blocked`: the reason says that
    /// group is blocked (and why).
    GroupAhead {
        group: String,
        says_blocked: bool,
    },
    OverSize,
    Window,
    LastManager,
    Held,
    CannotHeal(Refusal),
    NotDownYet,
    InGrace,
    DeadManager(Refusal),
    /// An operation in flight waits.
    Op(OpCause),
}

/// The kinds of an operation's wait (`OpWait`): each variant is the like-named one there.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OpCause {
    Hold,
    Step,
    Undeclared,
    Undescribed,
    Unobserved,
}

impl Blocked {
    pub(crate) fn cause(&self) -> BlockedCause {
        match self {
            Blocked::SharedLink { .. } => BlockedCause::SharedLink,
            Blocked::ManagerLocked(_) => BlockedCause::ManagerLocked,
            Blocked::Meltdown { .. } => BlockedCause::Meltdown,
            Blocked::NeverJoined { .. } => BlockedCause::NeverJoined,
            Blocked::NeverJoinedSays { blocked, .. } => blocked.cause(),
            Blocked::SlotSpent { .. } => BlockedCause::SlotSpent,
            Blocked::HookFailed { .. } => BlockedCause::HookFailed,
            Blocked::UpdateFailed { .. } => BlockedCause::UpdateFailed,
            Blocked::DrainTimedOut { .. } => BlockedCause::DrainTimedOut,
            Blocked::Budget(_) => BlockedCause::Budget,
            Blocked::Unmatched(_) => BlockedCause::Unmatched,
            Blocked::Foreign(_) => BlockedCause::Foreign,
            Blocked::StepTimedOut(t) => BlockedCause::StepTimedOut(t.step),
            Blocked::RollbackFailed(t) => BlockedCause::RollbackFailed(t.step),
        }
    }
}

impl Waiting<'_> {
    pub(crate) fn cause(&self) -> WaitingCause {
        use WaitingCause as C;
        match self {
            Waiting::ZoneBusy(_) => C::ZoneBusy,
            Waiting::Member { no, .. } => C::Member(no.clone()),
            Waiting::Manager { no, .. } => C::Manager(no.clone()),
            Waiting::InFlight { .. } => C::InFlight,
            Waiting::Budget { .. } => C::Budget,
            Waiting::LeaderLast { .. } => C::LeaderLast,
            Waiting::Unlisted(_) => C::Unlisted,
            Waiting::HealAfterUnlisted { .. } => C::HealAfterUnlisted,
            Waiting::EmptySlot { .. } => C::EmptySlot,
            Waiting::EmptySpareSlot { .. } => C::EmptySpareSlot,
            Waiting::NoLeaderToAdd => C::NoLeaderToAdd,
            Waiting::CannotAddManager(no) => C::CannotAddManager(no.clone()),
            Waiting::CannotAddSpare(no) => C::CannotAddSpare(no.clone()),
            Waiting::GroupAhead { group, stuck } => C::GroupAhead {
                group: group.clone(),
                says_blocked: matches!(stuck, Some(WaitingBehind::Blocked(_))),
            },
            Waiting::OverSize(_) => C::OverSize,
            Waiting::Window(_) => C::Window,
            Waiting::LastManager { .. } => C::LastManager,
            Waiting::Held(_) => C::Held,
            Waiting::CannotHeal { no, .. } => C::CannotHeal(no.clone()),
            Waiting::NotDownYet(_) => C::NotDownYet,
            Waiting::InGrace(_) => C::InGrace,
            Waiting::DeadManager { no, .. } => C::DeadManager(no.clone()),
            Waiting::Op { why, .. } => C::Op(match why {
                OpWait::Hold(_) => OpCause::Hold,
                OpWait::Step(_) => OpCause::Step,
                OpWait::Undeclared => OpCause::Undeclared,
                OpWait::Undescribed(_) => OpCause::Undescribed,
                OpWait::Unobserved => OpCause::Unobserved,
            }),
        }
    }
}
