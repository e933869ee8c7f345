//! One planning pass: evaluate operations in flight, then start new ones
//! group by group (managers first), then summarise.

use super::budget::{Budgets, Gate};
use super::fast::Set;
use super::health::Health;
use super::in_flight::{InFlight, Ops};
use super::memory::UNLISTED_BOUND;
use super::memory::{Clock, Timer};
use super::view::{Found, Member, View};
use super::world::World;
use super::zones::ShortZones;
use super::{Action, DesiredGroup, Garbage, GroupStatus, Phase, Plan, PlanInput, SwarmStatus};
use crate::journal::{Collection, GcRule, OpKind, Operation, Target, Victim};
use crate::model::{Node, NodeState};
use crate::spec::{Allocation, Role, Strategy};
use std::cell::RefCell;

use std::collections::{BTreeMap, HashSet};
use std::rc::Rc;
use std::time::Duration;

pub(crate) struct Planner<'a> {
    pub(crate) input: PlanInput<'a>,
    pub(crate) world: World<'a>,
    pub(crate) clock: Clock<'a>,
    /// Shared, so a group's view can be read while the planner acts.
    pub(crate) views: Vec<Rc<View<'a>>>,
    /// Operations in flight, including those begun in this pass.
    pub(crate) ops: Ops<'a>,
    /// Budget counts over `ops` (changed only with them: `begin`, `end_op`).
    in_flight: InFlight,
    pub(crate) actions: Vec<Action>,
    pub(crate) explanation: Vec<String>,
    pub(crate) blocked: BTreeMap<String, String>,
    pub(crate) waiting: BTreeMap<String, String>,
    pub(crate) rollback_requested: HashSet<String>,
    pub(crate) desired_managers: usize,
    /// The fault tolerance a voluntary disruption of a manager must leave
    /// (the manager group's [`roll_floor`](crate::spec::GroupSpec::roll_floor)).
    pub(crate) roll_floor: i64,
    pub(crate) manager_trouble: Option<String>,
    /// What garbage collection found (for `drover gc`).
    pub(crate) garbage: Vec<Garbage>,
    /// Positions of the nodes that may be stale: no owned member of any
    /// group carries their link, or a rejoined Ready node with the same
    /// link superseded them. Found once per pass, in one scan of the
    /// nodes; [`Self::stale_nodes`] reads only these.
    unclaimed: Vec<u32>,
    /// Raft members (or nodes joining or leaving it) that a member of a
    /// group declaring workers carries: promoted by hand. Their removal
    /// passes the manager gate (usually empty).
    pub(crate) promoted: Vec<&'a Node>,
    /// The raft members that no owned machine carries (an engine that lost
    /// drover's labels, a machine that lost its link tag, a partial
    /// describe, a machine gone) and that are not another cluster's: a
    /// machine whose node cannot be found may be one of them
    /// ([`Self::unmatched_member`]). A handful at most.
    pub(crate) unmatched: Vec<&'a Node>,
    /// Operations of worker groups whose demotion of a promoted node was
    /// planned in this pass ([`Self::removes_raft_member`]).
    pub(crate) demoting: Vec<String>,
    /// By operation slot: where its members are in its group's view,
    /// once looked up in this pass ([`Self::found`]).
    found: RefCell<Vec<Option<Found>>>,
    pub(crate) counter: u32,
    /// Zones the group's provisions avoid (`plan::zones`).
    pub(crate) short_zones: ShortZones,
    /// The services' budgets and the nodes on their way out.
    pub(crate) budgets: Budgets<'a>,
}

impl<'a> Planner<'a> {
    pub(crate) fn new(input: PlanInput<'a>) -> Self {
        // Sized up front: a filtered iterator's hint is zero, and growing
        // sets of 10 000 ids rehashed them several times.
        let ids = |id: fn(&Victim) -> Option<&String>| {
            let mut set = Set::with_capacity_and_hasher(input.journal.len(), Default::default());
            set.extend(
                input
                    .journal
                    .iter()
                    .filter_map(|o| id(o.victim.as_ref()?))
                    .map(String::as_str),
            );
            set
        };
        let world = World::new(input.observed, ids(|v| v.node.as_ref()));
        let victims: Set<&str> = ids(|v| v.instance.as_ref());
        let mut views: Vec<View<'a>> = input
            .desired
            .groups
            .iter()
            .map(|d| {
                View::new(
                    d,
                    &input.desired.cluster_id,
                    input.observed,
                    &world,
                    &victims,
                )
            })
            .collect();
        // Managers first: they roll first and their state gates everything.
        views.sort_by_key(|v| v.d.spec.role != Role::Manager);
        let desired_managers = input
            .desired
            .groups
            .iter()
            .filter(|g| g.spec.role == Role::Manager)
            .map(|g| g.spec.allocation.size())
            .sum();
        let unclaimed = unclaimed_nodes(&world, &views);
        let promoted = world
            .raft_nodes()
            .filter(|&(k, _)| {
                views
                    .iter()
                    .any(|v| v.d.spec.role == Role::Worker && !v.unclaimed(k as usize))
            })
            .map(|(_, n)| n)
            .collect();
        let cluster = input.desired.cluster_id.as_str();
        let unmatched = world
            .raft_nodes()
            .filter(|(k, n)| n.raft.is_some() && unclaimed.binary_search(k).is_ok())
            .map(|(_, n)| n)
            .filter(|n| n.cluster.as_deref().is_none_or(|c| c == cluster))
            .collect();
        let budgets = Budgets::new(
            &input.observed.services,
            world.nodes(),
            input.journal,
            |op| {
                let v = op.victim.as_ref()?;
                world.victim_node(v.link.as_deref(), v.node.as_deref())
            },
        );
        Planner {
            input,
            world,
            clock: Clock::new(input.memory, input.now),
            views: views.into_iter().map(Rc::new).collect(),
            ops: Ops::new(input.journal),
            in_flight: InFlight::new(input.journal),
            actions: Vec::new(),
            explanation: Vec::new(),
            blocked: BTreeMap::new(),
            waiting: BTreeMap::new(),
            rollback_requested: HashSet::new(),
            desired_managers,
            roll_floor: input.desired.roll_floor(),
            manager_trouble: None,
            garbage: Vec::new(),
            unclaimed,
            promoted,
            unmatched,
            demoting: Vec::new(),
            found: RefCell::new(Vec::new()),
            counter: 0,
            short_zones: ShortZones::at(&input.memory.short_zones, input.journal, input.now),
            budgets,
        }
    }

