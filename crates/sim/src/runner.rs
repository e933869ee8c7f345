//! Drives the real planner against the simulated world, event by event, the
//! way the controller does: plan, write the journal, start each op's next
//! action (one at a time per op), wake on the next completion, world event
//! or planner timer. Faults are injected from a seeded schedule, and every
//! voluntary step is checked against the world's own state (the oracle).

use crate::rng::Rng;
use crate::world::{Timings, World};
use drover_core::journal::Operation;
use drover_core::model::{Availability, NodeState, Time, tags};
use drover_core::plan::{self, Action, Desired, DesiredGroup, Memory, Phase, Plan, PlanInput};
use drover_core::spec::Role;
use std::collections::{BTreeMap, BTreeSet};

/// The controller's periodic resync, ms.
pub const RESYNC: Time = 10_000;

/// Which faults to inject, and until when.
#[derive(Debug, Clone, Default)]
pub struct Faults {
    /// Probability a provision call fails.
    pub provision_failure: f64,
    /// Probability a new machine never joins.
    pub never_join: f64,
    /// Engine crashes per simulated minute (only while quorum would survive).
    pub crashes_per_min: f64,
    /// Spontaneous leader changes per simulated minute.
    pub leader_changes_per_min: f64,
    /// Probability the controller crashes while executing a plan (after a
    /// random prefix of its actions), losing its memory.
    pub controller_crash: f64,
    /// Probability a provider describe fails.
    pub describe_failure: f64,
    /// Share of machine faults that make the machine vanish from the
    /// provider altogether (its node stays behind, Down), rather than crash.
    pub vanish_share: f64,
    /// No fault after this time.
    pub until: Time,
}

/// One line of the run's trace.
#[derive(Debug, Clone, serde::Serialize)]
pub struct TraceLine {
    /// Virtual time, ms.
    pub at: Time,
    /// The group the step belongs to (none for faults).
    pub group: Option<String>,
    /// What happened.
    pub what: String,
    /// Manager fault tolerance before (from the simulator's raft).
    pub ft_before: i64,
    /// ... and after.
    pub ft_after: i64,
    /// The leader's link after.
    pub leader: Option<String>,
}

/// How a run ended. In JSON: `{"kind": "converged"}`, or
/// `{"kind": "blocked" | "stuck" | "timed_out", "reason": "…"}`: a field a
/// script can match on, not the Rust spelling of the variant.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(tag = "kind", content = "reason", rename_all = "snake_case")]
pub enum Outcome {
    /// Every group converged with no operation left.
    Converged,
    /// A group blocked (the reason is kept).
    Blocked(String),
    /// Nothing left to wake for, yet not converged.
    Stuck(String),
    /// The deadline passed.
    TimedOut(String),
}

impl std::fmt::Display for Outcome {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Outcome::Converged => write!(f, "Converged"),
            Outcome::Blocked(why) => write!(f, "Blocked ({why})"),
            Outcome::Stuck(why) => write!(f, "Stuck ({why})"),
            Outcome::TimedOut(why) => write!(f, "Timed out ({why})"),
        }
    }
}

struct InFlight {
    op: String,
    action: Action,
    done_at: Time,
    generation: u64,
}

/// A simulated cluster with a controller.
pub struct Runner {
    /// The world (also the oracle).
    pub world: World,
    /// Declared state.
    pub desired: Desired,
    previous: BTreeMap<String, DesiredGroup>,
    /// The journal as the store holds it.
    pub journal: Vec<Operation>,
    memory: Memory,
    controller_link: Option<String>,
    generation: u64,
    inflight: Vec<InFlight>,
    faults: Faults,
    rng: Rng,
    /// Applied side effects, in order.
    pub trace: Vec<TraceLine>,
    /// Safety violations seen by the oracle.
    pub violations: Vec<String>,
    /// Controller passes made.
    pub passes: u64,
    /// Last plan, for status.
    pub last_plan: Option<Plan>,
    faulted_groups: BTreeSet<String>,
    full_once: BTreeSet<String>,
    foreign: Vec<String>,
    next_fault: Time,
    /// Group of the action being applied, for the trace.
    acting_for: Option<String>,
}

