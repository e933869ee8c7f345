//! The steps only an in-place update has (`update.strategy: in_place`),
//! each judged from the world: the leader's own demotion, the update on
//! the machine, the promotion back into the raft, the return to service.
//! The drain, the demotion of a follower, the wait out of the raft and
//! the watch are the roll's own (`steps.rs`).

use super::Action;
use super::blocked::Blocked;
use super::group::Planner;
use super::op::{Abandon, StepOf, StepState, StepWait, undisrupted};
use crate::in_place::{UpdateContext, run_for};
use crate::model::{Availability, NodeState};
use std::time::Duration;

impl<'a> Planner<'a> {
    /// DemoteSelf: the leader's own demotion (leadership moves on at once,
    /// swarm-facts), gated as its hand-over is; seen by the next leader,
    /// the former leader's demotion if it crashed before it.
    pub(super) fn demote_self<'o>(&mut self, s: StepOf<'_, 'o, 'a>) -> StepState<'o>
    where
        'a: 'o,
    {
        let (op, step, node) = (s.op, s.step, s.node);
        let Some(n) = node.filter(|n| n.manager_role) else {
            return StepState::Done;
        };
        if !self.facts.world.is_self(s.vlink()) {
            return self.demote_former_leader(op, step, n);
        }
        if let Some(why) = self.leader_goes_last(op, step, n) {
            return why;
        }
        match self.healthy_manager_gate(Some(&op.id), Some(n), self.floor_of(op)) {
            Some(no) if undisrupted(op, step) => {
                StepState::Abandon(Abandon::SelfDemotionUnsafe(no))
            }
            Some(no) => StepState::Wait(StepWait::SelfDemotion { no }),
            None => StepState::Act(Action::DemoteSelf {
                op: op.id.clone(),
                node: n.id.clone(),
            }),
        }
    }

    /// Update: done once the machine carries the group's config (the
    /// controller tags it so when the update succeeded); a failure
    /// recorded for this config blocks the group, nothing else touched.
    /// A machine no longer listed is the heal's (its slot is empty).
    pub(super) fn update<'o>(&mut self, s: StepOf<'_, 'o, 'a>) -> StepState<'o>
    where
        'a: 'o,
    {
        let (op, d) = (s.op, s.view.d);
        let Some(inst) = s.victim_inst else {
            return StepState::Done;
        };
        if inst.current() {
            return StepState::Done;
        }
        if let Some(wait) = self.not_out_of_service(&s) {
            return wait;
        }
        if let Some(failed) = op.update_failure.as_ref().filter(|f| f.config == d.hash) {
            if self.facts.input.desired.replace.contains(&inst.id) {
                return StepState::Abandon(Abandon::ReplaceRequested {
                    instance: inst.id.clone(),
                });
            }
            return StepState::Fail(Blocked::UpdateFailed {
                instance: inst.id.clone(),
                op: op.id.clone(),
                summary: failed.summary.clone(),
            });
        }
        let Some(spec) = &d.spec.update.in_place else {
            // The group no longer updates in place: its roll replaces the
            // member once this operation ends.
            return StepState::Done;
        };
        let ctx = UpdateContext {
            cluster_id: self.facts.input.desired.cluster_id.clone(),
            group: d.spec.name.clone(),
            role: d.spec.role.as_str().to_string(),
            instance: inst.id.clone(),
            logical_id: inst.logical_id().unwrap_or_default().to_string(),
        };
        match run_for(spec, &ctx, format!("{}-{}", op.id, d.hash)) {
            Ok(run) => StepState::Act(Action::RunUpdate {
                op: op.id.clone(),
                instance: inst.id.clone(),
                config: d.hash.clone(),
                run: Box::new(run),
            }),
            Err(e) => StepState::Fail(Blocked::UpdateFailed {
                instance: inst.id.clone(),
                op: op.id.clone(),
                summary: format!("update.in_place.command does not render: {e}"),
            }),
        }
    }

    /// Promote: an updated manager's node back into the raft, once it is
    /// Ready, out of the raft (a member it still has is its engine's old
    /// manager state, a ghost once unreachable) and a member may be added:
    /// the same gate as a replacement's new manager (design rule 13: an
    /// update in place passes the gates a replacement does), raft facts
    /// only (rule 10): no other membership
    /// change under way, and the add gate, worst case (a voter that never
    /// catches up counts as one more unreachable member).
    ///
    /// Not held by manager trouble (another manager unhealthy, or a manager
    /// group not described). That used to deadlock: while this member is
    /// out of the raft, another manager becomes unreachable; the heal of
    /// that one waits for this operation (one manager operation at a time,
    /// `other_manager_op`), and this promotion waited for the heal (the
    /// unreachable member is trouble outside any operation), so the
    /// operation blocked at its step timeout while the raft stayed a voter
    /// short. The order that keeps every rule is promote first, then heal:
    /// - rule 1 forbids *disrupting* a healthy manager while another is
    ///   unreachable; a promotion disrupts nothing, it adds a voter back;
    /// - the worst case stays counted: five managers, this one out and one
    ///   unreachable, is 4 members with 3 reachable (fault tolerance 0);
    ///   promoted, 5 with 4 (1), and 5 with 3 (0) if it never catches up,
    ///   which is what `add_manager_gate` computes and refuses below 0;
    /// - one change at a time holds: the heal still waits for this
    ///   operation (it is in flight until the member is healthy and
    ///   active), and `membership_changing` holds the promotion while any
    ///   other member's membership is changing; the two never run at once;
    /// - the heal then removes the unreachable member, which raises fault
    ///   tolerance (rule 1, healing first among what may start).
    ///
    /// Where the add gate refuses (adding could cost the quorum: e.g. 4
    /// members, this one out and one unreachable, 3 with 2 reachable) the
    /// promotion waits, and the operation blocks at its step timeout,
    /// naming the refusal (docs/safety.md, "Updates in place").
    pub(super) fn promote<'o>(&mut self, s: StepOf<'_, 'o, 'a>) -> StepState<'o>
    where
        'a: 'o,
    {
        let (op, node) = (s.op, s.node);
        let Some(n) = node else {
            return StepState::Wait(StepWait::NodeBack {
                node: s.victim().and_then(|v| v.node.as_deref()).unwrap_or("?"),
            });
        };
        if n.manager_role {
            return StepState::Done;
        }
        if n.state != NodeState::Ready {
            return StepState::Wait(StepWait::NodeBack { node: &n.id });
        }
        if n.raft.is_some() {
            // A worker by spec with a raft member: its engine, restarted by
            // the update before its worker certificate came, rejoined the
            // raft with its old manager state. Promoted now, it would be
            // given that member's raft id back with an empty log (its
            // engine then panics at every start); it waits for the member
            // to go, healed when it is a ghost.
            let wait = StepWait::LeavingRaft { node: &n.id };
            return self.out_of_raft_or_heal(op, s.step, n, wait);
        }
        let gate = self
            .membership_changing(Some(&op.id), Some(n))
            .or_else(|| self.add_manager_gate());
        match gate {
            Some(no) => StepState::Wait(StepWait::Promote { node: &n.id, no }),
            None => StepState::Act(Action::Promote {
                op: op.id.clone(),
                node: n.id.clone(),
            }),
        }
    }

    /// Activate: the node takes tasks again.
    pub(super) fn activate<'o>(&mut self, s: StepOf<'_, 'o, 'a>) -> StepState<'o>
    where
        'a: 'o,
    {
        match s.node {
            Some(n) if n.availability != Availability::Active => StepState::Act(Action::Activate {
                op: s.op.id.clone(),
                node: n.id.clone(),
            }),
            _ => StepState::Done,
        }
    }
}