    /// [`View::found`] for the operation in `slot` (in `view`, its
    /// group's), looked up once per pass.
    pub(crate) fn found(&self, slot: usize, op: &Operation, view: &View<'_>) -> Found {
        if let Some(Some(f)) = self.found.borrow().get(slot) {
            return *f;
        }
        let f = view.found(&self.world, op);
        let mut cache = self.found.borrow_mut();
        if cache.len() <= slot {
            cache.resize(slot + 1, None);
        }
        cache[slot] = Some(f);
        f
    }

    pub(crate) fn run(&mut self) {
        self.manager_trouble = self.first_unhealthy_manager_outside_ops();
        for (slot, op) in self.input.journal.iter().enumerate() {
            self.advance(op, slot);
        }
        let rolling = self.rolling_group();
        for gi in 0..self.views.len() {
            let ahead = rolling
                .filter(|r| *r != gi)
                .map(|r| self.views[r].d.spec.name.clone());
            self.start_ops(gi, ahead);
        }
        self.collect_orphans();
    }

    fn first_unhealthy_manager_outside_ops(&self) -> Option<String> {
        // Asked only of unhealthy managers (a handful): a scan of the
        // operations each, rather than a set of every operation's links.
        let busy = |link: &str| {
            self.ops.iter().any(|o| {
                o.id == link || o.victim.as_ref().and_then(|v| v.link.as_deref()) == Some(link)
            })
        };
        self.views
            .iter()
            .filter(|v| v.d.spec.role == Role::Manager)
            .find_map(|v| match &v.described {
                Err(e) => Some(format!(
                    "manager group {} cannot be described: {e}",
                    v.d.spec.name
                )),
                Ok(insts) => insts
                    .iter()
                    .filter(|i| !i.healthy())
                    .find(|i| !i.link().is_some_and(busy))
                    .map(|i| format!("manager instance {} is not healthy", i.id)),
            })
    }

