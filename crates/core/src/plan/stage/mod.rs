//! One group's pass, in stages: heal, reap, fill, retire, roll (which adds
//! a pets group's temporary manager first: spare). Each stage reads the
//! pass's facts (`plan::facts`), the group's [`Group`] (computed once per
//! pass) and what the stages before it handed on, as values:
//!
//! ```text
//! facts ─► Group ─► heal ──Healed──► reap ──unlisted──► fill
//!                                                  └──► retire, roll
//! ```
//!
//! A stage's rules live in its file, next to its decision; what it decides
//! goes out as actions, operations begun and the group's reasons.

mod fill;
mod heal;
mod reap;
mod retire;
mod roll;
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

/// What every stage of one group's pass reads, computed once.
pub(crate) struct Group<'v, 'a> {
    pub(crate) v: &'v View<'a>,
    /// Slots operations in flight are filling whose machine is not listed.
    pub(crate) pending: Vec<Target>,
    /// Members no operation is removing.
    pub(crate) live: Vec<&'v Member<'a>>,
    /// Members no operation works on and no operator holds: candidates
    /// for new operations.
    pub(crate) free: Vec<&'v Member<'a>>,
    /// A manager operation is in flight (any group's).
    pub(crate) manager_busy: bool,
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
        let Some(g) = self.group(&v) else {
            return;
        };
        let Some(healed) = self.heal(&g) else {
            return;
        };
        let unlisted = self.reap(&g, &healed);
        self.fill(&g, unlisted);
        self.retire(&g);
        self.roll(&g, unlisted, ahead);
    }

    /// The group's pass, or `None` when nothing may start in it (blocked,
    /// paused, undescribed, its links shared, a manager locked, a meltdown).
    fn group<'v>(&mut self, v: &'v View<'a>) -> Option<Group<'v, 'a>> {
        let d = v.d;
        let name = d.spec.name.clone();
        let Ok(insts) = &v.described else {
            return None;
        };
        if let Some(why) = v.shared_link.clone() {
            // The link is how members are matched to nodes: with two machines
            // on one link, any node step could hit the wrong machine's node.
            self.block(&name, why);
            return None;
        }
        if d.spec.role == Role::Manager
            && let Some(n) = self.facts.world.locked
        {
            // Every manager step changes the raft; with a member waiting for
            // its unlock key the real fault tolerance is unknown.
            self.block(&name, Blocked::ManagerLocked(n.id.clone()));
            return None;
        }
        if d.paused
            || self.out.blocked.contains_key(&name)
            || self.out.rollback_requested.contains(&name)
        {
            return None;
        }
        let stale = self.stale_nodes(v);
        if let Some(why) = self.meltdown(d, insts, stale.len()) {
            self.block(&name, why);
            return None;
        }
        let (pending, live, free) = self.by_operation(v, insts);
        let free = self.without_held(&name, free);
        let is_manager = d.spec.role == Role::Manager;
        let manager_busy = is_manager && self.ops.iter().any(|o| o.role == Role::Manager);

        let rolling = self
            .ops
            .iter()
            .any(|o| o.group == name && o.kind == OpKind::Roll);
        let spare_kept = Group::spare_kept(d, &live, &self.facts.input.desired.replace, rolling);
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
        Some(Group {
            v,
            pending,
            live,
            free,
            manager_busy,
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
    /// are not current and healthy, saying so).
    fn without_held<'v>(&mut self, name: &str, free: Vec<&'v Member<'a>>) -> Vec<&'v Member<'a>> {
        let held_ids = &self.facts.input.desired.held;
        if held_ids.is_empty() {
            return free;
        }
        let (held, free): (Vec<&Member>, Vec<&Member>) =
            free.into_iter().partition(|i| held_ids.contains(&i.id));
        let stuck: Vec<String> = held
            .iter()
            .filter(|i| !i.current() || !i.healthy())
            .map(|i| i.id.clone())
            .collect();
        if !stuck.is_empty() {
            self.wait(name, Waiting::Held(stuck));
        }
        free
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
