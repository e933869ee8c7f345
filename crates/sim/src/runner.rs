//! Drives the real planner against the simulated world, event by event, the
//! way the controller does: plan, write the journal, start each op's next
//! action (one at a time per op), wake on the next completion, world event
//! or planner timer. Faults are injected from a seeded schedule, and every
//! voluntary step is checked against the world's own state (the oracle,
//! `oracle.rs`).
//!
//! # Stale observations and fairness
//! A plan may be acted on only after the world moved (`stale_observation`,
//! `paused_controller`): the runner then keeps `judge`, the world as the
//! planner observed it with this plan's own steps applied, and every oracle
//! check judges the step against it. A fault that struck in between (a
//! crash, a partition, leadership moving, a hand promotion) is not the
//! planner's doing: in the real world the step meets the simulated
//! engine's own refusals (demote refused on loss of quorum, no leader), as
//! production meets the real engine's. So "the planner did it" means the
//! step was unsafe in the world it saw; "the fault did it" means only the
//! real world made it so, and the trace shows what the engine did with it.
//!
//! # Fencing
//! Every action carries the epoch of the controller that planned it. As in
//! production, the store refuses a journal write with a stale epoch and the
//! executor re-checks the epoch immediately before each side effect; the
//! first refused action ends that controller's plan. What stays unmodelled
//! is the window between that check and the call reaching the engine or
//! provider (a controller stopped exactly there acts once on resuming), and
//! side effects already running when the epoch moves (a provision in
//! flight completes; the ex-leader's leave loop goes on): docs/testing.md.

use crate::oracle;
use crate::rng::Rng;
use crate::world::{Refusal, Timings, World};
use drover_core::execute::{Carry, Execution, walk_order};
use drover_core::hash::config_hash;
use drover_core::journal::{OpKind, Operation};
use drover_core::model::{Time, tags};
use drover_core::plan::{self, Action, Desired, DesiredGroup, Memory, Phase, Plan, PlanInput};
use drover_core::revision::{Past, rollback_target};
use drover_core::spec::{ClusterSpec, GcPolicy, Role};
use std::collections::{BTreeMap, BTreeSet};

/// The controller's periodic resync, ms.
pub const RESYNC: Time = 10_000;

/// Which faults to inject, and until when.
#[derive(Debug, Clone, Default)]
pub struct Faults {
    /// Probability a provision call fails.
    pub provision_failure: f64,
    /// By zone: probability a provision call in that zone is refused for
    /// lack of capacity (the provider's `Capacity` error).
    pub no_capacity: BTreeMap<String, f64>,
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
    /// After every leader change each node reads `unknown` for 1 s up to
    /// this many ms while raft counts it reachable (0: never). A property of
    /// swarmkit rather than a fault: it stays on once faults stop.
    pub unknown_window: Time,
    /// Nodes reading `disconnected` for 2-10 s, per simulated minute.
    pub disconnects_per_min: f64,
    /// Managers cut off from the other managers for 3-12 s (engine alive,
    /// status still Ready, raft-unreachable), per simulated minute.
    pub partitions_per_min: f64,
    /// Probability a pass's plan is acted on 0.2-5 s after its observation,
    /// with one fault of the enabled kinds striking in between.
    pub stale_observation: f64,
    /// Probability the controller is stopped mid-plan (SIGSTOP) while its
    /// engine's leadership moves away; it resumes 5-40 s later with the
    /// rest of its plan and its old epoch.
    pub paused_controller: f64,
    /// Probability a successful describe leaves one machine out.
    pub partial_describe: f64,
    /// Engines restarted without drover's labels, per simulated minute
    /// (the labels come back when faults stop: the operator fixed it).
    pub label_losses_per_min: f64,
    /// Workers promoted to manager by hand, per simulated minute.
    pub hand_promotions_per_min: f64,
    /// Operator holds, releases, replace requests, pauses and resumes, per
    /// simulated minute (holds and pauses are lifted when faults stop).
    pub operator_events_per_min: f64,
    /// No fault after this time.
    pub until: Time,
}

