//! The leader goes last: who the leader is, which raft member must be
//! current and healthy before it, and the wait that says so.

use super::group::Planner;
use super::memory::{Timer, UNLISTED_BOUND};
use super::view::Member;
use super::waiting::Waiting;
use crate::model::Node;
use crate::spec::Role;

impl Planner<'_> {
    pub(crate) fn is_leader(&self, inst: &Member<'_>) -> bool {
        self.facts
            .world
            .leader
            .is_some_and(|l| l.link.as_deref() == inst.link() && inst.link().is_some())
    }

    /// A member of the manager group (there is one per cluster) other than
    /// `leader` (the leader's or this controller's own machine) that is not
    /// current and healthy yet, held ones included: a hold keeps a member
    /// from being touched, not the leader from going last.
    /// Raft members of other groups (workers promoted by hand) count too:
    /// the leader goes last among all raft members.
    /// A raft member of this cluster no listed machine carries (a partial
    /// describe) may be outdated too: the leader waits until it is matched.
    /// A member with no cluster label may be a manager drover never made,
    /// which would hold the leader for ever: it holds the leader only while
    /// a running machine of ours has no node (an engine that lost drover's
    /// labels: that member may be it) or a group cannot be described, and
    /// until no such machine was seen for `UNLISTED_BOUND`.
    pub(crate) fn manager_before_leader(&self, leader: &str) -> Option<String> {
        let cluster = self.facts.input.desired.cluster_id.as_str();
        // A member with no cluster label is one of ours only if some running
        // machine of ours has no node (its engine lost drover's labels), or
        // a group could not be described (it may hold that machine).
        let node_less = || {
            self.facts.views.iter().any(|v| match &v.described {
                Ok(m) => m
                    .iter()
                    .any(|i| i.running && i.node.is_none() && i.id != leader),
                Err(_) => true,
            })
        };
        // Nor while it is new: a describe can leave its machine out, so
        // only once no machine of ours has lacked a node for a while is it
        // taken for a manager drover never made.
        let doubtful = |n: &Node| {
            node_less()
                || !self
                    .clock
                    .elapsed(Timer::Unlabelled(n.id.clone()), UNLISTED_BOUND)
        };
        if let Some(n) = self
            .facts
            .unmatched
            .iter()
            .find(|n| match n.cluster.as_deref() {
                Some(c) => c == cluster,
                None => doubtful(n),
            })
        {
            return Some(format!(
                "raft member {} (no listed machine carries it)",
                n.id
            ));
        }
        let in_raft = |i: &Member<'_>| i.node.is_some_and(Node::in_raft);
        self.facts
            .views
            .iter()
            .filter(|v| v.d.spec.role == Role::Manager || !self.facts.promoted.is_empty())
            .find_map(|v| match (&v.described, v.d.spec.role) {
                (Err(_), Role::Manager) => Some(format!("group {}", v.d.spec.name)),
                (Err(_), _) => None,
                // A temporary member (spare slot) is retired, never rolled:
                // it holds the leader only while unhealthy.
                (Ok(members), Role::Manager) => members
                    .iter()
                    .filter(|i| i.id != leader)
                    .find(|i| {
                        let spare = v.d.spec.is_spare(i.logical_id());
                        !(i.healthy() && (spare || self.due(v.d, i).is_none()))
                    })
                    .map(|i| i.id.clone()),
                (Ok(members), _) => members
                    .iter()
                    .find(|i| in_raft(i) && self.due(v.d, i).is_some())
                    .map(|i| i.id.clone()),
            })
    }

    /// True (and `group` waits, saying why) when `inst` is the leader or
    /// this controller's own machine and another raft member is not current
    /// and healthy yet: rolls and retires alike take the leader last.
    pub(crate) fn leader_waits(&mut self, group: &str, inst: &Member<'_>) -> bool {
        if !(self.is_leader(inst) || self.facts.world.is_self(inst.link())) {
            return false;
        }
        let Some(other) = self.manager_before_leader(&inst.id) else {
            return false;
        };
        self.wait(group, Waiting::LeaderLast { other });
        true
    }
}
