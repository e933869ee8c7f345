//! When a machine's own engine is worth asking, beyond the leader's node
//! list, and how often: what only it knows — that it is autolocked (the
//! leader lists it Down, like a dead one), or that it ran `swarm leave` (the
//! leader lists it for another 27-34 s). The swarm adapter does the asking;
//! these are its rules, with the time passed in.

use crate::model::{Node, NodeState, Time};
use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

/// The least time between two questions to one engine. Asking a demoted
/// manager's engine while it shuts its manager down stretches its `swarm
/// leave` from 0.1-0.6 s to 5-8 s (swarm-facts), and the controller passes
/// many times a second while node events arrive; once a second still sees
/// a leave within about a second of it.
pub const ASK_EVERY: Duration = Duration::from_secs(1);

/// How long no engine is asked once a demoted manager is out of the raft.
/// The leader lists it so as soon as leadership has moved, while its engine
/// is still shutting its manager down (0.1-0.4 s here), and asking that
/// engine then stretches the shutdown to 5-8 s (swarm-facts). A new
/// leader's first pass asks every engine whether it is autolocked (it
/// lists every node Unknown): with `dockerd -D` its question was seen
/// landing 27 ms into the ex-leader's manager shutdown (BENCHMARKS.md §4).
/// The price: its leave (0.5-0.9 s after its demotion here) is noticed up
/// to half a second later.
pub const SETTLE: Duration = Duration::from_secs(1);

/// A manager the leader lists not Ready, or unreachable: its engine may say
/// it is autolocked.
pub fn may_be_locked(n: &Node) -> bool {
    n.manager_role && (n.state != NodeState::Ready || n.raft.as_ref().is_some_and(|r| !r.reachable))
}

/// A worker by spec that the leader still lists as an unreachable raft
/// member: its engine may say it runs no manager (a ghost, `plan::Ghost`).
pub fn may_be_ghost(n: &Node) -> bool {
    !n.manager_role && n.raft.as_ref().is_some_and(|r| !r.reachable)
}

/// For each of `nodes`, whether it is a demoted manager that may have
/// left: no manager role and already out of the raft as the leader sees it
/// (asked earlier, it is still shutting its manager down, and the question
/// slows that), listed Ready or Unknown (the new leader lists every node
/// Unknown at first, and an ex-leader stays so until it turns Down), in a
/// group that has raft members. The groups with raft members are found
/// once: a leader's node list holds every worker too.
pub fn may_have_left(nodes: &[Node]) -> Vec<bool> {
    let raft_groups: BTreeSet<&str> = nodes
        .iter()
        .filter(|m| m.raft.is_some())
        .filter_map(|m| m.group.as_deref())
        .collect();
    nodes
        .iter()
        .map(|n| {
            n.raft.is_none()
                && !n.manager_role
                && matches!(n.state, NodeState::Ready | NodeState::Unknown)
                && n.group.as_deref().is_some_and(|g| raft_groups.contains(g))
        })
        .collect()
}

/// Whether to ask other machines' engines now: some node may be locked,
/// may have left or may be a ghost, and the asker will act on the answer. A manager's
/// controller (`own`: its engine's node id) acts only while its node is the
/// leader: a follower's would only slow its own passes (an engine that is
/// shutting its manager down can take seconds to answer) and load the
/// engines, among them the demoted one that is leaving. An off-cluster
/// observer (`own`: `None`) always asks.
pub fn worth_asking(nodes: &[Node], own: Option<&str>) -> bool {
    let leads = |own: &str| {
        nodes
            .iter()
            .any(|n| n.id == own && n.raft.as_ref().is_some_and(|r| r.leader))
    };
    own.is_none_or(leads)
        && (nodes.iter().any(may_be_locked)
            || nodes.iter().any(may_be_ghost)
            || may_have_left(nodes).contains(&true))
}

