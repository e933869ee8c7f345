//! An indexed view of one observation, built once per pass.

use super::fast::{Hasher, Map, Set};
use crate::model::{Node, NodeState, Observed, SwarmView};
use crate::quorum;
use hashbrown::HashTable;
use std::cell::OnceCell;
use std::hash::BuildHasher;

pub(crate) struct World<'a> {
    pub(crate) observed: &'a Observed,
    /// The node list (empty unless the swarm answered).
    nodes: &'a [Node],
    /// Each link's first node, as its position in `nodes`, hashed by the
    /// node's link. A pass looks up every member's node here, so this is
    /// the one table every node goes into, and its entries are four bytes:
    /// at 100 000 nodes it stays in the core's cache (half a megabyte, where
    /// keeping each link's `&str` made it six times that), and the one
    /// memory read it costs beyond that is the node itself, which the
    /// caller reads anyway.
    by_link: HashTable<u32>,
    hasher: Hasher,
    /// The links carried by more than one node (a member rejoined: its
    /// stale entries share the label), with all their nodes. Rare.
    shared: Map<&'a str, Vec<u32>>,
    /// The nodes named by the journal's victims, by id: operations whose
    /// victim's node cannot be found by its link look it up here.
    by_id: Map<&'a str, u32>,
    /// The ids in `by_id` were looked for.
    wanted: Set<&'a str>,
    /// Every node by id, built on the first lookup of an id not wanted
    /// (an operation begun in this pass: a dead node's removal).
    all_by_id: OnceCell<Map<&'a str, u32>>,
    pub(crate) members: usize,
    pub(crate) reachable: usize,
    pub(crate) leader: Option<&'a Node>,
    /// The first node waiting for its unlock key (autolock), if any.
    pub(crate) locked: Option<&'a Node>,
    /// Positions of the raft's members and of nodes whose membership is
    /// changing (a handful): what the quorum rules are judged on.
    raft_positions: Vec<u32>,
}

impl<'a> World<'a> {
    /// Indexes `observed`; `wanted` are the node ids the journal's victims
    /// name.
    pub(crate) fn new(observed: &'a Observed, wanted: Set<&'a str>) -> Self {
        let nodes: &[Node] = match &observed.swarm {
            SwarmView::Ok(nodes) => nodes,
            _ => &[],
        };
        let mut w = World {
            observed,
            nodes,
            by_link: HashTable::with_capacity(nodes.len()),
            hasher: Hasher::default(),
            shared: Map::default(),
            by_id: Map::default(),
            wanted,
            all_by_id: OnceCell::new(),
            members: 0,
            reachable: 0,
            leader: None,
            locked: None,
            raft_positions: Vec::new(),
        };
        for (k, n) in nodes.iter().enumerate() {
            let k = k as u32;
            if let Some(l) = &n.link {
                let hash = w.hasher.hash_one(l.as_str());
                match w.by_link.find(hash, |&p| link_is(&nodes[p as usize], l)) {
                    // Keep the first in `by_link`, all of them in `shared`.
                    Some(&first) => w.shared.entry(l).or_insert_with(|| vec![first]).push(k),
                    None => {
                        let hasher = &w.hasher;
                        w.by_link.insert_unique(hash, k, |&p| {
                            hasher.hash_one(nodes[p as usize].link.as_deref().unwrap_or(""))
                        });
                    }
                }
            }
            if w.wanted.contains(n.id.as_str()) {
                w.by_id.insert(&n.id, k);
            }
            if n.locked && w.locked.is_none() {
                w.locked = Some(n);
            }
            if n.in_raft() {
                w.raft_positions.push(k);
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
        if !self.shared.is_empty()
            && let Some(all) = self.shared.get(l)
        {
            return all;
        }
        let nodes = self.nodes;
        self.by_link
            .find(self.hasher.hash_one(l), |&p| link_is(&nodes[p as usize], l))
            .map_or(&[], std::slice::from_ref)
    }

    /// The node for a link: the most alive of those carrying it
    /// ([`liveness`]), since a rejoined member leaves a stale Down entry
    /// with the same label.
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
            .max_by_key(|n| (liveness(n), std::cmp::Reverse(n.id.as_str())))
    }

    /// An operation's victim's node: the most alive ([`liveness`]) among
    /// the nodes carrying its `link` and the node it `recorded` at Begin (an
    /// engine that lost drover's labels keeps its node id), preferring the
    /// recorded one on a tie.
    pub(crate) fn victim_node(
        &self,
        link: Option<&str>,
        recorded: Option<&str>,
    ) -> Option<&'a Node> {
        self.with_link(link)
            .chain(self.node_by_id(recorded))
            .max_by_key(|n| (liveness(n), Some(n.id.as_str()) == recorded))
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
        let id = id?;
        let by_id = if self.wanted.contains(id) {
            &self.by_id
        } else {
            self.all_by_id.get_or_init(|| {
                let mut m = Map::default();
                m.reserve(self.nodes.len());
                for (k, n) in self.nodes.iter().enumerate() {
                    m.insert(n.id.as_str(), k as u32);
                }
                m
            })
        };
        by_id.get(id).map(|&k| &self.nodes[k as usize])
    }

