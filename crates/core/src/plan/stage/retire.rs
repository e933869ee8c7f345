//! Retire: members the spec no longer declares go, the leader last and
//! through the same budget and gates as a roll.

use super::super::group::{Planner, excess_members};
use super::Group;
use crate::journal::OpKind;

impl Planner<'_> {
    /// Retires `g`'s excess members.
    pub(super) fn retire(&mut self, g: &Group<'_, '_>) {
        let (d, name) = (g.d(), g.name());
        let (live, pending, free, is_manager) = (&g.live, &g.pending, &g.free, g.is_manager());
        let excess = excess_members(
            d,
            free,
            live.len() + pending.len(),
            self.world.observed.self_link.as_deref(),
            g.spare_kept,
        );
        for inst in excess {
            let last = is_manager && self.world.members <= 1 && self.world.swarm_ok();
            if last && d.spec.allocation.size() == 0 && self.is_leader(inst) {
                // Only `drover destroy` commits a manager group below one
                // member; the swarm's last one is removed from outside it.
                self.wait(
                    name,
                    format!(
                        "{} is the swarm's last manager: `drover destroy {name}` removes it from outside the swarm",
                        inst.id
                    ),
                );
                break;
            }
            if is_manager && self.leader_waits(name, inst) {
                break;
            }
            if !self.may_disrupt(d, inst, None) {
                break;
            }
            if !self.within_service_budgets(name, inst) {
                continue;
            }
            let op = self.make_op(d, OpKind::Retire, Some(inst), None);
            self.begin(op, format!("retire {} (not declared any more)", inst.id));
        }
    }
}