/// A kind of fault the nemesis strikes with.
#[derive(Debug, Clone, Copy)]
enum Nemesis {
    Crash,
    LeaderChange,
    Partition,
    Disconnect,
    LoseLabels,
    Promote,
    Operator,
}

impl Faults {
    /// The nemesis kinds on, with their rates per minute.
    fn nemeses(&self) -> [(f64, Nemesis); 7] {
        [
            (self.crashes_per_min, Nemesis::Crash),
            (self.leader_changes_per_min, Nemesis::LeaderChange),
            (self.partitions_per_min, Nemesis::Partition),
            (self.disconnects_per_min, Nemesis::Disconnect),
            (self.label_losses_per_min, Nemesis::LoseLabels),
            (self.hand_promotions_per_min, Nemesis::Promote),
            (self.operator_events_per_min, Nemesis::Operator),
        ]
    }
}

/// The rest of a plan whose controller was stopped mid-way.
struct Paused {
    actions: Vec<Action>,
    /// The epoch it planned under.
    epoch: u64,
    /// The world as it observed it, with its earlier steps applied.
    judge: World,
    /// The desired state it planned against.
    desired: Desired,
    resume_at: Time,
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

/// A side effect under way in the simulated world (the planner's
/// `InFlight` counts operations; this is one call of one of them).
struct Running {
    op: String,
    action: Action,
    done_at: Time,
    epoch: u64,
}

/// A simulated cluster with a controller.
pub struct Runner {
    /// The world (also the oracle).
    pub world: World,
    /// Declared state.
    pub desired: Desired,
    /// Each group as declared before the last commit (the oracle's "previous size").
    previous: BTreeMap<String, DesiredGroup>,
    /// The declared revisions, as the store keeps them: the spec and
    /// whether the cluster converged on it (what the rollback rule reads).
    revisions: Vec<(ClusterSpec, bool)>,
    /// The journal as the store holds it.
    pub journal: Vec<Operation>,
    memory: Memory,
    controller_link: Option<String>,
    /// The store's epoch: bumped whenever another controller (or the same
    /// one restarted) takes over.
    epoch: u64,
    /// The world as the acting plan observed it, when the real one moved
    /// on before the plan was acted on (the oracle judges against it).
    judge: Option<World>,
    /// Worker machines a provisioning plan saw without drover's labels
    /// (`see_unlabelled`).
    unlabelled_seen: BTreeSet<String>,
    /// The desired state the acting plan was made against, when an
    /// operator changed it before the plan was acted on.
    judge_desired: Option<Desired>,
    paused: Option<Paused>,
    /// Nodes promoted to manager by hand (they may stay raft members).
    promoted: BTreeSet<String>,
    /// Faults were lifted (labels restored, holds and pauses released).
    lifted: bool,
    /// When the last plan's observation was made.
    observed_at: Time,
    running: Vec<Running>,
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
        let revisions = vec![(spec_of(&desired), false)];
        let mut r = Runner {
            world,
            desired,
            previous: BTreeMap::new(),
            revisions,
            journal: Vec::new(),
            memory: Memory::default(),
            controller_link: None,
            epoch: 0,
            judge: None,
            unlabelled_seen: BTreeSet::new(),
            judge_desired: None,
            paused: None,
            promoted: BTreeSet::new(),
            lifted: false,
            observed_at: 0,
            running: Vec::new(),
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
        r.set_faults(r.faults.clone());
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
        self.world.partial_describe = faults.partial_describe;
        self.world.unknown_window = faults.unknown_window;
        self.lifted = false;
        self.faults = faults;
    }

