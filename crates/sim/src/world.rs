//! The simulated cloud and swarm: machines, nodes, raft membership and a
//! leader, evolving on a virtual clock with the timings measured on real
//! engines (`swarm-facts.md`). It is also the independent oracle for the
//! property tests: fault tolerance and leadership are computed from *its*
//! raft state, never by asking the planner.

mod verbs;
use crate::rng::Rng;
use drover_core::model::{
    Availability, Described, Instance, Node, NodeState, Observed, RaftMember, SwarmView, Time,
};
use drover_core::quorum;
use drover_core::spec::Role;
use drover_spi::ClusterError;
use std::collections::BTreeMap;

/// Latencies of the simulated machines and swarm, in ms.
#[derive(Debug, Clone)]
pub struct Timings {
    /// Provider call until the machine exists.
    pub provision: Time,
    /// Machine exists until its node is Ready (and in the raft, for managers).
    pub join: Time,
    /// One engine/provider API call.
    pub api: Time,
    /// Demote until the node is out of the raft.
    pub out_of_raft: Time,
    /// A node that left or died until it shows Down.
    pub down_after: Time,
    /// Leader lost until a new one is elected (when quorum remains).
    pub election: Time,
    /// Drain until the node's tasks moved.
    pub drain: Time,
    /// Tasks each worker runs (so drains prove something).
    pub tasks_per_worker: u32,
}

impl Timings {
    /// Machines that take no time: provision, join, leave and drain are
    /// immediate (what is left is the controller's own time).
    pub fn instant() -> Self {
        Timings {
            provision: 0,
            join: 0,
            api: 0,
            out_of_raft: 0,
            drain: 0,
            tasks_per_worker: 0,
            ..Timings::default()
        }
    }
}

impl Default for Timings {
    /// The medians measured on real engines here.
    fn default() -> Self {
        Timings {
            provision: 400,
            join: 600,
            api: 20,
            out_of_raft: 300,
            down_after: 15_000,
            election: 12_000,
            drain: 4_600,
            tasks_per_worker: 2,
        }
    }
}

/// A simulated machine.
#[derive(Debug, Clone)]
pub struct SimInstance {
    /// Provider-facing description.
    pub inst: Instance,
    /// When its node joins (`None`: it never will).
    pub join_at: Option<Time>,
    /// The node it created, once joined.
    pub node: Option<String>,
    /// It was broken by a fault (crash, never-join), not by drover.
    pub faulted: bool,
}

/// A simulated swarm node.
#[derive(Debug, Clone)]
pub struct SimNode {
    /// What `node ls` shows (state, raft, availability are kept current).
    pub node: Node,
    /// The engine behind it is alive.
    pub engine_alive: bool,
    /// The node left the swarm (or its engine died): Down at `down_at`.
    pub down_at: Option<Time>,
    /// Out of the raft at this time (after a demote).
    pub out_of_raft_at: Option<Time>,
    /// Tasks moved away at this time (after a drain).
    pub drained_at: Option<Time>,
    /// It reached `Down` (left or dead past `down_after`); only a rejoin,
    /// under a new node id, brings a machine back.
    pub down: bool,
    /// Cut off from the other managers until then (a partition): raft counts
    /// it unreachable while its engine lives and its status may still read
    /// Ready (the leader's heartbeat timeout is longer than the partition).
    pub partitioned_until: Option<Time>,
    /// Reads `unknown` until then: swarmkit's new leader lists every node so
    /// until the node's agent re-registers, while raft counts it reachable.
    pub unknown_until: Option<Time>,
    /// Reads `disconnected` until then (a flapping agent session).
    pub disconnected_until: Option<Time>,
    /// drover's engine labels (link, cluster, group) as they were before the
    /// engine restarted without them, to be put back by [`World::restore_labels`].
    pub lost_labels: Option<[Option<String>; 3]>,
    /// Its engine restarted right after its self-demotion was accepted and
    /// rejoined the raft under a new raft id, then stopped its manager: a
    /// raft member stays, unreachable, while the node reads as a Ready
    /// worker, until a node update makes swarmkit reconcile it away
    /// ([`World::heal_ghost`]).
    pub ghost: bool,
}

impl SimNode {
    /// Raft can reach it: its engine lives and no partition cuts it off.
    /// Deliberately not its status: after an election every node reads
    /// `unknown` while raft counts it reachable (design rule 10).
    pub fn in_contact(&self) -> bool {
        self.engine_alive && self.partitioned_until.is_none() && !self.ghost
    }

