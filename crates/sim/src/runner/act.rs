//! Acting on a plan as the controller does: one pass, the journal
//! writes, each action started under its epoch, paused controllers and
//! rollbacks.

use super::*;

impl Runner {
    /// One controller pass: observe, plan, execute.
    pub(super) fn pass(&mut self) -> (Plan, bool) {
        let leader_link = self.world.leader_link();
        let bootstrap = !self.world.swarm_exists;
        if leader_link != self.controller_link && !bootstrap {
            // A different controller acts now: it starts with empty memory
            // and reads the journal after winning the epoch (as production
            // does since issue 15), so it sees the deposed one's last writes.
            self.controller_link = leader_link.clone();
            self.take_over();
        }
        let mut observed = self.world.observe(self.controller_link.clone());
        observed.services = self.services(&observed.swarm);
        self.observed_at = self.world.now;
        let nonce = self.rng.next_u64();
        let plan = plan::plan(PlanInput {
            desired: &self.desired,
            observed: &observed,
            journal: &self.journal,
            memory: &self.memory,
            now: self.world.now,
            wall_ms: self.world.wall_ms(),
            nonce,
        });
        self.passes += 1;
        let can_act = bootstrap || self.world.leader_runs_controller();
        // With no controller on the leader nobody plans: no timer runs.
        if can_act {
            self.memory = plan.memory.clone();
        }
        self.mark_full_groups();
        let mut changed = false;
        let faulty = self.world.now < self.faults.until;
        let crash_after = self
            .rng
            .chance(self.faults.controller_crash)
            .then(|| self.rng.between(0, plan.actions.len() as u64) as usize);
        let pause_after = (faulty && self.rng.chance(self.faults.paused_controller))
            .then(|| self.rng.between(0, plan.actions.len() as u64) as usize);
        if can_act {
            self.rotate_tokens(&plan, &observed.swarm);
        }
        if can_act && faulty && self.rng.chance(self.faults.stale_observation) {
            self.act_late();
        }
        if can_act {
            // As the controller walks a plan: its own hand-over last.
            let actions: Vec<Action> = walk_order(&plan.actions).into_iter().cloned().collect();
            for (k, action) in actions.iter().enumerate() {
                if crash_after == Some(k) && faulty {
                    self.take_over();
                    self.note(
                        "fault: controller crashed mid-plan".into(),
                        self.world.settled_fault_tolerance(),
                    );
                    break;
                }
                if pause_after == Some(k) && self.pause(&actions[k..]) {
                    break;
                }
                match self.execute(action, self.epoch) {
                    Some(c) => changed |= c,
                    None => break,
                }
            }
        }
        self.judge = None;
        self.judge_desired = None;
        self.last_plan = Some(plan.clone());
        (plan, changed)
    }

    /// The world moves on between the observation and the plan's steps: the
    /// oracle keeps the world as observed to judge them by.
    pub(super) fn act_late(&mut self) {
        let ft = self.world.settled_fault_tolerance();
        self.judge = Some(self.world.clone());
        self.judge_desired = Some(self.desired.clone());
        let gap = self.rng.between(200, 5_000);
        self.world.advance(self.world.now + gap);
        self.complete_inflight();
        self.note(
            format!("fault: this plan is acted on {gap} ms after its observation"),
            ft,
        );
        if self.world.now < self.faults.until {
            self.strike_any();
        }
    }

    /// Stops the controller before `rest` of its plan while the nemesis
    /// moves its engine's leadership away (as issue 15's nemesis does with
    /// SIGSTOP and a demote from another manager). False when no other
    /// manager could take the leadership (then it is not paused).
    pub(super) fn pause(&mut self, rest: &[Action]) -> bool {
        let leader = self.world.leader.clone();
        let successor = self.world.nodes.values().any(|n| {
            n.node.raft.is_some() && n.in_contact() && Some(&n.node.id) != leader.as_ref()
        });
        if !successor {
            return false;
        }
        let ft = self.world.settled_fault_tolerance();
        self.paused = Some(Paused {
            actions: rest.to_vec(),
            epoch: self.epoch,
            judge: self.judge.clone().unwrap_or_else(|| self.world.clone()),
            desired: self
                .judge_desired
                .clone()
                .unwrap_or_else(|| self.desired.clone()),
            resume_at: self.world.now + self.rng.between(5_000, 40_000),
        });
        self.world.change_leader();
        self.note(
            format!(
                "fault: controller paused before {} of its actions; leadership moved away",
                rest.len()
            ),
            ft,
        );
        true
    }

    /// The paused controller goes on with the rest of its plan, under the
    /// epoch it planned with, judged by the world it observed.
    pub(super) fn resume(&mut self) {
        let Some(p) = self.paused.take() else {
            return;
        };
        let ft = self.world.settled_fault_tolerance();
        self.note(
            format!("fault: paused controller (epoch {}) resumes", p.epoch),
            ft,
        );
        self.judge = Some(p.judge);
        self.judge_desired = Some(p.desired);
        for action in &p.actions {
            if self.execute(action, p.epoch).is_none() {
                break;
            }
        }
        self.judge = None;
        self.judge_desired = None;
    }