/// When each engine was last asked, so none is asked more often than
/// [`ASK_EVERY`] (between questions the adapter reuses the last answer),
/// and when each demoted manager was first seen out of the raft, so none is
/// asked before it [`SETTLE`]s.
#[derive(Debug, Clone, Default)]
pub struct Pacing {
    asked: BTreeMap<String, Time>,
    /// Node id → first sighting as [`may_have_left`].
    out_of_raft: BTreeMap<String, Time>,
}

impl Pacing {
    /// Notes when each of `nodes` that may have left (`left`, as
    /// [`may_have_left`] says of them) was first seen so (forgetting the
    /// others); true unless one of them was first seen less than [`SETTLE`]
    /// before `now`: until then no engine is asked (the adapter cannot tell
    /// which engine is whose before it has asked).
    pub fn settled(&mut self, nodes: &[Node], left: &[bool], now: Time) -> bool {
        let fresh_until = |since: Time| since.saturating_add(SETTLE.as_millis() as Time);
        let mut seen = BTreeMap::new();
        for n in nodes
            .iter()
            .zip(left)
            .filter(|(_, may)| **may)
            .map(|(n, _)| n)
        {
            let since = self.out_of_raft.get(&n.id).copied().unwrap_or(now);
            seen.insert(n.id.clone(), since);
        }
        self.out_of_raft = seen;
        self.out_of_raft
            .values()
            .all(|&since| now >= fresh_until(since))
    }

    /// True when `engine` was asked less than [`ASK_EVERY`] before `now`:
    /// its last answer is current. While no engine is asked (not
    /// [`settled`](Self::settled)), only such answers may be used: an older
    /// one may say `left` of a machine that has since rejoined.
    pub fn fresh(&self, engine: &str, now: Time) -> bool {
        let every = ASK_EVERY.as_millis() as Time;
        self.asked
            .get(engine)
            .is_some_and(|&at| now < at.saturating_add(every))
    }

    /// True when `engine` may be asked at `now` (then counted as asked).
    pub fn due(&mut self, engine: &str, now: Time) -> bool {
        let every = ASK_EVERY.as_millis() as Time;
        match self.asked.get(engine) {
            Some(&at) if now < at.saturating_add(every) => false,
            _ => {
                self.asked.insert(engine.to_string(), now);
                true
            }
        }
    }