    /// Once faults stop: observations are whole again, lost labels come back
    /// and the operator lifts the holds and pauses it set, so that the run
    /// can converge.
    fn lift_faults(&mut self) {
        self.lifted = true;
        self.world.describe_failure = 0.0;
        self.world.partial_describe = 0.0;
        self.world.restore_labels();
        self.desired.held.clear();
        for g in &mut self.desired.groups {
            g.paused = false;
        }
    }

    /// Once faults stop, the operator undoes the hand promotions, as soon as
    /// the engine lets them: a promoted worker that leads leaves the swarm
    /// without a controller, so none would heal what blocks its demotion (in
    /// production a deadlock until someone acts: sim-findings N4). Here the
    /// operator starts the stopped machines of raft members (the engine
    /// refuses a demotion that would lose the quorum while they are down),
    /// moves the leadership to a manager-group member (`docker node demote`
    /// of the leader, or restarting its engine, does that in production),
    /// then demotes the promoted workers the engine allows.
    fn undo_promotions(&mut self) {
        let ft = self.world.settled_fault_tolerance();
        if self.world.swarm_exists && !self.world.leader_runs_controller() {
            let stopped: Vec<String> = self
                .world
                .instances
                .iter()
                .filter(|(_, i)| !i.inst.running)
                .filter(|(_, i)| {
                    let node = i.node.as_ref().and_then(|n| self.world.nodes.get(n));
                    node.is_some_and(|n| n.node.raft.is_some() && !n.engine_alive)
                })
                .map(|(id, _)| id.clone())
                .collect();
            for id in stopped {
                self.world.restart(&id);
                self.note(
                    format!("operator: start stopped raft member machine {id}"),
                    ft,
                );
            }
            self.world.lead_from_a_manager();
            self.note(
                "operator: move leadership to a manager-group member".into(),
                ft,
            );
        }
        let in_raft: Vec<String> = self.promoted_in_raft().cloned().collect();
        for node in in_raft {
            if self.world.demote(&node).is_ok() {
                self.note(format!("operator: demote hand-promoted {node}"), ft);
            }
        }
    }

    /// Nodes promoted by hand that are raft members and not leaving it.
    fn promoted_in_raft(&self) -> impl Iterator<Item = &String> {
        self.promoted.iter().filter(|n| {
            self.world
                .nodes
                .get(*n)
                .is_some_and(|m| m.node.raft.is_some() && m.out_of_raft_at.is_none())
        })
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
        self.revisions.push((spec_of(&self.desired), false));
    }

