//! One group's pass, in stages: heal, reap, fill, retire, roll (which adds
//! a pets group's temporary manager first: spare). Each stage reads the
//! pass's facts (`plan::facts`), the group's [`Group`] (computed once per
//! pass) and what the stages before it handed on, as values:
//!
//! ```text
//! facts ─► Group ─┬─► heal ──Healed──┬─► reap
//!     (or Skip)   │                  └─► unlisted ──► fill, retire, roll
//!                 └─ held members' wait
//! ```
//!
//! A stage's rules live in its file, next to its decision. Whether a group
//! runs at all ([`Skip`]), the held members' wait, the heal stage's block
//! and the node that holds additions (`reap::unlisted`, read from the
//! facts, the group and `Healed` alone) are handed back to the driver
//! below as values. Operations begun, and the reasons the gates give
//! while a stage walks its members, still go through the planner as the
//! stage runs: a later member's gate counts the operations begun for an
//! earlier one, and a group keeps the first reason in the order given.

mod fill;
mod heal;
mod reap;
mod retire;
mod roll;

pub use roll::RollEntry;
mod spare;

use super::DesiredGroup;
use super::blocked::Blocked;
use super::group::Planner;
use super::view::{Busy, Member, View};
use super::waiting::Waiting;
use crate::journal::{OpKind, Target};
use crate::model::{Node, NodeState};
use crate::spec::{Allocation, Role};
use std::collections::HashSet;
use std::rc::Rc;

/// Why nothing starts in a group this pass.
enum Skip {
    /// The group blocks: an operator acts.
    Blocked(Blocked),
    /// Paused, undescribed, blocked or rolling back already: its reason,
    /// if any, is given elsewhere.
    Quiet,
}

/// What every stage of one group's pass reads, computed once.
pub(crate) struct Group<'v, 'a> {
    pub(crate) v: &'v View<'a>,
    /// Why the group waits on members an operator holds, taken by the
    /// driver before the first stage runs.
    held: Option<Waiting<'a>>,
    /// Slots operations in flight are filling whose machine is not listed.
    pub(crate) pending: Vec<Target>,
    /// Members no operation is removing.
    pub(crate) live: Vec<&'v Member<'a>>,
    /// Members no operation works on and no operator holds: candidates
    /// for new operations.
    pub(crate) free: Vec<&'v Member<'a>>,
    /// Members the spec no longer declares: retired (the retire stage), not healed.
    pub(crate) excess_ids: HashSet<String>,
    /// The member in a spare slot is kept (see the spare stage).
    pub(crate) spare_kept: bool,
    /// The spare slots read empty (for long enough: `Some(true)`), or a
    /// machine holds one or there is none (`None`); see the spare stage.
    pub(crate) spare_slot: Option<bool>,
    /// A slot fill of this group is in flight.
    pub(crate) filling: bool,
    /// A live node of this group that no listed machine carries: the
    /// describe may have left a member out, so whether the group is over
    /// its size is not known.
    pub(crate) left_out: Option<&'a Node>,
    /// The nodes that may be stale (the meltdown guard counted them).
    pub(crate) stale: Vec<&'a Node>,
}

impl<'a> Group<'_, 'a> {
    /// The group's declaration.
    pub(crate) fn d(&self) -> &'a DesiredGroup {
        self.v.d
    }

    pub(crate) fn name(&self) -> &'a str {
        &self.v.d.spec.name
    }

    pub(crate) fn is_manager(&self) -> bool {
        self.v.d.spec.role == Role::Manager
    }

    /// The group is sized by count (cattle), not by logical ids.
    pub(crate) fn by_count(&self) -> bool {
        matches!(self.v.d.spec.allocation, Allocation::Size { .. })
    }
}

/// A node that may still carry a machine: not `Down`, or a reachable raft
/// member.
fn alive(n: &&Node) -> bool {
    n.state != NodeState::Down || n.raft.as_ref().is_some_and(|r| r.reachable)
}

impl<'a> Planner<'a> {
    /// Starts new operations in group `gi`. `ahead` names the group that
    /// rolls now when it is another one (groups roll one after another).
    pub(crate) fn start_ops(&mut self, gi: usize, ahead: Option<String>) {
        let v = Rc::clone(&self.facts.views[gi]);
        let name = v.d.spec.name.as_str();
        let mut g = match self.group(&v) {
            Ok(g) => g,
            Err(Skip::Blocked(why)) => return self.block(name, why),
            Err(Skip::Quiet) => return,
        };
        if let Some(why) = g.held.take() {
            self.wait(name, why);
        }
        let healed = match self.heal(&g) {
            Ok(healed) => healed,
            Err(why) => return self.block(name, why),
        };
        let unlisted = reap::unlisted(&self.facts, &g, &healed);
        self.reap(&g, &healed);
        self.fill(&g, unlisted);
        self.retire(&g);
        self.roll(&g, unlisted, ahead);
    }

