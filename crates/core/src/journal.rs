//! The operation journal: write-ahead records of multi-step operations.
//!
//! An [`Operation`] is written to the store *before* its first side effect.
//! Its steps are derived from what it is (role, strategy, whether the victim
//! is the controller's own machine), and the planner decides each step's
//! completion from the world first: a step already done (a node already
//! demoted, an instance already gone) is detected, never re-done blindly.
//! `done` marks are an optimisation and an audit trail, not the truth.

use crate::spec::{HookPoint, Hooks, Role};
use serde::{Deserialize, Serialize};
use std::collections::BTreeSet;

/// Why an operation exists.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OpKind {
    /// Fill an empty slot.
    Provision,
    /// Replace an outdated member (rolling update).
    Roll,
    /// Replace a lost, unhealthy or never-joined member.
    Heal,
    /// Remove a member without replacement (scale-in, undeclared logical id).
    Retire,
    /// Remove a dead node whose machine is gone (demoted first if a manager).
    RemoveDead,
    /// Destroy a machine of a group no longer declared (an orphan).
    Orphan,
}

/// The garbage-collection rule behind an operation (docs/gc.md).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum GcRule {
    /// A swarm node Down for the grace period that no machine carries.
    DeadNode,
    /// A machine whose node did not appear within `startup_timeout`.
    NeverJoined,
    /// A machine tagged for a group this cluster no longer declares.
    Orphan,
}

impl GcRule {
    /// The rule's name in events, status and `drover gc`.
    pub fn as_str(self) -> &'static str {
        match self {
            GcRule::DeadNode => "dead-node",
            GcRule::NeverJoined => "never-joined",
            GcRule::Orphan => "orphan",
        }
    }
}

/// Why an operation collects something: the rule and what was observed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Collection {
    /// The rule.
    pub rule: GcRule,
    /// The instance or node collected.
    pub item: String,
    /// What the controller saw that satisfies the rule.
    pub evidence: String,
}

/// One step of an operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Step {
    /// Create the new machine (tagged with the op id as its link).
    Provision,
    /// Wait until the new member is healthy for `watch`.
    AwaitHealthy,
    /// Worker: availability drain, wait for its tasks to move.
    Drain,
    /// Manager (not self): demote through the leader.
    Demote,
    /// Wait until the demoted node is out of the raft membership.
    AwaitOutOfRaft,
    /// The leader itself: demote self, wait out of raft, leave, stand down.
    /// The next leader infers from the world that it happened.
    DemoteSelfAndLeave,
    /// Destroy the old machine.
    Destroy,
    /// Remove the old node from the swarm.
    RemoveNode,
    /// The group's `hooks.pre_drain`, before the first step that takes the
    /// member out of service. Hook steps are in the walk only while the
    /// group declares the hook ([`Operation::steps_with_hooks`]), and only
    /// the journal can say one ran.
    PreDrainHook,
    /// `hooks.pre_destroy`, before the destroy.
    PreDestroyHook,
    /// `hooks.post_provision`, once the new machine is listed.
    PostProvisionHook,
    /// `hooks.post_join`, once the new member is healthy.
    PostJoinHook,
    /// `hooks.on_abort`, once an operation whose pre hook was called
    /// steps aside (never in the walk: [`Operation::aborting`]).
    OnAbortHook,
    /// In place, the leader itself: demote self (leadership moves on in
    /// ~0.1 s) and stand down; the next leader carries the operation on.
    DemoteSelf,
    /// In place: run the group's update on the member's machine, then tag
    /// the machine with the config it now has.
    Update,
    /// In place, a manager: promote the node back into the raft.
    Promote,
    /// In place: make the node's availability active again.
    Activate,
}

