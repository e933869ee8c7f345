//! The oracle's judgements of one voluntary step: pure functions of a
//! [`World`] (the simulator's own raft, nodes and machines) and the declared
//! state, never of anything the planner computes.
//!
//! The runner hands in the world *as the planner observed it*, with this
//! plan's earlier steps applied (see `Runner::judge`): a fault that struck
//! between the observation and the step is not the planner's doing, and the
//! simulated engine's own refusals in the real world are what protect the
//! swarm in that window.

use crate::world::World;
use drover_core::plan::{Action, Desired};
use drover_core::spec::Role;

/// The swarm node a step acts on: the demoted node, or the destroyed
/// machine's node (the simulator knows it even when the labels are lost).
pub(crate) fn target_node(w: &World, action: &Action) -> Option<String> {
    match action {
        Action::Demote { node, .. }
        | Action::DemoteSelfAndLeave { node, .. }
        | Action::DemoteSelf { node, .. }
        | Action::Drain { node, .. } => Some(node.clone()),
        Action::Destroy { instance, .. } | Action::RunUpdate { instance, .. } => {
            w.instances.get(instance)?.node.clone()
        }
        _ => None,
    }
}

/// Managers declared across all manager groups.
pub(crate) fn declared_managers(desired: &Desired) -> usize {
    desired
        .groups
        .iter()
        .filter(|g| g.spec.role == Role::Manager)
        .map(|g| g.spec.allocation.size())
        .sum()
}

/// A step that removes a raft member, judged by the raft itself:
/// - no machine is destroyed while its node is a raft member (demote, wait
///   until out of the raft, then destroy);
/// - one manager removal at a time: no member is demoted while another is
///   still leaving the raft;
/// - heal first: a healthy (raft-reachable) member is not disrupted while
///   the raft has fewer members than declared or another member is
///   raft-unreachable. Reachability is raft contact, never node status
///   (design rule 10): a member that reads `unknown` after an election is
///   healthy here, a partitioned one whose status reads Ready is not.
pub(crate) fn manager_removal(w: &World, desired: &Desired, action: &Action) -> Option<String> {
    let destroying = matches!(action, Action::Destroy { .. });
    let updating = matches!(action, Action::RunUpdate { .. });
    if !destroying
        && !updating
        && !matches!(
            action,
            Action::Demote { .. } | Action::DemoteSelfAndLeave { .. } | Action::DemoteSelf { .. }
        )
    {
        return None;
    }
    let id = target_node(w, action)?;
    let n = w.nodes.get(&id)?;
    n.node.raft.as_ref()?;
    let what = action.describe();
    if destroying {
        return Some(format!(
            "{what} destroys the machine of raft member {id} (never destroyed before it left the raft)"
        ));
    }
    if updating {
        return Some(format!(
            "{what} updates the machine of raft member {id} in place (never before it left the raft)"
        ));
    }
    if n.out_of_raft_at.is_some() {
        return None; // a repeated demote of a member already leaving
    }
    let others = || {
        w.nodes
            .values()
            .filter(|m| m.node.id != id && m.node.raft.is_some())
    };
    if let Some(leaving) = others().find(|m| m.out_of_raft_at.is_some()) {
        return Some(format!(
            "{what} while {} is still leaving the raft (one manager removal at a time)",
            leaving.node.id
        ));
    }
    if !n.in_contact() {
        return None; // healing: removing an unreachable member raises FT
    }
    let declared = declared_managers(desired);
    let (members, _) = w.raft();
    if members < declared {
        return Some(format!(
            "{what} disrupts healthy manager {id} ({:?}) while the raft has {members} of {declared} declared members (heal first)",
            n.node.state
        ));
    }
    others().find(|m| !m.in_contact()).map(|u| {
        format!(
            "{what} disrupts healthy manager {id} ({:?}) while {} is raft-unreachable (heal first)",
            n.node.state, u.node.id
        )
    })
}

