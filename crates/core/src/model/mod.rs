//! What the providers and the swarm report: the planner's view of the world.
//!
//! Observations are values handed in by the shell. A failed or partial
//! observation is represented as such ([`Described::Failed`],
//! [`SwarmView::Unavailable`]), never as an empty list: "the cloud call
//! failed" must never read as "there are no machines".

use std::collections::{BTreeMap, BTreeSet};

/// Milliseconds on the observing controller's own monotonic clock.
pub type Time = u64;

pub mod service;
pub mod tags;
pub use service::{Service, Services};
pub use tags::{Key, Tags};

/// One machine as the provider describes it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Instance {
    /// Provider's id.
    pub id: String,
    /// Tags (drover's and the provider's).
    pub tags: Tags,
    /// False when the provider knows the machine stopped or its engine died.
    pub running: bool,
    /// Creation time, ms since the Unix epoch (provider-reported).
    pub created_ms: u64,
}

impl Instance {
    /// A tag's value.
    pub fn tag(&self, key: &str) -> Option<&str> {
        self.tags.get(key)
    }
    /// The link token, if tagged.
    pub fn link(&self) -> Option<&str> {
        self.tags.own(Key::Link)
    }
    /// The config hash it was built from. An adopted machine was not built
    /// by drover: it counts as built from the config it was adopted under
    /// (its `drover.adopted` tag), so it is rolled only once that changes.
    pub fn config(&self) -> Option<&str> {
        self.tags
            .own(Key::Config)
            .or_else(|| self.tags.own(Key::Adopted))
    }
    /// True when drover adopted this machine rather than created it.
    pub fn adopted(&self) -> bool {
        self.tags.own(Key::Config).is_none() && self.tags.own(Key::Adopted).is_some()
    }
    /// The slot's logical id.
    pub fn logical_id(&self) -> Option<&str> {
        self.tags.own(Key::LogicalId)
    }
    /// The slot's zone.
    pub fn zone(&self) -> Option<&str> {
        self.tags.own(Key::Zone)
    }
    /// Which machine for its slot this is (1 when untagged).
    pub fn attempt(&self) -> u32 {
        self.tags
            .own(Key::Attempt)
            .and_then(|a| a.parse().ok())
            .unwrap_or(1)
    }
    /// True only when it carries both this cluster's id and this group's name.
    pub fn owned_by(&self, cluster_id: &str, group: &str) -> bool {
        self.tags.own(Key::Cluster) == Some(cluster_id) && self.tags.own(Key::Group) == Some(group)
    }
}

/// A provider describe for one group.
#[derive(Debug, Clone, PartialEq)]
pub enum Described {
    /// A complete, successful listing.
    Ok(Vec<Instance>),
    /// The call failed or was partial: nothing may be concluded from it.
    Failed(String),
}

/// Node status as `docker node ls` shows it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum NodeState {
    /// Heartbeating.
    Ready,
    /// Missed heartbeats: gone or dead.
    Down,
    /// Not known yet (every node is briefly unknown after a leader change).
    Unknown,
    /// Disconnected.
    Disconnected,
}

/// Node availability.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Availability {
    /// Takes tasks.
    Active,
    /// Keeps tasks, takes no new ones.
    Pause,
    /// Tasks move away.
    Drain,
}

/// A raft member's state, present only while the node is in the raft.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct RaftMember {
    /// This member is the leader.
    pub leader: bool,
    /// Reachable from the leader.
    pub reachable: bool,
    /// Its advertise address (`host:port`).
    pub addr: String,
}

/// One swarm node (`docker node ls` row).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Node {
    /// Swarm node id.
    pub id: String,
    /// The `drover.link` engine label, if any.
    pub link: Option<String>,
    /// The `drover.cluster` engine label, if any.
    pub cluster: Option<String>,
    /// The `drover.group` engine label, if any.
    pub group: Option<String>,
    /// Status.
    pub state: NodeState,
    /// Availability.
    pub availability: Availability,
    /// Spec role is manager (may still be joining or leaving the raft).
    pub manager_role: bool,
    /// Raft membership, if a member.
    pub raft: Option<RaftMember>,
    /// Tasks still running on the node (for drains).
    pub running_tasks: u32,
    /// The node's own engine reports its swarm autolocked (it needs
    /// `docker swarm unlock`): the leader sees it Down, but it is a healthy
    /// machine waiting for its key, never garbage.
    #[serde(default)]
    pub locked: bool,
    /// The node's own engine says it is in no swarm any more (it ran
    /// `swarm leave`), while the leader still lists it until its heartbeats
    /// time out (27-34 s): the direct signal that a leave happened.
    #[serde(default)]
    pub left: bool,
    /// The node's own engine says it runs no manager (`info` shows
    /// `ControlAvailable: false`) while the leader still lists it a raft
    /// member: with a worker spec, the member is a ghost no one will remove
    /// (`plan::Ghost`). Asked only of such nodes.
    #[serde(default)]
    pub engine_no_manager: bool,
    /// The version its engine reports (`Description.Engine.EngineVersion`):
    /// what an engine upgrade moves, shown by `drover plan`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub engine_version: Option<String>,
}

