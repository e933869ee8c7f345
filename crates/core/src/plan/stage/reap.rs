//! Reap: dead nodes of the group are removed (a manager demoted first),
//! and what may hold the group's additions is found (a live node no listed
//! machine carries).

use super::super::DesiredGroup;
use super::super::facts::Facts;
use super::super::gc::GarbageState;
use super::super::group::Planner;
use super::super::memory::Timer;
use super::super::waiting::Waiting;
use super::heal::Healed;
use super::{Group, alive};
use crate::journal::{Collection, GcRule, OpKind, Operation, Victim};
use crate::model::{Node, NodeState};
use crate::spec::{Allocation, Role};

/// The stale nodes the reap stage works on: those the meltdown guard
/// counted, but those a heal of this pass claimed (`healed`).
fn unclaimed<'n, 'a>(
    g: &'n Group<'_, 'a>,
    healed: &'n Healed,
) -> impl Iterator<Item = &'a Node> + 'n {
    g.stale.iter().copied().filter(|n| !healed.claims(n))
}

/// The node that holds additions to `g` (the fill, spare and roll stages
/// add nothing while it is unmatched), if one does: read from the facts,
/// `g` and what the heal stage claimed, never from what reaping begins.
///
/// A live node of this group that no listed machine carries means the
/// describe may have left a machine out (a successful answer can be
/// partial: eventual consistency): adding one for "its" slot could make a
/// second machine for it. A node whose machine is really gone turns Down
/// within ~15 s. The same holds for a live raft member of this cluster
/// that no listed machine carries and that carries no link at all (its
/// engine lost drover's labels): it may be the member of the very slot
/// that reads empty, so no manager is added while it is unmatched. For
/// pets a dead node holds too: its stopped machine, left out of a
/// describe, would share its logical id with the new one. A labelled one
/// holds until it is reaped (unmatched for the whole grace period, which a
/// partial describe cannot fake); an unlabelled one, which drover cannot
/// reap, until the operator acts (the message says how).
pub(super) fn unlisted<'a>(
    facts: &Facts<'a>,
    g: &Group<'_, 'a>,
    healed: &Healed,
) -> Option<&'a Node> {
    let pets = matches!(g.d().spec.allocation, Allocation::LogicalIds(_));
    unclaimed(g, healed).find(|n| pets || alive(n)).or_else(|| {
        g.is_manager()
            .then(|| {
                facts
                    .unmatched
                    .iter()
                    .copied()
                    .find(|n| n.link.is_none() && (pets || alive(n)))
            })
            .flatten()
    })
}

impl<'a> Planner<'a> {
    /// Reaps `g`'s dead nodes but those the heal stage claimed (`healed`).
    /// Dead nodes: Down (not merely unknown) for the whole grace period as
    /// seen by this controller, carrying this cluster's and group's
    /// labels, and whose link no machine of a successful describe carries.
    /// A manager is demoted first, one at a time.
    pub(super) fn reap(&mut self, g: &Group<'_, 'a>, healed: &Healed) {
        let stale: Vec<&'a Node> = unclaimed(g, healed).collect();
        self.reap_dead_nodes(g.d(), stale);
    }

    fn reap_dead_nodes(&mut self, d: &DesiredGroup, stale: Vec<&'a Node>) {
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
                self.wait(name, Waiting::NotDownYet(n.id.clone()));
                self.note_garbage(name, &c, GarbageState::NotDownYet);
                continue;
            }
            if let Some(seen) = self.clock.in_grace(Timer::Down(n.id.clone()), grace) {
                self.wait(name, Waiting::InGrace(n.id.clone()));
                let state = GarbageState::InGrace {
                    down: true,
                    seen,
                    grace,
                };
                self.note_garbage(name, &c, state);
                continue;
            }
            let is_manager = n.in_raft();
            if let Some(no) = is_manager
                .then(|| self.removal_gate(Some(n), None, 0))
                .flatten()
            {
                self.note_garbage(name, &c, GarbageState::Held(no.clone()));
                let node = n.id.clone();
                self.wait(name, Waiting::DeadManager { node, no });
                continue;
            }
            let op = self.dead_node_op(d, n, c);
            self.begin_collection(op);
        }
    }

    /// The operation that removes dead node `n` of `d`, collected by `c`
    /// (its evidence completed with the grace it was Down for).
    fn dead_node_op(&mut self, d: &DesiredGroup, n: &Node, c: Collection) -> Operation {
        let name = d.spec.name.as_str();
        let grace = d.spec.health.unhealthy_after;
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
        Operation {
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
            in_place: false,
            update_failure: None,
        }
    }
}