    /// The raft's members and the nodes joining or leaving it, with their
    /// positions in [`Self::nodes`].
    pub(crate) fn raft_nodes(&self) -> impl Iterator<Item = (u32, &'a Node)> + '_ {
        self.raft_positions
            .iter()
            .map(|&k| (k, &self.nodes[k as usize]))
    }

    /// The first node whose raft membership is changing, other than those
    /// `mine` accepts: one demoted but still a member (leaving), or one
    /// promoted but not a member yet (joining; a Down one is not joining).
    /// Quorum is a raft fact (design rule 10): such a member is counted as
    /// disrupted whether or not an operation of this controller's journal
    /// explains it (a deposed controller's, an operator's by hand).
    pub(crate) fn in_transition(&self, mine: impl Fn(&Node) -> bool) -> Option<&'a Node> {
        self.raft_nodes().map(|(_, n)| n).find(|n| {
            let leaving = n.raft.is_some() && !n.manager_role;
            let joining = n.raft.is_none() && n.manager_role && n.state != NodeState::Down;
            (leaving || joining) && !mine(n)
        })
    }

    pub(crate) fn fault_tolerance(&self) -> Option<i64> {
        self.swarm_ok()
            .then(|| quorum::fault_tolerance(self.members, self.reachable))
    }

    pub(crate) fn is_self(&self, link: Option<&str>) -> bool {
        link.is_some() && link == self.observed.self_link.as_deref()
    }

    /// True when the controller of the machine linked `link` reported that
    /// its engine, as node `node`, left the swarm. The id must match: a
    /// report about an earlier node of the same machine says nothing of
    /// this one.
    pub(crate) fn leave_reported(&self, link: Option<&str>, node: &str) -> bool {
        link.is_some_and(|link| {
            self.observed
                .left_reports
                .iter()
                .any(|r| r.link == link && r.node == node)
        })
    }
}

/// True when `node` carries `link`.
fn link_is(node: &Node, link: &str) -> bool {
    node.link.as_deref() == Some(link)
}

/// How alive a node is, for choosing among nodes that carry one link: a
/// raft member, then a Ready one, then one not Down. A rejoined member
/// leaves a stale Down entry with the same link; a member reading
/// `disconnected` or `unknown` is not Ready but still runs its tasks, and
/// must win over that stale entry.
fn liveness(n: &Node) -> (bool, bool, bool) {
    (
        n.raft.is_some(),
        n.state == NodeState::Ready,
        n.state != NodeState::Down,
    )
}

#[cfg(test)]
mod tests {
    use super::World;
    use crate::model::{Node, NodeState, Observed, SwarmView};

    fn node(id: &str, link: Option<&str>) -> Node {
        Node {
            link: link.map(str::to_string),
            ..crate::testkit::node(id)
        }
    }

    /// Nodes are found by id whether or not the journal named them (the
    /// others through the index built on first need), and by link, a
    /// rejoined member's Ready node first.
    #[test]
    fn finds_nodes_by_id_and_by_link() {
        let mut stale = node("n-0", Some("l-1"));
        stale.state = NodeState::Down;
        let observed = Observed {
            instances: Default::default(),
            swarm: SwarmView::Ok(vec![stale, node("n-1", Some("l-1")), node("n-2", None)]),
            self_link: None,
            left_reports: Vec::new(),
            services: Default::default(),
            boots: Default::default(),
            complete_listings: Default::default(),
        };
        let world = World::new(&observed, ["n-2", "n-9"].into_iter().collect());
        let id = |n: Option<&Node>| n.map(|n| n.id.clone());
        assert_eq!(id(world.node_by_id(Some("n-2"))).as_deref(), Some("n-2"));
        assert_eq!(id(world.node_by_id(Some("n-9"))), None);
        assert_eq!(id(world.node_by_id(Some("n-0"))).as_deref(), Some("n-0"));
        assert_eq!(id(world.node_for(Some("l-1"))).as_deref(), Some("n-1"));
        assert_eq!(world.with_link(Some("l-1")).count(), 2);
        assert!(world.links_shared());
    }

    /// A member reading `disconnected` (or `unknown`) still runs: it is its
    /// link's node, not a stale Down entry whose id sorts first.
    #[test]
    fn a_link_s_live_node_wins_over_a_stale_down_one_whatever_their_ids() {
        let mut stale = node("n-0", Some("l-1"));
        stale.state = NodeState::Down;
        let mut live = node("n-1", Some("l-1"));
        live.state = NodeState::Disconnected;
        let observed = Observed {
            instances: Default::default(),
            swarm: SwarmView::Ok(vec![stale, live]),
            self_link: None,
            left_reports: Vec::new(),
            services: Default::default(),
            boots: Default::default(),
            complete_listings: Default::default(),
        };
        let world = World::new(&observed, Default::default());
        assert_eq!(
            world.node_for(Some("l-1")).map(|n| n.id.as_str()),
            Some("n-1")
        );
        let victim = world.victim_node(Some("l-1"), Some("n-0"));
        assert_eq!(victim.map(|n| n.id.as_str()), Some("n-1"));
    }
}
