//! Member health, judged from the swarm's node list through the link label.

use super::world::World;
use crate::model::{Node, NodeState};
use crate::spec::Role;

/// A member's health as one observation shows it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Health {
    /// Ready (and, for managers, a reachable raft member).
    Healthy,
    /// Known bad: machine stopped, node down, manager unreachable.
    Unhealthy(&'static str),
    /// No node for it yet (still booting or never joined).
    Pending,
    /// Cannot tell (swarm unavailable, node state unknown).
    Unknown,
}

/// The health of a member of a `role` group whose machine is `running`
/// and carries `link`.
pub(crate) fn judge(role: Role, running: bool, link: Option<&str>, world: &World<'_>) -> Health {
    judge_node(role, running, world.swarm_ok(), world.node_for(link))
}

/// [`judge`] with the member's `node` (as [`World::node_for`] finds it)
/// looked up already; `swarm_ok` as [`World::swarm_ok`].
pub(crate) fn judge_node(role: Role, running: bool, swarm_ok: bool, node: Option<&Node>) -> Health {
    if !running {
        return Health::Unhealthy("machine not running");
    }
    if role == Role::Plain {
        return Health::Healthy;
    }
    if !swarm_ok {
        return Health::Unknown;
    }
    let Some(node) = node else {
        return Health::Pending;
    };
    if node.locked {
        // Down to the leader, but alive and waiting for its unlock key:
        // replacing it would destroy a healthy manager (the group blocks).
        return Health::Unknown;
    }
    match node.state {
        NodeState::Down => Health::Unhealthy("node down"),
        NodeState::Unknown | NodeState::Disconnected => Health::Unknown,
        NodeState::Ready if role == Role::Manager => match &node.raft {
            Some(r) if r.reachable => Health::Healthy,
            Some(_) => Health::Unhealthy("manager unreachable"),
            None => Health::Pending,
        },
        NodeState::Ready => Health::Healthy,
    }
}