impl Step {
    /// Lowercase name for output.
    pub fn as_str(self) -> &'static str {
        match self {
            Step::Provision => "provision",
            Step::AwaitHealthy => "await-healthy",
            Step::Drain => "drain",
            Step::Demote => "demote",
            Step::AwaitOutOfRaft => "await-out-of-raft",
            Step::DemoteSelfAndLeave => "demote-self-and-leave",
            Step::Destroy => "destroy",
            Step::RemoveNode => "remove-node",
            Step::PreDrainHook => "hook-pre-drain",
            Step::PreDestroyHook => "hook-pre-destroy",
            Step::PostProvisionHook => "hook-post-provision",
            Step::PostJoinHook => "hook-post-join",
            Step::OnAbortHook => "hook-on-abort",
            Step::DemoteSelf => "demote-self",
            Step::Update => "update",
            Step::Promote => "promote",
            Step::Activate => "activate",
        }
    }

    /// The hook this step runs, if it is a hook step.
    pub fn hook(self) -> Option<HookPoint> {
        match self {
            Step::PreDrainHook => Some(HookPoint::PreDrain),
            Step::PreDestroyHook => Some(HookPoint::PreDestroy),
            Step::PostProvisionHook => Some(HookPoint::PostProvision),
            Step::PostJoinHook => Some(HookPoint::PostJoin),
            Step::OnAbortHook => Some(HookPoint::OnAbort),
            _ => None,
        }
    }

    /// True for a step that takes the member out of service (before
    /// which `pre_drain` runs).
    pub fn takes_out_of_service(self) -> bool {
        matches!(
            self,
            Step::Drain | Step::Demote | Step::DemoteSelfAndLeave | Step::DemoteSelf
        )
    }

    /// True for an in-place operation's steps before its update: the ones
    /// that take the member out of service.
    pub fn before_update(self) -> bool {
        self.takes_out_of_service() || matches!(self, Step::AwaitOutOfRaft | Step::PreDrainHook)
    }

    /// The step that runs the hook at `point`.
    pub fn of_hook(point: HookPoint) -> Step {
        match point {
            HookPoint::PreDrain => Step::PreDrainHook,
            HookPoint::PreDestroy => Step::PreDestroyHook,
            HookPoint::PostProvision => Step::PostProvisionHook,
            HookPoint::PostJoin => Step::PostJoinHook,
            HookPoint::OnAbort => Step::OnAbortHook,
        }
    }
}

/// The member an operation removes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Victim {
    /// Provider instance id (`None` for a dead node whose machine is gone).
    pub instance: Option<String>,
    /// Its link token.
    pub link: Option<String>,
    /// Its swarm node id when the op was written.
    pub node: Option<String>,
    /// Its logical id.
    pub logical_id: Option<String>,
    /// Its zone.
    pub zone: Option<String>,
    /// It was the controller's own machine (and the leader) when written.
    pub is_self: bool,
}

/// Where an operation's new member goes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Target {
    /// The slot's logical id.
    pub logical_id: Option<String>,
    /// The slot's zone.
    pub zone: Option<String>,
    /// Which machine for this slot this is (1 = the first). A machine that
    /// never joined is replaced by attempt + 1, up to `health.max_attempts`;
    /// the number travels on the machine as the `drover.attempt` tag, so it
    /// survives leader changes without any store state.
    #[serde(default = "first_attempt")]
    pub attempt: u32,
}

fn first_attempt() -> u32 {
    1
}

/// A journaled multi-step operation.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Operation {
    /// Unique id; also the new member's link and provision token, so a
    /// machine created just before a crash is found by describe, not re-made.
    pub id: String,
    /// Group it belongs to.
    pub group: String,
    /// Why it exists.
    pub kind: OpKind,
    /// The group's role.
    pub role: Role,
    /// Member removed, if any.
    pub victim: Option<Victim>,
    /// Member added, if any.
    pub target: Option<Target>,
    /// True when the new member is added before the old one is removed.
    pub surge: bool,
    /// Steps recorded done (an audit trail; the world is the truth).
    pub done: BTreeSet<Step>,
    /// The side effect last started, if any (absent in records of older
    /// builds).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub intent: Option<Intent>,
    /// Set when the operation is garbage collection: rule and evidence.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub collection: Option<Collection>,
    /// Failed provision calls of this operation so far (recorded by the
    /// controller): they use the slot's `health.max_attempts` budget too.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub provision_failures: u32,
    /// Zones whose provider refused this operation's provision for lack
    /// of capacity, oldest first (recorded by the controller with the
    /// failure): its next provision goes to another of the group's zones
    /// (`plan::zones`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub short_zones: Vec<String>,
    /// The last failure of a blocking hook of this operation (recorded by
    /// the controller): the group's reason until the hook succeeds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hook_failure: Option<HookFailed>,
    /// The member is updated where it is (`strategy: in_place`): its
    /// machine is the victim and stays; there is no new member.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub in_place: bool,
    /// The in-place update that failed on this operation's machine
    /// (recorded by the controller): the group's reason, and not run
    /// again for the same config.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub update_failure: Option<UpdateFailed>,
}