    /// The group's pass, or why nothing may start in it (blocked, paused,
    /// undescribed, its links shared, a manager locked, a meltdown).
    fn group<'v>(&self, v: &'v View<'a>) -> Result<Group<'v, 'a>, Skip> {
        let d = v.d;
        let name = d.spec.name.as_str();
        let Ok(insts) = &v.described else {
            return Err(Skip::Quiet);
        };
        if let Some(why) = v.shared_link.clone() {
            // The link is how members are matched to nodes: with two machines
            // on one link, any node step could hit the wrong machine's node.
            return Err(Skip::Blocked(why));
        }
        if d.spec.role == Role::Manager
            && let Some(n) = self.facts.world.locked
        {
            // Every manager step changes the raft; with a member waiting for
            // its unlock key the real fault tolerance is unknown.
            return Err(Skip::Blocked(Blocked::ManagerLocked(n.id.clone())));
        }
        if d.paused
            || self.out.blocked.contains_key(name)
            || self.out.rollback_requested.contains(name)
        {
            return Err(Skip::Quiet);
        }
        let stale = self.stale_nodes(v);
        if let Some(why) = self.meltdown(d, insts, stale.len()) {
            return Err(Skip::Blocked(why));
        }
        let (pending, live, free) = self.by_operation(v, insts);
        let (free, held) = self.without_held(d, free);
        let rolling = self
            .ops
            .iter()
            .any(|o| o.group == name && o.kind == OpKind::Roll);
        let spare_kept = self.spare_kept(d, &live, rolling);
        let spare_slot = self.spare_slot(d, &live, &pending);
        // Members the spec no longer declares are retired (the retire stage), not healed.
        let excess_ids: HashSet<String> = retire::excess_members(
            d,
            &free,
            live.len() + pending.len(),
            self.facts.world.observed.self_link.as_deref(),
            spare_kept,
        )
        .iter()
        .map(|i| i.id.clone())
        .collect();

        // A slot filled while the group was over its size: the fill already
        // replaces a member that a describe left out and lists again.
        let filling = self
            .ops
            .iter()
            .any(|o| o.group == name && o.kind == OpKind::Provision);
        // A live node of this group that no listed machine carries: the
        // describe may have left a member out, so whether the group is over
        // its size is not known (see the reap stage).
        let left_out = stale.iter().copied().find(alive);
        Ok(Group {
            v,
            held,
            pending,
            live,
            free,
            excess_ids,
            spare_kept,
            spare_slot,
            filling,
            left_out,
            stale,
        })
    }

    /// `free` but the members an operator holds: they still fill their
    /// slots, but nothing new touches them (the group waits on those that
    /// are due for replacement or unhealthy, saying so: the wait returned).
    fn without_held<'v>(
        &self,
        d: &DesiredGroup,
        free: Vec<&'v Member<'a>>,
    ) -> (Vec<&'v Member<'a>>, Option<Waiting<'a>>) {
        let held_ids = &self.facts.input.desired.held;
        if held_ids.is_empty() {
            return (free, None);
        }
        let (held, free): (Vec<&Member>, Vec<&Member>) =
            free.into_iter().partition(|i| held_ids.contains(&i.id));
        let stuck: Vec<String> = held
            .iter()
            .filter(|i| self.due(d, i).is_some() || !i.healthy())
            .map(|i| i.id.clone())
            .collect();
        (free, (!stuck.is_empty()).then_some(Waiting::Held(stuck)))
    }

    /// `v`'s members sorted by the operations in flight: the slots they are
    /// filling whose machine is not listed yet, the members none removes
    /// (live), and those none works on (free: candidates for new ones).
    fn by_operation<'v>(
        &self,
        v: &'v View<'a>,
        insts: &'v [Member<'a>],
    ) -> (Vec<Target>, Vec<&'v Member<'a>>, Vec<&'v Member<'a>>) {
        let name = &v.d.spec.name;
        let in_group = || {
            self.ops
                .iter_slots()
                .filter(|(_, o)| o.group == *name)
                .map(|(slot, o)| (o, self.found(slot, o, v)))
        };
        let pending: Vec<Target> = in_group()
            .filter(|(o, f)| o.target.is_some() && f.replacement.is_none())
            .filter_map(|(o, _)| o.target.clone())
            .collect();
        let busy = v.busy(in_group().map(|(_, f)| f));
        let members = |keep: fn(&Busy) -> bool| -> Vec<&Member> {
            insts
                .iter()
                .zip(&busy)
                .filter(|(_, b)| keep(b))
                .map(|(i, _)| i)
                .collect()
        };
        (
            pending,
            members(|b| !b.victim),
            members(|b| !b.victim && !b.replacement),
        )
    }
}