impl Runner {
    /// A run of `desired` in an empty world.
    pub fn new(desired: Desired, seed: u64, timings: Timings, faults: Faults) -> Self {
        let mut world = World::new(seed ^ 0x5eed, timings);
        world.groups = desired.groups.iter().map(|g| g.spec.name.clone()).collect();
        world.describe_failure = faults.describe_failure;
        let mut r = Runner {
            world,
            desired,
            previous: BTreeMap::new(),
            journal: Vec::new(),
            memory: Memory::default(),
            controller_link: None,
            generation: 0,
            inflight: Vec::new(),
            faults,
            rng: Rng::new(seed),
            trace: Vec::new(),
            violations: Vec::new(),
            passes: 0,
            last_plan: None,
            faulted_groups: BTreeSet::new(),
            full_once: BTreeSet::new(),
            foreign: Vec::new(),
            next_fault: 0,
            acting_for: None,
        };
        r.plant_foreign_machines();
        r
    }

    /// Machines drover must never touch: another cluster's, and untagged.
    fn plant_foreign_machines(&mut self) {
        let Some(g) = self.desired.groups.first().map(|g| g.spec.name.clone()) else {
            return;
        };
        let other = BTreeMap::from([
            (tags::CLUSTER.to_string(), "another-cluster".to_string()),
            (tags::GROUP.to_string(), g.clone()),
        ]);
        let a = self.world.provision(other, Role::Plain, true);
        let untagged = BTreeMap::from([(tags::GROUP.to_string(), g)]);
        let b = self.world.provision(untagged, Role::Plain, true);
        self.foreign = vec![a, b];
    }

    /// Kills machine `id`'s engine as a fault (its group is then exempt from
    /// the capacity oracle, as with scheduled faults).
    pub fn crash(&mut self, id: &str) {
        if let Some(g) = self
            .world
            .instances
            .get(id)
            .and_then(|i| i.inst.tag(tags::GROUP))
        {
            self.faulted_groups.insert(g.to_string());
        }
        self.world.crash(id);
    }

    /// Replaces the fault schedule (e.g. faults only during a rollout).
    pub fn set_faults(&mut self, faults: Faults) {
        self.world.describe_failure = faults.describe_failure;
        self.faults = faults;
    }

    /// Commits a new spec for the groups (a rollout), keeping the old for rollback.
    pub fn commit(&mut self, groups: Vec<DesiredGroup>) {
        for g in groups {
            if let Some(old) = self
                .desired
                .groups
                .iter_mut()
                .find(|o| o.spec.name == g.spec.name)
            {
                self.previous.insert(g.spec.name.clone(), old.clone());
                *old = g;
            } else {
                self.world.groups.push(g.spec.name.clone());
                self.desired.groups.push(g);
            }
        }
    }

    /// Runs until converged, blocked, stuck or `deadline` (virtual ms).
    pub fn run_until(&mut self, deadline: Time) -> Outcome {
        let mut immediate = 0;
        loop {
            let (plan, changed) = self.pass();
            if changed && immediate < 20 {
                // The journal or the world changed: react now, not at the next tick.
                immediate += 1;
                continue;
            }
            immediate = 0;
            if self.world.now >= self.faults.until {
                if let Some(why) = plan
                    .groups
                    .iter()
                    .find(|g| g.phase == Phase::Blocked)
                    .and_then(|g| g.reason.clone())
                {
                    return Outcome::Blocked(why);
                }
                let converged = plan.groups.iter().all(|g| g.phase == Phase::Converged)
                    && self.journal.is_empty()
                    && self.inflight.is_empty();
                if converged {
                    self.check_converged();
                    return Outcome::Converged;
                }
            }
            // Like the real controller, resync on a timer: "no event" never means "no change".
            let resync = (!self.journal.is_empty()
                || plan.groups.iter().any(|g| g.phase != Phase::Converged))
            .then_some(self.world.now + RESYNC);
            let wake = [
                self.inflight.iter().map(|f| f.done_at).min(),
                plan.wake_at,
                self.world.next_event(),
                self.fault_time(),
                resync,
            ]
            .into_iter()
            .flatten()
            .filter(|t| *t >= self.world.now)
            .min();
            let Some(t) = wake else {
                return Outcome::Stuck(plan.explanation.join("; "));
            };
            if t > deadline {
                return Outcome::TimedOut(plan.explanation.join("; "));
            }
            // Let time move even when a wake lands at `now` repeatedly.
            let t = t.max(self.world.now + 1);
            self.world.advance(t);
            self.complete_inflight();
            self.inject_faults();
        }
    }

    fn fault_time(&self) -> Option<Time> {
        if self.world.now >= self.faults.until {
            return None;
        }
        let active = self.faults.crashes_per_min > 0.0 || self.faults.leader_changes_per_min > 0.0;
        // Wake when the next fault may strike, or at least when faults end.
        Some(if active {
            self.next_fault.max(self.world.now + 1)
        } else {
            self.faults.until
        })
    }