    /// Executes one action planned under `epoch`; `Some(true)` when it
    /// changed the journal or started a step, `None` when fencing refused
    /// it (the controller then stops, as the planner's contract says).
    pub(super) fn execute(&mut self, action: &Action, epoch: u64) -> Option<bool> {
        // The store refuses a journal write with a stale epoch; the executor
        // re-checks the epoch immediately before each side effect.
        if epoch != self.epoch {
            self.note(
                format!(
                    "fenced: {} refused (epoch {epoch}, current {})",
                    action.describe(),
                    self.epoch
                ),
                self.world.settled_fault_tolerance(),
            );
            return None;
        }
        let running = action.is_side_effect() && self.under_way(action);
        let mut walk = Execution::new(std::mem::take(&mut self.journal), epoch);
        let carry = walk.next(action, running);
        let group = walk.group_of(action).map(str::to_string);
        self.journal = walk.into_journal();
        match carry {
            // The store holds the journal: the walk's writes are its writes.
            Carry::Journal(_) => {}
            Carry::Nothing => return Some(!action.is_side_effect()),
            Carry::Rollback => {
                if let Action::Rollback { group, reason } = action {
                    return Some(self.roll_back(group, reason));
                }
            }
            Carry::Effect { .. } => {
                let op = action.op_id().unwrap_or_default().to_string();
                self.acting_for = group;
                let done_at = self.start(action);
                self.acting_for = None;
                if let Action::Provision { group, .. } = action {
                    self.see_unlabelled(group);
                }
                self.running.push(Running {
                    op,
                    action: action.clone(),
                    done_at,
                    epoch: self.epoch,
                });
            }
        }
        Some(true)
    }

    /// A call of `action`'s operation is under way already. A provider
    /// creates the machine when a provision call starts (the latency is its
    /// boot), so a second call with the same link while one is under way,
    /// even a deposed controller's, finds it — idempotent on the token,
    /// checked when the call starts, as the local provider does — and so
    /// does a call after the machine it made exists.
    pub(super) fn under_way(&self, action: &Action) -> bool {
        let op = action.op_id().unwrap_or_default();
        let provision = matches!(action, Action::Provision { .. });
        let same = |f: &Running| {
            f.op == op
                && (f.epoch == self.epoch
                    || provision && matches!(f.action, Action::Provision { .. }))
        };
        let made = || {
            self.world
                .instances
                .values()
                .any(|i| i.inst.link() == Some(op))
        };
        self.running.iter().any(same) || provision && made()
    }

    /// Rolls `group` back to its last converged revision (the controller's
    /// rule, [`rollback_target`]), as a new revision; false when there is
    /// none to roll back to.
    pub(super) fn roll_back(&mut self, group: &str, reason: &str) -> bool {
        let history = self
            .revisions
            .iter()
            .enumerate()
            .map(|(k, (spec, c))| Past {
                rev: k as u64 + 1,
                converged: *c,
                spec,
            });
        let target = history
            .clone()
            .next_back()
            .and_then(|current| rollback_target(history, current, group));
        let Some((_, old)) = target else {
            return false;
        };
        let old = DesiredGroup {
            hash: config_hash(old),
            spec: old.clone(),
            paused: false,
            is_rollback: true,
        };
        self.note(
            format!("rollback of {group}: {reason}"),
            self.world.settled_fault_tolerance(),
        );
        if let Some(g) = self
            .desired
            .groups
            .iter_mut()
            .find(|g| g.spec.name == *group)
        {
            *g = old;
        }
        self.revisions.push((spec_of(&self.desired), false));
        true
    }

    /// The world the oracle judges the current step by.
    pub(super) fn judged(&self) -> &World {
        self.judge.as_ref().unwrap_or(&self.world)
    }

    /// Starts a side effect; returns when its call returns. Effects apply at
    /// once (the engine acts when called), except a provision, whose machine
    /// appears when the provider call returns. Each step is judged by the
    /// oracle before and after, against the world the planner observed.
    pub(super) fn start(&mut self, action: &Action) -> Time {
        let t = self.world.timings.clone();
        let now = self.world.now;
        if let Action::Provision { role, .. } = action {
            self.place_token(*role);
            return now + t.provision;
        }
        self.judge_before(action);
        let ft = self.judged().settled_fault_tolerance();
        // Every swarm call goes through the leader (a destroy does not).
        let real = if self.world.leader.is_none() && !matches!(action, Action::Destroy { .. }) {
            Err(Refusal::NoLeader)
        } else {
            apply(&mut self.world, action)
        };
        let judged = match self.judge.as_mut() {
            Some(j) => apply(j, action),
            None => real,
        };
        if real.is_ok() {
            self.restart_mid_demotion(action);
        }
        let outcome = real.err().map_or("ok", Refusal::message);
        let what = format!("{} -> {outcome}", action.describe());
        self.judge_floor(&what, action, ft);
        self.judge_after(&what, ft, judged);
        match action {
            Action::DemoteSelfAndLeave { .. } => {
                // Leave follows once out of the raft; 1 in 6 leaves is refused once.
                let retry = if self.rng.chance(1.0 / 6.0) { 1_000 } else { 0 };
                now + t.out_of_raft + 200 + retry
            }
            Action::Drain { node, .. } => {
                self.check_capacity(node);
                now + t.api
            }
            _ => now + t.api,
        }
    }
}