impl Node {
    /// A raft member, or a node joining or leaving the raft (its role says
    /// manager, or it is still a member after a demote): removing it is a
    /// quorum decision, whatever group declared its machine.
    pub fn in_raft(&self) -> bool {
        self.raft.is_some() || self.manager_role
    }

    /// A manager by spec whose raft member is gone and whose node is Down
    /// (a replaced leader that was cut off from its peers): it holds no
    /// vote, swarmkit refuses its demotion for ever ("can't find manager
    /// in raft memberlist"), and removes its node as it is.
    pub fn manager_out_of_raft(&self) -> bool {
        self.manager_role && self.raft.is_none() && self.state == NodeState::Down
    }
}

/// The swarm as seen through a manager.
#[derive(Debug, Clone, PartialEq)]
pub enum SwarmView {
    /// A complete node list from a manager that has a leader.
    Ok(Vec<Node>),
    /// The swarm has no leader (quorum lost): no voluntary action at all.
    NoQuorum(String),
    /// Could not ask (engine down, timeout): nothing may be concluded.
    Unavailable(String),
    /// No swarm exists yet (bootstrap).
    Absent,
}

impl SwarmView {
    /// The node list manager `own` (its swarm node id) answered, as a view:
    /// a manager's list always shows that manager itself in the raft, and
    /// one that does not is no view of the swarm. Seen once in a roll on
    /// Incus machines, from an engine mid-join or mid-demotion: a list with
    /// no raft member at all, which read as "0 of 0 managers reachable" (a
    /// lost quorum, or to a planner, a swarm with no managers).
    pub fn from_manager_list(nodes: Vec<Node>, own: &str) -> SwarmView {
        if nodes.iter().any(|n| n.id == own && n.raft.is_some()) {
            SwarmView::Ok(nodes)
        } else {
            SwarmView::Unavailable(format!(
                "the node list of manager {own} does not show it in the raft ({} nodes, {} raft members): not a view of the swarm",
                nodes.len(),
                nodes.iter().filter(|n| n.raft.is_some()).count()
            ))
        }
    }
}

/// Everything observed for one planning pass.
#[derive(Debug, Clone, PartialEq)]
pub struct Observed {
    /// Per group name, the provider's describe.
    pub instances: BTreeMap<String, Described>,
    /// The swarm.
    pub swarm: SwarmView,
    /// The link of the instance this controller runs on, if it runs on one.
    pub self_link: Option<String>,
    /// Controllers' reports, read from the store, that their own engine
    /// left the swarm (the end of a leader's hand-over). Read only while a
    /// former leader's leave is awaited; empty otherwise.
    pub left_reports: Vec<LeftReport>,
    /// The swarm's services and where their tasks run (service budgets).
    pub services: Services,
    /// What the machines the previous pass asked about showed of their
    /// boot (`plan::Plan::boot_asks`), by instance id: empty where nobody
    /// asked or the provider offers nothing.
    pub boots: crate::boot::Boots,
    /// The groups whose provider lists every machine it made in every
    /// successful describe (`InstanceProvider::listing_is_complete`): an
    /// empty pet slot there is empty at once, not after `UNLISTED_BOUND`.
    pub complete_listings: BTreeSet<String>,
}

/// A controller's report that its own engine ran `swarm leave` and left:
/// its hand-over's leave call returned. Only the leaving controller can
/// know this the moment it happens (the swarm lists the node Ready for
/// another 27-34 s), so it says so in the store, and the next leader's
/// controller need not ask that engine. The planner trusts it no more than
/// the engine's own answer ([`Node::left`]): only for the very node id it
/// names (a node that rejoins gets a new id), and only once that node is
/// out of the raft and no manager as the leader lists it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct LeftReport {
    /// The link of the machine whose controller reports (its own).
    pub link: String,
    /// The swarm node id its engine had before it left.
    pub node: String,
    /// When the leave returned, ms since the Unix epoch (that host's clock:
    /// shown, never compared with this one).
    pub at_ms: u64,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(id: &str, manager: bool) -> Node {
        Node {
            id: id.to_string(),
            link: None,
            cluster: None,
            group: None,
            state: NodeState::Ready,
            availability: Availability::Active,
            manager_role: manager,
            raft: manager.then(|| RaftMember {
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
    fn a_manager_list_that_shows_the_manager_in_the_raft_is_a_view() {
        let nodes = vec![node("a", true), node("b", false)];
        assert_eq!(
            SwarmView::from_manager_list(nodes.clone(), "a"),
            SwarmView::Ok(nodes)
        );
    }

    #[test]
    fn a_manager_list_without_the_manager_in_the_raft_is_no_view() {
        for (nodes, own) in [
            (vec![], "a"),
            (vec![node("a", false), node("b", false)], "a"),
            (vec![node("b", true)], "a"),
        ] {
            let view = SwarmView::from_manager_list(nodes, own);
            assert!(
                matches!(&view, SwarmView::Unavailable(m) if m.contains("not a view")),
                "{view:?}"
            );
        }
    }
}
