//! Advancing an operation in flight: find its first step the world does not
//! show as done, and act, wait, or fail on it.

use super::Action;
use super::blocked::{Blocked, TimedOut};
use super::group::Planner;
use super::memory::Timer;
use super::view::{Member, View};
use super::waiting::{OpWait, Waiting};
use crate::journal::{OpKind, Operation, Step, Victim};
use crate::model::{Node, NodeState};
use crate::spec::{OnFailure, Role};
use std::rc::Rc;
use std::time::Duration;

mod reason;

pub(crate) use reason::{Abandon, StepWait};

pub(super) enum StepState<'x> {
    Done,
    Act(Action),
    Wait(StepWait<'x>),
    /// Waiting on a gate with its own deadline (a service budget): not
    /// timed by `step_timeout` here, so it never turns into a rollback.
    Hold(super::budget::Wait),
    Fail(Blocked),
    /// Nothing was disrupted yet and the op no longer makes sense: drop it.
    Abandon(Abandon),
}

/// What an operation works on, looked up once for all its steps: its
/// victim's node and instance, and the member it made.
#[derive(Clone, Copy)]
struct Subjects<'a> {
    node: Option<&'a Node>,
    victim: Option<Member<'a>>,
    replacement: Option<Member<'a>>,
}

/// One step of an operation and what it works on: what each step's
/// judgement (`steps.rs`) reads.
#[derive(Clone, Copy)]
pub(super) struct StepOf<'v, 'o, 'a> {
    pub(super) op: &'o Operation,
    pub(super) step: Step,
    /// Its group's view (the group's declaration, its machines).
    pub(super) view: &'v View<'a>,
    /// The victim's node, if it has one.
    pub(super) node: Option<&'a Node>,
    /// The victim's machine, if listed.
    pub(super) victim_inst: Option<Member<'a>>,
    /// The machine the operation provisioned, if listed.
    pub(super) replacement: Option<Member<'a>>,
}

impl<'o> StepOf<'_, 'o, '_> {
    /// The operation's victim, if it has one.
    pub(super) fn victim(&self) -> Option<&'o Victim> {
        self.op.victim.as_ref()
    }

    /// The victim's link.
    pub(super) fn vlink(&self) -> Option<&'o str> {
        self.victim().and_then(|v| v.link.as_deref())
    }
}

impl<'a> Planner<'a> {
    /// Emits the next action of `op`, in `slot` of the operations in
    /// flight (or waits, blocks, completes it).
    pub(crate) fn advance(&mut self, op: &Operation, slot: usize) {
        if op.kind == OpKind::Orphan {
            return self.advance_orphan(op, slot);
        }
        let Some(view) = self.judgeable_view(op) else {
            return;
        };
        // What the op works on, looked up once for all its steps.
        let victim = op.victim.as_ref();
        let node = victim.and_then(|v| {
            self.facts
                .world
                .victim_node(v.link.as_deref(), v.node.as_deref())
        });
        let found = self.found(slot, op, &view);
        let subjects = Subjects {
            node,
            victim: view.member(found.victim).copied(),
            replacement: view.member(found.replacement).copied(),
        };
        if op.aborting() {
            return self.abandon(op, slot, &view, &subjects, None);
        }
        for step in op.steps_with_hooks(&view.d.spec.hooks) {
            let step_timeout = super::in_place::step_timeout(step, view.d);
            let state = self.step_state(op, step, &view, &subjects);
            let key = || Timer::Step(op.id.clone(), step);
            match state {
                StepState::Done => {
                    if !op.done.contains(&step) {
                        self.out.actions.push(Action::MarkDone {
                            op: op.id.clone(),
                            step,
                        });
                    }
                    continue;
                }
                StepState::Fail(why) => self.block(&op.group, why),
                StepState::Abandon(why) => {
                    let why = why.to_string();
                    self.abandon(op, slot, &view, &subjects, Some(why));
                }
                StepState::Act(action) => {
                    if self.clock.elapsed(key(), step_timeout) {
                        self.step_failed(op, step, "its action kept failing".into());
                    }
                    if op.role == Role::Worker && matches!(action, Action::Demote { .. }) {
                        self.demoting.push(op.id.clone());
                    }
                    self.out.actions.push(action);
                }
                StepState::Hold(why) => {
                    if !self.out.waiting.contains_key(op.group.as_str()) {
                        self.wait(&op.group, Waiting::op(op, OpWait::Hold(why)));
                    }
                }
                StepState::Wait(why) => self.step_waits(op, step, why, step_timeout),
            }
            return;
        }
        self.out
            .explanation
            .push(format!("{}: operation {} complete", op.group, op.id));
        self.out
            .actions
            .push(Action::Complete { op: op.id.clone() });
        self.end_op(op, slot);
    }

