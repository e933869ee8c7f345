//! The counts over operations in flight that every budget check needs,
//! kept current as operations begin and end: starting k operations in one
//! pass then costs O(k), not O(k × operations in flight).

use crate::journal::{OpKind, Operation};
use std::collections::HashMap;

#[derive(Default)]
pub(crate) struct InFlight {
    /// Disruptive operations by victim zone (heals, dead-node removals and
    /// orphan collections excepted: they repair or clean up, so they never
    /// hold a zone).
    zones: HashMap<Option<String>, usize>,
    /// Members being replaced, by group (dead-node removals excepted).
    replacing: HashMap<String, usize>,
}

impl InFlight {
    pub(crate) fn new(ops: &[Operation]) -> Self {
        let mut counts = InFlight::default();
        for op in ops {
            counts.add(op);
        }
        counts
    }

    pub(crate) fn add(&mut self, op: &Operation) {
        self.change(op, true);
    }

    pub(crate) fn remove(&mut self, op: &Operation) {
        self.change(op, false);
    }

    fn change(&mut self, op: &Operation, add: bool) {
        if !op.is_disruptive() {
            return;
        }
        let bump = |n: &mut usize| {
            *n = if add { *n + 1 } else { n.saturating_sub(1) };
        };
        if !matches!(op.kind, OpKind::Heal | OpKind::RemoveDead | OpKind::Orphan) {
            let zone = op.victim.as_ref().and_then(|v| v.zone.clone());
            let n = self.zones.entry(zone.clone()).or_default();
            bump(n);
            if *n == 0 {
                self.zones.remove(&zone);
            }
        }
        if op.kind != OpKind::RemoveDead {
            bump(self.replacing.entry(op.group.clone()).or_default());
        }
    }

    /// Zones being disrupted, cluster-wide.
    pub(crate) fn zones(&self) -> impl Iterator<Item = &Option<String>> {
        self.zones.keys()
    }

    /// Members of `group` being replaced.
    pub(crate) fn replacing(&self, group: &str) -> usize {
        self.replacing.get(group).copied().unwrap_or(0)
    }
}