    /// It still runs: not dead, not left, not Down (an `unknown` or
    /// `disconnected` node still serves its tasks).
    pub fn serving(&self) -> bool {
        self.engine_alive && !self.down && !self.node.left
    }

    /// Status from its overlays: Down is final; `unknown` and `disconnected`
    /// windows hide a Ready node.
    fn status(&self, now: Time) -> NodeState {
        let within = |t: Option<Time>| t.is_some_and(|t| t > now);
        if self.down {
            NodeState::Down
        } else if within(self.unknown_until) {
            NodeState::Unknown
        } else if within(self.disconnected_until) {
            NodeState::Disconnected
        } else {
            NodeState::Ready
        }
    }
}

/// The whole simulated world.
#[derive(Debug, Clone)]
pub struct World {
    /// Virtual now.
    pub now: Time,
    /// The wall clock (ms since the Unix epoch) at virtual time 0: what the
    /// planner reads windows and machine ages against, and what machines'
    /// `created_ms` counts from. Fixed by default ([`WALL_ORIGIN`]), so a
    /// seeded run is the same whatever day it runs.
    pub wall_origin: Time,
    /// Latencies.
    pub timings: Timings,
    /// Machines by id (destroyed ones are removed).
    pub instances: BTreeMap<String, SimInstance>,
    /// Nodes by id (removed ones are removed).
    pub nodes: BTreeMap<String, SimNode>,
    /// The raft leader's node id.
    pub leader: Option<String>,
    /// A leader election completes at this time.
    pub election_at: Option<Time>,
    /// A swarm exists (someone ran init).
    pub swarm_exists: bool,
    /// Groups the provider is asked about.
    pub groups: Vec<String>,
    /// Probability that one describe fails.
    pub describe_failure: f64,
    /// Probability that one describe succeeds but leaves one machine out
    /// (eventually consistent provider APIs do).
    pub partial_describe: f64,
    /// After every leader change each node reads `unknown` for a random
    /// 1 s..=this many ms (0: never), as swarmkit's new leader shows them.
    pub unknown_window: Time,
    pub(crate) rng: Rng,
    next_id: u64,
}

/// The default [`World::wall_origin`]: 2026-12-05 00:00 UTC, a Saturday.
pub const WALL_ORIGIN: Time = 1_796_428_800_000;

impl World {
    /// An empty world.
    pub fn new(seed: u64, timings: Timings) -> Self {
        World {
            now: 0,
            wall_origin: WALL_ORIGIN,
            timings,
            instances: BTreeMap::new(),
            nodes: BTreeMap::new(),
            leader: None,
            election_at: None,
            swarm_exists: false,
            groups: Vec::new(),
            describe_failure: 0.0,
            partial_describe: 0.0,
            unknown_window: 0,
            rng: Rng::new(seed),
            next_id: 0,
        }
    }

    /// The wall clock now, ms since the Unix epoch.
    pub fn wall_ms(&self) -> Time {
        self.wall_origin + self.now
    }

    fn fresh_id(&mut self, prefix: &str) -> String {
        self.next_id += 1;
        format!("{prefix}{:04}", self.next_id)
    }

    /// Raft members and how many are reachable (the oracle's numbers).
    pub fn raft(&self) -> (usize, usize) {
        let members: Vec<&SimNode> = self
            .nodes
            .values()
            .filter(|n| n.node.raft.is_some())
            .collect();
        (
            members.len(),
            members.iter().filter(|n| n.in_contact()).count(),
        )
    }

    /// Fault tolerance from the simulator's own raft state.
    pub fn fault_tolerance(&self) -> i64 {
        let (m, r) = self.raft();
        quorum::fault_tolerance(m, r)
    }

    /// Raft members and how many are reachable once demotions under way
    /// have taken effect (a demote leaves the raft within a second).
    fn settled_raft(&self) -> (usize, usize) {
        let members: Vec<&SimNode> = self
            .nodes
            .values()
            .filter(|n| n.node.raft.is_some() && n.out_of_raft_at.is_none())
            .collect();
        (
            members.len(),
            members.iter().filter(|n| n.in_contact()).count(),
        )
    }