    fn inject_faults(&mut self) {
        if self.world.now < self.next_fault || self.world.now >= self.faults.until {
            return;
        }
        self.next_fault = self.world.now + 1_000;
        let per_sec = |per_min: f64| per_min / 60.0;
        if self.rng.chance(per_sec(self.faults.crashes_per_min)) {
            self.crash_random_machine();
        }
        if self.rng.chance(per_sec(self.faults.leader_changes_per_min)) {
            self.world.change_leader();
            self.note(
                "fault: leadership moved".into(),
                self.world.settled_fault_tolerance(),
            );
        }
    }

    fn crash_random_machine(&mut self) {
        let alive: Vec<String> = self
            .world
            .instances
            .iter()
            .filter(|(id, i)| {
                i.inst.running
                    && !self.foreign.contains(id)
                    && i.inst.tag(tags::CLUSTER) == Some(self.desired.cluster_id.as_str())
            })
            .map(|(id, _)| id.clone())
            .collect();
        if alive.is_empty() {
            return;
        }
        let id = alive[self.rng.between(0, alive.len() as u64 - 1) as usize].clone();
        let is_member = self.world.instances[&id]
            .node
            .as_ref()
            .and_then(|n| self.world.nodes.get(n))
            .is_some_and(|n| n.node.raft.is_some() && n.engine_alive);
        // Only crash a manager when the swarm keeps its quorum: this tests
        // healing, not the (unrecoverable without an operator) quorum loss.
        if is_member && self.world.settled_fault_tolerance() < 1 {
            return;
        }
        let group = self.world.instances[&id]
            .inst
            .tag(tags::GROUP)
            .unwrap_or_default()
            .to_string();
        self.faulted_groups.insert(group);
        let ft = self.world.settled_fault_tolerance();
        if self.rng.chance(self.faults.vanish_share) {
            self.world.destroy(&id);
            self.note(
                format!("fault: machine {id} vanished behind drover's back"),
                ft,
            );
        } else {
            self.world.crash(&id);
            self.note(format!("fault: engine of {id} crashed"), ft);
        }
    }

    fn note(&mut self, what: String, ft_before: i64) {
        self.trace.push(TraceLine {
            at: self.world.now,
            group: self.acting_for.clone(),
            what,
            ft_before,
            ft_after: self.world.settled_fault_tolerance(),
            leader: self.world.leader_link(),
        });
    }

    /// One controller pass: observe, plan, execute.
    fn pass(&mut self) -> (Plan, bool) {
        let leader_link = self.world.leader_link();
        let bootstrap = !self.world.swarm_exists;
        if leader_link != self.controller_link && !bootstrap {
            // A different controller acts now: it starts with empty memory.
            self.controller_link = leader_link.clone();
            self.memory = Memory::default();
            self.generation += 1;
        }
        if self.world.now >= self.faults.until {
            self.world.describe_failure = 0.0;
        }
        let observed = self.world.observe(self.controller_link.clone());
        let nonce = self.rng.next_u64();
        let plan = plan::plan(PlanInput {
            desired: &self.desired,
            observed: &observed,
            journal: &self.journal,
            memory: &self.memory,
            now: self.world.now,
            nonce,
        });
        self.passes += 1;
        self.memory = plan.memory.clone();
        self.mark_full_groups();
        let can_act = bootstrap || self.world.leader.is_some();
        let mut changed = false;
        let crash_after = self
            .rng
            .chance(self.faults.controller_crash)
            .then(|| self.rng.between(0, plan.actions.len() as u64) as usize);
        if can_act {
            for (k, action) in plan.actions.iter().enumerate() {
                if crash_after == Some(k) && self.world.now < self.faults.until {
                    self.memory = Memory::default();
                    self.generation += 1;
                    self.note(
                        "fault: controller crashed mid-plan".into(),
                        self.world.settled_fault_tolerance(),
                    );
                    break;
                }
                changed |= self.execute(action);
            }
        }
        self.last_plan = Some(plan.clone());
        (plan, changed)
    }

