//! Where each step of an operation stands: one function per step, each
//! judging its step from the world (never from what the journal says was
//! done), next to the rules that gate it.

use super::Action;
use super::DesiredGroup;
use super::blocked::Blocked;
use super::budget::Gate;
use super::group::Planner;
use super::health::Health;
use super::memory::Timer;
use super::memory::{LEAVE_BOUND, UNLISTED_BOUND};
use super::op::{Abandon, StepOf, StepState, StepWait, undisrupted};
use crate::journal::{Operation, Step};
use crate::model::{Availability, Node, NodeState};
use crate::spec::{OnDrainTimeout, Role};

impl<'a> Planner<'a> {
    /// Provision: done once the operation's machine is listed; otherwise its
    /// call, unless the swarm cannot take a member now (then the slot goes back
    /// to the fill stage) or the slot's attempt budget is spent.
    pub(super) fn provision<'o>(&mut self, s: StepOf<'_, 'o, 'a>) -> StepState<'o>
    where
        'a: 'o,
    {
        let (op, view, replacement) = (s.op, s.view, s.replacement);
        let d = view.d;
        if replacement.is_some() {
            return StepState::Done;
        }
        if op.role != Role::Plain
            && !self.facts.world.swarm_ok()
            && !matches!(
                self.facts.world.observed.swarm,
                crate::model::SwarmView::Absent
            )
        {
            return StepState::Wait(StepWait::NoLeaderToProvision);
        }
        let add_gate = (op.role == Role::Manager && self.facts.world.swarm_ok())
            .then(|| self.add_manager_gate());
        if let Some(Some(no)) = add_gate {
            // Only additions remain: hand the slot back to the
            // missing-slot logic so healing (which waits for no
            // manager op) can go first.
            return StepState::Abandon(Abandon::CannotAddManager(no));
        }
        let target = op.target.clone().unwrap_or(crate::journal::Target {
            logical_id: None,
            zone: None,
            attempt: 1,
        });
        let attempt = target.attempt + op.provision_failures;
        match self.provision_gate(d, op, attempt) {
            Err(why) => return StepState::Fail(why),
            Ok(Some(why)) => return StepState::Wait(why),
            Ok(None) => {}
        }
        let zone = self.placement(view, op, target.zone.as_deref());
        StepState::Act(Action::Provision {
            op: op.id.clone(),
            group: op.group.clone(),
            role: op.role,
            logical_id: target.logical_id,
            zone,
            config: d.hash.clone(),
            attempt,
        })
    }

    /// AwaitHealthy: the new member must stay healthy for `update.watch`;
    /// judged from its node, never from the journal.
    pub(super) fn await_healthy<'o>(&mut self, s: StepOf<'_, 'o, 'a>) -> StepState<'o>
    where
        'a: 'o,
    {
        let StepOf {
            op,
            view,
            replacement,
            ..
        } = s;
        let d = view.d;
        // A member updated in place that does not come back is left as it
        // is, its group blocked: it is no new machine for healing to
        // replace (the operator decides).
        let given_up = |why: &str| {
            if op.in_place {
                StepState::Fail(Blocked::UpdateFailed {
                    instance: replacement.map_or_else(String::new, |m| m.id.clone()),
                    op: op.id.clone(),
                    summary: format!("the update ran, but after it the member is {why}"),
                })
            } else {
                StepState::Done
            }
        };
        let Some(new) = replacement else {
            // Provisioned, then lost: the slot is judged afresh next pass.
            return StepState::Done;
        };
        if new.config() != Some(d.hash.as_str()) {
            // Superseded by a newer spec: the roll will replace it.
            return StepState::Done;
        }
        match new.health {
            Health::Healthy => {
                let watch = d.spec.update.watch;
                let timer = Timer::Healthy(new.id.clone());
                if self.clock.elapsed(timer.clone(), watch) {
                    StepState::Done
                } else {
                    StepState::Wait(StepWait::Watching {
                        member: new.instance_id(),
                        so_far: self.clock.running_for(&timer),
                        watch,
                    })
                }
            }
            // A new member that died, stayed unhealthy or never
            // joined is handed to healing (same timers, so it does
            // not wait twice); the op does not wait on it forever.
            Health::Unhealthy("machine not running") => given_up("not running"),
            Health::Unhealthy(why) => {
                let limit = d.spec.health.unhealthy_after;
                if self.clock.elapsed(Timer::Unhealthy(new.id.clone()), limit) {
                    given_up(why)
                } else {
                    StepState::Wait(StepWait::NewUnhealthy {
                        member: new.instance_id(),
                        why,
                    })
                }
            }
            // Its join failed (seen at once) or its startup_timeout ran
            // out since its creation: healing replaces it.
            // (An updated machine is no new one: its creation says nothing
            // of its node's return, which its step's timeout bounds.)
            Health::Pending
                if !op.in_place && self.join_over(&new, d.spec.health.startup_timeout) =>
            {
                StepState::Done
            }
            Health::Pending => match self.boot_log(new.instance_id()) {
                Some(log) => StepState::Wait(StepWait::JoiningSays {
                    member: new.instance_id(),
                    log,
                }),
                None => StepState::Wait(StepWait::Joining {
                    member: new.instance_id(),
                }),
            },
            Health::Unknown => StepState::Wait(StepWait::JoinUnknown {
                member: new.instance_id(),
            }),
        }
    }

    /// Drain: done when the victim's node holds no running task (or is
    /// `Down`), never merely because it is not `Ready`.
    pub(super) fn drain<'o>(&mut self, s: StepOf<'_, 'o, 'a>) -> StepState<'o>
    where
        'a: 'o,
    {
        let StepOf { op, view, node, .. } = s;
        let d = view.d;
        let victim = op.victim.as_ref();
        let Some(n) = node else {
            return StepState::Done;
        };
        if victim
            .and_then(|v| v.instance.as_ref())
            .is_some_and(|id| self.facts.input.desired.skip_drain.contains(id))
        {
            return StepState::Done;
        }
        if n.state == NodeState::Down {
            // Gone: the swarm reschedules a Down node's tasks itself.
            // Any other status (`unknown` for seconds after every
            // election, `disconnected`) is not "drained".
            return StepState::Done;
        }
        if n.availability != Availability::Drain {
            // Checked again here: a surge roll drains long after it began,
            // and the services' tasks may be down by then.
            return self.within_budgets(op, n, d, || Action::Drain {
                op: op.id.clone(),
                node: n.id.clone(),
            });
        }
        if n.running_tasks == 0 {
            return StepState::Done;
        }
        if self
            .clock
            .elapsed(Timer::Drain(op.id.clone()), d.spec.drain.timeout)
        {
            return match d.spec.drain.on_timeout {
                OnDrainTimeout::Force => StepState::Done,
                OnDrainTimeout::Block => StepState::Fail(Blocked::DrainTimedOut {
                    node: n.id.clone(),
                    tasks: n.running_tasks,
                }),
            };
        }
        StepState::Wait(StepWait::Draining {
            node: &n.id,
            tasks: n.running_tasks,
        })
    }

    /// Demote: a manager victim leaves the raft through the removal gate,
    /// the leader last.
    pub(super) fn demote<'o>(&mut self, s: StepOf<'_, 'o, 'a>) -> StepState<'o>
    where
        'a: 'o,
    {
        let (op, step, node, replacement) = (s.op, s.step, s.node, s.replacement);
        let Some(n) = node else {
            return StepState::Done;
        };
        if !n.manager_role {
            return StepState::Done;
        }
        if n.manager_out_of_raft() {
            // No vote to take away; the node's removal takes it.
            return StepState::Done;
        }
        if let Some(why) = Self::surge_member_unready(op, replacement.as_ref()) {
            return StepState::Abandon(why);
        }
        if let Some(why) = self.leader_goes_last(op, step, n) {
            return why;
        }
        match self.removal_gate(Some(n), Some(&op.id), self.floor_of(op)) {
            Some(no) if undisrupted(op, step) => {
                // E.g. a manager became unreachable, or the surge
                // member never joined: healing comes first and waits
                // for no other manager op, so step aside (nothing
                // was disrupted yet).
                StepState::Abandon(Abandon::DemotionUnsafe {
                    node: n.id.clone(),
                    no,
                })
            }
            Some(no) => StepState::Wait(StepWait::Demote { node: &n.id, no }),
            None => self.within_budgets(op, n, s.view.d, || Action::Demote {
                op: op.id.clone(),
                node: n.id.clone(),
            }),
        }
    }

    /// `act` once `n`'s tasks may go by their services' budgets (a
    /// manager running tasks loses them as its machine goes; a worker's
    /// drain is gated the same way), else a hold naming the service, or a
    /// block ([`Gate::Block`]). Only a roll or a retirement is held: a
    /// heal's member is broken already.
    fn within_budgets<'o>(
        &mut self,
        op: &Operation,
        n: &Node,
        d: &DesiredGroup,
        act: impl FnOnce() -> Action,
    ) -> StepState<'o> {
        if !op.is_voluntary() {
            return StepState::Act(act());
        }
        match self.budget_gate(d, n, &op.id) {
            Gate::Go => StepState::Act(act()),
            Gate::Hold(why) => StepState::Hold(why),
            Gate::Block(why) => StepState::Fail(Blocked::Budget(why)),
        }
    }

    /// AwaitOutOfRaft: waits until the demoted node is no raft member.
    pub(super) fn await_out_of_raft<'o>(&mut self, s: StepOf<'_, 'o, 'a>) -> StepState<'o>
    where
        'a: 'o,
    {
        let StepOf { op, step, node, .. } = s;
        match node {
            Some(n) if n.raft.is_some() => {
                self.out_of_raft_or_heal(op, step, n, StepWait::LeavingRaft { node: &n.id })
            }
            _ => StepState::Done,
        }
    }

    /// DemoteSelfAndLeave: the leader's own hand-over (demote self, wait
    /// out of the raft, leave, stand down), or, seen by the next controller,
    /// the former leader's remains.
    pub(super) fn demote_self_and_leave<'o>(&mut self, s: StepOf<'_, 'o, 'a>) -> StepState<'o>
    where
        'a: 'o,
    {
        let (op, step, node, replacement) = (s.op, s.step, s.node, s.replacement);
        let victim_inst = s.victim_inst.as_ref();
        let vlink = s.vlink();
        let Some(n) = node else {
            return StepState::Done;
        };
        if let Some(why) = n
            .manager_role
            .then(|| Self::surge_member_unready(op, replacement.as_ref()))
            .flatten()
        {
            return StepState::Abandon(why);
        }
        if self.facts.world.is_self(vlink) {
            if let Some(why) = self.leader_goes_last(op, step, n) {
                return why;
            }
            let gate = n
                .manager_role
                .then(|| self.healthy_manager_gate(Some(&op.id), Some(n), self.floor_of(op)));
            if let Some(Some(no)) = gate {
                if undisrupted(op, step) {
                    return StepState::Abandon(Abandon::SelfDemotionUnsafe(no));
                }
                return StepState::Wait(StepWait::SelfDemotion { no });
            }
            return self.within_budgets(op, n, s.view.d, || Action::DemoteSelfAndLeave {
                op: op.id.clone(),
                node: n.id.clone(),
            });
        }
        // Another controller: the old leader journaled this, then
        // either demoted itself or crashed before it could.
        if n.raft.is_some() && !n.manager_role {
            let wait = StepWait::FormerLeaderInRaft { node: &n.id };
            return self.out_of_raft_or_heal(op, step, n, wait);
        }
        if n.manager_role {
            return self.demote_former_leader(op, step, n);
        }
        // Here the node is out of the raft and no manager (above): only then
        // may a leave, its engine's answer or its controller's report, be
        // believed (a stale or forged report cannot destroy a raft member).
        let left = n.left
            || self.facts.world.leave_reported(vlink, &n.id)
            || n.state == NodeState::Down
            || victim_inst.is_none_or(|i| !i.running);
        if left || self.clock.elapsed(Timer::Leave(op.id.clone()), LEAVE_BOUND) {
            StepState::Done
        } else {
            // The swarm lists a node that left Ready for another
            // 27-34 s: its leave is learnt from its controller's report
            // in the store (etcd, file: the store's change watch wakes
            // this controller at once) or by asking its engine, once per
            // question interval (a swarm store: a node that left can no
            // longer write the raft), so look again then rather than at
            // the next resync.
            self.clock.wake_within(crate::own_engine::ASK_EVERY);
            StepState::Wait(StepWait::FormerLeaderLeave {
                node: &n.id,
                bound: LEAVE_BOUND,
            })
        }
    }

    /// The former leader, still a manager (its controller crashed before
    /// it demoted itself): demoted through the manager gate, or the op
    /// steps aside while nothing was disrupted yet.
    pub(super) fn demote_former_leader<'o>(
        &self,
        op: &'o Operation,
        step: Step,
        n: &'a Node,
    ) -> StepState<'o>
    where
        'a: 'o,
    {
        match self.removal_gate(Some(n), Some(&op.id), self.floor_of(op)) {
            Some(no) if undisrupted(op, step) => StepState::Abandon(Abandon::FormerLeaderUnsafe {
                node: n.id.clone(),
                no,
            }),
            Some(no) => StepState::Wait(StepWait::DemoteFormerLeader { node: &n.id, no }),
            None => StepState::Act(Action::Demote {
                op: op.id.clone(),
                node: n.id.clone(),
            }),
        }
    }

    /// Destroy: the victim's machine goes, only once its node is out of the
    /// raft and only if it carries this cluster's and group's tags.
    pub(super) fn destroy<'o>(&mut self, s: StepOf<'_, 'o, 'a>) -> StepState<'o>
    where
        'a: 'o,
    {
        let (op, view, node) = (s.op, s.view, s.node);
        let victim_inst = s.victim_inst.as_ref();
        let (victim, vlink) = (s.victim(), s.vlink());
        let Some(id) = victim.and_then(|v| v.instance.clone()) else {
            return StepState::Done;
        };
        if self.facts.world.is_self(vlink) {
            return StepState::Wait(StepWait::StandingDown);
        }
        if victim_inst.is_some() {
            if let Some(state) = self.out_of_raft_first(op, node, &id) {
                return state;
            }
            return StepState::Act(Action::Destroy {
                op: op.id.clone(),
                instance: id,
            });
        }
        if view.foreign.contains(id.as_str()) {
            return StepState::Fail(Blocked::Foreign(id));
        }
        use crate::verdict::machine::{Listing, MachineEvidence, verdict};
        let listing = if op.reached(Step::Destroy) {
            Listing::Destroyed
        } else {
            let bound_passed = (self.clock).elapsed(Timer::Unlisted(op.id.clone()), UNLISTED_BOUND);
            Listing::Unlisted { bound_passed }
        };
        if verdict(&MachineEvidence::unasked(listing)).is_gone() {
            StepState::Done
        } else {
            StepState::Wait(StepWait::Unlisted {
                instance: id,
                bound: UNLISTED_BOUND,
            })
        }
    }

    /// RemoveNode: `node rm` of the victim's node once it is no manager.
    pub(super) fn remove_node<'o>(&mut self, s: StepOf<'_, 'o, 'a>) -> StepState<'o>
    where
        'a: 'o,
    {
        let StepOf { op, node, .. } = s;
        let Some(n) = node else {
            return StepState::Done;
        };
        if n.in_raft() && !n.manager_out_of_raft() {
            return StepState::Wait(StepWait::StillManager { node: &n.id });
        }
        StepState::Act(Action::RemoveNode {
            op: op.id.clone(),
            node: n.id.clone(),
            force: n.state == NodeState::Ready,
        })
    }
}
