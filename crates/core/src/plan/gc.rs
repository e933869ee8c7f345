//! Garbage collection (docs/gc.md): machines that never joined, orphans of
//! undeclared groups, and the meltdown guard that stops all of it (and all
//! replacing) when too much of a group is down at once. Dead nodes are
//! reaped in `group.rs` (`reap_dead_nodes`); every collection carries its
//! rule and evidence ([`Collection`]) into the journal and the events.

use super::blocked::Blocked;
use super::fast::Set;
use super::group::Planner;
use super::health::Health;
use super::memory::Timer;
use super::op::StepWait;
use super::refusal::Refusal;
use super::view::Member;
use super::{Action, DesiredGroup, Garbage};
use crate::journal::{Collection, GcRule, OpKind, Operation, Step, Victim};
use crate::model::{Described, Instance, Node, NodeState, tags};
use std::time::Duration;

/// Where an item garbage collection found stands: the reason is the
/// variant; the text `drover gc` and status show is rendered from it
/// (and serialised as that text).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GarbageState {
    /// An operation collects it: begun in this pass, or in flight (its id).
    Collecting(Option<String>),
    /// A dead node's candidate that is not Down yet.
    NotDownYet,
    /// An orphan while the swarm cannot say whether its node is a manager.
    SwarmUnasked,
    /// Seen, but not yet for its whole grace period.
    InGrace {
        /// What was seen: a node Down (else a machine listed).
        down: bool,
        /// For how long so far, in whole seconds.
        seen: Duration,
        /// The grace period.
        grace: Duration,
    },
    /// A dead manager's node the manager gate holds.
    Held(Refusal),
    /// An orphan that is a swarm manager: kept on purpose, never collected.
    KeptManager,
}

impl GarbageState {
    /// Kept on purpose: nothing will collect it without an operator.
    pub fn is_kept(&self) -> bool {
        matches!(self, GarbageState::KeptManager)
    }
}

impl std::fmt::Display for GarbageState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let human = humantime::format_duration;
        match self {
            GarbageState::Collecting(None) => f.write_str("collecting"),
            GarbageState::Collecting(Some(op)) => write!(f, "collecting (operation {op})"),
            GarbageState::NotDownYet => f.write_str("waiting: not Down yet"),
            GarbageState::SwarmUnasked => {
                f.write_str("waiting: the swarm cannot be asked whether it is a manager")
            }
            GarbageState::InGrace { down, seen, grace } => write!(
                f,
                "in grace: {} for {} of {}",
                if *down { "Down" } else { "seen" },
                human(*seen),
                human(*grace)
            ),
            GarbageState::Held(no) => write!(f, "held: {no}"),
            GarbageState::KeptManager => f.write_str(
                "kept: it is a swarm manager; drover never removes a manager it does not declare (demote and remove it by hand)",
            ),
        }
    }
}

impl serde::Serialize for GarbageState {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

/// The wait before the second machine for a slot; doubled for each further one.
const FIRST_BACKOFF: Duration = Duration::from_secs(10);
/// The longest wait between two machines for one slot.
const MAX_BACKOFF: Duration = Duration::from_secs(300);

impl Planner<'_> {
    /// Records an item for `drover gc` and status.
    pub(crate) fn note_garbage(
        &mut self,
        group: &str,
        collection: &Collection,
        state: GarbageState,
    ) {
        self.out.garbage.push(Garbage {
            group: group.to_string(),
            collection: collection.clone(),
            state,
        });
    }