    /// Fault tolerance once demotions under way have taken effect. The
    /// oracle judges steps by it, and the fault injector respects it so that
    /// it tests healing, not an unrecoverable double failure.
    pub fn settled_fault_tolerance(&self) -> i64 {
        let (members, reachable) = self.settled_raft();
        quorum::fault_tolerance(members, reachable)
    }

    /// The link of the leader's machine: what the controller on it knows
    /// itself by (from its own configuration, so even when its engine lost
    /// drover's labels).
    pub fn leader_link(&self) -> Option<String> {
        let leader = self.leader.as_deref()?;
        self.instances
            .values()
            .find(|i| i.node.as_deref() == Some(leader))
            .and_then(|i| i.inst.link().map(str::to_string))
    }

    /// True when the leader's machine runs a controller: only machines of
    /// manager groups do (their boot script starts it), so a worker promoted
    /// by hand that becomes the leader leaves the swarm with no acting
    /// controller.
    pub fn leader_runs_controller(&self) -> bool {
        let Some(leader) = self.leader.as_deref() else {
            return false;
        };
        self.instances
            .values()
            .any(|i| i.node.as_deref() == Some(leader) && i.inst.tag("sim.role") == Some("manager"))
    }

    /// The earliest pending internal event.
    pub fn next_event(&self) -> Option<Time> {
        let mut t: Option<Time> = self.election_at;
        let mut take = |x: Option<Time>| {
            if let Some(x) = x.filter(|x| *x > self.now) {
                t = Some(t.map_or(x, |t| t.min(x)));
            }
        };
        for i in self.instances.values() {
            if i.node.is_none() && i.inst.running {
                take(i.join_at);
            }
        }
        for n in self.nodes.values() {
            take(n.down_at);
            take(n.out_of_raft_at);
            take(n.drained_at);
            take(n.partitioned_until);
            take(n.unknown_until);
            take(n.disconnected_until);
        }
        t
    }

    /// Moves the clock to `t`, letting joins, departures and elections happen.
    pub fn advance(&mut self, t: Time) {
        self.now = self.now.max(t);
        let now = self.now;
        let joining: Vec<String> = self
            .instances
            .iter()
            .filter(|(_, i)| {
                i.node.is_none() && i.inst.running && i.join_at.is_some_and(|j| j <= now)
            })
            .map(|(id, _)| id.clone())
            .collect();
        for id in joining {
            self.join(&id);
        }
        let mut lost_leader = false;
        for n in self.nodes.values_mut() {
            if n.out_of_raft_at.is_some_and(|t| t <= now) {
                n.out_of_raft_at = None;
                // A ghost's new raft id stays a member.
                if !n.ghost {
                    n.node.raft = None;
                }
                n.node.manager_role = false;
            }
            if n.down_at.is_some_and(|t| t <= now) {
                n.down_at = None;
                n.down = true;
            }
            if n.partitioned_until.is_some_and(|t| t <= now) {
                n.partitioned_until = None;
            }
            if n.drained_at.is_some_and(|t| t <= now) {
                n.drained_at = None;
                n.node.running_tasks = 0;
            }
        }
        if let Some(l) = &self.leader {
            let gone = self
                .nodes
                .get(l)
                .is_none_or(|n| n.node.raft.is_none() || !n.in_contact());
            // A raft leader that cannot reach a quorum of members steps down.
            let alive = self
                .nodes
                .values()
                .filter(|n| n.node.raft.is_some() && n.in_contact())
                .count();
            let members = self
                .nodes
                .values()
                .filter(|n| n.node.raft.is_some())
                .count();
            if gone || alive < quorum::quorum(members) {
                lost_leader = true;
            }
        }
        if lost_leader {
            self.leader = None;
            self.election_at.get_or_insert(now + self.timings.election);
        }
        if self.election_at.is_some_and(|t| t <= now) {
            self.election_at = None;
            self.elect();
        }
        self.refresh_raft_flags();
    }

    /// Elects a reachable member if a quorum of members is reachable.
    fn elect(&mut self) {
        let (members, reachable) = self.raft();
        if members == 0 || reachable < quorum::quorum(members) {
            return;
        }
        let candidates: Vec<String> = self
            .nodes
            .iter()
            .filter(|(_, n)| n.node.raft.is_some() && n.in_contact())
            .map(|(id, _)| id.clone())
            .collect();
        let pick = self.rng.between(0, candidates.len() as u64 - 1) as usize;
        self.leader = Some(candidates[pick].clone());
        self.new_leader_lists_nodes_unknown();
    }

