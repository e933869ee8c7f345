//! An indexed view of one observation, built once per pass.

use super::fast::Map;
use crate::model::{Node, NodeState, Observed, SwarmView};
use crate::quorum;
use std::cell::OnceCell;

pub(crate) struct World<'a> {
    pub(crate) observed: &'a Observed,
    /// The node list (empty unless the swarm answered).
    nodes: &'a [Node],
    /// Each link's first node (its position in `nodes`). A pass looks up
    /// every member's node here, so this is the one table every node goes
    /// into: small entries, no allocation per node.
    by_link: Map<&'a str, u32>,
    /// The links carried by more than one node (a member rejoined: its
    /// stale entries share the label), with all their nodes. Rare.
    shared: Map<&'a str, Vec<u32>>,
    /// Nodes by id, built on the first lookup: only operations whose
    /// victim's node cannot be found by its link look a node up by id.
    by_id: OnceCell<Map<&'a str, u32>>,
    pub(crate) members: usize,
    pub(crate) reachable: usize,
    pub(crate) leader: Option<&'a Node>,
}

impl<'a> World<'a> {
    pub(crate) fn new(observed: &'a Observed) -> Self {
        let nodes: &[Node] = match &observed.swarm {
            SwarmView::Ok(nodes) => nodes,
            _ => &[],
        };
        let mut w = World {
            observed,
            nodes,
            by_link: Map::default(),
            shared: Map::default(),
            by_id: OnceCell::new(),
            members: 0,
            reachable: 0,
            leader: None,
        };
        w.by_link.reserve(nodes.len());
        for (k, n) in nodes.iter().enumerate() {
            let k = k as u32;
            if let Some(l) = &n.link
                && let Some(first) = w.by_link.insert(l, k)
            {
                // Keep the first in `by_link`, all of them in `shared`.
                w.by_link.insert(l, first);
                w.shared.entry(l).or_insert_with(|| vec![first]).push(k);
            }
            if let Some(r) = &n.raft {
                w.members += 1;
                w.reachable += usize::from(r.reachable);
                if r.leader {
                    w.leader = Some(n);
                }
            }
        }
        w
    }

    /// True when the swarm answered with a leader.
    pub(crate) fn swarm_ok(&self) -> bool {
        matches!(self.observed.swarm, SwarmView::Ok(_))
    }

    /// The positions in [`Self::nodes`] of every node carrying `link`.
    pub(crate) fn positions_with_link(&self, link: Option<&str>) -> &[u32] {
        let Some(l) = link else { return &[] };
        match self.shared.get(l) {
            Some(all) => all,
            None => self.by_link.get(l).map_or(&[], std::slice::from_ref),
        }
    }

    /// The node for a link: the raft member or Ready one first, since a
    /// rejoined member leaves a stale Down entry with the same label.
    pub(crate) fn node_for(&self, link: Option<&str>) -> Option<&'a Node> {
        self.node_among(self.positions_with_link(link))
    }

    /// [`Self::node_for`] a link whose nodes' positions were looked up.
    pub(crate) fn node_among(&self, positions: &[u32]) -> Option<&'a Node> {
        if let [only] = positions {
            return Some(&self.nodes[*only as usize]);
        }
        positions
            .iter()
            .map(|&k| &self.nodes[k as usize])
            .max_by_key(|n| {
                (
                    n.raft.is_some(),
                    n.state == NodeState::Ready,
                    std::cmp::Reverse(n.id.as_str()),
                )
            })
    }

    /// Every node carrying `link` (none for no link).
    pub(crate) fn with_link(&self, link: Option<&str>) -> impl Iterator<Item = &'a Node> {
        let nodes = self.nodes;
        self.positions_with_link(link)
            .iter()
            .map(move |&k| &nodes[k as usize])
    }

    /// True when some link is carried by more than one node (a rejoin).
    pub(crate) fn links_shared(&self) -> bool {
        !self.shared.is_empty()
    }

    /// All nodes (none unless the swarm answered).
    pub(crate) fn nodes(&self) -> &'a [Node] {
        self.nodes
    }

    pub(crate) fn node_by_id(&self, id: Option<&str>) -> Option<&'a Node> {
        let by_id = self.by_id.get_or_init(|| {
            let mut m = Map::default();
            m.reserve(self.nodes.len());
            for (k, n) in self.nodes.iter().enumerate() {
                m.insert(n.id.as_str(), k as u32);
            }
            m
        });
        by_id.get(id?).map(|&k| &self.nodes[k as usize])
    }

    pub(crate) fn fault_tolerance(&self) -> Option<i64> {
        self.swarm_ok()
            .then(|| quorum::fault_tolerance(self.members, self.reachable))
    }

    pub(crate) fn is_self(&self, link: Option<&str>) -> bool {
        link.is_some() && link == self.observed.self_link.as_deref()
    }
}