    /// Meltdown guard: why nothing in the group may be replaced or reaped
    /// now, if more members are down at once than `health.max_unhealthy`
    /// allows. Down members are those judged unhealthy plus lost ones:
    /// declared slots without a machine while a node of the group has no
    /// machine either (a slot already refilled leaves mere debris, and a
    /// slot never filled is growth, not loss). An outage of the control
    /// plane or the provider is not a reason to destroy the fleet. `stale`
    /// counts the group's stale nodes (`stale_nodes`).
    pub(crate) fn meltdown(
        &self,
        d: &DesiredGroup,
        insts: &[Member<'_>],
        stale: usize,
    ) -> Option<Blocked> {
        let unhealthy = insts
            .iter()
            .filter(|i| matches!(i.health, Health::Unhealthy(_)))
            .count();
        let size = d.spec.allocation.size();
        let missing = size.saturating_sub(insts.len());
        let lost = stale.min(missing);
        let down = unhealthy + lost;
        let policy = d.spec.health.max_unhealthy;
        // A share is of the machines there are (a surge roll has one more).
        let base = size.max(insts.len());
        let limit = policy.limit(base);
        (down > limit).then_some(Blocked::Meltdown {
            down,
            base,
            unhealthy,
            lost,
            policy,
            limit,
        })
    }

    /// The attempt number for the replacement of `inst`, which never
    /// joined, or why the group blocks instead. A new spec (another config
    /// hash) starts a fresh budget.
    pub(crate) fn next_attempt(&self, d: &DesiredGroup, inst: &Instance) -> Result<u32, Blocked> {
        if inst.config() != Some(d.hash.as_str()) {
            return Ok(1);
        }
        let attempt = inst.attempt();
        let max = d.spec.health.max_attempts;
        if attempt >= max {
            return Err(Blocked::NeverJoined {
                attempt,
                max,
                startup_timeout: d.spec.health.startup_timeout,
                last: inst.id.clone(),
            });
        }
        Ok(attempt + 1)
    }

    /// The never-joined rule's record for `inst`.
    pub(crate) fn never_joined(d: &DesiredGroup, inst: &Instance, evidence: String) -> Collection {
        Collection {
            rule: GcRule::NeverJoined,
            item: inst.id.clone(),
            evidence: format!(
                "{evidence} (attempt {} of {})",
                inst.attempt(),
                d.spec.health.max_attempts
            ),
        }
    }

    /// Why the provision step of `op` must not run now: the slot's budget is
    /// spent (`Err`, the group blocks) or it backs off before trying again
    /// (`Ok(Some)`). The slot's attempt number counts machines that never
    /// joined and provision calls that failed alike.
    pub(crate) fn provision_gate(
        &self,
        d: &DesiredGroup,
        op: &Operation,
        attempt: u32,
    ) -> Result<Option<StepWait<'static>>, Blocked> {
        let max = d.spec.health.max_attempts;
        if attempt > max {
            return Err(Blocked::SlotSpent {
                op: op.id.clone(),
                max,
                failures: op.provision_failures,
            });
        }
        if attempt <= 1 {
            return Ok(None);
        }
        let backoff = FIRST_BACKOFF
            .saturating_mul(1 << (attempt - 2).min(16))
            .min(MAX_BACKOFF)
            .min(d.spec.update.step_timeout / 2);
        let key = Timer::Backoff(op.id.clone(), attempt);
        Ok(
            (!self.clock.elapsed(key, backoff)).then_some(StepWait::Backoff {
                backoff,
                attempt,
                max,
            }),
        )
    }

    /// Orphans: machines carrying this cluster's id for a group that is no
    /// longer declared, seen through a successful describe for the whole
    /// `gc.orphan_grace`, are destroyed (and their node removed). Machines
    /// without drover's tags or with another cluster id are never listed.
    /// Nothing is concluded while the swarm cannot be asked: a machine's
    /// node might be a manager, which is never collected this way.
    pub(crate) fn collect_orphans(&mut self) {
        let desired = self.facts.input.desired;
        let declared: Set<&str> = desired
            .groups
            .iter()
            .map(|g| g.spec.name.as_str())
            .collect();
        if (self.facts.input.observed.instances.keys()).all(|g| declared.contains(g.as_str())) {
            return;
        }
        let claimed: Set<String> = self
            .ops
            .iter()
            .filter_map(|o| o.victim.as_ref()?.instance.clone())
            .collect();
        let grace = desired.orphan_grace;
        for (group, described) in &self.facts.input.observed.instances {
            if declared.contains(group.as_str()) {
                continue;
            }
            let Described::Ok(list) = described else {
                continue;
            };
            for inst in list
                .iter()
                .filter(|i| i.owned_by(&desired.cluster_id, group))
            {
                let c = Collection {
                    rule: GcRule::Orphan,
                    item: inst.id.clone(),
                    evidence: format!(
                        "tagged {}={} and {}={}, but no group {group} is declared",
                        tags::CLUSTER,
                        desired.cluster_id,
                        tags::GROUP,
                        group
                    ),
                };
                if claimed.contains(&inst.id) {
                    self.note_garbage(group, &c, GarbageState::Collecting(None));
                    continue;
                }
                if !self.facts.world.swarm_ok() {
                    self.note_garbage(group, &c, GarbageState::SwarmUnasked);
                    continue;
                }
                let node = self.facts.world.node_for(inst.link());
                if node.is_some_and(Node::in_raft) {
                    self.note_garbage(group, &c, GarbageState::KeptManager);
                    continue;
                }
                if let Some(seen) = self.clock.in_grace(Timer::Orphan(inst.id.clone()), grace) {
                    let state = GarbageState::InGrace {
                        down: false,
                        seen,
                        grace,
                    };
                    self.note_garbage(group, &c, state);
                    continue;
                }
                let c = Collection {
                    evidence: format!(
                        "{}, seen for gc.orphan_grace ({})",
                        c.evidence,
                        humantime::format_duration(grace)
                    ),
                    ..c
                };
                let op = self.orphan_op(group, inst, node, c.clone());
                self.note_garbage(group, &c, GarbageState::Collecting(None));
                self.begin_collection(op);
            }
        }
    }

