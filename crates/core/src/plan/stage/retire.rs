//! Retire: members the spec no longer declares go, the leader last and
//! through the same budget and gates as a roll.

use super::super::DesiredGroup;
use super::super::group::Planner;
use super::super::view::Member;
use super::super::waiting::Waiting;
use super::Group;
use crate::journal::OpKind;
use crate::spec::Allocation;
use std::collections::{BTreeMap, HashSet};

impl Planner<'_> {
    /// Retires `g`'s excess members.
    pub(super) fn retire(&mut self, g: &Group<'_, '_>) {
        let (d, name) = (g.d(), g.name());
        let (live, pending, free, is_manager) = (&g.live, &g.pending, &g.free, g.is_manager());
        let excess = excess_members(
            d,
            free,
            live.len() + pending.len(),
            self.facts.world.observed.self_link.as_deref(),
            g.spare_kept,
        );
        for inst in excess {
            let last = is_manager && self.facts.world.members <= 1 && self.facts.world.swarm_ok();
            if last && d.spec.allocation.size() == 0 && self.is_leader(inst) {
                // Only `drover destroy` commits a manager group below one
                // member; the swarm's last one is removed from outside it.
                let (member, group) = (inst.id.clone(), name.to_string());
                self.wait(name, Waiting::LastManager { member, group });
                break;
            }
            if is_manager && self.leader_waits(name, inst) {
                break;
            }
            if !self.may_disrupt(d, inst, None) {
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
            let op = self.make_op(d, OpKind::Retire, Some(inst), None);
            self.begin(op, format!("retire {} (not declared any more)", inst.id));
        }
    }
}

/// A member's place in the retirement order, the first goes first.
type Rank<'i> = (
    bool,
    bool,
    bool,
    bool,
    bool,
    std::cmp::Reverse<u64>,
    &'i str,
);

/// [`Rank`] of `i` in `d`: the controller's own machine (`self_link`)
/// last. A machine with no node (it never joined) serves nothing: it goes
/// first, before a joined one that reads unhealthy for a moment (a node
/// `disconnected` for seconds), which a heal of the other would keep.
/// Among the unhealthy, a raft member unreachable from the leader goes
/// before a reachable one that merely reads unknown (after an election),
/// whatever their configs: removing it raises fault tolerance, removing
/// the other would wait at the gate.
fn retire_rank<'i>(d: &DesiredGroup, self_link: Option<&str>, i: &'i Member<'i>) -> Rank<'i> {
    let reachable = i
        .node
        .and_then(|n| n.raft.as_ref())
        .is_some_and(|r| r.reachable);
    (
        i.link().is_some() && i.link() == self_link,
        i.node.is_some(),
        i.healthy(),
        reachable,
        i.config() == Some(d.hash.as_str()),
        std::cmp::Reverse(i.created_ms),
        i.id.as_str(),
    )
}

/// Members to retire: undeclared logical ids and duplicates, or cattle over
/// size. Preference: unhealthy (a broken member goes without the healthy
/// manager gate, and a healthy one would wait for it), then raft-unreachable,
/// then outdated, then newest; from the fullest
/// zone; never the controller's own machine unless it is the last choice.
pub(super) fn excess_members<'i>(
    d: &DesiredGroup,
    free: &[&'i Member<'i>],
    count: usize,
    self_link: Option<&str>,
    spare_kept: bool,
) -> Vec<&'i Member<'i>> {
    let rank = |i: &'i Member<'i>| retire_rank(d, self_link, i);
    match &d.spec.allocation {
        Allocation::LogicalIds(slots) => {
            // The temporary member a roll keeps counts as declared.
            let spares = d.spec.spares.iter().filter(|_| spare_kept);
            let declared: HashSet<&str> = slots
                .iter()
                .chain(spares)
                .filter_map(|s| s.logical_id.as_deref())
                .collect();
            let mut out: Vec<&Member> = free
                .iter()
                .copied()
                .filter(|i| !i.logical_id().is_some_and(|l| declared.contains(l)))
                .collect();
            let mut by_id: BTreeMap<&str, Vec<&Member>> = BTreeMap::new();
            for i in free
                .iter()
                .copied()
                .filter(|i| i.logical_id().is_some_and(|l| declared.contains(l)))
            {
                by_id
                    .entry(i.logical_id().unwrap_or_default())
                    .or_default()
                    .push(i);
            }
            for (_, mut dupes) in by_id {
                dupes.sort_by_key(|&i| rank(i));
                out.extend(dupes.iter().take(dupes.len() - 1));
            }
            out.sort_by_key(|&i| rank(i));
            out
        }
        Allocation::Size { size, .. } => pick_from_fullest_zone(
            free,
            count.saturating_sub(*size as usize),
            |i| i.zone(),
            |i| {
                let r = rank(i);
                (r.0, r)
            },
        ),
    }
}