    /// Executes one action; true when it changed the journal or started a step.
    fn execute(&mut self, action: &Action) -> bool {
        match action {
            Action::Begin { op } => self.journal.push(op.as_ref().clone()),
            Action::MarkDone { op, step } => {
                if let Some(o) = self.journal.iter_mut().find(|o| o.id == *op) {
                    o.done.insert(*step);
                }
            }
            Action::Complete { op } => self.journal.retain(|o| o.id != *op),
            Action::Rollback { group, reason } => {
                let Some(prev) = self.previous.remove(group) else {
                    return false;
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
                    *g = DesiredGroup {
                        is_rollback: true,
                        ..prev
                    };
                }
            }
            _ => {
                let op = action.op_id().unwrap_or_default().to_string();
                if self
                    .inflight
                    .iter()
                    .any(|f| f.op == op && f.generation == self.generation)
                {
                    return false;
                }
                self.acting_for = self
                    .journal
                    .iter()
                    .find(|o| o.id == op)
                    .map(|o| o.group.clone());
                let done_at = self.start(action);
                self.acting_for = None;
                self.inflight.push(InFlight {
                    op,
                    action: action.clone(),
                    done_at,
                    generation: self.generation,
                });
            }
        }
        true
    }

    /// Starts a side effect; returns when its call returns. Effects apply at
    /// once (the engine acts when called), except a provision, whose machine
    /// appears when the provider call returns.
    fn start(&mut self, action: &Action) -> Time {
        let t = self.world.timings.clone();
        let now = self.world.now;
        match action {
            Action::Provision { .. } => now + t.provision,
            Action::DemoteSelfAndLeave { node, .. } => {
                self.demote(action, node);
                // Leave follows once out of the raft; 1 in 6 leaves is refused once.
                let retry = if self.rng.chance(1.0 / 6.0) { 1_000 } else { 0 };
                now + t.out_of_raft + 200 + retry
            }
            Action::Demote { node, .. } => {
                self.demote(action, node);
                now + t.api
            }
            Action::Destroy { instance, .. } => {
                self.check_destroy(instance);
                let node = self
                    .world
                    .instances
                    .get(instance)
                    .and_then(|i| i.node.clone());
                self.check_disruption(action, node.as_ref());
                let ft = self.world.settled_fault_tolerance();
                self.world.destroy(instance);
                self.after_disruption(&action.describe(), ft);
                now + t.api
            }
            Action::Drain { node, .. } => {
                self.check_disruption(action, Some(node));
                let ft = self.world.settled_fault_tolerance();
                let res = self.world.drain(node);
                self.note(
                    format!(
                        "{} -> {}",
                        action.describe(),
                        res.err().unwrap_or("ok".into())
                    ),
                    ft,
                );
                self.check_capacity(node);
                now + t.api
            }
            Action::RemoveNode { node, force, .. } => {
                let ft = self.world.settled_fault_tolerance();
                let res = self.world.remove_node(node, *force);
                self.note(
                    format!(
                        "{} -> {}",
                        action.describe(),
                        res.err().unwrap_or("ok".into())
                    ),
                    ft,
                );
                now + t.api
            }
            _ => now,
        }
    }

    /// A demotion, judged by the oracle before (leader last) and after (FT).
    fn demote(&mut self, action: &Action, node: &str) {
        self.check_disruption(action, Some(&node.to_string()));
        let ft = self.world.settled_fault_tolerance();
        let res = self.world.demote(node);
        let outcome = res.err().unwrap_or_else(|| "ok".into());
        self.after_disruption(&format!("{} -> {outcome}", action.describe()), ft);
    }

    /// Oracle: no voluntary step takes the raft's fault tolerance below 0,
    /// and none is one the engine itself refuses as unsafe.
    fn after_disruption(&mut self, what: &str, ft_before: i64) {
        self.note(what.to_string(), ft_before);
        if what.contains("loss of quorum") || what.contains("last manager") {
            self.violations.push(format!(
                "t={} {what}: the planner attempted a step the engine refuses as unsafe",
                self.world.now
            ));
        }
        let after = self.world.settled_fault_tolerance();
        if ft_before >= 0 && after < 0 {
            self.violations.push(format!(
                "t={} {what}: fault tolerance went from {ft_before} to {after}",
                self.world.now
            ));
        }
    }

    fn complete_inflight(&mut self) {
        let now = self.world.now;
        let (done, rest): (Vec<InFlight>, Vec<InFlight>) = std::mem::take(&mut self.inflight)
            .into_iter()
            .partition(|f| f.done_at <= now);
        self.inflight = rest;
        for f in done {
            match &f.action {
                Action::Provision {
                    op, role, group, ..
                } => {
                    self.acting_for = Some(group.clone());
                    self.finish_provision(&f.action, op, *role);
                    self.acting_for = None;
                }
                // Refused while still in the raft: retry, as the shell does.
                Action::DemoteSelfAndLeave { node, .. } if self.world.leave(node).is_err() => {
                    self.inflight.push(InFlight {
                        done_at: now + 500,
                        ..f
                    });
                }
                _ => {}
            }
        }
    }