    fn orphan_op(
        &mut self,
        group: &str,
        inst: &Instance,
        node: Option<&Node>,
        c: Collection,
    ) -> Operation {
        Operation {
            id: self.new_op_id(group),
            group: group.to_string(),
            kind: OpKind::Orphan,
            role: if node.is_some() {
                crate::spec::Role::Worker
            } else {
                crate::spec::Role::Plain
            },
            victim: Some(Victim {
                instance: Some(inst.id.clone()),
                link: inst.link().map(str::to_string),
                node: node.map(|n| n.id.clone()),
                logical_id: inst.logical_id().map(str::to_string),
                zone: inst.zone().map(str::to_string),
                is_self: false,
            }),
            target: None,
            surge: false,
            done: Default::default(),
            intent: None,
            collection: Some(c),
            provision_failures: 0,
            short_zones: Vec::new(),
            hook_failure: None,
            in_place: false,
            update_failure: None,
        }
    }

    /// An orphan operation: destroy the machine, then remove its node (a
    /// worker's; forced when still Ready, since its machine is gone).
    pub(crate) fn advance_orphan(&mut self, op: &Operation, slot: usize) {
        let group = op.group.as_str();
        let victim = op.victim.clone().unwrap_or(Victim {
            instance: None,
            link: None,
            node: None,
            logical_id: None,
            zone: None,
            is_self: false,
        });
        let list = match self.facts.input.observed.instances.get(group) {
            Some(Described::Ok(list)) => list,
            Some(Described::Failed(e)) => {
                self.out.explanation.push(format!(
                    "{group}: orphan operation {} waits: describe failed: {e}",
                    op.id
                ));
                return;
            }
            None => {
                self.out.explanation.push(format!(
                    "{group}: orphan operation {} waits: not described",
                    op.id
                ));
                return;
            }
        };
        if !self.facts.world.swarm_ok() {
            self.out.explanation.push(format!(
                "{group}: orphan operation {} waits: the swarm cannot be observed",
                op.id
            ));
            return;
        }
        let cluster = &self.facts.input.desired.cluster_id;
        let node = self
            .facts
            .world
            .victim_node(victim.link.as_deref(), victim.node.as_deref());
        if let Some(inst) = list.iter().find(|i| {
            Some(i.id.as_str()) == victim.instance.as_deref() && i.owned_by(cluster, group)
        }) {
            return self.destroy_orphan(op, slot, inst, node);
        }
        if !op.done.contains(&Step::Destroy) {
            self.out.actions.push(Action::MarkDone {
                op: op.id.clone(),
                step: Step::Destroy,
            });
        }
        match node {
            // Its machine is gone; a manager's node is never removed here
            // (the quorum gates own that), so the operation ends.
            Some(n) if n.in_raft() => self.out.explanation.push(format!(
                "{group}: orphan operation {} leaves node {}: it became a manager",
                op.id, n.id
            )),
            Some(n) => {
                self.out.actions.push(Action::RemoveNode {
                    op: op.id.clone(),
                    node: n.id.clone(),
                    force: n.state != NodeState::Down,
                });
                return;
            }
            None => {}
        }
        self.out
            .explanation
            .push(format!("{group}: orphan operation {} complete", op.id));
        self.out
            .actions
            .push(Action::Complete { op: op.id.clone() });
        self.end_op(op, slot);
    }

    /// The orphan's machine is still listed: it is destroyed unless its
    /// node is (or may be) a raft member.
    fn destroy_orphan(
        &mut self,
        op: &Operation,
        slot: usize,
        inst: &Instance,
        node: Option<&Node>,
    ) {
        let group = op.group.as_str();
        // No machine is destroyed while its node is (or may be) a raft
        // member: a manager is never collected this way.
        if let Some(n) = node.filter(|n| n.in_raft()) {
            self.out.explanation.push(format!(
                "{group}: orphan operation {} abandoned: node {} became a manager",
                op.id, n.id
            ));
            self.out
                .actions
                .push(Action::Complete { op: op.id.clone() });
            self.end_op(op, slot);
            return;
        }
        if let Some(why) = node
            .is_none()
            .then(|| self.unmatched_member(&inst.id, inst.link()))
            .flatten()
        {
            self.out
                .explanation
                .push(format!("{group}: orphan operation {} waits: {why}", op.id));
            return;
        }
        self.out.actions.push(Action::Destroy {
            op: op.id.clone(),
            instance: inst.id.clone(),
        });
    }
}
