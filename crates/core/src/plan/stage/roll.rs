//! Roll: outdated members (or ones an operator asked to replace) are
//! replaced, lazily in rollout order, within the group's budget; the leader
//! last.

use super::super::disrupt::Settled;
use super::super::due::Due;
use super::super::group::Planner;
use super::super::view::Member;
use super::super::waiting::{Unlisted, Waiting};
use super::Group;
use crate::journal::{OpKind, Target};
use crate::model::Node;
use crate::spec::Strategy;
use std::cmp::Reverse;
use std::collections::BinaryHeap;

impl<'a> Planner<'a> {
    /// Rolls `g`'s outdated members, unless `ahead` (another group) rolls
    /// now or `unlisted` holds a surge.
    pub(super) fn roll(
        &mut self,
        g: &Group<'_, 'a>,
        unlisted: Option<&Node>,
        ahead: Option<String>,
    ) {
        let (d, name) = (g.d(), g.name());
        self.explain_lifetimes(g);
        let is_manager = g.is_manager();
        let excess_ids = &g.excess_ids;
        // Only in the one rolling group. The temporary member of a spare
        // slot is retired, never rolled.
        let outdated: Vec<&Member> = g
            .free
            .iter()
            .copied()
            .filter(|i| self.due(d, i).is_some())
            .filter(|i| !d.spec.is_spare(i.logical_id()))
            .collect();
        // Read now, not when the group was sorted: a heal or a fill of
        // this pass may have begun one (two raft additions at once).
        if outdated.is_empty() || (is_manager && self.manager_op_in_flight()) {
            return;
        }
        if let Some(other) = ahead {
            let stuck = None;
            self.wait(
                name,
                Waiting::GroupAhead {
                    group: other,
                    stuck,
                },
            );
            return;
        }
        if let Some(n) = unlisted.filter(|_| d.spec.update.strategy == Strategy::Surge) {
            // A surge adds a machine too: the same doubt holds it.
            self.wait(name, Waiting::Unlisted(Unlisted::of(n)));
            return;
        }
        if d.spec.update.strategy == Strategy::Surge && !excess_ids.is_empty() {
            // E.g. a surge roll stepped aside after its new member joined:
            // that member is already the replacement. Adding yet another
            // would grow the group each time; retiring the excess comes first.
            self.wait(name, Waiting::OverSize(excess_ids.len()));
            return;
        }
        if let Some(why) = self.window_closed(&d.spec) {
            self.wait(name, Waiting::Window(why));
            return;
        }
        if self.add_spare(g, unlisted) {
            return;
        }
        self.roll_in_order(g, &outdated);
    }

    /// Begins rolls of `outdated` members in rollout order, stopping at
    /// the first that may not be disrupted now (a manager group: after one).
    fn roll_in_order(&mut self, g: &Group<'_, '_>, outdated: &[&Member<'_>]) {
        let (d, name, is_manager) = (g.d(), g.name(), g.is_manager());
        // The rollout order. The loop stops at the first member it may not
        // disrupt (after about max_in_flight of them), so the order is
        // produced lazily: a heap is built in O(n), where sorting every
        // outdated member cost O(n log n). Ties keep the described order.
        let mut order: BinaryHeap<Reverse<RollKey<'_>>> = outdated
            .iter()
            .copied()
            .enumerate()
            .map(|(k, i)| Reverse(self.roll_key(i, k)))
            .collect();
        let settled = Settled::count(&g.free);
        while let Some(Reverse((.., k))) = order.pop() {
            let inst = outdated[k];
            if is_manager && self.leader_waits(name, inst) {
                break;
            }
            if !self.may_disrupt(d, inst, Some(settled)) {
                break;
            }
            if !self.within_service_budgets(d, inst) {
                // Another worker may run other services; a manager waits
                // (the leader goes last).
                if is_manager {
                    break;
                }
                continue;
            }
            let due = self.due(d, inst);
            // An in-place group updates a member built from another config
            // where it is; one an operator asked to replace, or past its
            // max_age, is replaced by a new machine all the same.
            let in_place =
                d.spec.update.strategy == Strategy::InPlace && matches!(due, Some(Due::Config(_)));
            let target = (!in_place).then(|| Target {
                logical_id: inst.logical_id().map(str::to_string),
                zone: inst.zone().map(str::to_string),
                attempt: 1,
            });
            let why = due.map_or("", Due::note);
            let op = self.make_op(d, OpKind::Roll, Some(inst), target);
            let leader = if op.victim.as_ref().is_some_and(|v| v.is_self) {
                " (the leader, self: last)"
            } else {
                why
            };
            let config = if inst.current() {
                String::new()
            } else {
                let old = inst.config().unwrap_or("none");
                format!(" (config {old} → {})", d.hash)
            };
            let how = if in_place {
                "update in place"
            } else {
                "replace"
            };
            self.begin(op, format!("roll: {how} {}{leader}{config}", inst.id));
            if is_manager {
                break;
            }
        }
    }
}

impl<'a> Planner<'a> {
    /// `i`'s place in the rollout order, `k` its position among the
    /// outdated members: the one rule for the order, which the roll and
    /// [`Planner::rollout`] read.
    fn roll_key<'i>(&self, i: &'i Member<'_>, k: usize) -> RollKey<'i> {
        (
            self.facts.world.is_self(i.link()) || self.is_leader(i),
            i.healthy(),
            i.zone(),
            i.logical_id(),
            IdOrder::of(&i.id),
            k,
        )
    }