    pub(crate) fn view(&self, group: &str) -> Option<&View<'a>> {
        self.view_rc(group).map(|v| &**v)
    }

    /// [`Self::view`], shared: readable while the planner acts.
    pub(crate) fn view_rc(&self, group: &str) -> Option<&Rc<View<'a>>> {
        self.views.iter().find(|v| v.d.spec.name == group)
    }

    /// The one group allowed to start roll operations: the first (managers
    /// first, then declared order) with outdated members or rolls in flight.
    /// A manager group left with only the leader to roll yields to a later
    /// group holding an outdated raft member (a worker promoted by hand):
    /// the leader goes last among all raft members.
    fn rolling_group(&self) -> Option<usize> {
        let rolling_op = |v: &View<'_>| {
            self.ops
                .iter()
                .any(|o| o.group == v.d.spec.name && o.kind == OpKind::Roll)
        };
        let outdated = |v: &View<'_>, keep: &dyn Fn(&Member<'_>) -> bool| {
            v.described.as_ref().is_ok_and(|insts| {
                insts
                    .iter()
                    .any(|i| (!i.current() || self.expired(&v.d.spec, i)) && keep(i))
            })
        };
        let first = self
            .views
            .iter()
            .position(|v| rolling_op(v) || outdated(v, &|_| true))?;
        if self.promoted.is_empty() {
            return Some(first);
        }
        let v = &self.views[first];
        let not_leader = |i: &Member<'_>| !(self.is_leader(i) || self.world.is_self(i.link()));
        let only_the_leader =
            v.d.spec.role == Role::Manager && !rolling_op(v) && !outdated(v, &not_leader);
        let in_raft = |i: &Member<'_>| i.node.is_some_and(Node::in_raft);
        let promoted_outdated =
            || (first + 1..self.views.len()).find(|&k| outdated(&self.views[k], &in_raft));
        Some(
            only_the_leader
                .then(promoted_outdated)
                .flatten()
                .unwrap_or(first),
        )
    }

    pub(crate) fn new_op_id(&mut self, group: &str) -> String {
        self.counter += 1;
        format!("{group}-{:x}-{}", self.input.nonce, self.counter)
    }

    /// Drops a finished or abandoned operation (in `slot`) from those in flight.
    pub(crate) fn end_op(&mut self, op: &Operation, slot: usize) {
        if self.ops.end(slot) {
            self.in_flight.remove(op);
        }
    }

    pub(crate) fn begin(&mut self, op: Operation, why: String) {
        self.explanation.push(format!("{}: {why}", op.group));
        self.in_flight.add(&op);
        let slot = self.ops.push(op.clone());
        // The Begin (journal write) goes before the actions of the first
        // step, and takes `op` itself once the step no longer needs it.
        let at = self.actions.len();
        self.advance(&op, slot);
        self.actions.insert(at, Action::Begin { op: Box::new(op) });
    }

    /// Begins an operation that collects garbage, explained by its rule and evidence.
    pub(crate) fn begin_collection(&mut self, op: Operation) {
        let why = op.collection.as_ref().map_or(String::new(), |c| {
            format!("collect {} ({}: {})", c.item, c.rule.as_str(), c.evidence)
        });
        self.begin(op, why);
    }

    pub(crate) fn make_op(
        &mut self,
        d: &DesiredGroup,
        kind: OpKind,
        victim: Option<&Member<'_>>,
        target: Option<Target>,
    ) -> Operation {
        let victim = victim.map(|i| Victim {
            instance: Some(i.id.clone()),
            link: i.link().map(str::to_string),
            node: i.node.map(|n| n.id.clone()),
            logical_id: i.logical_id().map(str::to_string),
            zone: i.zone().map(str::to_string),
            is_self: self.world.is_self(i.link()),
        });
        Operation {
            id: self.new_op_id(&d.spec.name),
            group: d.spec.name.clone(),
            kind,
            role: d.spec.role,
            surge: target.is_some()
                && victim.is_some()
                && d.spec.update.strategy == Strategy::Surge
                && kind == OpKind::Roll,
            victim,
            target,
            done: Default::default(),
            intent: None,
            collection: None,
            provision_failures: 0,
            short_zones: Vec::new(),
            hook_failure: None,
        }
    }

    /// Nodes carrying this cluster's and group's labels that no machine of
    /// a successful describe carries (or that a rejoined Ready node with the
    /// same link superseded), and that no operation is working on.
    ///
    /// "No machine" means no owned member of any declared group: a node
    /// whose link another group's machine carries is mislabelled, not dead,
    /// and removing a node is never done on a guess. Those nodes are found
    /// once per pass ([`unclaimed_nodes`]); each group reads only them.
    pub(crate) fn stale_nodes(&self, v: &View<'_>) -> Vec<&'a Node> {
        let d = v.d;
        if d.spec.role == Role::Plain || v.described.is_err() {
            return Vec::new();
        }
        let cluster = self.input.desired.cluster_id.as_str();
        let nodes = self.world.nodes();
        let candidates: Vec<&'a Node> = self
            .unclaimed
            .iter()
            .map(|&k| &nodes[k as usize])
            .filter(|n| {
                n.group.as_deref() == Some(d.spec.name.as_str())
                    && n.cluster.as_deref() == Some(cluster)
                    && !n.locked
            })
            .collect();
        if candidates.is_empty() {
            return candidates;
        }
        let claimed_by_ops: Set<&str> = self
            .ops
            .iter()
            .filter_map(|o| o.victim.as_ref())
            .flat_map(|v| [v.node.as_deref(), v.link.as_deref()])
            .flatten()
            .collect();
        candidates
            .into_iter()
            .filter(|n| {
                !claimed_by_ops.contains(n.id.as_str())
                    && !n
                        .link
                        .as_deref()
                        .is_some_and(|l| claimed_by_ops.contains(l))
            })
            .collect()
    }

    pub(crate) fn reap_dead_nodes(&mut self, d: &DesiredGroup, stale: Vec<&'a Node>) {
        let name = d.spec.name.as_str();
        let grace = d.spec.health.unhealthy_after;
        for n in stale {
            let c = Collection {
                rule: GcRule::DeadNode,
                item: n.id.clone(),
                evidence: format!(
                    "node {} ({}) is {:?}; no machine of a successful describe carries its link {}",
                    n.id,
                    if n.manager_role { "manager" } else { "worker" },
                    n.state,
                    n.link.as_deref().unwrap_or("(none)")
                ),
            };
            if n.state != NodeState::Down {
                // Not Down yet (every node is briefly unknown after a leader
                // change; a gone machine's node turns Down after ~15 s): wait.
                self.wait(name, format!("node {} has no machine; it is removed once it has been Down for the grace period", n.id));
                self.note_garbage(name, &c, "waiting: not Down yet".into());
                continue;
            }
            let key = Timer::Down(n.id.clone());
            if !self.clock.elapsed(key.clone(), grace) {
                self.wait(name, format!("node {} is Down and no machine carries its link: removed once its grace period ends", n.id));
                let seen = self.clock.running_for(&key);
                self.note_garbage(
                    name,
                    &c,
                    format!(
                        "in grace: Down for {} of {}",
                        humantime::format_duration(Duration::from_secs(seen.as_secs())),
                        humantime::format_duration(grace)
                    ),
                );
                continue;
            }
            let is_manager = n.in_raft();
            if let Some(no) = is_manager
                .then(|| self.removal_gate(Some(n), None, 0))
                .flatten()
            {
                self.wait(name, format!("dead manager node {} waits: {no}", n.id));
                self.note_garbage(name, &c, format!("held: {no}"));
                continue;
            }
            // Addressed by node id only: its link may be carried by a live
            // machine's node too (a rejoin), which must not be touched.
            let victim = Victim {
                instance: None,
                link: None,
                node: Some(n.id.clone()),
                logical_id: None,
                zone: None,
                is_self: false,
            };
            let c = Collection {
                evidence: format!(
                    "{}, Down for health.unhealthy_after ({}) as seen by this controller",
                    c.evidence,
                    humantime::format_duration(grace)
                ),
                ..c
            };
            let op = Operation {
                id: self.new_op_id(name),
                group: name.to_string(),
                kind: OpKind::RemoveDead,
                // A worker promoted by hand is removed as the manager it is
                // (demoted first): its steps follow the node, not the group.
                role: if n.in_raft() {
                    Role::Manager
                } else {
                    d.spec.role
                },
                victim: Some(victim),
                target: None,
                surge: false,
                done: Default::default(),
                intent: None,
                collection: Some(c),
                provision_failures: 0,
                short_zones: Vec::new(),
                hook_failure: None,
            };
            self.begin_collection(op);
        }
    }

    pub(crate) fn is_leader(&self, inst: &Member<'_>) -> bool {
        self.world
            .leader
            .is_some_and(|l| l.link.as_deref() == inst.link() && inst.link().is_some())
    }

    /// A member of the manager group (there is one per cluster) other than
    /// `leader` (the leader's or this controller's own machine) that is not
    /// current and healthy yet, held ones included: a hold keeps a member
    /// from being touched, not the leader from going last.
    /// Raft members of other groups (workers promoted by hand) count too:
    /// the leader goes last among all raft members.
    /// A raft member of this cluster no listed machine carries (a partial
    /// describe) may be outdated too: the leader waits until it is matched.
    /// A member with no cluster label may be a manager drover never made,
    /// which would hold the leader for ever: it holds the leader only while
    /// a running machine of ours has no node (an engine that lost drover's
    /// labels: that member may be it) or a group cannot be described, and
    /// until no such machine was seen for `UNLISTED_BOUND`.
    pub(crate) fn manager_before_leader(&self, leader: &str) -> Option<String> {
        let cluster = self.input.desired.cluster_id.as_str();
        // A member with no cluster label is one of ours only if some running
        // machine of ours has no node (its engine lost drover's labels), or
        // a group could not be described (it may hold that machine).
        let node_less = || {
            self.views.iter().any(|v| match &v.described {
                Ok(m) => m
                    .iter()
                    .any(|i| i.running && i.node.is_none() && i.id != leader),
                Err(_) => true,
            })
        };
        // Nor while it is new: a describe can leave its machine out, so
        // only once no machine of ours has lacked a node for a while is it
        // taken for a manager drover never made.
        let doubtful = |n: &Node| {
            node_less()
                || !self
                    .clock
                    .elapsed(Timer::Unlabelled(n.id.clone()), UNLISTED_BOUND)
        };
        if let Some(n) = self.unmatched.iter().find(|n| match n.cluster.as_deref() {
            Some(c) => c == cluster,
            None => doubtful(n),
        }) {
            return Some(format!(
                "raft member {} (no listed machine carries it)",
                n.id
            ));
        }
        let in_raft = |i: &Member<'_>| i.node.is_some_and(Node::in_raft);
        let requested = |i: &Member<'_>| self.input.desired.replace.contains(&i.id);
        self.views
            .iter()
            .filter(|v| v.d.spec.role == Role::Manager || !self.promoted.is_empty())
            .find_map(|v| match (&v.described, v.d.spec.role) {
                (Err(_), Role::Manager) => Some(format!("group {}", v.d.spec.name)),
                (Err(_), _) => None,
                // A temporary member (spare slot) is retired, never rolled:
                // it holds the leader only while unhealthy.
                (Ok(members), Role::Manager) => members
                    .iter()
                    .filter(|i| i.id != leader)
                    .find(|i| {
                        let spare = v.d.spec.is_spare(i.logical_id());
                        !(i.healthy() && (spare || (i.current() && !requested(i))))
                    })
                    .map(|i| i.id.clone()),
                (Ok(members), _) => members
                    .iter()
                    .find(|i| in_raft(i) && (!i.current() || requested(i)))
                    .map(|i| i.id.clone()),
            })
    }

    /// True (and `group` waits, saying why) when `inst` is the leader or
    /// this controller's own machine and another raft member is not current
    /// and healthy yet: rolls and retires alike take the leader last.
    pub(crate) fn leader_waits(&mut self, group: &str, inst: &Member<'_>) -> bool {
        if !(self.is_leader(inst) || self.world.is_self(inst.link())) {
            return false;
        }
        let Some(other) = self.manager_before_leader(&inst.id) else {
            return false;
        };
        self.wait(
            group,
            format!("the leader goes last: other managers are not all current yet ({other} is not current and healthy)"),
        );
        true
    }

    /// Budget, zone and quorum checks for disrupting `inst` now.
    /// `settled` (members no operation is working on) is given for rolls:
    /// until `canaries` of them are current and healthy, only canaries roll.
    pub(crate) fn may_disrupt(
        &mut self,
        d: &DesiredGroup,
        inst: &Member<'_>,
        settled: Option<Settled>,
    ) -> bool {
        let name = &d.spec.name;
        if let Some(busy) = self.in_flight.other_zone(inst.zone()) {
            self.wait(
                name,
                format!("zone {busy} is being disrupted: one zone at a time"),
            );
            return false;
        }
        if let Some(no) = self.node_in_doubt(inst) {
            self.wait(name, format!("{} waits: {no}", inst.id));
            return false;
        }
        if d.spec.role == Role::Manager {
            // A surge roll adds first; its demotion is gated when it comes.
            // That demotion of a reachable member waits for heal-first, so
            // the addition does too (else each try adds a member, then
            // steps aside).
            let surge = settled.is_some() && d.spec.update.strategy == Strategy::Surge;
            let reachable = inst
                .node
                .and_then(|n| n.raft.as_ref())
                .is_some_and(|r| r.reachable);
            let gate = if surge {
                self.unreachable_manager_gate(None, None)
                    .or_else(|| self.manager_trouble.clone())
                    .or_else(|| reachable.then(|| self.heal_first()).flatten())
                    .or_else(|| self.add_manager_gate())
                    .or_else(|| {
                        inst.node
                            .is_none()
                            .then(|| self.unmatched_member(&inst.id, inst.link()))
                            .flatten()
                    })
            } else {
                self.member_gate(Role::Manager, inst, self.roll_floor)
            };
            if let Some(no) = gate {
                self.wait(name, format!("manager {} waits: {no}", inst.id));
                return false;
            }
            return true;
        }
        if let Some(no) = self.member_gate(d.spec.role, inst, self.roll_floor) {
            self.wait(name, format!("{} waits: {no}", inst.id));
            return false;
        }
        // Out of service: members being replaced (heals included: a new
        // config that keeps failing must not walk through the whole group)
        // and members known to be broken that no operation owns yet.
        let being_replaced = self.in_flight.replacing(name);
        let broken = settled.map_or(0, |s| s.broken);
        let in_flight = being_replaced + broken;
        let current_healthy = settled.map_or(usize::MAX, |s| s.current_healthy);
        let canaries = d.spec.update.canaries as usize;
        let limit = if current_healthy < canaries {
            canaries
        } else {
            d.spec.update.max_in_flight as usize
        };
        if in_flight >= limit {
            let what = if current_healthy < canaries {
                "canaries"
            } else {
                "max_in_flight"
            };
            self.wait(name, format!("{in_flight} in flight ({what} = {limit})"));
            return false;
        }
        true
    }

    /// The service budget gate for `inst`'s node, where a roll or a
    /// retirement would begin (after [`Self::may_disrupt`]): a wait says
    /// why; a budget that can never be met blocks the group, so `plan` and
    /// `status` report it before the roll spends anything. Either way only
    /// this member is held: the next in order may run other tasks.
    pub(crate) fn within_service_budgets(&mut self, d: &DesiredGroup, inst: &Member<'_>) -> bool {
        let Some(node) = inst.node else {
            return true;
        };
        let name = d.spec.name.as_str();
        match self.budget_gate(d, node, &inst.id) {
            Gate::Go => true,
            Gate::Hold(why) => {
                self.wait(name, format!("{} waits: {why}", inst.id));
                false
            }
            Gate::Block(why) => {
                self.block(name, why);
                false
            }
        }
    }

    /// Records why `group` waits, unless a reason is recorded already.
    pub(crate) fn wait(&mut self, group: &str, why: String) {
        if !self.waiting.contains_key(group) {
            self.waiting.insert(group.to_string(), why);
        }
    }

    /// Records why `group` is blocked, unless a reason is recorded already.
    pub(crate) fn block(&mut self, group: &str, why: String) {
        if !self.blocked.contains_key(group) {
            self.blocked.insert(group.to_string(), why);
        }
    }

    pub(crate) fn finish(mut self) -> Plan {
        let statuses: Vec<GroupStatus> = self.views.iter().map(|v| self.status_of(v)).collect();
        let mut order: Vec<usize> = (0..statuses.len()).collect();
        // Report in declared order.
        order.sort_by_key(|&i| {
            self.input
                .desired
                .groups
                .iter()
                .position(|g| g.spec.name == statuses[i].name)
        });
        let groups = order.into_iter().map(|i| statuses[i].clone()).collect();
        for (g, why) in self.blocked.iter().chain(self.waiting.iter()) {
            self.explanation.push(format!("{g}: {why}"));
        }
        let swarm = SwarmStatus {
            members: self.world.members,
            reachable: self.world.reachable,
            fault_tolerance: self.world.fault_tolerance(),
            leader_link: self.world.leader.and_then(|n| n.link.clone()),
            problem: match &self.world.observed.swarm {
                crate::model::SwarmView::Ok(_) => None,
                crate::model::SwarmView::NoQuorum(e) => {
                    Some(format!("the swarm has lost quorum: {e}"))
                }
                crate::model::SwarmView::Unavailable(e) => {
                    Some(format!("the swarm cannot be asked: {e}"))
                }
                crate::model::SwarmView::Absent => Some("no swarm exists yet".into()),
            },
        };
        let (mut memory, wake_at) = self.clock.finish();
        memory.short_zones = std::mem::take(&mut self.short_zones);
        // Collections in flight that this pass did not list itself.
        let mut listed: Set<String> = self
            .garbage
            .iter()
            .map(|g| g.collection.item.clone())
            .collect();
        for op in self.ops.iter() {
            if let Some(c) = &op.collection
                && listed.insert(c.item.clone())
            {
                self.garbage.push(Garbage {
                    group: op.group.clone(),
                    collection: c.clone(),
                    state: format!("collecting (operation {})", op.id),
                });
            }
        }
        Plan {
            garbage: self.garbage,
            actions: self.actions,
            groups,
            swarm,
            explanation: self.explanation,
            memory,
            wake_at,
        }
    }

    fn status_of(&self, v: &View<'_>) -> GroupStatus {
        let name = &v.d.spec.name;
        let in_flight = self.ops.iter().filter(|o| o.group == *name).count();
        let mut st = GroupStatus {
            name: name.clone(),
            role: v.d.spec.role,
            phase: Phase::Converged,
            reason: None,
            desired_hash: v.d.hash.clone(),
            desired: v.d.spec.allocation.size(),
            members: 0,
            current: 0,
            healthy: 0,
            in_flight,
            window: self.calendar(&v.d.spec).describe(),
        };
        let insts = match &v.described {
            Err(e) => {
                st.phase = Phase::Unobservable;
                st.reason = Some(format!("provider describe failed: {e}"));
                return st;
            }
            Ok(i) => i,
        };
        let busy = v.busy(
            self.ops
                .iter_slots()
                .filter(|(_, o)| o.group == *name)
                .map(|(slot, o)| self.found(slot, o, v)),
        );
        for (i, _) in insts.iter().zip(busy).filter(|(_, b)| !b.victim) {
            st.members += 1;
            st.current += usize::from(i.current());
            st.healthy += usize::from(i.healthy());
        }
        let rolling = self
            .ops
            .iter()
            .any(|o| o.group == *name && o.kind == OpKind::Roll)
            || st.current < st.members;
        (st.phase, st.reason) = if let Some(why) = self.blocked.get(name) {
            (Phase::Blocked, Some(why.clone()))
        } else if v.d.paused {
            (Phase::Paused, Some("paused by an operator".into()))
        } else if rolling {
            (Phase::Rolling, self.waiting.get(name).cloned())
        } else if in_flight > 0 {
            (Phase::Changing, self.waiting.get(name).cloned())
        } else if st.members == st.desired
            && st.healthy == st.members
            && !self.waiting.contains_key(name)
        {
            (Phase::Converged, None)
        } else {
            (
                Phase::Waiting,
                Some(self.waiting.get(name).cloned().unwrap_or_else(|| {
                    format!("{} of {} members healthy", st.healthy, st.desired)
                })),
            )
        };
        st
    }
}

