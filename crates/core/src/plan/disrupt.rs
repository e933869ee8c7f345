//! May a member be disrupted now: the zone, doubt, quorum and budget
//! checks a roll or a retirement passes before it begins.

use super::DesiredGroup;
use super::blocked::Blocked;
use super::budget::Gate;
use super::group::Planner;
use super::health::Health;
use super::in_flight::holds_zone;
use super::refusal::Refusal;
use super::view::Member;
use super::waiting::Waiting;
use crate::journal::Operation;
use crate::spec::{Role, Strategy};

impl Planner<'_> {
    /// Budget, zone and quorum checks for disrupting `inst` now.
    /// `settled` (members no operation is working on) is given for rolls:
    /// until `canaries` of them are current and healthy, only canaries roll.
    pub(crate) fn may_disrupt(
        &mut self,
        d: &DesiredGroup,
        inst: &Member<'_>,
        settled: Option<Settled>,
    ) -> bool {
        let name = &d.spec.name;
        if let Some(busy) = self.in_flight.other_zone(inst.zone()) {
            let why = match self.zone_held_by_blocked(inst.zone()) {
                Some(group) => Waiting::GroupAhead { group, stuck: None },
                None => Waiting::ZoneBusy(busy),
            };
            self.wait(name, why);
            return false;
        }
        if let Some(no) = self.node_in_doubt(inst) {
            self.wait(name, member(inst, no));
            return false;
        }
        if d.spec.role == Role::Manager {
            // A surge roll adds first; its demotion is gated when it comes.
            // That demotion of a reachable member waits for heal-first, so
            // the addition does too (else each try adds a member, then
            // steps aside).
            let surge = settled.is_some() && d.spec.update.strategy == Strategy::Surge;
            let reachable = inst
                .node
                .and_then(|n| n.raft.as_ref())
                .is_some_and(|r| r.reachable);
            let gate = if surge {
                self.unreachable_manager_gate(None, None)
                    .or_else(|| self.facts.manager_trouble.clone())
                    .or_else(|| reachable.then(|| self.heal_first()).flatten())
                    .or_else(|| self.add_manager_gate())
                    .or_else(|| {
                        inst.node
                            .is_none()
                            .then(|| self.unmatched_member(&inst.id, inst.link()))
                            .flatten()
                    })
            } else {
                self.member_gate(Role::Manager, inst, self.facts.roll_floor)
            };
            if let Some(no) = gate {
                let member = inst.id.clone();
                self.wait(name, Waiting::Manager { member, no });
                return false;
            }
            return true;
        }
        if let Some(no) = self.member_gate(d.spec.role, inst, self.facts.roll_floor) {
            self.wait(name, member(inst, no));
            return false;
        }
        // Out of service: members being replaced (heals included: a new
        // config that keeps failing must not walk through the whole group)
        // and members known to be broken that no operation owns yet.
        let being_replaced = self.in_flight.replacing(name);
        let broken = settled.map_or(0, |s| s.broken);
        let in_flight = being_replaced + broken;
        let current_healthy = settled.map_or(usize::MAX, |s| s.current_healthy);
        let canaries = d.spec.update.canaries as usize;
        let limit = if current_healthy < canaries {
            canaries
        } else {
            d.spec.update.max_in_flight as usize
        };
        if in_flight >= limit {
            let canaries = current_healthy < canaries;
            let why = Waiting::InFlight {
                in_flight,
                canaries,
                limit,
            };
            self.wait(name, why);
            return false;
        }
        true
    }

    /// The blocked group whose operations alone hold the zones other than
    /// `zone`, if they do (issue 36). Its operations keep their zone even
    /// parked: the zone is checked only as an operation begins, so one
    /// released while parked would, once an operator unblocks it, take its
    /// member out while another zone's roll is under way — two zones
    /// disrupted at once. The group waiting for the zone says instead that
    /// it waits behind that blocked group (and why it is blocked), as a
    /// group waiting for its turn behind a blocked one does.
    fn zone_held_by_blocked(&self, zone: Option<&str>) -> Option<String> {
        let mut holders = self
            .ops
            .iter()
            .filter(|o| holds_zone(o))
            .filter(|o| o.victim.as_ref().and_then(|v| v.zone.as_deref()) != zone);
        let first = holders.next()?;
        let blocked = |o: &Operation| self.out.blocked.contains_key(o.group.as_str());
        (blocked(first) && holders.all(blocked)).then(|| first.group.clone())
    }

    /// The service budget gate for `inst`'s node, where a roll or a
    /// retirement would begin (after [`Self::may_disrupt`]): a wait says
    /// why; a budget that can never be met blocks the group, so `plan` and
    /// `status` report it before the roll spends anything. Either way only
    /// this member is held: the next in order may run other tasks.
    pub(crate) fn within_service_budgets(&mut self, d: &DesiredGroup, inst: &Member<'_>) -> bool {
        let Some(node) = inst.node else {
            return true;
        };
        let name = d.spec.name.as_str();
        match self.budget_gate(d, node, &inst.id) {
            Gate::Go => true,
            Gate::Hold(why) => {
                let member = inst.id.clone();
                self.wait(name, Waiting::Budget { member, why });
                false
            }
            Gate::Block(why) => {
                self.block(name, Blocked::Budget(why));
                false
            }
        }
    }
}

/// What a roll's budget needs from the members no operation works on,
/// counted once per pass (not once per candidate).
#[derive(Clone, Copy)]
pub(crate) struct Settled {
    /// Known broken: out of service already.
    broken: usize,
    /// Current and healthy: the canaries that passed.
    current_healthy: usize,
}

impl Settled {
    pub(crate) fn count(settled: &[&Member<'_>]) -> Self {
        Settled {
            broken: settled
                .iter()
                .filter(|i| matches!(i.health, Health::Unhealthy(_)))
                .count(),
            current_healthy: settled
                .iter()
                .filter(|i| i.current() && i.healthy())
                .count(),
        }
    }
}

/// `inst` may not be disrupted now: `no`.
fn member(inst: &Member<'_>, no: Refusal) -> Waiting<'static> {
    Waiting::Member {
        member: inst.id.clone(),
        no,
    }
}