    /// Every member a roll would take now, in the order it takes them:
    /// group after group (managers first), each group's due members in
    /// rollout order (the leader last). For `drover plan`: it sorts every
    /// due member, which a pass never does.
    pub(crate) fn rollout(&self) -> Vec<RollEntry> {
        let mut out = Vec::new();
        for v in &self.facts.views {
            let Ok(g) = self.group(v) else { continue };
            let d = g.d();
            let mut due: Vec<(RollKey<'_>, &Member<'_>)> = g
                .free
                .iter()
                .copied()
                .filter(|i| !d.spec.is_spare(i.logical_id()))
                .filter(|i| self.due(d, i).is_some())
                .enumerate()
                .map(|(k, i)| (self.roll_key(i, k), i))
                .collect();
            due.sort_by(|a, b| a.0.cmp(&b.0));
            out.extend(due.into_iter().map(|(key, i)| RollEntry {
                group: d.spec.name.clone(),
                instance: i.id.clone(),
                node: i.node.map(|n| n.id.clone()),
                engine_version: i.node.and_then(|n| n.engine_version.clone()),
                in_place: d.spec.update.strategy == Strategy::InPlace
                    && matches!(self.due(d, i), Some(Due::Config(_))),
                from: i.config().map(str::to_string),
                to: d.hash.clone(),
                leader: key.0,
            }));
        }
        out
    }
}

/// One member in the order a roll takes them ([`crate::plan::rollout`]).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct RollEntry {
    /// Its group.
    pub group: String,
    /// Its machine.
    pub instance: String,
    /// Its swarm node, if it has one.
    pub node: Option<String>,
    /// The version its engine reports now, if its node does.
    pub engine_version: Option<String>,
    /// Updated where it is (`strategy: in_place`), else replaced by a new
    /// machine.
    pub in_place: bool,
    /// The config it was built from (`None`: it carries none).
    pub from: Option<String>,
    /// The config the roll brings it to.
    pub to: String,
    /// It is the leader (or the controller's own machine): last.
    pub leader: bool,
}

/// A roll candidate's place in the rollout order: the leader (or this
/// controller's own machine) last, unhealthy members first, then by zone,
/// logical id and id; last its position among the outdated members.
type RollKey<'i> = (
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
struct IdOrder<'i> {
    /// The first eight bytes, big-endian, zero-padded: when two prefixes
    /// differ they order as the strings do (a shorter string pads with the
    /// lowest byte); when equal, `id` decides.
    prefix: u64,
    id: &'i str,
}

impl<'i> IdOrder<'i> {
    fn of(id: &'i str) -> Self {
        let mut head = [0u8; 8];
        let n = id.len().min(8);
        head[..n].copy_from_slice(&id.as_bytes()[..n]);
        IdOrder {
            prefix: u64::from_be_bytes(head),
            id,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::IdOrder;
    use proptest::prelude::*;

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
    }
}
