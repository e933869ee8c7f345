//! An indexed view of one observation, built once per pass.

use super::fast::Map;
use crate::model::{Node, Observed, SwarmView};
use crate::quorum;

/// The nodes carrying one link: almost always one, so no `Vec` is allocated
/// for it (a pass indexes every node).
enum Linked<'a> {
    One([&'a Node; 1]),
    /// A member rejoined: its stale entries share the label.
    Many(Vec<&'a Node>),
}

impl<'a> Linked<'a> {
    fn as_slice(&self) -> &[&'a Node] {
        match self {
            Linked::One(n) => n,
            Linked::Many(v) => v,
        }
    }

    fn push(&mut self, n: &'a Node) {
        match self {
            Linked::One([first]) => *self = Linked::Many(vec![first, n]),
            Linked::Many(v) => v.push(n),
        }
    }
}

pub(crate) struct World<'a> {
    pub(crate) observed: &'a Observed,
    /// Nodes by link label; several when a member rejoined (stale entries).
    by_link: Map<&'a str, Linked<'a>>,
    by_id: Map<&'a str, &'a Node>,
    /// Some link is carried by more than one node.
    links_shared: bool,
    pub(crate) members: usize,
    pub(crate) reachable: usize,
    pub(crate) leader: Option<&'a Node>,
}

impl<'a> World<'a> {
    pub(crate) fn new(observed: &'a Observed) -> Self {
        let mut w = World {
            observed,
            by_link: Map::default(),
            by_id: Map::default(),
            links_shared: false,
            members: 0,
            reachable: 0,
            leader: None,
        };
        if let SwarmView::Ok(nodes) = &observed.swarm {
            w.by_id.reserve(nodes.len());
            w.by_link.reserve(nodes.len());
            for n in nodes {
                w.by_id.insert(&n.id, n);
                if let Some(l) = &n.link {
                    w.by_link
                        .entry(l)
                        .and_modify(|e| {
                            e.push(n);
                            w.links_shared = true;
                        })
                        .or_insert(Linked::One([n]));
                }
                if let Some(r) = &n.raft {
                    w.members += 1;
                    w.reachable += usize::from(r.reachable);
                    if r.leader {
                        w.leader = Some(n);
                    }
                }
            }
        }
        w
    }

    /// True when the swarm answered with a leader.
    pub(crate) fn swarm_ok(&self) -> bool {
        matches!(self.observed.swarm, SwarmView::Ok(_))
    }

    /// The node for a link: the raft member or Ready one first, since a
    /// rejoined member leaves a stale Down entry with the same label.
    pub(crate) fn node_for(&self, link: Option<&str>) -> Option<&'a Node> {
        let nodes = self.by_link.get(link?)?.as_slice();
        if let [only] = nodes {
            return Some(only);
        }
        nodes.iter().copied().max_by_key(|n| {
            (
                n.raft.is_some(),
                n.state == crate::model::NodeState::Ready,
                std::cmp::Reverse(n.id.as_str()),
            )
        })
    }

    /// Every node carrying `link` (none for no link).
    pub(crate) fn with_link(&self, link: Option<&str>) -> &[&'a Node] {
        link.and_then(|l| self.by_link.get(l))
            .map_or(&[], Linked::as_slice)
    }

    /// True when some link is carried by more than one node (a rejoin).
    pub(crate) fn links_shared(&self) -> bool {
        self.links_shared
    }

    /// All nodes (none unless the swarm answered).
    pub(crate) fn nodes(&self) -> &'a [Node] {
        match &self.observed.swarm {
            SwarmView::Ok(nodes) => nodes,
            _ => &[],
        }
    }

    pub(crate) fn node_by_id(&self, id: Option<&str>) -> Option<&'a Node> {
        self.by_id.get(id?).copied()
    }

    pub(crate) fn fault_tolerance(&self) -> Option<i64> {
        self.swarm_ok()
            .then(|| quorum::fault_tolerance(self.members, self.reachable))
    }

    pub(crate) fn is_self(&self, link: Option<&str>) -> bool {
        link.is_some() && link == self.observed.self_link.as_deref()
    }
}