    /// Runs until converged, blocked, stuck or `deadline` (virtual ms).
    pub fn run_until(&mut self, deadline: Time) -> Outcome {
        let mut immediate = 0;
        loop {
            if self.world.now >= self.faults.until {
                if !self.lifted {
                    self.lift_faults();
                }
                self.undo_promotions();
            }
            let (plan, changed) = self.pass();
            if changed && immediate < 20 {
                // The journal or the world changed: react now, not at the next tick.
                immediate += 1;
                continue;
            }
            immediate = 0;
            // Judged only on a plan that observed the world after faults
            // stopped (a stale plan may have been observed before).
            if self.observed_at >= self.faults.until {
                if let Some(why) = plan
                    .groups
                    .iter()
                    .find(|g| g.phase == Phase::Blocked)
                    .and_then(|g| g.reason.clone())
                {
                    return Outcome::Blocked(why);
                }
                // The world settled too: an operator's demotion of a worker
                // promoted by hand under way, or a partition not yet over,
                // is not drover's to finish.
                let (members, reachable) = self.world.raft();
                let settled = members == reachable
                    && self
                        .world
                        .nodes
                        .values()
                        .all(|n| n.out_of_raft_at.is_none());
                let converged = plan.groups.iter().all(|g| g.phase == Phase::Converged)
                    && self.journal.is_empty()
                    && self.running.is_empty()
                    && settled;
                if converged {
                    if let Some((_, converged)) = self.revisions.last_mut() {
                        *converged = true;
                    }
                    self.check_converged();
                    return Outcome::Converged;
                }
            }
            // Like the real controller, resync on a timer: "no event" never means "no change".
            let resync = (!self.journal.is_empty()
                || plan.groups.iter().any(|g| g.phase != Phase::Converged))
            .then_some(self.world.now + RESYNC);
            let wake = [
                self.running.iter().map(|f| f.done_at).min(),
                plan.wake_at,
                self.world.next_event(),
                self.fault_time(),
                self.paused.as_ref().map(|p| p.resume_at),
                // A plan observed before faults stopped but acted on after
                // them is no verdict: look again.
                (self.observed_at < self.faults.until && self.world.now >= self.faults.until)
                    .then_some(self.world.now),
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
            if self.paused.as_ref().is_some_and(|p| p.resume_at <= t) {
                self.resume();
            }
        }
    }

    fn fault_time(&self) -> Option<Time> {
        if self.world.now >= self.faults.until {
            return None;
        }
        let active = self.faults.nemeses().iter().any(|(rate, _)| *rate > 0.0);
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
        for (per_min, kind) in self.faults.nemeses() {
            if self.rng.chance(per_min / 60.0) {
                self.strike(kind);
            }
        }
    }

    /// One fault of a kind the schedule has on, if any (the one that
    /// strikes between a stale observation and its plan's steps).
    fn strike_any(&mut self) {
        let on: Vec<Nemesis> = self
            .faults
            .nemeses()
            .into_iter()
            .filter(|(rate, _)| *rate > 0.0)
            .map(|(_, k)| k)
            .collect();
        if !on.is_empty() {
            let k = on[self.rng.between(0, on.len() as u64 - 1) as usize];
            self.strike(k);
        }
    }

    fn strike(&mut self, kind: Nemesis) {
        let ft = self.world.settled_fault_tolerance();
        match kind {
            Nemesis::Crash => self.crash_random_machine(),
            Nemesis::LeaderChange => {
                self.world.change_leader();
                self.note("fault: leadership moved".into(), ft);
            }
            Nemesis::Partition => {
                // As with crashes: only while the quorum survives it.
                let Some(node) = self.pick_node(|n| n.node.raft.is_some() && n.in_contact()) else {
                    return;
                };
                if ft < 1 {
                    return;
                }
                let until = self.world.now + self.rng.between(3_000, 12_000);
                self.world.partition(&node, until);
                self.note(format!("fault: {node} partitioned from the raft"), ft);
            }
            Nemesis::Disconnect => {
                let Some(node) = self.pick_node(|n| !n.down) else {
                    return;
                };
                let until = self.world.now + self.rng.between(2_000, 10_000);
                self.world.disconnect(&node, until);
                self.note(format!("fault: {node} reads disconnected"), ft);
            }
            Nemesis::LoseLabels => {
                let Some(node) = self.pick_node(|n| n.node.link.is_some() && n.serving()) else {
                    return;
                };
                // The engine's restart costs a member its raft contact briefly.
                if self.world.nodes[&node].node.raft.is_some() && ft < 1 {
                    return;
                }
                self.fault_in_group_of(&node);
                self.world.lose_labels(&node);
                self.note(
                    format!("fault: engine of {node} restarted without drover's labels"),
                    ft,
                );
            }
            Nemesis::Promote => {
                // A worker group's node (a manager-group machine demoted
                // mid-roll is drover's to replace, not a recovery spare).
                let workers: BTreeSet<String> = self
                    .world
                    .instances
                    .values()
                    .filter(|i| i.inst.tag("sim.role") == Some("worker"))
                    .filter_map(|i| i.node.clone())
                    .collect();
                let Some(node) = self.pick_node(|n| {
                    n.node.raft.is_none()
                        && !n.node.manager_role
                        && n.serving()
                        && workers.contains(&n.node.id)
                }) else {
                    return;
                };
                self.fault_in_group_of(&node);
                if self.world.promote(&node).is_ok() {
                    self.promoted.insert(node.clone());
                    self.note(format!("fault: worker {node} promoted by hand"), ft);
                }
            }
            Nemesis::Operator => self.operator_event(),
        }
    }

    /// A random node of this cluster matching `pick`.
    fn pick_node(&mut self, pick: impl Fn(&crate::world::SimNode) -> bool) -> Option<String> {
        let cluster = self.desired.cluster_id.as_str();
        let ids: Vec<String> = self
            .world
            .nodes
            .values()
            .filter(|n| pick(n))
            .filter(|n| {
                let labelled = n.lost_labels.as_ref().map_or(&n.node.cluster, |l| &l[1]);
                labelled.as_deref() == Some(cluster)
            })
            .map(|n| n.node.id.clone())
            .collect();
        (!ids.is_empty()).then(|| ids[self.rng.between(0, ids.len() as u64 - 1) as usize].clone())
    }

    /// Exempts the group of `node`'s machine from the capacity oracle.
    fn fault_in_group_of(&mut self, node: &str) {
        let group = self
            .world
            .instances
            .values()
            .find(|i| i.node.as_deref() == Some(node))
            .and_then(|i| i.inst.tag(tags::GROUP));
        if let Some(g) = group {
            self.faulted_groups.insert(g.to_string());
        }
    }

    /// An operator acting mid-roll: hold or release a machine, ask for one
    /// to be replaced, pause or resume a group.
    fn operator_event(&mut self) {
        let ids: Vec<String> = self
            .world
            .instances
            .values()
            .filter(|i| {
                i.inst.running
                    && self
                        .desired
                        .groups
                        .iter()
                        .any(|g| i.inst.owned_by(&self.desired.cluster_id, &g.spec.name))
            })
            .map(|i| i.inst.id.clone())
            .collect();
        let ft = self.world.settled_fault_tolerance();
        let groups = self.desired.groups.len() as u64;
        let what = match self.rng.between(0, 3) {
            0 | 1 if ids.is_empty() => return,
            0 => {
                let id = ids[self.rng.between(0, ids.len() as u64 - 1) as usize].clone();
                let what = format!("operator: hold {id}");
                self.desired.held.insert(id);
                what
            }
            1 => {
                let id = ids[self.rng.between(0, ids.len() as u64 - 1) as usize].clone();
                let what = format!("operator: replace {id}");
                self.desired.replace.insert(id);
                what
            }
            2 => match self.desired.held.pop_first() {
                Some(id) => format!("operator: release {id}"),
                None => return,
            },
            _ => {
                let g = &mut self.desired.groups[self.rng.between(0, groups - 1) as usize];
                g.paused = !g.paused;
                let verb = if g.paused { "pause" } else { "resume" };
                format!("operator: {verb} {}", g.spec.name)
            }
        };
        self.note(what, ft);
    }

    /// `id` is the only manager-group machine whose node is a raft member.
    fn last_controller_host(&self, id: &str) -> bool {
        let in_raft = |i: &crate::world::SimInstance| {
            i.node
                .as_ref()
                .and_then(|n| self.world.nodes.get(n))
                .is_some_and(|n| n.node.raft.is_some())
        };
        let hosts: Vec<&String> = self
            .world
            .instances
            .iter()
            .filter(|(_, i)| i.inst.tag("sim.role") == Some("manager") && in_raft(i))
            .map(|(k, _)| k)
            .collect();
        hosts.len() == 1 && hosts[0] == id
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
            .is_some_and(|n| n.node.raft.is_some() && n.in_contact());
        // Only crash a manager when the swarm keeps its quorum: this tests
        // healing, not the (unrecoverable without an operator) quorum loss.
        if is_member && self.world.settled_fault_tolerance() < 1 {
            return;
        }
        // Nor the last manager-group member of a raft that workers promoted
        // by hand keep alive: only manager-group machines run a controller,
        // so none would be left to heal it (sim-findings N4, a design gap
        // an operator must close by hand; not a planner decision).
        if self.last_controller_host(&id) {
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

    /// A different controller acts from now on (another leader's, or the
    /// same restarted): a new epoch and empty memory.
    fn take_over(&mut self) {
        self.memory = Memory::default();
        self.epoch += 1;
    }

    /// One controller pass: observe, plan, execute.
    fn pass(&mut self) -> (Plan, bool) {
        let leader_link = self.world.leader_link();
        let bootstrap = !self.world.swarm_exists;
        if leader_link != self.controller_link && !bootstrap {
            // A different controller acts now: it starts with empty memory
            // and reads the journal after winning the epoch (as production
            // does since issue 15), so it sees the deposed one's last writes.
            self.controller_link = leader_link.clone();
            self.take_over();
        }
        let observed = self.world.observe(self.controller_link.clone());
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
    fn act_late(&mut self) {
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
    fn pause(&mut self, rest: &[Action]) -> bool {
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
    fn resume(&mut self) {
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
    fn execute(&mut self, action: &Action, epoch: u64) -> Option<bool> {
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
    fn under_way(&self, action: &Action) -> bool {
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
    fn roll_back(&mut self, group: &str, reason: &str) -> bool {
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
    fn judged(&self) -> &World {
        self.judge.as_ref().unwrap_or(&self.world)
    }

    /// Starts a side effect; returns when its call returns. Effects apply at
    /// once (the engine acts when called), except a provision, whose machine
    /// appears when the provider call returns. Each step is judged by the
    /// oracle before and after, against the world the planner observed.
    fn start(&mut self, action: &Action) -> Time {
        let t = self.world.timings.clone();
        let now = self.world.now;
        if matches!(action, Action::Provision { .. }) {
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

    /// Oracle: a voluntary demotion (of a roll or a retirement) never takes
    /// the fault tolerance it found at or above the manager group's roll
    /// floor below it (issue 18; a heal may, its victim being broken).
    fn judge_floor(&mut self, what: &str, action: &Action, ft_before: i64) {
        let (Action::Demote { op, .. } | Action::DemoteSelfAndLeave { op, .. }) = action else {
            return;
        };
        let voluntary = self
            .journal
            .iter()
            .any(|o| o.id == *op && matches!(o.kind, OpKind::Roll | OpKind::Retire));
        let floor = self
            .judge_desired
            .as_ref()
            .unwrap_or(&self.desired)
            .roll_floor();
        let after = self.judged().settled_fault_tolerance();
        if voluntary && ft_before >= floor && after < floor {
            self.violations.push(format!(
                "t={} {what}: a roll took fault tolerance from {ft_before} to {after}, below its floor of {floor}",
                self.world.now
            ));
        }
    }

    /// Oracle, before a step: ownership, the leader last, the raft's own
    /// rules for removing a member (`oracle::manager_removal`), and no
    /// machine destroyed with its tasks (`oracle::tasks_moved`).
    fn judge_before(&mut self, action: &Action) {
        if let Action::Destroy { instance, .. } = action {
            self.check_destroy(instance);
        }
        let w = self.judged();
        // Judged against what the plan was made from: an operator's request
        // that arrives after it cannot bind it.
        let desired = self.judge_desired.as_ref().unwrap_or(&self.desired);
        let found = [
            oracle::leader_last(w, desired, action),
            oracle::manager_removal(w, desired, action),
            oracle::tasks_moved(w, desired, action),
        ];
        let now = self.world.now;
        self.violations
            .extend(found.into_iter().flatten().map(|v| format!("t={now} {v}")));
    }

    /// Oracle, after a step: no voluntary step takes the raft's fault
    /// tolerance below 0, and none is one the engine itself refuses as
    /// unsafe — in the world the planner observed (`judged`); a refusal only
    /// the moved real world makes is the engine doing its job.
    fn judge_after(&mut self, what: &str, ft_before: i64, judged: Result<(), Refusal>) {
        self.note(what.to_string(), ft_before);
        if let Err(e) = judged
            && e.guards_quorum()
        {
            self.violations.push(format!(
                "t={} {what}: the planner attempted a step the engine refuses as unsafe ({})",
                self.world.now,
                e.message()
            ));
        }
        let after = self.judged().settled_fault_tolerance();
        if ft_before >= 0 && after < 0 {
            self.violations.push(format!(
                "t={} {what}: fault tolerance went from {ft_before} to {after}",
                self.world.now
            ));
        }
    }
    fn complete_inflight(&mut self) {
        let now = self.world.now;
        let (done, rest): (Vec<Running>, Vec<Running>) = std::mem::take(&mut self.running)
            .into_iter()
            .partition(|f| f.done_at <= now);
        self.running = rest;
        for f in done {
            match &f.action {
                Action::Provision {
                    op, role, group, ..
                } => {
                    self.acting_for = Some(group.clone());
                    self.finish_provision(&f.action, op, *role);
                    self.acting_for = None;
                }
                // A simulated hook succeeds; as the controller does, its
                // step is journaled done (nothing in the world shows it).
                Action::RunHook { op, step, .. } => {
                    if let Some(o) = self.journal.iter_mut().find(|o| o.id == *op) {
                        o.done.insert(*step);
                    }
                }
                // Refused while still in the raft: retry, as the shell does
                // (unless the demote itself was refused: the call failed).
                Action::DemoteSelfAndLeave { node, .. }
                    if self
                        .world
                        .nodes
                        .get(node)
                        .is_some_and(|n| n.out_of_raft_at.is_some() || n.node.raft.is_none())
                        && self.world.leave(node).is_err() =>
                {
                    self.running.push(Running {
                        done_at: now + 500,
                        ..f
                    });
                }
                _ => {}
            }
        }
    }

    /// The zone that refuses `action` for lack of capacity
    /// ([`Faults::no_capacity`]) while faults are on. Draws from the seeded
    /// generator only for a zone that has a rate, so other runs keep theirs.
    fn capacity_refusal(&mut self, action: &Action) -> Option<String> {
        let Action::Provision { zone: Some(z), .. } = action else {
            return None;
        };
        let rate = *self.faults.no_capacity.get(z)?;
        (self.world.now < self.faults.until && self.rng.chance(rate)).then(|| z.clone())
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
        let short = self.capacity_refusal(action);
        if short.is_some()
            || (self.rng.chance(self.faults.provision_failure)
                && self.world.now < self.faults.until)
        {
            let why = short
                .as_ref()
                .map_or_else(|| "failed".into(), |z| format!("no capacity in zone {z}"));
            self.note(
                format!("{} -> {why} (simulated)", action.describe()),
                self.world.settled_fault_tolerance(),
            );
            // As the controller does: a failed call uses the slot's budget.
            if let Some(o) = self.journal.iter_mut().find(|o| o.id == op) {
                o.provision_failed(short.as_deref());
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
        self.see_unlabelled(group);
        let Some(g) = self.group_of(group) else {
            return;
        };
        // Managers: one addition at a time, plus the temporary member of a
        // spare slot while pets roll.
        let slack = if g.spec.role == Role::Manager {
            1 + usize::from(!g.spec.spares.is_empty())
        } else {
            g.spec.update.max_in_flight.max(g.spec.update.canaries) as usize
        };
        // A scale-in still holds the machines of the previous size.
        let before = self
            .previous
            .get(group)
            .map_or(0, |p| p.spec.allocation.size());
        let unlabelled = self
            .unlabelled_seen
            .iter()
            .filter_map(|id| self.world.instances.get(id))
            .filter(|i| i.inst.running && i.inst.owned_by(&self.desired.cluster_id, group))
            .count();
        let limit = g.spec.allocation.size().max(before) + slack + unlabelled;
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

    /// A worker whose engine lost drover's labels is, to drover, a worker
    /// it did not make (operators join those by hand): while a describe
    /// also leaves its machine out, its slot reads empty and is refilled
    /// (cattle have no identity), and the surplus stays until the excess is
    /// retired, after the operations in flight (a roll's surge may still
    /// add its machine). Managers hold instead (the raft is at stake), so
    /// only a worker group's machines are noted: those read unlabelled in
    /// the world a provisioning plan observed, for as long as they run.
    fn see_unlabelled(&mut self, group: &str) {
        if self.group_of(group).map(|g| g.spec.role) != Some(Role::Worker) {
            return;
        }
        let seen = self.judged();
        let ids: Vec<String> = seen
            .instances
            .values()
            .filter(|i| i.inst.running && i.inst.owned_by(&self.desired.cluster_id, group))
            .filter(|i| {
                i.node
                    .as_ref()
                    .and_then(|n| seen.nodes.get(n))
                    .is_some_and(|n| n.lost_labels.is_some())
            })
            .map(|i| i.inst.id.clone())
            .collect();
        self.unlabelled_seen.extend(ids);
    }

    fn group_of(&self, name: &str) -> Option<&DesiredGroup> {
        self.desired.groups.iter().find(|g| g.spec.name == name)
    }

    /// Oracle: only machines tagged with this cluster and a declared group are destroyed.
    fn check_destroy(&mut self, id: &str) {
        let Some(i) = self.judged().instances.get(id) else {
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
            && i.inst.created_ms + self.desired.orphan_grace.as_millis() as u64
                <= self.world.wall_ms();
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
            .judged()
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
        // Scaled mid-roll: the group was full at its previous size, and a
        // scale-out's new members are not missing capacity drover took away.
        let size = self
            .previous
            .get(&group)
            .map_or(usize::MAX, |p| p.spec.allocation.size())
            .min(g.spec.allocation.size());
        let serving = oracle::serving(self.judged(), &group);
        if size.saturating_sub(serving) > limit {
            self.violations.push(format!(
                "t={} {group}: {} of {size} workers out of service (limit {limit})",
                self.world.now,
                size - serving
            ));
        }
    }

    /// Records which groups reached full strength (capacity checks start then).
    fn mark_full_groups(&mut self) {
        let full: Vec<String> = self
            .desired
            .groups
            .iter()
            .filter(|g| oracle::serving(&self.world, &g.spec.name) >= g.spec.allocation.size())
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
            // By the simulator's truth: a node reading `unknown` after the
            // last hand-over is not stale.
            if !backed || !n.serving() {
                problems.push(format!(
                    "stale node {} ({:?}, link {:?})",
                    n.node.id, n.node.state, n.node.link
                ));
            }
        }
        // A worker promoted by hand that drover kept (it was current) is an
        // operator's extra member, not drover's.
        let promoted = self.promoted_in_raft().count();
        let desired_managers = oracle::declared_managers(&self.desired) + promoted;
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

/// Performs a side effect on `w`, with the simulated engine's own preconditions.
fn apply(w: &mut World, action: &Action) -> Result<(), Refusal> {
    match action {
        Action::Demote { node, .. } | Action::DemoteSelfAndLeave { node, .. } => w.demote(node),
        Action::Destroy { instance, .. } => {
            w.destroy(instance);
            Ok(())
        }
        Action::Drain { node, .. } => w.drain(node),
        Action::RemoveNode { node, force, .. } => w.remove_node(node, *force),
        _ => Ok(()),
    }
}

/// The cluster file `desired` was made from, as far as the revision rules
/// read it (its groups).
fn spec_of(desired: &Desired) -> ClusterSpec {
    ClusterSpec {
        groups: desired.groups.iter().map(|g| g.spec.clone()).collect(),
        gc: GcPolicy {
            orphan_grace: desired.orphan_grace,
        },
    }
}