/// Positions of the nodes no owned member of any of `views` carries, or
/// that a Ready node with the same link superseded (a node that joins again
/// always gets a new id): the nodes that may be stale.
fn unclaimed_nodes(world: &World<'_>, views: &[View<'_>]) -> Vec<u32> {
    if views.iter().all(|v| v.d.spec.role == Role::Plain) {
        return Vec::new();
    }
    let superseded = |n: &Node| {
        world.links_shared()
            && world
                .with_link(n.link.as_deref())
                .any(|m| m.id != n.id && m.state == NodeState::Ready)
    };
    world
        .nodes()
        .iter()
        .enumerate()
        .filter(|&(k, n)| views.iter().all(|v| v.unclaimed(k)) || superseded(n))
        .map(|(k, _)| k as u32)
        .collect()
}

/// A roll candidate's place in the rollout order: the leader (or this
/// controller's own machine) last, unhealthy members first, then by zone,
/// logical id and id; last its position among the outdated members.
pub(crate) type RollKey<'i> = (
    bool,
    bool,
    Option<&'i str>,
    Option<&'i str>,
    IdOrder<'i>,
    usize,
);

/// An id that orders as the string does, its first eight bytes compared as
/// one integer first: building the rollout heap compares ids some 2n times,
/// and comparing the strings themselves reads every id's bytes from memory
/// again, each time (a third of a pass over 100 000 outdated members).
#[derive(PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct IdOrder<'i> {
    /// The first eight bytes, big-endian, zero-padded: when two prefixes
    /// differ they order as the strings do (a shorter string pads with the
    /// lowest byte); when equal, `id` decides.
    prefix: u64,
    id: &'i str,
}