    /// swarmkit's new leader lists every node `unknown` until its agent
    /// re-registers (each on its own heartbeat: a random 1 s..=window).
    fn new_leader_lists_nodes_unknown(&mut self) {
        if self.unknown_window == 0 {
            return;
        }
        let now = self.now;
        let window = self.unknown_window.max(1_000);
        for n in self.nodes.values_mut() {
            if !n.down {
                n.unknown_until = Some(now + self.rng.between(1_000, window));
            }
        }
    }

    /// Moves leadership to another reachable member at once (a demote of the
    /// leader hands over in ~0.1 s without an election).
    fn hand_over(&mut self, from: &str) {
        let next = self
            .nodes
            .iter()
            .find(|(id, n)| {
                id.as_str() != from
                    && n.node.raft.is_some()
                    && n.out_of_raft_at.is_none()
                    && n.in_contact()
            })
            .map(|(id, _)| id.clone());
        self.leader = next;
        if self.leader.is_none() {
            self.election_at
                .get_or_insert(self.now + self.timings.election);
        } else {
            self.new_leader_lists_nodes_unknown();
        }
    }

    /// The operator moves leadership onto a member whose machine runs a
    /// controller (a manager-group machine), if one is in contact.
    pub fn lead_from_a_manager(&mut self) {
        let manager = self
            .instances
            .values()
            .filter(|i| i.inst.tag("sim.role") == Some("manager"))
            .filter_map(|i| i.node.clone())
            .find(|id| {
                self.nodes.get(id).is_some_and(|n| {
                    n.node.raft.is_some() && n.out_of_raft_at.is_none() && n.in_contact()
                })
            });
        if let Some(id) = manager {
            self.leader = Some(id);
            self.new_leader_lists_nodes_unknown();
            self.refresh_raft_flags();
        }
    }

    /// Spontaneous leadership change (a fault).
    pub fn change_leader(&mut self) {
        if let Some(l) = self.leader.clone() {
            self.hand_over(&l);
            self.refresh_raft_flags();
        }
    }

    /// Brings what `node ls` shows in line with the world: raft flags and
    /// each node's status.
    fn refresh_raft_flags(&mut self) {
        let leader = self.leader.clone();
        let has_quorum = leader.is_some();
        let now = self.now;
        for (id, n) in self.nodes.iter_mut() {
            let contact = n.in_contact();
            if let Some(r) = &mut n.node.raft {
                r.leader = Some(id) == leader.as_ref();
                r.reachable = contact && (has_quorum || r.reachable);
            }
            n.node.state = n.status(now);
        }
    }

    fn join(&mut self, instance: &str) {
        let role = match self.instances[instance].inst.tag("sim.role") {
            Some("manager") => Role::Manager,
            Some("plain") => Role::Plain,
            _ => Role::Worker,
        };
        if role == Role::Plain {
            return;
        }
        // Joining needs a leader (or, for the first manager, no swarm at all).
        let init = !self.swarm_exists && role == Role::Manager;
        if !init && self.leader.is_none() {
            if let Some(i) = self.instances.get_mut(instance) {
                i.join_at = Some(self.now + 1_000);
            }
            return;
        }
        let id = self.fresh_id("node");
        let inst = &self.instances[instance].inst;
        let node = Node {
            id: id.clone(),
            link: inst.link().map(str::to_string),
            cluster: inst
                .tag(drover_core::model::tags::CLUSTER)
                .map(str::to_string),
            group: inst
                .tag(drover_core::model::tags::GROUP)
                .map(str::to_string),
            state: NodeState::Ready,
            availability: Availability::Active,
            manager_role: role == Role::Manager,
            raft: (role == Role::Manager).then(|| RaftMember {
                leader: false,
                reachable: true,
                addr: format!("{id}:2377"),
            }),
            running_tasks: if role == Role::Worker {
                self.timings.tasks_per_worker
            } else {
                0
            },
            locked: false,
            left: false,
            engine_no_manager: false,
            engine_version: None,
        };
        self.nodes.insert(
            id.clone(),
            SimNode {
                node,
                engine_alive: true,
                down_at: None,
                out_of_raft_at: None,
                drained_at: None,
                down: false,
                partitioned_until: None,
                unknown_until: None,
                disconnected_until: None,
                lost_labels: None,
                ghost: false,
            },
        );
        if let Some(i) = self.instances.get_mut(instance) {
            i.node = Some(id.clone());
        }
        if init {
            self.swarm_exists = true;
            self.leader = Some(id);
        }
        self.refresh_raft_flags();
    }

