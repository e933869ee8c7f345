//! Reap: dead nodes of the group are removed (a manager demoted first),
//! and what may hold the group's additions is found (a live node no listed
//! machine carries).

use super::super::group::Planner;
use super::{Group, alive};
use crate::model::Node;
use crate::spec::Allocation;

impl<'a> Planner<'a> {
    /// Reaps `g`'s dead nodes; returns the node that holds additions to the
    /// group, if one does. `counter_before_heal`: the heal stage claimed a
    /// stale node when the operation counter moved.
    pub(super) fn reap(&mut self, g: &Group<'_, 'a>, counter_before_heal: u32) -> Option<&'a Node> {
        let (d, is_manager) = (g.d(), g.is_manager());
        // Dead nodes: Down (not merely unknown) for the whole grace
        // period as seen by this controller, carrying this cluster's and
        // group's labels, and whose link no machine of a successful
        // describe carries. A manager is demoted first, one at a time.
        // The stale nodes the meltdown guard counted, unless a heal just
        // claimed one of them.
        let stale = if self.counter == counter_before_heal {
            g.stale.clone()
        } else {
            self.stale_nodes(g.v)
        };
        // A live node of this group that no listed machine carries means the
        // describe may have left a machine out (a successful answer can be
        // partial: eventual consistency): adding one for "its" slot could
        // make a second machine for it. A node whose machine is really gone
        // turns Down within ~15 s.
        // The same holds for a live raft member of this cluster that no
        // listed machine carries and that carries no link at all (its engine
        // lost drover's labels): it may be the member of the very slot that
        // reads empty, so no manager is added while it is unmatched.
        // For pets a dead node holds too: its stopped machine, left out of a
        // describe, would share its logical id with the new one. A labelled
        // one holds until it is reaped (unmatched for the whole grace
        // period, which a partial describe cannot fake); an unlabelled one,
        // which drover cannot reap, until the operator acts (the message
        // says how).
        let pets = matches!(d.spec.allocation, Allocation::LogicalIds(_));
        let unlisted = stale
            .iter()
            .copied()
            .find(|n| pets || alive(n))
            .or_else(|| {
                is_manager
                    .then(|| {
                        self.unmatched
                            .iter()
                            .copied()
                            .find(|n| n.link.is_none() && (pets || alive(n)))
                    })
                    .flatten()
            });
        self.reap_dead_nodes(d, stale);
        unlisted
    }
}
