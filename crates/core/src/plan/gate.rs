//! The manager gate: may a manager be disrupted or added right now?
//!
//! Every voluntary manager step passes through here, computed worst-case
//! (the replacement never joins) as the design brief's safety contract says.

use super::group::Planner;
use crate::quorum;
use crate::spec::Role;

impl Planner<'_> {
    /// A manager operation other than `except` is in flight.
    fn other_manager_op(&self, except: Option<&str>) -> Option<String> {
        self.ops
            .iter()
            .find(|o| o.role == Role::Manager && Some(o.id.as_str()) != except)
            .map(|o| o.id.clone())
    }

    /// Why a healthy, reachable manager may not be disrupted now (or `None`: it may).
    pub(crate) fn healthy_manager_gate(&self, except: Option<&str>) -> Option<String> {
        if !self.world.swarm_ok() {
            return Some("the swarm has no leader or cannot be asked".into());
        }
        if let Some(id) = self.other_manager_op(except) {
            return Some(format!("manager operation {id} is still in flight"));
        }
        if let Some(why) = &self.manager_trouble {
            return Some(why.clone());
        }
        if self.world.reachable < self.world.members {
            return Some(format!(
                "{} of {} raft members are unreachable: heal first",
                self.world.members - self.world.reachable,
                self.world.members
            ));
        }
        if self.world.members < self.desired_managers {
            return Some(format!(
                "the raft has {} members, fewer than the {} declared: no disruption until it is whole",
                self.world.members, self.desired_managers
            ));
        }
        let after = quorum::ft_after_removing_healthy(self.world.members, self.world.reachable);
        if after < 0 {
            return Some(format!(
                "removing a manager would leave fault tolerance at {after} ({} members)",
                self.world.members
            ));
        }
        None
    }

    /// Why an unreachable manager may not be demoted now. Demoting it raises
    /// fault tolerance, so only quorum and one-at-a-time matter.
    pub(crate) fn unreachable_manager_gate(&self, except: Option<&str>) -> Option<String> {
        if !self.world.swarm_ok() {
            return Some("the swarm has no leader: no voluntary action".into());
        }
        self.other_manager_op(except)
            .map(|id| format!("manager operation {id} is still in flight"))
    }

    /// Why a manager may not be added now. A join that enters the raft and
    /// then fails counts as one more unreachable member; that risk is taken
    /// only while every current member is reachable (growing a raft always
    /// passes through it, as `swarm join` itself does) or when fault
    /// tolerance would survive it anyway.
    pub(crate) fn add_manager_gate(&self) -> Option<String> {
        if !self.world.swarm_ok() {
            return Some("the swarm has no leader: a new manager could not join".into());
        }
        let all_reachable = self.world.reachable == self.world.members;
        let after = quorum::fault_tolerance(self.world.members + 1, self.world.reachable);
        (!all_reachable && after < 0).then(|| {
            format!(
                "adding a manager while {} of {} members are unreachable could leave fault tolerance at {after}: heal the unreachable member first",
                self.world.members - self.world.reachable,
                self.world.members
            )
        })
    }
}