    fn finish_provision(&mut self, action: &Action, op: &str, role: Role) {
        if self
            .world
            .instances
            .values()
            .any(|i| i.inst.link() == Some(op))
        {
            return; // idempotent on the link: a re-issued call finds the machine
        }
        if self.rng.chance(self.faults.provision_failure) && self.world.now < self.faults.until {
            self.note(
                format!("{} -> failed (simulated)", action.describe()),
                self.world.settled_fault_tolerance(),
            );
            // As the controller does: a failed call uses the slot's budget.
            if let Some(o) = self.journal.iter_mut().find(|o| o.id == op) {
                o.provision_failures += 1;
            }
            return;
        }
        let tags = plan::instance_tags(&self.desired.cluster_id, action);
        if let Action::Provision {
            group,
            logical_id: Some(l),
            ..
        } = action
        {
            let dup = self.world.instances.values().any(|i| {
                i.inst.tag(tags::GROUP) == Some(group.as_str())
                    && i.inst.logical_id() == Some(l.as_str())
            });
            if dup {
                self.violations.push(format!(
                    "t={} duplicate logical id {l} in {group}",
                    self.world.now
                ));
            }
        }
        let never_join =
            self.world.now < self.faults.until && self.rng.chance(self.faults.never_join);
        if let (true, Action::Provision { group, .. }) = (never_join, action) {
            self.faulted_groups.insert(group.clone());
        }
        let ft = self.world.settled_fault_tolerance();
        self.world.provision(tags, role, never_join);
        self.note(action.describe(), ft);
        self.check_population(action);
    }

    /// Oracle: a failed or partial describe never causes a provisioning storm.
    fn check_population(&mut self, action: &Action) {
        let Action::Provision { group, .. } = action else {
            return;
        };
        let Some(g) = self.group_of(group) else {
            return;
        };
        let slack = if g.spec.role == Role::Manager {
            1
        } else {
            g.spec.update.max_in_flight.max(g.spec.update.canaries) as usize
        };
        let limit = g.spec.allocation.size() + slack;
        // Crashed machines awaiting their heal are dead weight, not a storm.
        let alive = self
            .world
            .instances
            .values()
            .filter(|i| i.inst.running && i.inst.owned_by(&self.desired.cluster_id, group))
            .count();
        if alive > limit {
            self.violations.push(format!(
                "t={} {group} has {alive} machines, more than size + slack = {limit}",
                self.world.now
            ));
        }
    }

    fn group_of(&self, name: &str) -> Option<&DesiredGroup> {
        self.desired.groups.iter().find(|g| g.spec.name == name)
    }

    /// Oracle: the leader is disrupted only when every other manager is current.
    fn check_disruption(&mut self, action: &Action, node: Option<&String>) {
        let Some(node) = node.and_then(|n| self.world.nodes.get(n)) else {
            return;
        };
        let is_leader = self.world.leader.as_ref() == Some(&node.node.id);
        if !is_leader || !node.engine_alive {
            return;
        }
        let Some(group) = node.node.group.clone() else {
            return;
        };
        let Some(hash) = self.group_of(&group).map(|g| g.hash.clone()) else {
            return;
        };
        let leader_link = node.node.link.clone();
        let stale: Vec<String> = self
            .world
            .instances
            .values()
            .filter(|i| {
                i.inst.owned_by(&self.desired.cluster_id, &group)
                    && i.inst.running
                    && i.inst.link() != leader_link.as_deref()
            })
            .filter(|i| i.inst.config() != Some(hash.as_str()))
            .map(|i| i.inst.id.clone())
            .collect();
        let rolling = matches!(
            action,
            Action::DemoteSelfAndLeave { .. } | Action::Demote { .. } | Action::Destroy { .. }
        );
        if rolling && !stale.is_empty() {
            self.violations.push(format!(
                "t={} {} disrupts the leader while {stale:?} are not current",
                self.world.now,
                action.describe()
            ));
        }
    }

