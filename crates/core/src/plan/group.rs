//! One planning pass: evaluate operations in flight, then start new ones
//! group by group (managers first), then summarise.

use super::blocked::Blocked;
use super::budget::Budgets;
use super::facts::Facts;
use super::fast::Set;
use super::in_flight::{InFlight, Ops};
use super::memory::Clock;
use super::view::{Found, Member, View};
use super::waiting::Waiting;
use super::zones::ShortZones;
use super::{Action, DesiredGroup, Garbage, PlanInput};
use crate::journal::{OpKind, Operation, Target, Victim};
use crate::model::Node;
use crate::spec::{Role, Strategy};
use std::cell::RefCell;
use std::collections::{BTreeMap, HashSet};
use std::rc::Rc;

/// What a pass decides, written by the stages in order and read back only
/// to keep a group's first reason and to summarise: the plan's actions and
/// explanation, why groups are blocked or wait, the groups whose rollback
/// was asked for, and what garbage collection found.
#[derive(Default)]
pub(crate) struct Outputs<'a> {
    pub(crate) actions: Vec<Action>,
    pub(crate) explanation: Vec<String>,
    pub(crate) blocked: BTreeMap<String, Blocked>,
    pub(crate) waiting: BTreeMap<String, Waiting<'a>>,
    pub(crate) rollback_requested: HashSet<String>,
    /// What garbage collection found (for `drover gc`).
    pub(crate) garbage: Vec<Garbage>,
}

/// The ids a pass gives the operations it begins: `<group>-<nonce>-<n>`.
/// The one counter every stage of every group draws from, in the order
/// operations are begun: an id must be unique in the journal (the nonce
/// tells passes apart, `n` operations within one), and the same input
/// must give the same ids, so the counter cannot be split per stage or
/// per group without renaming what a pass plans.
struct OpIds {
    nonce: u64,
    /// Ids issued so far in this pass.
    issued: u32,
}

impl OpIds {
    fn next(&mut self, group: &str) -> String {
        self.issued += 1;
        format!("{group}-{:x}-{}", self.nonce, self.issued)
    }
}

/// One planning pass: the read-only facts, and what the stages produce
/// as they run (actions, operations begun, reasons, timers, garbage).
pub(crate) struct Planner<'a> {
    /// What the pass reads and never changes.
    pub(crate) facts: Facts<'a>,
    pub(crate) clock: Clock<'a>,
    /// Operations in flight, including those begun in this pass.
    pub(crate) ops: Ops<'a>,
    /// Budget counts over `ops` (changed only with them: `begin`, `end_op`).
    pub(crate) in_flight: InFlight,
    /// What the stages decided so far.
    pub(crate) out: Outputs<'a>,
    /// Operations of worker groups whose demotion of a promoted node was
    /// planned in this pass ([`Self::removes_raft_member`]).
    pub(crate) demoting: Vec<String>,
    /// By operation slot: where its members are in its group's view,
    /// once looked up in this pass ([`Self::found`]).
    found: RefCell<Vec<Option<Found>>>,
    /// The ids of the operations this pass begins.
    ids: OpIds,
    /// Zones the group's provisions avoid (`plan::zones`).
    pub(crate) short_zones: ShortZones,
    /// The services' budgets and the nodes on their way out.
    pub(crate) budgets: Budgets<'a>,
    /// The raft's ghost members (`plan::ghost`), found before any
    /// operation advances.
    pub(crate) ghosts: Vec<(&'a Node, super::Ghost)>,
}