    /// Forgets engines no longer listed (machines destroyed).
    pub fn retain(&mut self, engines: &[String]) {
        self.asked.retain(|e, _| engines.contains(e));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{Availability, RaftMember};

    fn node(id: &str, manager: bool, raft: bool, state: NodeState) -> Node {
        Node {
            id: id.into(),
            link: Some(format!("l-{id}")),
            cluster: Some("c".into()),
            group: Some("managers".into()),
            state,
            availability: Availability::Active,
            manager_role: manager,
            raft: raft.then(|| RaftMember {
                leader: false,
                reachable: true,
                addr: format!("{id}:2377"),
            }),
            running_tasks: 0,
            locked: false,
            left: false,
            engine_no_manager: false,
            engine_version: None,
        }
    }

    #[test]
    fn a_demoted_manager_is_asked_about_leaving_only_once_out_of_the_raft() {
        let peer = node("a", true, true, NodeState::Ready);
        let leaving = node("b", false, true, NodeState::Ready);
        let out = node("c", false, false, NodeState::Unknown);
        let down = node("d", false, false, NodeState::Down);
        let mut worker = out.clone();
        worker.group = Some("workers".into());
        let nodes = vec![peer, leaving, out, down, worker];
        assert_eq!(
            may_have_left(&nodes),
            // peer; leaving: still in the raft; out; down: Down says it
            // already; worker: not a manager group.
            [false, false, true, false, false]
        );
    }

    #[test]
    fn only_the_leader_or_an_off_cluster_observer_asks() {
        let mut leader = node("a", true, true, NodeState::Ready);
        leader.raft.as_mut().unwrap().leader = true;
        let follower = node("b", true, true, NodeState::Ready);
        let out = node("c", false, false, NodeState::Ready);
        let nodes = vec![leader, follower, out];
        assert!(worth_asking(&nodes, Some("a")));
        assert!(!worth_asking(&nodes, Some("b")), "a follower never acts");
        assert!(!worth_asking(&nodes, Some("")), "own node unknown");
        assert!(worth_asking(&nodes, None));
        assert!(
            !worth_asking(&nodes[..2], Some("a")),
            "nothing to ask about"
        );
    }

    /// A worker by spec that is still an unreachable raft member: its
    /// engine is asked whether it runs a manager (a ghost).
    #[test]
    fn a_workers_unreachable_member_is_asked_about() {
        let mut leader = node("a", true, true, NodeState::Ready);
        leader.raft.as_mut().unwrap().leader = true;
        let mut ghost = node("g", false, true, NodeState::Ready);
        assert!(!may_be_ghost(&ghost), "reachable: a demotion in progress");
        ghost.raft.as_mut().unwrap().reachable = false;
        assert!(may_be_ghost(&ghost));
        let mut unreachable_manager = ghost.clone();
        unreachable_manager.manager_role = true;
        assert!(!may_be_ghost(&unreachable_manager));
        assert!(!may_be_ghost(&node("w", false, false, NodeState::Ready)));
        assert!(worth_asking(&[leader.clone(), ghost], Some("a")));
        assert!(!worth_asking(&[leader], Some("a")));
    }

    #[test]
    fn an_unwell_manager_may_be_locked() {
        assert!(may_be_locked(&node("a", true, true, NodeState::Down)));
        assert!(!may_be_locked(&node("a", true, true, NodeState::Ready)));
        let mut unreachable = node("a", true, true, NodeState::Ready);
        unreachable.raft.as_mut().unwrap().reachable = false;
        assert!(may_be_locked(&unreachable));
        assert!(!may_be_locked(&node("w", false, false, NodeState::Down)));
    }

    /// A demoted manager is left alone for [`SETTLE`] from its first
    /// sighting out of the raft (its engine may still be shutting its
    /// manager down); other reasons to ask wait meanwhile too, and a node
    /// that is back is forgotten.
    #[test]
    fn a_freshly_demoted_manager_settles_before_any_engine_is_asked() {
        let settle = SETTLE.as_millis() as Time;
        let peer = node("a", true, true, NodeState::Unknown);
        let out = node("c", false, false, NodeState::Unknown);
        let mut p = Pacing::default();
        let mut settled = |nodes: &[Node], now| p.settled(nodes, &may_have_left(nodes), now);
        assert!(settled(std::slice::from_ref(&peer), 0), "nothing demoted");
        let nodes = vec![peer.clone(), out.clone()];
        assert!(!settled(&nodes, 1_000), "first seen out of the raft");
        assert!(!settled(&nodes, 1_000 + settle - 1));
        assert!(settled(&nodes, 1_000 + settle));
        assert!(settled(std::slice::from_ref(&peer), 1_000 + settle + 1));
        assert!(
            !settled(&nodes, 1_000 + settle + 2),
            "seen again: a new first sighting"
        );
    }

    #[test]
    fn an_engine_is_asked_at_most_once_per_interval() {
        let every = ASK_EVERY.as_millis() as Time;
        let mut p = Pacing::default();
        assert!(!p.fresh("e1", 100), "never asked");
        assert!(p.due("e1", 100));
        assert!(p.fresh("e1", 100 + every - 1));
        assert!(!p.fresh("e1", 100 + every), "an answer a second old is not");
        assert!(!p.due("e1", 100 + every - 1));
        assert!(p.due("e2", 101), "each engine on its own");
        assert!(p.due("e1", 100 + every));
        p.retain(&["e2".to_string()]);
        assert!(p.due("e1", 100 + every + 1), "forgotten once unlisted");
        assert!(!p.due("e2", 102));
    }
}