    /// Ends `op`, which stepped aside (`why`, in the pass it did) with
    /// nothing disrupted. If its group's `pre_drain` or `pre_destroy` hook
    /// was called, the outside world was told the member goes: the
    /// group's `on_abort` hook is called first (issue 36), and from then
    /// on the operation only ends (`Operation::aborting`), whatever the
    /// world does meanwhile: the hook said it was aborted.
    fn abandon(
        &mut self,
        op: &Operation,
        slot: usize,
        view: &View<'a>,
        subjects: &Subjects<'a>,
        why: Option<String>,
    ) {
        if let Some(why) = &why {
            self.out.explanation.push(format!(
                "{}: operation {} abandoned: {why}",
                op.group, op.id
            ));
        }
        let owed = view.d.spec.hooks.on_abort.is_some() && (op.told_pre_hook() || op.aborting());
        if owed {
            match self.step_state(op, Step::OnAbortHook, view, subjects) {
                StepState::Act(call) => {
                    let told = "its pre hook was called: on_abort is called before it ends";
                    self.out
                        .explanation
                        .push(format!("{}: operation {}: {told}", op.group, op.id));
                    return self.out.actions.push(call);
                }
                StepState::Fail(why) => return self.block(&op.group, why),
                // Called (the controller recorded it), or no longer declared.
                _ => {}
            }
        }
        self.out
            .actions
            .push(Action::Complete { op: op.id.clone() });
        self.end_op(op, slot);
    }

    /// `step` of `op` waits (`why`): past `step_timeout` it failed; the
    /// group quotes it unless it waits on something else already. The
    /// reason is rendered only when one of them reads it.
    fn step_waits(&mut self, op: &Operation, step: Step, why: StepWait<'_>, timeout: Duration) {
        let timed_out = self
            .clock
            .elapsed(Timer::Step(op.id.clone(), step), timeout);
        let quoted = !self.out.waiting.contains_key(op.group.as_str());
        if !timed_out && !quoted {
            return;
        }
        let why = why.to_string();
        if timed_out {
            self.step_failed(op, step, why.clone());
        }
        if quoted {
            self.wait(&op.group, Waiting::op(op, OpWait::Step(why)));
        }
    }

    /// `op`'s group's view when its steps can be judged at all; otherwise
    /// the group waits, saying why, and `None`. Shared, so the steps read
    /// it while the planner acts.
    fn judgeable_view(&mut self, op: &Operation) -> Option<Rc<View<'a>>> {
        let Some(view) = self.view_rc(&op.group).cloned() else {
            self.wait(&op.group, Waiting::op(op, OpWait::Undeclared));
            return None;
        };
        if let Err(e) = &view.described {
            let why = OpWait::Undescribed(e.to_string());
            self.wait(&op.group, Waiting::op(op, why));
            return None;
        }
        if op.victim.is_some() && op.role != Role::Plain && !self.facts.world.swarm_ok() {
            // Without a node list no step on a member can be judged: "no
            // node seen" must never read as "already demoted or drained".
            self.wait(&op.group, Waiting::op(op, OpWait::Unobserved));
            return None;
        }
        Some(view)
    }

    fn step_failed(&mut self, op: &Operation, step: Step, why: String) {
        let Some(view) = self.view(&op.group) else {
            return;
        };
        let (policy, is_rollback) = (view.d.spec.update.on_failure, view.d.is_rollback);
        let reason = TimedOut {
            step,
            op: op.id.clone(),
            timeout: view.d.spec.update.step_timeout,
            why,
        };
        if policy == OnFailure::Rollback && !is_rollback && op.kind == OpKind::Roll {
            if self.out.rollback_requested.insert(op.group.clone()) {
                self.out.actions.push(Action::Rollback {
                    group: op.group.clone(),
                    reason: reason.to_string(),
                });
            }
        } else if is_rollback {
            self.block(&op.group, Blocked::RollbackFailed(reason));
        } else {
            self.block(&op.group, Blocked::StepTimedOut(reason));
        }
    }

    /// With surge, the old manager goes only once its successor is a healthy
    /// member: otherwise fault tolerance would drop during the replacement.
    /// Nothing was disrupted yet, so the op steps aside (healing or scale-in
    /// take care of the failed successor).
    pub(super) fn surge_member_unready(
        op: &Operation,
        replacement: Option<&Member<'_>>,
    ) -> Option<Abandon> {
        if !op.surge {
            return None;
        }
        let healthy = replacement.is_some_and(|i| i.healthy());
        (!healthy).then(|| Abandon::SurgeMemberUnready { op: op.id.clone() })
    }

    /// Where `step` of `op` stands, given what it works on.
    fn step_state<'o>(
        &mut self,
        op: &'o Operation,
        step: Step,
        view: &View<'a>,
        subjects: &Subjects<'a>,
    ) -> StepState<'o>
    where
        'a: 'o,
    {
        let Subjects {
            node,
            victim: victim_inst,
            replacement,
        } = *subjects;
        let s = StepOf {
            op,
            step,
            view,
            node,
            victim_inst,
            replacement,
        };
        if op.in_place && step.before_update() && s.victim_inst.is_some_and(|m| m.current()) {
            // Updated (the machine carries the group's config): the steps
            // that took it out of service did their part, and the node
            // back in service no longer reads as their world.
            return StepState::Done;
        }
        match step {
            Step::Provision => self.provision(s),
            Step::AwaitHealthy => self.await_healthy(s),
            Step::Drain => self.drain(s),
            Step::Demote => self.demote(s),
            Step::AwaitOutOfRaft => self.await_out_of_raft(s),
            Step::DemoteSelfAndLeave => self.demote_self_and_leave(s),
            Step::DemoteSelf => self.demote_self(s),
            Step::Update => self.update(s),
            Step::Promote => self.promote(s),
            Step::Activate => self.activate(s),
            Step::Destroy => self.destroy(s),
            Step::RemoveNode => self.remove_node(s),
            Step::PreDrainHook
            | Step::PreDestroyHook
            | Step::PostProvisionHook
            | Step::PostJoinHook
            | Step::OnAbortHook => self.hook(s),
        }
    }
}