    /// The observation a controller would make now.
    pub fn observe(&mut self, self_link: Option<String>) -> Observed {
        let mut instances = BTreeMap::new();
        // Declared groups, and any other group a machine is tagged for (the
        // shell describes by cluster id too, to find orphans).
        let mut groups = self.groups.clone();
        for i in self.instances.values() {
            if let Some(g) = i.inst.tag(drover_core::model::tags::GROUP)
                && !groups.iter().any(|d| d == g)
            {
                groups.push(g.to_string());
            }
        }
        for g in groups {
            let described = if self.rng.chance(self.describe_failure) {
                Described::Failed("simulated provider outage".into())
            } else {
                let mut listed: Vec<Instance> = self
                    .instances
                    .values()
                    .filter(|i| i.inst.tag(drover_core::model::tags::GROUP) == Some(g.as_str()))
                    .map(|i| i.inst.clone())
                    .collect();
                // A successful answer that misses a machine: the planner
                // cannot tell it from a complete one.
                if !listed.is_empty() && self.rng.chance(self.partial_describe) {
                    let gone = self.rng.between(0, listed.len() as u64 - 1) as usize;
                    listed.remove(gone);
                }
                Described::Ok(listed)
            };
            instances.insert(g, described);
        }
        Observed {
            instances,
            swarm: self.swarm(),
            self_link,
            left_reports: Vec::new(),
            services: Default::default(),
            boots: Default::default(),
            // The simulated provider lists every machine it made unless
            // it is set to leave some out.
            complete_listings: if self.partial_describe == 0.0 {
                self.groups.iter().cloned().collect()
            } else {
                Default::default()
            },
        }
    }

    /// The swarm as `docker node ls` through a manager shows it (without
    /// describing the machines, which the swarm does not see).
    pub fn swarm(&self) -> SwarmView {
        if !self.swarm_exists {
            SwarmView::Absent
        } else if self.leader.is_none() {
            SwarmView::NoQuorum("The swarm does not have a leader".into())
        } else {
            SwarmView::Ok(self.nodes.values().map(|n| n.node.clone()).collect())
        }
    }
}

/// Why the simulated engine refused a call: swarmkit's preconditions, each
/// with the engine's own words ([`Refusal::message`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// The swarm has no leader to take the call.
    NoLeader,
    /// No node has that id.
    NoSuchNode,
    /// A promotion by hand needs a healthy worker.
    NotAHealthyWorker,
    /// The last raft member cannot be demoted.
    LastManager,
    /// The demotion would leave the raft without a quorum.
    QuorumLoss,
    /// A raft member cannot leave the swarm.
    LeavingManager,
    /// A manager's node cannot be removed.
    NotDemoted,
    /// A node that is not down is removed only with force.
    NotDown,
}

impl Refusal {
    /// The engine's message.
    pub fn message(self) -> &'static str {
        match self {
            Refusal::NoLeader => "The swarm does not have a leader",
            Refusal::NoSuchNode => "no such node",
            Refusal::NotAHealthyWorker => "not a healthy worker",
            Refusal::LastManager => "attempting to demote the last manager of the swarm",
            Refusal::QuorumLoss => {
                "can't remove member from the raft: this would result in a loss of quorum"
            }
            Refusal::LeavingManager => {
                "You are attempting to leave the swarm on a node that is participating as a manager"
            }
            Refusal::NotDemoted => "node must be demoted to worker before removal",
            Refusal::NotDown => "node is not down and can't be removed without --force",
        }
    }

    /// The engine refused because the step would cost the raft its quorum
    /// (or its last member): a planner that asks for it is unsafe.
    pub fn guards_quorum(self) -> bool {
        matches!(self, Refusal::LastManager | Refusal::QuorumLoss)
    }
}

impl From<Refusal> for ClusterError {
    fn from(r: Refusal) -> Self {
        let message = r.message().to_string();
        match r {
            Refusal::NoLeader => ClusterError::NoLeader(message),
            Refusal::NoSuchNode => ClusterError::NotFound(message),
            _ => ClusterError::Refused(message),
        }
    }
}
