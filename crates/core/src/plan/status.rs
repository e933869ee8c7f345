//! The pass's summary: why each group waits or is blocked, the groups'
//! and the swarm's status, and what garbage collection found.

use super::blocked::Blocked;
use super::fast::Set;
use super::gc::GarbageState;
use super::group::Planner;
use super::view::View;
use super::waiting::{Stuck, Waiting};
use super::{Garbage, GroupStatus, Phase, Plan, SwarmStatus};
use crate::journal::OpKind;
use crate::model::SwarmView;
use std::fmt;
use std::str::FromStr;

/// Why the swarm's manager health is not known or not whole: the reason is
/// the variant; status stores and shows the text rendered from it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SwarmProblem {
    /// The swarm has no leader: the managers lost their quorum.
    QuorumLost(String),
    /// No manager could be asked.
    Unavailable(String),
    /// No swarm exists yet.
    Absent,
}

/// The rendered texts' fixed beginnings, which the stored status reads back by.
const QUORUM_LOST: &str = "the swarm has lost quorum: ";
const UNAVAILABLE: &str = "the swarm cannot be asked: ";
const ABSENT: &str = "no swarm exists yet";

impl SwarmProblem {
    /// The problem an observation of the swarm shows, if any.
    pub fn of(swarm: &SwarmView) -> Option<SwarmProblem> {
        match swarm {
            SwarmView::Ok(_) => None,
            SwarmView::NoQuorum(e) => Some(SwarmProblem::QuorumLost(e.clone())),
            SwarmView::Unavailable(e) => Some(SwarmProblem::Unavailable(e.clone())),
            SwarmView::Absent => Some(SwarmProblem::Absent),
        }
    }
}

impl fmt::Display for SwarmProblem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SwarmProblem::QuorumLost(e) => write!(f, "{QUORUM_LOST}{e}"),
            SwarmProblem::Unavailable(e) => write!(f, "{UNAVAILABLE}{e}"),
            SwarmProblem::Absent => f.write_str(ABSENT),
        }
    }
}

impl FromStr for SwarmProblem {
    type Err = String;

    /// Reads a stored status's text back (status documents keep the text
    /// operators read, as they always have).
    fn from_str(s: &str) -> Result<Self, String> {
        if let Some(e) = s.strip_prefix(QUORUM_LOST) {
            Ok(SwarmProblem::QuorumLost(e.to_string()))
        } else if let Some(e) = s.strip_prefix(UNAVAILABLE) {
            Ok(SwarmProblem::Unavailable(e.to_string()))
        } else if s == ABSENT {
            Ok(SwarmProblem::Absent)
        } else {
            Err(format!("not a swarm problem drover reports: {s:?}"))
        }
    }
}

impl serde::Serialize for SwarmProblem {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> serde::Deserialize<'de> for SwarmProblem {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

impl<'a> Planner<'a> {
    /// Records why `group` waits, unless a reason is recorded already.
    ///
    /// One exception (issue 36): "the leader goes last" gives way to a
    /// wait behind a blocked group. The leader waits for the other members
    /// to roll; when their roll waits behind a blocked group (for its zone,
    /// say), that group's block is why the leader waits, and the group
    /// must say so, never only "waiting".
    pub(crate) fn wait(&mut self, group: &str, why: Waiting<'a>) {
        let behind_blocked = matches!(&why, Waiting::GroupAhead { group: g, .. }
            if self.out.blocked.contains_key(g.as_str()));
        match self.out.waiting.get(group) {
            None => {}
            Some(Waiting::LeaderLast { .. }) if behind_blocked => {}
            Some(_) => return,
        }
        self.out.waiting.insert(group.to_string(), why);
    }

    /// Records why `group` is blocked, unless a reason is recorded already.
    pub(crate) fn block(&mut self, group: &str, why: Blocked) {
        if !self.out.blocked.contains_key(group) {
            self.out.blocked.insert(group.to_string(), why);
        }
    }

    pub(crate) fn finish(mut self) -> Plan {
        self.tell_stuck_ahead();
        let statuses: Vec<GroupStatus> =
            self.facts.views.iter().map(|v| self.status_of(v)).collect();
        let mut order: Vec<usize> = (0..statuses.len()).collect();
        // Report in declared order.
        order.sort_by_key(|&i| {
            self.facts
                .input
                .desired
                .groups
                .iter()
                .position(|g| g.spec.name == statuses[i].name)
        });
        let groups = order.into_iter().map(|i| statuses[i].clone()).collect();
        for (g, why) in &self.out.blocked {
            self.out.explanation.push(format!("{g}: {why}"));
        }
        for (g, why) in &self.out.waiting {
            self.out.explanation.push(format!("{g}: {why}"));
        }
        for (_, ghost) in &self.ghosts {
            self.out.explanation.push(format!("swarm: {ghost}"));
        }
        let swarm = SwarmStatus {
            members: self.facts.world.members,
            reachable: self.facts.world.reachable,
            fault_tolerance: self.facts.world.fault_tolerance(),
            leader_link: self.facts.world.leader.and_then(|n| n.link.clone()),
            problem: SwarmProblem::of(&self.facts.world.observed.swarm),
            ghosts: self.ghosts.iter().map(|(_, g)| g.clone()).collect(),
        };
        let parked = self.parked();
        let boot_asks = self.boot_asks();
        let (mut memory, wake_at) = self.clock.finish();
        memory.short_zones = std::mem::take(&mut self.short_zones);
        // Collections in flight that this pass did not list itself.
        let mut listed: Set<String> = self
            .out
            .garbage
            .iter()
            .map(|g| g.collection.item.clone())
            .collect();
        for op in self.ops.iter() {
            if let Some(c) = &op.collection
                && listed.insert(c.item.clone())
            {
                self.out.garbage.push(Garbage {
                    group: op.group.clone(),
                    collection: c.clone(),
                    state: GarbageState::Collecting(Some(op.id.clone())),
                });
            }
        }
        let causes = self
            .out
            .blocked
            .iter()
            .map(|(g, why)| (g.clone(), super::Cause::Blocked(why.cause())))
            .chain(
                self.out
                    .waiting
                    .iter()
                    .filter(|(g, _)| !self.out.blocked.contains_key(*g))
                    .map(|(g, why)| (g.clone(), super::Cause::Waiting(why.cause()))),
            )
            .collect();
        Plan {
            causes,
            parked,
            boot_asks,
            garbage: self.out.garbage,
            actions: self.out.actions,
            groups,
            swarm,
            explanation: self.out.explanation,
            memory,
            wake_at,
        }
    }