    /// Oracle: only machines tagged with this cluster and a declared group are destroyed.
    fn check_destroy(&mut self, id: &str) {
        let Some(i) = self.world.instances.get(id) else {
            return;
        };
        let ours = i.inst.tag(tags::CLUSTER) == Some(self.desired.cluster_id.as_str());
        let declared = i
            .inst
            .tag(tags::GROUP)
            .is_some_and(|g| self.group_of(g).is_some());
        // An orphan (undeclared group) may go, but only after gc.orphan_grace.
        let orphan_due = i.inst.tag(tags::GROUP).is_some()
            && !declared
            && i.inst.created_ms + self.desired.orphan_grace.as_millis() as u64 <= self.world.now;
        let owned = ours && (declared || orphan_due);
        if !owned || self.foreign.iter().any(|f| f == id) {
            self.violations.push(format!(
                "t={} destroyed {id}, which lacks this cluster's and group's tags",
                self.world.now
            ));
        }
    }

    /// Oracle: at most max(max_in_flight, canaries) workers out of service
    /// through drover's own steps (checked for groups no fault touched).
    fn check_capacity(&mut self, node: &str) {
        let Some(group) = self
            .world
            .nodes
            .get(node)
            .and_then(|n| n.node.group.clone())
        else {
            return;
        };
        let Some(g) = self.group_of(&group) else {
            return;
        };
        if g.spec.role != Role::Worker
            || self.faulted_groups.contains(&group)
            || !self.full_once.contains(&group)
        {
            return;
        }
        let limit = g.spec.update.max_in_flight.max(g.spec.update.canaries) as usize;
        let size = g.spec.allocation.size();
        let serving = self.serving(&group);
        if size.saturating_sub(serving) > limit {
            self.violations.push(format!(
                "t={} {group}: {} of {size} workers out of service (limit {limit})",
                self.world.now,
                size - serving
            ));
        }
    }

    fn serving(&self, group: &str) -> usize {
        self.world
            .instances
            .values()
            .filter(|i| i.inst.tag(tags::GROUP) == Some(group) && i.inst.running)
            .filter_map(|i| self.world.nodes.get(i.node.as_ref()?))
            .filter(|n| {
                n.node.state == NodeState::Ready && n.node.availability == Availability::Active
            })
            .count()
    }

    /// Records which groups reached full strength (capacity checks start then).
    fn mark_full_groups(&mut self) {
        let full: Vec<String> = self
            .desired
            .groups
            .iter()
            .filter(|g| self.serving(&g.spec.name) >= g.spec.allocation.size())
            .map(|g| g.spec.name.clone())
            .collect();
        self.full_once.extend(full);
    }

    /// Oracle checks once converged: shape, config, no orphan, no stale node.
    fn check_converged(&mut self) {
        let now = self.world.now;
        let mut problems = Vec::new();
        for g in &self.desired.groups {
            let members: Vec<_> = self
                .world
                .instances
                .values()
                .filter(|i| i.inst.owned_by(&self.desired.cluster_id, &g.spec.name))
                .collect();
            if members.len() != g.spec.allocation.size() {
                problems.push(format!(
                    "{} has {} machines, declared {}",
                    g.spec.name,
                    members.len(),
                    g.spec.allocation.size()
                ));
            }
            if let Some(i) = members
                .iter()
                .find(|i| i.inst.config() != Some(g.hash.as_str()))
            {
                problems.push(format!(
                    "{} member {} is not on config {}",
                    g.spec.name, i.inst.id, g.hash
                ));
            }
        }
        for n in self.world.nodes.values() {
            let backed = self.world.instances.values().any(|i| {
                i.inst.running && i.inst.link().is_some() && i.inst.link() == n.node.link.as_deref()
            });
            if !backed || n.node.state != NodeState::Ready {
                problems.push(format!(
                    "stale node {} ({:?}, link {:?})",
                    n.node.id, n.node.state, n.node.link
                ));
            }
        }
        let desired_managers: usize = self
            .desired
            .groups
            .iter()
            .filter(|g| g.spec.role == Role::Manager)
            .map(|g| g.spec.allocation.size())
            .sum();
        let (members, reachable) = self.world.raft();
        if members != desired_managers || reachable != members {
            problems.push(format!(
                "raft has {members} members ({reachable} reachable), declared {desired_managers}"
            ));
        }
        for f in &self.foreign {
            if !self.world.instances.contains_key(f) {
                problems.push(format!("foreign machine {f} was destroyed"));
            }
        }
        self.violations.extend(
            problems
                .into_iter()
                .map(|p| format!("t={now} after convergence: {p}")),
        );
    }
}
