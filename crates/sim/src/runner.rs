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

mod act;
mod checks;
mod ends;
mod nemesis;
mod services;
mod windows;

pub use windows::WindowWait;

use crate::liveness::{self, Stuck};
use crate::oracle;
use crate::rng::Rng;
use crate::world::{Refusal, Timings, World};
use drover_core::execute::{Carry, Execution, walk_order};
use drover_core::hash::config_hash;
use drover_core::join_token::Tokens;
use drover_core::journal::{OpKind, Operation};
use drover_core::model::{Time, tags};
use drover_core::plan::{self, Action, Desired, DesiredGroup, Memory, Phase, Plan, PlanInput};
use drover_core::revision::{Past, rollback_target};
use drover_core::spec::{ClusterSpec, GcPolicy, Role};
use std::collections::{BTreeMap, BTreeSet};

/// The controller's periodic resync, ms.
pub const RESYNC: Time = 10_000;

/// The longest a run's final linger goes on for a provision still in
/// flight (`Runner::linger`), ms: several calls' worth, so a provision the
/// last passes started ends, and a bound however the calls are timed.
const LINGER_PROVISION: Time = 6 * RESYNC;

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
    /// A fault that stays once the others stop (the liveness oracle's).
    pub stuck: Option<Stuck>,
    /// Probability that the leader's engine restarts right after its
    /// self-demotion is accepted, leaving a ghost raft member (while faults
    /// are on; the ghost stays until a node update removes it).
    pub ghost: f64,
    /// No fault after this time (but `stuck` and ghosts).
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
    /// The stretches rolls waited for their maintenance windows.
    pub window_waits: Vec<WindowWait>,
    /// By group with a roll pending: the wall-clock time (epoch ms) until
    /// which its windows stay as last read (`windows.rs`).
    windows_read: BTreeMap<String, i64>,
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
    /// The acting controller's view of the join tokens (as the shell's).
    tokens: Tokens,
    /// By the simulator's truth: since when each role's current join
    /// token sits in some machine's boot environment, not rotated since.
    token_placed: BTreeMap<Role, Time>,
    /// Machines made per slot (`ends::slot_of`).
    made: BTreeMap<String, u32>,
    /// Liveness violations seen during the run (machines per slot).
    pub liveness: Vec<String>,
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
            window_waits: Vec::new(),
            windows_read: BTreeMap::new(),
            passes: 0,
            last_plan: None,
            faulted_groups: BTreeSet::new(),
            full_once: BTreeSet::new(),
            foreign: Vec::new(),
            next_fault: 0,
            acting_for: None,
            tokens: Tokens::default(),
            token_placed: BTreeMap::new(),
            made: BTreeMap::new(),
            liveness: Vec::new(),
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

    /// The run's end when `plan` shows one: a blocked group, or the world
    /// converged and settled. Judged only on a plan that observed the world
    /// after faults stopped (a stale plan may have been observed before).
    fn verdict(&mut self, plan: &Plan) -> Option<Outcome> {
        if self.observed_at < self.faults.until {
            return None;
        }
        // Blocked once every group ended: converged, blocked, or waiting
        // behind a blocked group (the liveness oracle judges the reasons).
        if let Some(why) = plan
            .groups
            .iter()
            .find(|g| g.phase == Phase::Blocked)
            .and_then(|g| g.reason.clone())
            && plan
                .groups
                .iter()
                .all(|g| liveness::group_ended(plan, &g.name))
        {
            return Some(Outcome::Blocked(why));
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
            return Some(Outcome::Converged);
        }
        None
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
            self.note_windows(&plan);
            if changed && immediate < 20 {
                // The journal or the world changed: react now, not at the next tick.
                immediate += 1;
                continue;
            }
            immediate = 0;
            if let Some(outcome) = self.verdict(&plan) {
                return outcome;
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
}

/// Performs a side effect on `w`, with the simulated engine's own preconditions.
fn apply(w: &mut World, action: &Action) -> Result<(), Refusal> {
    match action {
        Action::Demote { node, .. }
        | Action::DemoteSelfAndLeave { node, .. }
        | Action::DemoteSelf { node, .. } => w.demote(node),
        Action::Promote { node, .. } => w.promote_back(node),
        Action::Activate { node, .. } => w.activate(node),
        Action::RunUpdate {
            instance, config, ..
        } => {
            w.updated(instance, config);
            Ok(())
        }
        Action::Destroy { instance, .. } => {
            w.destroy(instance);
            Ok(())
        }
        Action::Drain { node, .. } => w.drain(node),
        Action::RemoveNode { node, force, .. } => w.remove_node(node, *force),
        Action::HealGhost { node, .. } => w.update_ghost(node),
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
        control: desired.control,
    }
}