    /// A group waiting behind another that is blocked or paused says so,
    /// with that group's reason: one group's block never holds another
    /// silently (issue 36). Done once every group's pass has run, so the
    /// group ahead is seen whatever the order they ran in.
    fn tell_stuck_ahead(&mut self) {
        let (blocked, desired) = (&self.out.blocked, self.facts.input.desired);
        for why in self.out.waiting.values_mut() {
            if let Waiting::GroupAhead { group, stuck } = why {
                *stuck = match blocked.get(group.as_str()) {
                    Some(b) => Some(Stuck::Blocked(b.clone())),
                    None => desired
                        .groups
                        .iter()
                        .any(|g| g.spec.name == *group && g.paused)
                        .then_some(Stuck::Paused),
                };
            }
        }
    }

    fn status_of(&self, v: &View<'_>) -> GroupStatus {
        let name = &v.d.spec.name;
        let in_flight = self.ops.iter().filter(|o| o.group == *name).count();
        let mut st = GroupStatus {
            name: name.clone(),
            role: v.d.spec.role,
            phase: Phase::Converged,
            reason: None,
            desired_hash: v.d.hash.clone(),
            desired: v.d.spec.allocation.size(),
            members: 0,
            current: 0,
            healthy: 0,
            in_flight,
            window: self.calendar(&v.d.spec).describe(),
            behind: self
                .out
                .waiting
                .get(name)
                .and_then(Waiting::behind_stuck)
                .map(str::to_string),
        };
        let insts = match &v.described {
            Err(e) => {
                st.phase = Phase::Unobservable;
                st.reason = Some(format!("provider describe failed: {e}"));
                return st;
            }
            Ok(i) => i,
        };
        let busy = v.busy(
            self.ops
                .iter_slots()
                .filter(|(_, o)| o.group == *name)
                .map(|(slot, o)| self.found(slot, o, v)),
        );
        let mut due = false;
        for (i, _) in insts.iter().zip(busy).filter(|(_, b)| !b.victim) {
            due |= !v.d.spec.is_spare(i.logical_id()) && self.due(v.d, i).is_some();
            st.members += 1;
            st.current += usize::from(i.current());
            st.healthy += usize::from(i.healthy());
        }
        let rolling = self
            .ops
            .iter()
            .any(|o| o.group == *name && o.kind == OpKind::Roll)
            || st.current < st.members
            || due;
        (st.phase, st.reason) = if let Some(why) = self.out.blocked.get(name) {
            (Phase::Blocked, Some(why.to_string()))
        } else if v.d.paused {
            (Phase::Paused, Some("paused by an operator".into()))
        } else if rolling {
            (
                Phase::Rolling,
                self.out.waiting.get(name).map(Waiting::to_string),
            )
        } else if in_flight > 0 {
            (
                Phase::Changing,
                self.out.waiting.get(name).map(Waiting::to_string),
            )
        } else if st.members == st.desired
            && st.healthy == st.members
            && !self.out.waiting.contains_key(name)
        {
            (Phase::Converged, None)
        } else {
            (
                Phase::Waiting,
                Some(self.out.waiting.get(name).map_or_else(
                    || format!("{} of {} members healthy", st.healthy, st.desired),
                    Waiting::to_string,
                )),
            )
        };
        st
    }
}

#[cfg(test)]
mod tests {
    use super::SwarmProblem;
    use crate::model::SwarmView;

    /// Each problem is stored as the text status always showed, and read
    /// back as the same reason.
    #[test]
    fn problems_round_trip_through_their_stored_text() {
        let cases = [
            (
                SwarmView::NoQuorum("The swarm does not have a leader".into()),
                "the swarm has lost quorum: The swarm does not have a leader",
            ),
            (
                SwarmView::Unavailable("no manager machine answers".into()),
                "the swarm cannot be asked: no manager machine answers",
            ),
            (SwarmView::Absent, "no swarm exists yet"),
        ];
        for (view, text) in cases {
            let p = SwarmProblem::of(&view).expect("a problem");
            let json = serde_json::to_string(&p).unwrap();
            assert_eq!(json, serde_json::to_string(text).unwrap());
            assert_eq!(serde_json::from_str::<SwarmProblem>(&json).unwrap(), p);
        }
        assert!(matches!(
            SwarmProblem::of(&SwarmView::NoQuorum("x".into())),
            Some(SwarmProblem::QuorumLost(_))
        ));
        assert!(serde_json::from_str::<SwarmProblem>("\"something else\"").is_err());
    }
}