/// The leader is the last raft member a roll disrupts: when a step
/// demotes, self-demotes or destroys the leader, no other machine of the
/// manager group, nor any other raft member's machine (a worker promoted by
/// hand), may still be outdated or asked to be replaced (held ones included:
/// a held outdated manager keeps the leader waiting). A temporary member in
/// a spare slot is retired after the roll, never rolled: it is not waited for.
pub(crate) fn leader_last(w: &World, desired: &Desired, action: &Action) -> Option<String> {
    if !matches!(
        action,
        Action::Demote { .. }
            | Action::DemoteSelfAndLeave { .. }
            | Action::DemoteSelf { .. }
            | Action::Destroy { .. }
    ) {
        return None;
    }
    let id = target_node(w, action)?;
    let n = w.nodes.get(&id)?;
    if w.leader.as_deref() != Some(id.as_str()) || !n.in_contact() {
        return None;
    }
    let in_raft = |node: Option<&String>| {
        node.and_then(|x| w.nodes.get(x))
            .is_some_and(|m| m.node.raft.is_some())
    };
    let stale: Vec<String> = desired
        .groups
        .iter()
        .flat_map(|g| {
            w.instances
                .values()
                .filter(|i| i.inst.owned_by(&desired.cluster_id, &g.spec.name))
                .filter(|i| i.inst.running && i.node.as_deref() != Some(id.as_str()))
                .filter(|i| g.spec.role == Role::Manager || in_raft(i.node.as_ref()))
                // A temporary member (spare slot) is retired, never rolled.
                .filter(|i| !g.spec.is_spare(i.inst.logical_id()))
                .filter(|i| {
                    i.inst.config() != Some(g.hash.as_str()) || desired.replace.contains(&i.inst.id)
                })
                .map(|i| i.inst.id.clone())
        })
        .collect();
    (!stale.is_empty()).then(|| {
        format!(
            "{} disrupts the leader while {stale:?} are not current",
            action.describe()
        )
    })
}

/// Workers of `group` still serving (by the simulator's truth: an
/// `unknown` or `disconnected` node still runs its tasks).
pub(crate) fn serving(w: &World, group: &str) -> usize {
    w.instances
        .values()
        .filter(|i| i.inst.tag(drover_core::model::tags::GROUP) == Some(group) && i.inst.running)
        .filter_map(|i| w.nodes.get(i.node.as_ref()?))
        .filter(|n| n.serving() && n.node.availability == drover_core::model::Availability::Active)
        .count()
}

/// An update in place runs only on a node out of service: drained, or
/// already lost with its engine (Down). By the simulator's truth.
pub(crate) fn update_in_service(w: &World, action: &Action) -> Option<String> {
    let Action::RunUpdate { .. } = action else {
        return None;
    };
    let id = target_node(w, action)?;
    let n = w.nodes.get(&id)?;
    let out = n.node.availability == drover_core::model::Availability::Drain || !n.engine_alive;
    (!out).then(|| {
        format!(
            "{} updates the machine of node {id} while it is in service ({:?}, not drained)",
            action.describe(),
            n.node.availability
        )
    })
}

/// A machine is destroyed only once its node's tasks moved: drained, or
/// drained for longer than its group's `drain.timeout` (the spec's
/// `on_timeout` then decides), or skipped by the operator (`replace
/// --skip-drain`), or already lost with the node (engine dead, node Down or
/// gone). By the simulator's truth: a node reading `unknown` or
/// `disconnected` still runs its tasks.
pub(crate) fn tasks_moved(w: &World, desired: &Desired, action: &Action) -> Option<String> {
    let Action::Destroy { instance, .. } = action else {
        return None;
    };
    if desired.skip_drain.contains(instance) {
        return None;
    }
    let i = w.instances.get(instance)?;
    let n = w.nodes.get(i.node.as_ref()?)?;
    // A node whose engine lost drover's labels cannot be told to be this
    // machine's (the known limit of docs/safety.md §10): judged only for
    // nodes drover can identify.
    if !n.serving() || n.node.running_tasks == 0 || n.node.link.is_none() {
        return None;
    }
    let timeout = desired
        .groups
        .iter()
        .find(|g| i.inst.owned_by(&desired.cluster_id, &g.spec.name))
        .map_or(std::time::Duration::ZERO, |g| g.spec.drain.timeout);
    let drained_for = n.drained_at.map(|done| w.now + w.timings.drain - done);
    if drained_for.is_some_and(|t| t >= timeout.as_millis() as u64) {
        return None;
    }
    Some(format!(
        "{} while node {} still runs {} task(s) (drained for {})",
        action.describe(),
        n.node.id,
        n.node.running_tasks,
        drained_for.map_or("never".to_string(), |t| format!("{t} ms"))
    ))
}