impl<'i> IdOrder<'i> {
    pub(crate) fn of(id: &'i str) -> Self {
        let mut head = [0u8; 8];
        let n = id.len().min(8);
        head[..n].copy_from_slice(&id.as_bytes()[..n]);
        IdOrder {
            prefix: u64::from_be_bytes(head),
            id,
        }
    }
}

/// What a roll's budget needs from the members no operation works on,
/// counted once per pass (not once per candidate).
#[derive(Clone, Copy)]
pub(crate) struct Settled {
    /// Known broken: out of service already.
    broken: usize,
    /// Current and healthy: the canaries that passed.
    current_healthy: usize,
}

impl Settled {
    pub(crate) fn count(settled: &[&Member<'_>]) -> Self {
        Settled {
            broken: settled
                .iter()
                .filter(|i| matches!(i.health, Health::Unhealthy(_)))
                .count(),
            current_healthy: settled
                .iter()
                .filter(|i| i.current() && i.healthy())
                .count(),
        }
    }
}

/// Slots declared but neither filled nor being filled.
pub(crate) fn missing_slots(
    d: &DesiredGroup,
    live: &[&Member<'_>],
    pending: &[Target],
) -> Vec<Target> {
    match &d.spec.allocation {
        Allocation::LogicalIds(slots) => {
            let covered: HashSet<&str> = live
                .iter()
                .filter_map(|i| i.logical_id())
                .chain(pending.iter().filter_map(|t| t.logical_id.as_deref()))
                .collect();
            slots
                .iter()
                .filter(|s| !s.logical_id.as_deref().is_some_and(|l| covered.contains(l)))
                .map(|s| Target {
                    logical_id: s.logical_id.clone(),
                    zone: s.zone.clone(),
                    attempt: 1,
                })
                .collect()
        }
        Allocation::Size { size, zones } => {
            let have = live.len() + pending.len();
            let mut per_zone: BTreeMap<&str, usize> =
                zones.iter().map(|z| (z.as_str(), 0)).collect();
            for z in live
                .iter()
                .filter_map(|i| i.zone())
                .chain(pending.iter().filter_map(|t| t.zone.as_deref()))
            {
                if let Some(c) = per_zone.get_mut(z) {
                    *c += 1;
                }
            }
            (have..*size as usize)
                .map(|_| {
                    // Fill the emptiest zone first (ties: declared order).
                    let zone = zones.iter().min_by_key(|z| per_zone[z.as_str()]).cloned();
                    if let Some(z) = &zone {
                        *per_zone.get_mut(z.as_str()).expect("declared zone") += 1;
                    }
                    Target {
                        logical_id: None,
                        zone,
                        attempt: 1,
                    }
                })
                .collect()
        }
    }
}

/// Why no machine is added while `n`, a node that may be a member of the
/// group (live, or for pets Down and not yet reaped), is carried by no
/// listed machine.
pub(crate) fn unlisted_why(n: &Node) -> String {
    match &n.link {
        Some(link) if n.state == NodeState::Down => format!(
            "node {} (link {link}) is Down and no listed machine carries its link: its stopped machine may have been left out of the describe, so no pet is added until that node is matched or reaped",
            n.id
        ),
        Some(link) => format!(
            "node {} (link {link}) is live but no listed machine carries its link: the describe may be incomplete, so no machine is added until that node is matched or Down",
            n.id
        ),
        None => format!(
            "raft member {} carries no drover.link label (its engine lost drover's labels?): it may be the member of the empty slot, so no manager is added until its labels are back or it is demoted (docker node demote {}; a dead cattle member also once it is Down)",
            n.id, n.id
        ),
    }
}

/// Members to retire: undeclared logical ids and duplicates, or cattle over
/// size. Preference: unhealthy (a broken member goes without the healthy
/// manager gate, and a healthy one would wait for it), then raft-unreachable,
/// then outdated, then newest; from the fullest
/// zone; never the controller's own machine unless it is the last choice.
pub(crate) fn excess_members<'i>(
    d: &DesiredGroup,
    free: &[&'i Member<'i>],
    count: usize,
    self_link: Option<&str>,
    spare_kept: bool,
) -> Vec<&'i Member<'i>> {
    // A machine with no node (it never joined) serves nothing: it goes
    // first, before a joined one that reads unhealthy for a moment (a node
    // `disconnected` for seconds), which a heal of the other would keep.
    // Among the unhealthy, a raft member unreachable from the leader goes
    // before a reachable one that merely reads unknown (after an election),
    // whatever their configs: removing it raises fault tolerance, removing
    // the other would wait at the gate.
    type Rank<'i> = (
        bool,
        bool,
        bool,
        bool,
        bool,
        std::cmp::Reverse<u64>,
        &'i str,
    );
    let rank = |i: &'i Member<'i>| -> Rank<'i> {
        let reachable = i
            .node
            .and_then(|n| n.raft.as_ref())
            .is_some_and(|r| r.reachable);
        (
            i.link().is_some() && i.link() == self_link,
            i.node.is_some(),
            i.healthy(),
            reachable,
            i.config() == Some(d.hash.as_str()),
            std::cmp::Reverse(i.created_ms),
            i.id.as_str(),
        )
    };
    match &d.spec.allocation {
        Allocation::LogicalIds(slots) => {
            // The temporary member a roll keeps counts as declared.
            let spares = d.spec.spares.iter().filter(|_| spare_kept);
            let declared: HashSet<&str> = slots
                .iter()
                .chain(spares)
                .filter_map(|s| s.logical_id.as_deref())
                .collect();
            let mut out: Vec<&Member> = free
                .iter()
                .copied()
                .filter(|i| !i.logical_id().is_some_and(|l| declared.contains(l)))
                .collect();
            let mut by_id: BTreeMap<&str, Vec<&Member>> = BTreeMap::new();
            for i in free
                .iter()
                .copied()
                .filter(|i| i.logical_id().is_some_and(|l| declared.contains(l)))
            {
                by_id
                    .entry(i.logical_id().unwrap_or_default())
                    .or_default()
                    .push(i);
            }
            for (_, mut dupes) in by_id {
                dupes.sort_by_key(|&i| rank(i));
                out.extend(dupes.iter().take(dupes.len() - 1));
            }
            out.sort_by_key(|&i| rank(i));
            out
        }
        Allocation::Size { size, .. } => pick_from_fullest_zone(
            free,
            count.saturating_sub(*size as usize),
            |i| i.zone(),
            |i| {
                let r = rank(i);
                (r.0, r)
            },
        ),
    }
}