/// Picks `n` of `pool`, one at a time: each time the best by `rank` from
/// the zone with the most members left; a member whose rank says "last"
/// (the controller's own machine) only once no other is left. Per zone its members are sorted once, so a
/// pick compares zones, not members: comparing every member for every pick
/// made scaling 100 000 members in by half quadratic.
fn pick_from_fullest_zone<'z, T: Copy, R: Ord>(
    pool: &[T],
    n: usize,
    zone: impl Fn(T) -> Option<&'z str>,
    rank: impl Fn(T) -> (bool, R),
) -> Vec<T> {
    if n == 0 {
        return Vec::new();
    }
    // Per zone, worst first: the best is popped.
    let mut zones: BTreeMap<Option<&str>, Vec<T>> = BTreeMap::new();
    for &i in pool {
        zones.entry(zone(i)).or_default().push(i);
    }
    for members in zones.values_mut() {
        members.sort_by_key(|&i| std::cmp::Reverse(rank(i)));
    }
    let mut out = Vec::with_capacity(n.min(pool.len()));
    while out.len() < n {
        let Some(members) = zones
            .values_mut()
            .filter(|m| !m.is_empty())
            .min_by_key(|m| {
                let best = rank(m[m.len() - 1]);
                (best.0, std::cmp::Reverse(m.len()), best)
            })
        else {
            break;
        };
        out.extend(members.pop());
    }
    out
}

#[cfg(test)]
mod tests {
    use super::pick_from_fullest_zone;
    use proptest::prelude::*;
    use std::collections::HashMap;

    fn pick_naive(pool: &[(u8, bool, u8, u32)], n: usize) -> Vec<(u8, bool, u8, u32)> {
        let mut pool = pool.to_vec();
        let mut out = Vec::new();
        while out.len() < n && !pool.is_empty() {
            let mut per_zone: HashMap<u8, usize> = HashMap::new();
            for i in &pool {
                *per_zone.entry(i.0).or_default() += 1;
            }
            let best = pool
                .iter()
                .enumerate()
                .min_by_key(|(_, i)| (i.1, std::cmp::Reverse(per_zone[&i.0]), (i.1, i.2, i.3)))
                .map(|(k, _)| k)
                .expect("not empty");
            out.push(pool.remove(best));
        }
        out
    }

    proptest! {
        /// Scale-in picks the same members in the same order as comparing
        /// every member for every pick did.
        #[test]
        fn scale_in_picks_as_before(
            members in proptest::collection::vec((0u8..4, proptest::bool::weighted(0.1), 0u8..3), 0..40),
            n in 0usize..45,
        ) {
            const ZONES: [&str; 4] = ["a", "b", "c", "d"];
            // Unique ids, as members' are.
            let pool: Vec<(u8, bool, u8, u32)> = members
                .iter()
                .enumerate()
                .map(|(k, &(z, last, r))| (z, last, r, k as u32))
                .collect();
            let zone = |i: (u8, bool, u8, u32)| (i.0 > 0).then(|| ZONES[i.0 as usize]);
            let picked = pick_from_fullest_zone(&pool, n, zone, |i| (i.1, (i.1, i.2, i.3)));
            prop_assert_eq!(picked, pick_naive(&pool, n));
        }
    }
}
