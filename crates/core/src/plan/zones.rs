//! Zone fallback: a provision the provider refused for lack of capacity in
//! its zone goes to another of the group's zones.
//!
//! The controller records each such refusal on the operation
//! ([`Operation::short_zones`], journaled, so any leader sees it). The
//! operation's next provision call avoids every zone it was refused in, and
//! the group's other provisions avoid such a zone for [`ZONE_BACKOFF`]
//! after the last operation that reported it: a zone out of an instance
//! type usually stays so for a while, and trying it first for each slot
//! would spend every slot's attempts there. Among the zones left, the one
//! with the fewest of the group's members is taken (declared order breaks
//! ties), as a fill would. Never moved: a pets slot (its logical id pins
//! its zone: an address lives in one subnet), and a group without zones.
//! Nothing rebalances afterwards: a member placed elsewhere stays there
//! until it is replaced. The back-off is first-sighting memory like every
//! timer: a new leader re-learns it from the operations still in flight.

use super::group::Planner;
use super::view::View;
use crate::journal::Operation;
use crate::model::Time;
use crate::spec::Allocation;
use std::collections::BTreeMap;
use std::time::Duration;

/// How long a group's provisions avoid a zone that refused one for lack
/// of capacity, after the last operation that reported it.
pub const ZONE_BACKOFF: Duration = Duration::from_secs(600);

/// Zones short of capacity, by (group, zone): when this controller last
/// saw an operation in flight report a refusal there.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct ShortZones(BTreeMap<(String, String), Time>);

impl ShortZones {
    /// `old`'s zones still within their back-off at `now`, and every zone
    /// an operation in `journal` reports (seen now).
    pub(crate) fn at(old: &ShortZones, journal: &[Operation], now: Time) -> ShortZones {
        let backoff = ZONE_BACKOFF.as_millis() as u64;
        let mut zones: BTreeMap<(String, String), Time> = old
            .0
            .iter()
            .filter(|(_, seen)| now < seen.saturating_add(backoff))
            .map(|(k, seen)| (k.clone(), *seen))
            .collect();
        for op in journal {
            for z in &op.short_zones {
                zones.insert((op.group.clone(), z.clone()), now);
            }
        }
        ShortZones(zones)
    }

    fn avoids(&self, group: &str, zone: &str) -> bool {
        self.0.contains_key(&(group.to_string(), zone.to_string()))
    }

    /// Zones being avoided.
    pub(crate) fn len(&self) -> usize {
        self.0.len()
    }
}

impl Planner<'_> {
    /// The zone `op`'s provision goes to: `slot`'s, unless the provider
    /// lacked capacity there (see the module doc).
    pub(crate) fn placement(
        &mut self,
        view: &View<'_>,
        op: &Operation,
        slot: Option<&str>,
    ) -> Option<String> {
        let group = &view.d.spec.name;
        let (Some(slot), Allocation::Size { zones, .. }) = (slot, &view.d.spec.allocation) else {
            return slot.map(str::to_string);
        };
        let tried = |z: &str| op.short_zones.iter().any(|t| t == z);
        let short = |z: &str| tried(z) || self.short_zones.avoids(group, z);
        if !short(slot) {
            return Some(slot.to_string());
        }
        let members = |z: &str| {
            view.described
                .as_ref()
                .map_or(0, |m| m.iter().filter(|i| i.zone() == Some(z)).count())
        };
        let pick = |ok: &dyn Fn(&str) -> bool| {
            zones
                .iter()
                .filter(|z| ok(z))
                .min_by_key(|z| members(z))
                .cloned()
        };
        let Some(zone) = pick(&|z| !short(z)).or_else(|| pick(&|z| !tried(z))) else {
            // Every zone refused this operation: its slot's again, after
            // the attempt's back-off (the attempt budget ends it).
            return Some(slot.to_string());
        };
        if zone != slot {
            self.out.explanation.push(format!(
                "{group}: {} provisions in zone {zone}, not {slot}: zone {slot} had no capacity (avoided for {}s after its last refusal)",
                op.id,
                ZONE_BACKOFF.as_secs()
            ));
        }
        Some(zone)
    }
}