impl<'a> Planner<'a> {
    /// Why the update may not run yet, if it may not: the machine's node
    /// must be found, out of the raft (whatever its group says: a worker
    /// promoted by hand, an engine that lost drover's labels) and drained,
    /// or Down. The steps before it did that; this is judged again from
    /// the world, as a destroy is.
    fn not_out_of_service<'o>(&self, s: &StepOf<'_, 'o, 'a>) -> Option<StepState<'o>>
    where
        'a: 'o,
    {
        if s.op.role == crate::spec::Role::Plain {
            return None;
        }
        let Some(n) = s.node else {
            let id = s.victim_inst.map_or("?", |m| m.instance_id());
            return Some(
                self.out_of_raft_first(s.op, None, id)
                    .unwrap_or(StepState::Wait(StepWait::NodeBack {
                        node: s.victim().and_then(|v| v.node.as_deref()).unwrap_or("?"),
                    })),
            );
        };
        if n.in_raft() {
            return Some(StepState::Wait(StepWait::LeavingRaft { node: &n.id }));
        }
        (n.availability != Availability::Drain && n.state != NodeState::Down).then(|| {
            StepState::Wait(StepWait::Draining {
                node: &n.id,
                tasks: n.running_tasks,
            })
        })
    }
}

/// How long an operation's `step` may take: an update as long as its
/// provider waits for it ([`crate::in_place::wait_bound`]), on top of the
/// step timeout every step has.
pub(super) fn step_timeout(step: crate::journal::Step, d: &super::DesiredGroup) -> Duration {
    let base = d.spec.update.step_timeout;
    match (&d.spec.update.in_place, step) {
        (Some(u), crate::journal::Step::Update) => base + crate::in_place::wait_bound_of(u.timeout),
        _ => base,
    }
}
