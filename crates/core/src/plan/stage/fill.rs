//! Fill: empty slots get a machine, unless the describe may have left a
//! member out, a pet's slot has not read empty long enough (where the
//! provider's listing can leave a machine out), or the swarm cannot take a
//! member now.

use super::super::DesiredGroup;
use super::super::group::Planner;
use super::super::memory::Timer;
use super::super::memory::UNLISTED_BOUND;
use super::super::view::Member;
use super::super::waiting::{Unlisted, Waiting};
use super::Group;
use crate::journal::{OpKind, Target};
use crate::model::Node;
use crate::spec::{Allocation, Role};
use std::collections::{BTreeMap, HashSet};

impl Planner<'_> {
    /// Fills `g`'s empty slots; `unlisted` holds every addition.
    pub(super) fn fill(&mut self, g: &Group<'_, '_>, unlisted: Option<&Node>) {
        let (d, name) = (g.d(), g.name());
        let (live, pending, is_manager) = (&g.live, &g.pending, g.is_manager());
        let missing = missing_slots(d, live, pending);
        // Every empty pet slot's wait is asked first, whatever holds the
        // fill back below (a manager operation in flight): it counts how
        // long the slot has read empty, and restarting it after each
        // operation kept a bootstrap's managers 33 s apart. A group with no
        // machine at all is being made, not refilled.
        let empty: Vec<bool> = missing
            .iter()
            .map(|t| match t.logical_id.as_deref() {
                Some(id) if !live.is_empty() => self.slot_reads_empty(name, id),
                _ => true,
            })
            .collect();
        for (target, empty) in missing.into_iter().zip(empty) {
            if is_manager && self.manager_op_in_flight() {
                break;
            }
            if let Some(n) = unlisted {
                self.wait(name, Waiting::Unlisted(Unlisted::of(n)));
                break;
            }
            if !empty {
                let slot = target.logical_id.clone().unwrap_or_default();
                let bound = UNLISTED_BOUND;
                self.wait(name, Waiting::EmptySlot { slot, bound });
                continue;
            }
            let bootstrap = is_manager
                && matches!(
                    self.facts.world.observed.swarm,
                    crate::model::SwarmView::Absent
                )
                && live.is_empty();
            if !bootstrap {
                if !self.facts.world.swarm_ok() && d.spec.role != Role::Plain {
                    self.wait(name, Waiting::NoLeaderToAdd);
                    break;
                }
                if let Some(no) = is_manager.then(|| self.add_manager_gate()).flatten() {
                    self.wait(name, Waiting::CannotAddManager(no));
                    break;
                }
            }
            let op = self.make_op(d, OpKind::Provision, None, Some(target.clone()));
            let what = target
                .logical_id
                .clone()
                .unwrap_or_else(|| "a member".into());
            self.begin(
                op,
                format!(
                    "provision {what} ({} of {} present)",
                    live.len() + pending.len(),
                    d.spec.allocation.size()
                ),
            );
        }
    }
}

impl Planner<'_> {
    /// A manager operation is in flight (any group's, begun before or in
    /// this pass): raft changes go one at a time, so no other may begin.
    pub(crate) fn manager_op_in_flight(&self) -> bool {
        self.ops.iter().any(|o| o.role == Role::Manager)
    }

    /// Whether pet slot `slot` of `group`, which no machine holds, may be
    /// taken as empty. A pet's machine that never joined leaves no trace in
    /// the swarm, so where the provider's listing can leave a machine out
    /// only time tells a partial describe from an empty slot: it must have
    /// read empty for `UNLISTED_BOUND` (else the machine left out would get
    /// a twin on its address). Where the provider lists every machine it
    /// made (`Observed::complete_listings`), at once. The timer runs only
    /// through passes that ask: ask every pass the slot reads empty.
    pub(crate) fn slot_reads_empty(&self, group: &str, slot: &str) -> bool {
        if self.facts.world.observed.complete_listings.contains(group) {
            return true;
        }
        let key = Timer::EmptySlot(format!("{group}/{slot}"));
        self.clock.elapsed(key, UNLISTED_BOUND)
    }
}

/// Slots declared but neither filled nor being filled.
fn missing_slots(d: &DesiredGroup, live: &[&Member<'_>], pending: &[Target]) -> Vec<Target> {
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