/// Picks `n` of `pool`, one at a time: each time the best by `rank` from
/// the zone with the most members left; a member whose rank says "last"
/// (the controller's own machine) only once no other is left. Per zone its members are sorted once, so a
/// pick compares zones, not members: comparing every member for every pick
/// made scaling 100 000 members in by half quadratic.
fn pick_from_fullest_zone<'z, T: Copy, R: Ord>(
    pool: &[T],
    n: usize,
    zone: impl Fn(T) -> Option<&'z str>,
    rank: impl Fn(T) -> (bool, R),
) -> Vec<T> {
    if n == 0 {
        return Vec::new();
    }
    // Per zone, worst first: the best is popped.
    let mut zones: BTreeMap<Option<&str>, Vec<T>> = BTreeMap::new();
    for &i in pool {
        zones.entry(zone(i)).or_default().push(i);
    }
    for members in zones.values_mut() {
        members.sort_by_key(|&i| std::cmp::Reverse(rank(i)));
    }
    let mut out = Vec::with_capacity(n.min(pool.len()));
    while out.len() < n {
        let Some(members) = zones
            .values_mut()
            .filter(|m| !m.is_empty())
            .min_by_key(|m| {
                let best = rank(m[m.len() - 1]);
                (best.0, std::cmp::Reverse(m.len()), best)
            })
        else {
            break;
        };
        out.extend(members.pop());
    }
    out
}