impl<'a> Planner<'a> {
    pub(crate) fn new(input: PlanInput<'a>) -> Self {
        let facts = Facts::new(input);
        let world = &facts.world;
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
            facts,
            clock: Clock::new(input.memory, input.now),
            ops: Ops::new(input.journal),
            in_flight: InFlight::new(input.journal),
            out: Outputs::default(),
            demoting: Vec::new(),
            found: RefCell::new(Vec::new()),
            ids: OpIds {
                nonce: input.nonce,
                issued: 0,
            },
            short_zones: ShortZones::at(&input.memory.short_zones, input.journal, input.now),
            budgets,
            ghosts: Vec::new(),
        }
    }

    /// [`View::found`] for the operation in `slot` (in `view`, its
    /// group's), looked up once per pass.
    pub(crate) fn found(&self, slot: usize, op: &Operation, view: &View<'_>) -> Found {
        if let Some(Some(f)) = self.found.borrow().get(slot) {
            return *f;
        }
        let f = view.found(&self.facts.world, op);
        let mut cache = self.found.borrow_mut();
        if cache.len() <= slot {
            cache.resize(slot + 1, None);
        }
        cache[slot] = Some(f);
        f
    }

    pub(crate) fn run(&mut self) {
        self.ghosts = self.find_ghosts();
        for (slot, op) in self.facts.input.journal.iter().enumerate() {
            self.advance(op, slot);
        }
        self.heal_unclaimed_ghosts();
        let rolling = self.rolling_group();
        for gi in 0..self.facts.views.len() {
            let ahead = rolling
                .filter(|r| *r != gi)
                .map(|r| self.facts.views[r].d.spec.name.clone());
            self.start_ops(gi, ahead);
        }
        self.collect_orphans();
    }

    pub(crate) fn view(&self, group: &str) -> Option<&View<'a>> {
        self.view_rc(group).map(|v| &**v)
    }

    /// [`Self::view`], shared: readable while the planner acts.
    pub(crate) fn view_rc(&self, group: &str) -> Option<&Rc<View<'a>>> {
        self.facts.views.iter().find(|v| v.d.spec.name == group)
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
            v.described
                .as_ref()
                .is_ok_and(|insts| insts.iter().any(|i| self.due(v.d, i).is_some() && keep(i)))
        };
        let first = self
            .facts
            .views
            .iter()
            .position(|v| rolling_op(v) || outdated(v, &|_| true))?;
        if self.facts.promoted.is_empty() {
            return Some(first);
        }
        let v = &self.facts.views[first];
        let not_leader =
            |i: &Member<'_>| !(self.is_leader(i) || self.facts.world.is_self(i.link()));
        let only_the_leader =
            v.d.spec.role == Role::Manager && !rolling_op(v) && !outdated(v, &not_leader);
        let in_raft = |i: &Member<'_>| i.node.is_some_and(Node::in_raft);
        let promoted_outdated = || {
            (first + 1..self.facts.views.len()).find(|&k| outdated(&self.facts.views[k], &in_raft))
        };
        Some(
            only_the_leader
                .then(promoted_outdated)
                .flatten()
                .unwrap_or(first),
        )
    }

    pub(crate) fn new_op_id(&mut self, group: &str) -> String {
        self.ids.next(group)
    }

    /// Drops a finished or abandoned operation (in `slot`) from those in flight.
    pub(crate) fn end_op(&mut self, op: &Operation, slot: usize) {
        if self.ops.end(slot) {
            self.in_flight.remove(op);
        }
    }

    pub(crate) fn begin(&mut self, op: Operation, why: String) {
        self.out.explanation.push(format!("{}: {why}", op.group));
        self.in_flight.add(&op);
        let slot = self.ops.push(op.clone());
        // The Begin (journal write) goes before the actions of the first
        // step, and takes `op` itself once the step no longer needs it.
        let at = self.out.actions.len();
        self.advance(&op, slot);
        self.out
            .actions
            .insert(at, Action::Begin { op: Box::new(op) });
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
            is_self: self.facts.world.is_self(i.link()),
        });
        let in_place = kind == OpKind::Roll
            && d.spec.update.strategy == Strategy::InPlace
            && target.is_none()
            && victim.is_some();
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
            in_place,
            update_failure: None,
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
        let cluster = self.facts.input.desired.cluster_id.as_str();
        let nodes = self.facts.world.nodes();
        let candidates: Vec<&'a Node> = self
            .facts
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
}

#[cfg(test)]
mod tests {
    use super::OpIds;

    /// One counter for the whole pass: a second group's first operation
    /// does not reuse the first group's number.
    #[test]
    fn ids_count_up_across_groups_under_the_pass_nonce() {
        let mut ids = OpIds {
            nonce: 0xab,
            issued: 0,
        };
        assert_eq!(ids.next("workers"), "workers-ab-1");
        assert_eq!(ids.next("managers"), "managers-ab-2");
    }
}
