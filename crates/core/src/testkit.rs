//! Builders for this crate's unit tests: the journal and swarm records
//! tests write by hand, every field a test does not care about at its
//! empty value (set the others with struct update syntax).

use crate::journal::{OpKind, Operation, Target, Victim};
use crate::model::{Availability, Node, NodeState, RaftMember};
use crate::spec::Role;

/// A journaled operation of `group`, with no victim, no target and nothing
/// recorded yet.
pub(crate) fn op(id: &str, group: &str, kind: OpKind, role: Role) -> Operation {
    Operation {
        id: id.into(),
        group: group.into(),
        kind,
        role,
        victim: None,
        target: None,
        surge: false,
        done: Default::default(),
        intent: None,
        collection: None,
        provision_failures: 0,
        short_zones: Vec::new(),
        hook_failure: None,
        in_place: false,
        update_failure: None,
    }
}

/// An operation's victim known only by its instance id.
pub(crate) fn victim(instance: &str) -> Victim {
    Victim {
        instance: Some(instance.into()),
        link: None,
        node: None,
        logical_id: None,
        zone: None,
        is_self: false,
    }
}

/// A new member's first machine, in no particular slot.
pub(crate) fn first_attempt() -> Target {
    Target {
        logical_id: None,
        zone: None,
        attempt: 1,
    }
}

/// A ready, active worker node `id` with no drover labels.
pub(crate) fn node(id: &str) -> Node {
    Node {
        id: id.into(),
        link: None,
        cluster: None,
        group: None,
        state: NodeState::Ready,
        availability: Availability::Active,
        manager_role: false,
        raft: None,
        running_tasks: 0,
        locked: false,
        left: false,
        engine_no_manager: false,
        engine_version: None,
    }
}

/// Node `id` of cluster `c1`'s `group`, linked by `link`: a manager in the
/// raft (reachable, leading or not) when `raft` is `Some(leader)`, else a
/// worker.
pub(crate) fn labelled_node(id: &str, link: &str, group: &str, raft: Option<bool>) -> Node {
    Node {
        link: Some(link.into()),
        cluster: Some("c1".into()),
        group: Some(group.into()),
        manager_role: raft.is_some(),
        raft: raft.map(|leader| RaftMember {
            leader,
            reachable: true,
            addr: "127.0.0.1:2377".into(),
        }),
        ..node(id)
    }
}
