//! Operations in flight during a pass, and the counts over them that every
//! budget check needs, kept current as operations begin and end: starting k
//! operations in one pass then costs O(k), not O(k × operations in flight).

use super::fast::Map;
use crate::journal::{OpKind, Operation};
use std::ops::Deref;

/// The journal's operations (borrowed, never copied) followed by those
/// begun in this pass, in that order. An operation that ends leaves a hole:
/// ending k of them costs O(k), not O(k × operations) as removing from a
/// `Vec` would.
pub(crate) struct Ops<'a> {
    slots: Vec<Option<Slot<'a>>>,
}

/// One operation in flight: the journal's, borrowed, or one begun in this
/// pass, boxed. A slot stays two words: slots the size of an `Operation`
/// made every walk over the operations (a pass makes several per group)
/// read a few hundred bytes per operation.
enum Slot<'a> {
    Journal(&'a Operation),
    Begun(Box<Operation>),
}

impl Deref for Slot<'_> {
    type Target = Operation;
    fn deref(&self) -> &Operation {
        match self {
            Slot::Journal(o) => o,
            Slot::Begun(o) => o,
        }
    }
}

impl<'a> Ops<'a> {
    /// The journal's operations: slot `j` is `journal[j]`.
    pub(crate) fn new(journal: &'a [Operation]) -> Self {
        Ops {
            slots: journal.iter().map(|o| Some(Slot::Journal(o))).collect(),
        }
    }

    /// Operations still in flight, in order.
    pub(crate) fn iter(&self) -> impl Iterator<Item = &Operation> + '_ {
        self.slots.iter().flatten().map(|o| &**o)
    }

    /// Operations still in flight with their slots, in order.
    pub(crate) fn iter_slots(&self) -> impl Iterator<Item = (usize, &Operation)> + '_ {
        self.slots
            .iter()
            .enumerate()
            .filter_map(|(k, o)| o.as_deref().map(|o| (k, o)))
    }

    /// Adds an operation begun in this pass; returns its slot.
    pub(crate) fn push(&mut self, op: Operation) -> usize {
        self.slots.push(Some(Slot::Begun(Box::new(op))));
        self.slots.len() - 1
    }

    /// The operation added last is still in flight (its first step, taken
    /// as it began, did not end it).
    pub(crate) fn last_in_flight(&self) -> bool {
        self.slots.last().is_some_and(Option::is_some)
    }

    /// Ends the operation in `slot`; false if it had ended already.
    pub(crate) fn end(&mut self, slot: usize) -> bool {
        self.slots.get_mut(slot).and_then(Option::take).is_some()
    }
}

/// `op` holds its victim's zone (one zone at a time): a disruptive
/// operation, heals, dead-node removals and orphan collections excepted
/// (they repair or clean up).
pub(crate) fn holds_zone(op: &Operation) -> bool {
    op.is_disruptive() && !matches!(op.kind, OpKind::Heal | OpKind::RemoveDead | OpKind::Orphan)
}

#[derive(Default)]
pub(crate) struct InFlight {
    /// Disruptive operations by victim zone (heals, dead-node removals and
    /// orphan collections excepted: they repair or clean up, so they never
    /// hold a zone).
    zones: Map<Option<String>, usize>,
    /// Members being replaced, by group (dead-node removals excepted).
    replacing: Map<String, usize>,
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
        if holds_zone(op) {
            const NO_ZONE: &Option<String> = &None;
            let zone = op.victim.as_ref().map_or(NO_ZONE, |v| &v.zone);
            // Keys are copied only when new: a pass counts every operation.
            let n = match self.zones.get_mut(zone) {
                Some(n) => n,
                None => self.zones.entry(zone.clone()).or_default(),
            };
            bump(n);
            if *n == 0 {
                self.zones.remove(zone);
            }
        }
        if op.kind != OpKind::RemoveDead {
            match self.replacing.get_mut(op.group.as_str()) {
                Some(n) => bump(n),
                None => bump(self.replacing.entry(op.group.clone()).or_default()),
            }
        }
    }

    /// When zones other than `zone` are being disrupted (cluster-wide),
    /// one of them to name (`(none)` for members without a zone).
    pub(crate) fn other_zone(&self, zone: Option<&str>) -> Option<String> {
        let busy = !self.zones.is_empty() && !self.zones.keys().any(|z| z.as_deref() == zone);
        busy.then(|| {
            self.zones
                .keys()
                .flatten()
                .next()
                .map_or("(none)", String::as_str)
                .to_string()
        })
    }

    /// Members of `group` being replaced.
    pub(crate) fn replacing(&self, group: &str) -> usize {
        self.replacing.get(group).copied().unwrap_or(0)
    }
}

#[cfg(test)]
mod tests {
    use super::Ops;
    use crate::journal::{OpKind, Operation};
    use crate::spec::Role;

    fn op(id: &str) -> Operation {
        crate::testkit::op(id, "workers", OpKind::Heal, Role::Worker)
    }

    /// An operation begun in this pass is in flight until its first step
    /// ends it; ending an older one says nothing about the last.
    #[test]
    fn the_last_operation_is_in_flight_until_it_ends() {
        let journal = [op("a")];
        let mut ops = Ops::new(&journal);
        assert!(ops.last_in_flight());
        let b = ops.push(op("b"));
        assert!(ops.end(0));
        assert!(ops.last_in_flight());
        assert!(ops.end(b));
        assert!(!ops.last_in_flight());
        assert!(!Ops::new(&[]).last_in_flight());
    }
}