/// An in-place update's failure, as recorded.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct UpdateFailed {
    /// The config hash the update was to bring the machine to: a new spec
    /// (another hash) runs the update again.
    pub config: String,
    /// How it ended and its output's last lines, redacted
    /// ([`crate::in_place::UpdateOutcome::summary`]).
    pub summary: String,
}

/// A blocking hook's failure, as recorded.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HookFailed {
    /// The hook's step.
    pub step: Step,
    /// The hook's own message (its output's end, or the endpoint's answer).
    pub message: String,
    /// Failed calls of this hook so far (each waits out its own retry).
    pub attempts: u32,
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

/// A side effect a controller is about to start: written to the journal,
/// fenced by the controller's epoch, *just before* the side effect starts, so
/// a deposed controller's intent is refused and it never starts it. The next
/// leader treats the last intent as maybe-done: the planner judges every step
/// from the world (never from `done` or `intent`), so a step that happened is
/// seen as done and one that did not is started again; every side effect is
/// idempotent (provision on the link, destroy of a gone instance, demote of a
/// worker, ...).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Intent {
    /// The step.
    pub step: Step,
    /// The epoch of the controller that started it.
    pub epoch: u64,
}

impl Operation {
    /// Records a failed provision call: it uses the slot's attempt budget,
    /// and a refusal for lack of capacity in `short_zone` moves the next
    /// call to another zone. The one record the controller and the
    /// simulator both write.
    ///
    /// The call is known to have ended, so its intent no longer stands for
    /// a machine that may exist: an operation whose every provision call
    /// failed holds no join token back from its rotation
    /// ([`crate::join_token::awaiting`]) while it waits for its next call,
    /// parked or blocked, however long. (A failed call that made a machine
    /// after all is found by the describe on its link; if the rotated
    /// token keeps it out, it never joins and is healed as such, within
    /// `startup_timeout`: a bounded delay, where the held token was a
    /// valid secret left readable without bound.)
    pub fn provision_failed(&mut self, short_zone: Option<&str>) {
        self.provision_failures += 1;
        if self
            .intent
            .as_ref()
            .is_some_and(|i| i.step == Step::Provision)
        {
            self.intent = None;
        }
        if let Some(z) = short_zone
            && self.short_zones.last().map(String::as_str) != Some(z)
        {
            self.short_zones.push(z.to_string());
        }
    }

    /// This operation's own record says `step`'s side effect was started:
    /// the step is recorded done, or the intent reached it or a later step.
    pub fn reached(&self, step: Step) -> bool {
        let steps = self.steps();
        let at = |s: Step| steps.iter().position(|x| *x == s);
        // A hook step's intent stands where its hook runs: a post hook
        // at the step it follows, a pre hook just before the step it
        // precedes (`steps_with_hooks`).
        let stands = |s: Step| match s.hook() {
            None => at(s),
            Some(HookPoint::PostProvision) => at(Step::Provision),
            Some(HookPoint::PostJoin) => at(Step::AwaitHealthy),
            Some(HookPoint::PreDestroy) => at(Step::Destroy)?.checked_sub(1),
            Some(HookPoint::PreDrain) => steps
                .iter()
                .position(|x| x.takes_out_of_service())?
                .checked_sub(1),
            // Called only once the operation stepped aside: in no walk.
            Some(HookPoint::OnAbort) => None,
        };
        self.done.contains(&step)
            || at(step)
                .is_some_and(|k| self.intent.as_ref().and_then(|i| stands(i.step)) >= Some(k))
    }

    /// The steps, in order.
    pub fn steps(&self) -> Vec<Step> {
        if self.in_place {
            return self.steps_in_place().to_vec();
        }
        let add = [Step::Provision, Step::AwaitHealthy];
        let remove: &[Step] = match (&self.victim, self.role) {
            (None, _) => &[],
            (Some(_), Role::Plain) => &[Step::Destroy],
            (Some(_), _) if self.kind == OpKind::Orphan => &[Step::Destroy, Step::RemoveNode],
            (Some(_), Role::Worker) => &[Step::Drain, Step::Destroy, Step::RemoveNode],
            (Some(v), Role::Manager) if v.is_self => {
                &[Step::DemoteSelfAndLeave, Step::Destroy, Step::RemoveNode]
            }
            (Some(_), Role::Manager) => &[
                Step::Demote,
                Step::AwaitOutOfRaft,
                Step::Destroy,
                Step::RemoveNode,
            ],
        };
        match (self.target.is_some(), self.surge) {
            (false, _) => remove.to_vec(),
            (true, true) => add.iter().chain(remove).copied().collect(),
            (true, false) => remove.iter().chain(&add).copied().collect(),
        }
    }