impl<'a> Planner<'a> {
    /// What must happen before machine `id`, whose node is `node`, may be
    /// destroyed: no machine is destroyed while its node is a raft member
    /// (or may be one), whatever group declared it. A manager group's own
    /// steps demote first; this catches a worker promoted by hand (demoted
    /// here, through the manager gate) and a node that cannot be matched.
    pub(super) fn out_of_raft_first<'o>(
        &self,
        op: &'o Operation,
        node: Option<&'a Node>,
        id: &str,
    ) -> Option<StepState<'o>>
    where
        'a: 'o,
    {
        if op.role == Role::Plain {
            return None;
        }
        // No node, or one that may be an older incarnation under the
        // machine's link while the running engine, having lost drover's
        // labels, is an unmatched raft member: a manager machine's node out
        // of the raft (whatever its status: `unknown` after an election
        // proves nothing), or a worker machine's Down node. A worker's live
        // node out of the raft is the worker itself.
        let incarnation =
            |n: &Node| !n.in_raft() && (op.role == Role::Manager || n.state == NodeState::Down);
        let n = match node {
            Some(n) if !incarnation(n) => n,
            _ => {
                let link = op.victim.as_ref().and_then(|v| v.link.as_deref());
                return self
                    .unmatched_member(id, link)
                    .map(|no| StepState::Fail(Blocked::Unmatched(no)));
            }
        };
        if n.manager_role {
            return Some(
                match self.removal_gate(Some(n), Some(&op.id), self.floor_of(op)) {
                    Some(no) => StepState::Wait(StepWait::ManagerDemote { node: &n.id, no }),
                    None => StepState::Act(Action::Demote {
                        op: op.id.clone(),
                        node: n.id.clone(),
                    }),
                },
            );
        }
        n.raft.is_some().then(|| {
            let wait = StepWait::LeavingRaft { node: &n.id };
            self.out_of_raft_or_heal(op, Step::Destroy, n, wait)
        })
    }

    /// The leader's (or this controller's own) demotion, when another raft
    /// member still has to be rolled first (not current and healthy, asked
    /// to be replaced, held, or unmatched): leadership moved onto the victim
    /// after the op was written, or the other member's state changed since
    /// (an operator's replace request arrived). Nothing was disrupted yet
    /// and the leader goes last, so the op steps aside.
    pub(super) fn leader_goes_last<'o>(
        &self,
        op: &Operation,
        step: Step,
        n: &Node,
    ) -> Option<StepState<'o>> {
        // The journal's record, not the describe: a partial describe may
        // leave the leader's own machine out.
        let victim = op.victim.as_ref()?;
        let leads = n.raft.as_ref().is_some_and(|r| r.leader);
        if !(leads || self.facts.world.is_self(victim.link.as_deref())) || !undisrupted(op, step) {
            return None;
        }
        let other = self.manager_before_leader(victim.instance.as_deref().unwrap_or_default())?;
        Some(StepState::Abandon(Abandon::LeaderGoesLast {
            node: n.id.clone(),
            other,
        }))
    }
}

/// True when no step before `step` disrupted anything (only additions ran).
pub(super) fn undisrupted(op: &Operation, step: Step) -> bool {
    if op.in_place {
        // Its demotion comes first, and comes again when a new spec
        // arrives after the member was updated and promoted: its record
        // (intents, done marks) says whether it took the member out.
        return !op.began_disrupting();
    }
    op.steps()
        .iter()
        .take_while(|s| **s != step)
        .all(|s| matches!(s, Step::Provision | Step::AwaitHealthy))
}
