//! Spare: a pets manager group with a spare slot (`allocation.spare_ids`)
//! rolls with one temporary manager. Two machines cannot hold one pet's
//! address, so each pet is replaced in place; the temporary member, added
//! before the first pet goes and retired (the retire stage) after the last,
//! keeps the raft at the group's converged fault tolerance meanwhile.
//! Everything here is judged from the world: the temporary member is a
//! machine in a spare slot, so a crash at any point resumes (the roll goes
//! on with it) or unwinds (a group with nothing left to roll retires it).

use super::super::group::Planner;
use super::super::memory::UNLISTED_BOUND;
use super::super::view::Member;
use super::super::waiting::{Unlisted, Waiting};
use super::Group;
use crate::journal::{OpKind, Target};
use crate::model::Node;
use crate::spec::Role;

impl<'a> Group<'_, 'a> {
    /// Whether a machine (listed or being provisioned) holds a spare slot.
    pub(crate) fn spare_present(
        d: &super::super::DesiredGroup,
        live: &[&Member<'a>],
        pending: &[Target],
    ) -> bool {
        live.iter().any(|m| d.spec.is_spare(m.logical_id()))
            || pending
                .iter()
                .any(|t| d.spec.is_spare(t.logical_id.as_deref()))
    }
}

impl Planner<'_> {
    /// The group's temporary member stays: it has spare slots and a pet
    /// still waits for its replacement (due for any reason: see
    /// `plan::due`), or a roll is in flight.
    pub(crate) fn spare_kept(
        &self,
        d: &super::super::DesiredGroup,
        live: &[&Member<'_>],
        rolling: bool,
    ) -> bool {
        !d.spec.spares.is_empty()
            && (rolling
                || live
                    .iter()
                    .any(|m| !d.spec.is_spare(m.logical_id()) && self.due(d, m).is_some()))
    }

    /// Whether `d`'s spare slots read empty (`None`: a machine holds one,
    /// or the group has none), and long enough to be taken as empty
    /// (`Some(true)`, [`Planner::slot_reads_empty`]).
    /// Asked every pass, so a group that waited converged is ready to roll.
    pub(crate) fn spare_slot(
        &self,
        d: &super::super::DesiredGroup,
        live: &[&Member<'_>],
        pending: &[Target],
    ) -> Option<bool> {
        let id = d.spec.spares.first()?.logical_id.as_deref()?;
        if Group::spare_present(d, live, pending) {
            return None;
        }
        Some(self.slot_reads_empty(&d.spec.name, id))
    }

    /// Adds `g`'s temporary member when its roll is about to replace a pet
    /// and none holds a spare slot yet. True when the roll waits for it.
    pub(super) fn add_spare(&mut self, g: &Group<'_, '_>, unlisted: Option<&Node>) -> bool {
        let (d, name) = (g.d(), g.name());
        if d.spec.role != Role::Manager || !g.spare_kept || g.spare_slot.is_none() {
            return false;
        }
        let slot = &d.spec.spares[0];
        let id = slot.logical_id.as_deref().unwrap_or_default();
        if g.spare_slot == Some(false) {
            // A describe can be partial: a temporary member it left out
            // would get a twin on its address.
            let slot = id.to_string();
            let bound = UNLISTED_BOUND;
            self.wait(name, Waiting::EmptySpareSlot { slot, bound });
            return true;
        }
        if let Some(n) = unlisted {
            // The describe may have left a member out: adding one may
            // make the group larger than anyone meant.
            self.wait(name, Waiting::Unlisted(Unlisted::of(n)));
            return true;
        }
        if let Some(no) = self.add_manager_gate() {
            self.wait(name, Waiting::CannotAddSpare(no));
            return true;
        }
        let target = Target {
            logical_id: slot.logical_id.clone(),
            zone: slot.zone.clone(),
            attempt: 1,
        };
        let op = self.make_op(d, OpKind::Provision, None, Some(target));
        self.begin(
            op,
            format!("roll: add temporary manager {id} (spare slot) before the first pet is replaced, so the raft keeps its fault tolerance"),
        );
        true
    }
}