    /// An in-place update's steps: out of service (a manager demoted and
    /// out of the raft; drained), updated, back (a manager promoted),
    /// healthy for `watch`, active: Docker's order for an engine upgrade.
    fn steps_in_place(&self) -> &'static [Step] {
        match (self.role, self.victim.as_ref().is_some_and(|v| v.is_self)) {
            (Role::Plain, _) => &[Step::Update, Step::AwaitHealthy],
            (Role::Worker, _) => &[
                Step::Drain,
                Step::Update,
                Step::AwaitHealthy,
                Step::Activate,
            ],
            // Out of the raft first (a demotion that is not safe steps
            // aside with nothing disrupted), then drained.
            (Role::Manager, leader) => {
                if leader {
                    &[
                        Step::DemoteSelf,
                        Step::AwaitOutOfRaft,
                        Step::Drain,
                        Step::Update,
                        Step::Promote,
                        Step::AwaitHealthy,
                        Step::Activate,
                    ]
                } else {
                    &[
                        Step::Demote,
                        Step::AwaitOutOfRaft,
                        Step::Drain,
                        Step::Update,
                        Step::Promote,
                        Step::AwaitHealthy,
                        Step::Activate,
                    ]
                }
            }
        }
    }

    /// [`Self::steps`] with the hook steps of the hooks `hooks` declares,
    /// each before or after the step it belongs to. Only an operator's
    /// change runs hooks (a roll, a retirement, a fill): a heal, a dead
    /// node's removal and an orphan's collection run none, so that no
    /// hook ever delays the repair of a broken member.
    pub fn steps_with_hooks(&self, hooks: &Hooks) -> Vec<Step> {
        let steps = self.steps();
        if hooks.is_empty() || !self.is_voluntary() && self.kind != OpKind::Provision {
            return steps;
        }
        let has = |p: HookPoint| hooks.at(p).is_some();
        let mut out = Vec::with_capacity(steps.len() + 4);
        let mut out_of_service = false;
        for s in steps {
            let takes_out = s.takes_out_of_service();
            if takes_out && !out_of_service && has(HookPoint::PreDrain) {
                out.push(Step::PreDrainHook);
            }
            out_of_service |= takes_out;
            if s == Step::Destroy && has(HookPoint::PreDestroy) {
                out.push(Step::PreDestroyHook);
            }
            out.push(s);
            if s == Step::Provision && has(HookPoint::PostProvision) {
                out.push(Step::PostProvisionHook);
            }
            if s == Step::AwaitHealthy && has(HookPoint::PostJoin) {
                out.push(Step::PostJoinHook);
            }
        }
        out
    }

    /// True for a roll or a retirement: an operator's change that takes a
    /// working member away (service budgets and `pre_*` hooks apply).
    pub fn is_voluntary(&self) -> bool {
        matches!(self.kind, OpKind::Roll | OpKind::Retire)
    }

    /// True once a step that takes the victim's tasks away has started
    /// (by its intent) or been seen done; hook steps in between overwrite
    /// the intent, so the done marks are read too.
    pub fn began_disrupting(&self) -> bool {
        let takes = |s: &Step| {
            s.takes_out_of_service() || matches!(s, Step::Destroy | Step::RemoveNode | Step::Update)
        };
        self.victim.is_some()
            && (self.intent.as_ref().is_some_and(|i| takes(&i.step)) || self.done.iter().any(takes))
    }

    /// A pre hook (`pre_drain`, `pre_destroy`) was called for this
    /// operation, or may have been (its intent): the outside world may
    /// have been told the member goes.
    pub fn told_pre_hook(&self) -> bool {
        let pre = |s: &Step| matches!(s, Step::PreDrainHook | Step::PreDestroyHook);
        self.done.iter().any(pre) || self.intent.as_ref().is_some_and(|i| pre(&i.step))
    }

    /// The operation stepped aside and its `on_abort` hook was called (or
    /// may have been, or failed): it only ends, after that hook.
    pub fn aborting(&self) -> bool {
        let abort = Step::OnAbortHook;
        self.done.contains(&abort)
            || self.intent.as_ref().is_some_and(|i| i.step == abort)
            || self.hook_failure.as_ref().is_some_and(|f| f.step == abort)
    }

    /// True when the operation disrupts a member (as opposed to only adding one).
    pub fn is_disruptive(&self) -> bool {
        self.victim.is_some()
    }
}