#[cfg(test)]
mod tests {
    use super::{IdOrder, pick_from_fullest_zone};
    use proptest::prelude::*;
    use std::collections::HashMap;

    /// The scale-in choice as first written: every pick compares every
    /// member left (the fullest zone's best, "last" ones after all others).
    fn pick_naive(pool: &[(u8, bool, u8, u32)], n: usize) -> Vec<(u8, bool, u8, u32)> {
        let mut pool = pool.to_vec();
        let mut out = Vec::new();
        while out.len() < n && !pool.is_empty() {
            let mut per_zone: HashMap<u8, usize> = HashMap::new();
            for i in &pool {
                *per_zone.entry(i.0).or_default() += 1;
            }
            let best = pool
                .iter()
                .enumerate()
                .min_by_key(|(_, i)| (i.1, std::cmp::Reverse(per_zone[&i.0]), (i.1, i.2, i.3)))
                .map(|(k, _)| k)
                .expect("not empty");
            out.push(pool.remove(best));
        }
        out
    }

    proptest! {
        /// Ids order exactly as their strings do, however long, whatever
        /// bytes they share (NUL included: it is what short ids pad with).
        #[test]
        fn ids_order_as_their_strings(
            a in "[ab\\x00é]{0,10}",
            b in "[ab\\x00é]{0,10}",
        ) {
            prop_assert_eq!(IdOrder::of(&a).cmp(&IdOrder::of(&b)), a.cmp(&b));
        }

        /// Scale-in picks the same members in the same order as comparing
        /// every member for every pick did.
        #[test]
        fn scale_in_picks_as_before(
            members in proptest::collection::vec((0u8..4, proptest::bool::weighted(0.1), 0u8..3), 0..40),
            n in 0usize..45,
        ) {
            const ZONES: [&str; 4] = ["a", "b", "c", "d"];
            // Unique ids, as members' are.
            let pool: Vec<(u8, bool, u8, u32)> = members
                .iter()
                .enumerate()
                .map(|(k, &(z, last, r))| (z, last, r, k as u32))
                .collect();
            let zone = |i: (u8, bool, u8, u32)| (i.0 > 0).then(|| ZONES[i.0 as usize]);
            let picked = pick_from_fullest_zone(&pool, n, zone, |i| (i.1, (i.1, i.2, i.3)));
            prop_assert_eq!(picked, pick_naive(&pool, n));
        }
    }
}
