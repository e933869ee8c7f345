//! Why a gate says no, as a value: the reason is the variant, the message
//! is rendered from its data only when someone reads it (a wait, a block,
//! a garbage entry). No decision reads the message back.

use std::fmt;

/// Why a manager (or any raft member) may not be disrupted, removed or
/// added right now: the manager gate's answer (`plan::gate`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refusal {
    /// More than one node that is not Down carries the member's link.
    NodeInDoubt {
        /// The live nodes carrying it.
        nodes: Vec<String>,
        /// The shared link.
        link: String,
    },
    /// The machine, whose node cannot be found, may be a raft member no
    /// machine carries.
    UnmatchedMember {
        /// The machine.
        machine: String,
        /// The raft member it may be.
        node: String,
        /// That member's link label, if it has one.
        link: Option<String>,
    },
    /// The swarm has no leader or cannot be asked (disrupting a healthy manager).
    SwarmUnasked,
    /// The swarm has no leader (demoting an unreachable manager).
    NoLeader,
    /// The swarm has no leader (adding a manager).
    NoLeaderToJoin,
    /// Another operation changing the raft is in flight.
    ManagerOpInFlight(String),
    /// A node is joining or leaving the raft.
    MembershipChanging {
        /// The node.
        node: String,
        /// Joining (true) or leaving.
        joining: bool,
    },
    /// A manager group cannot be described.
    ManagerUndescribed {
        /// The group.
        group: String,
        /// The provider's error.
        error: String,
    },
    /// A manager no operation works on is not healthy.
    ManagerUnhealthy(String),
    /// The quorum arithmetic says no.
    Quorum(Quorum),
}

impl fmt::Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Refusal::NodeInDoubt { nodes, link } => write!(
                f,
                "nodes {} all carry its link {link}: it waits until only one of them is live (a gone machine's node turns Down within ~15 s)",
                nodes.join(", ")
            ),
            Refusal::UnmatchedMember {
                machine,
                node,
                link,
            } => write!(
                f,
                "cannot tell whether machine {machine} is raft member {node} (no machine carries that node's link {}): \
                 restore drover's engine labels on that engine, or demote and remove the member by hand",
                link.as_deref()
                    .unwrap_or("(none: its engine has no drover labels)")
            ),
            Refusal::SwarmUnasked => f.write_str("the swarm has no leader or cannot be asked"),
            Refusal::NoLeader => f.write_str("the swarm has no leader: no voluntary action"),
            Refusal::NoLeaderToJoin => {
                f.write_str("the swarm has no leader: a new manager could not join")
            }
            Refusal::ManagerOpInFlight(id) => {
                write!(f, "manager operation {id} is still in flight")
            }
            Refusal::MembershipChanging { node, joining } => write!(
                f,
                "node {node} is {} the raft: one membership change at a time",
                if *joining { "joining" } else { "leaving" }
            ),
            Refusal::ManagerUndescribed { group, error } => {
                write!(f, "manager group {group} cannot be described: {error}")
            }
            Refusal::ManagerUnhealthy(id) => write!(f, "manager instance {id} is not healthy"),
            Refusal::Quorum(q) => write!(f, "{q}"),
        }
    }
}

/// Why the raft's numbers forbid a change now: members unreachable or
/// missing, or fault tolerance that would fall too low.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Quorum {
    /// Raft members are unreachable: heal first.
    Unreachable {
        /// Unreachable members.
        unreachable: usize,
        /// Raft members.
        members: usize,
    },
    /// The raft has fewer members than declared: heal first.
    RaftShort {
        /// Members the declared managers make up.
        declared: usize,
        /// Workers promoted by hand in the raft.
        by_hand: usize,
        /// Managers declared.
        desired: usize,
    },
    /// Removing a healthy manager would leave fault tolerance below the floor.
    FaultTolerance {
        /// Fault tolerance after the removal.
        after: i64,
        /// Raft members.
        members: usize,
        /// The roll's floor.
        floor: i64,
        /// Whether an operator declared it (`update.min_fault_tolerance`)
        /// or it is the group's own (what it keeps while one member is
        /// replaced): the reason names the one that holds.
        declared: bool,
    },
    /// Adding a manager while members are unreachable could cost the quorum.
    AddWhileUnreachable {
        /// Unreachable members.
        unreachable: usize,
        /// Raft members.
        members: usize,
        /// Fault tolerance if the new member joined and then failed.
        after: i64,
        /// An unreachable member no machine carries (drover cannot heal it).
        unhealable: Option<String>,
    },
}

impl fmt::Display for Quorum {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Quorum::Unreachable {
                unreachable,
                members,
            } => write!(
                f,
                "{unreachable} of {members} raft members are unreachable: heal first"
            ),
            Quorum::RaftShort {
                declared,
                by_hand,
                desired,
            } => {
                write!(f, "the raft has {declared} members")?;
                if *by_hand > 0 {
                    write!(f, " ({by_hand} more promoted by hand)")?;
                }
                write!(
                    f,
                    ", fewer than the {desired} declared: no disruption until it is whole"
                )
            }
            Quorum::FaultTolerance {
                after,
                members,
                floor,
                declared,
            } => {
                write!(
                    f,
                    "removing a manager would leave fault tolerance at {after} ({members} members)"
                )?;
                if *after >= 0 {
                    write!(f, ", below this roll's floor of {floor}")?;
                    if *declared {
                        write!(f, " (update.min_fault_tolerance)")?;
                    } else {
                        write!(
                            f,
                            " (what the group keeps while one member is replaced; update.min_fault_tolerance is not set)"
                        )?;
                    }
                }
                Ok(())
            }
            Quorum::AddWhileUnreachable {
                unreachable,
                members,
                after,
                unhealable,
            } => {
                write!(
                    f,
                    "adding a manager while {unreachable} of {members} members are unreachable could leave fault tolerance at {after}: heal the unreachable member first"
                )?;
                if let Some(n) = unhealable {
                    write!(
                        f,
                        " (node {n} carries no machine's link: if its machine is gone, `docker node demote {n}` by hand)"
                    )?;
                }
                Ok(())
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{Quorum, Refusal};

    /// The messages operators read (status, events, `drover plan`) are
    /// rendered from the reason's data exactly as the gates wrote them.
    #[test]
    fn messages_are_rendered_from_the_data() {
        let cases = [
            (
                Refusal::Quorum(Quorum::FaultTolerance {
                    after: -1,
                    members: 1,
                    floor: 0,
                    declared: false,
                }),
                "removing a manager would leave fault tolerance at -1 (1 members)",
            ),
            (
                Refusal::Quorum(Quorum::FaultTolerance {
                    after: 0,
                    members: 3,
                    floor: 1,
                    declared: true,
                }),
                "removing a manager would leave fault tolerance at 0 (3 members), below this roll's floor of 1 (update.min_fault_tolerance)",
            ),
            (
                Refusal::Quorum(Quorum::FaultTolerance {
                    after: 0,
                    members: 3,
                    floor: 1,
                    declared: false,
                }),
                "removing a manager would leave fault tolerance at 0 (3 members), below this roll's floor of 1 (what the group keeps while one member is replaced; update.min_fault_tolerance is not set)",
            ),
            (
                Refusal::Quorum(Quorum::RaftShort {
                    declared: 2,
                    by_hand: 0,
                    desired: 3,
                }),
                "the raft has 2 members, fewer than the 3 declared: no disruption until it is whole",
            ),
            (
                Refusal::Quorum(Quorum::RaftShort {
                    declared: 2,
                    by_hand: 1,
                    desired: 3,
                }),
                "the raft has 2 members (1 more promoted by hand), fewer than the 3 declared: no disruption until it is whole",
            ),
            (
                Refusal::MembershipChanging {
                    node: "n1".into(),
                    joining: false,
                },
                "node n1 is leaving the raft: one membership change at a time",
            ),
            (
                Refusal::UnmatchedMember {
                    machine: "i-1".into(),
                    node: "n9".into(),
                    link: None,
                },
                "cannot tell whether machine i-1 is raft member n9 (no machine carries that node's link (none: its engine has no drover labels)): restore drover's engine labels on that engine, or demote and remove the member by hand",
            ),
            (
                Refusal::Quorum(Quorum::AddWhileUnreachable {
                    unreachable: 1,
                    members: 2,
                    after: -1,
                    unhealable: Some("n2".into()),
                }),
                "adding a manager while 1 of 2 members are unreachable could leave fault tolerance at -1: heal the unreachable member first (node n2 carries no machine's link: if its machine is gone, `docker node demote n2` by hand)",
            ),
        ];
        for (refusal, text) in cases {
            assert_eq!(refusal.to_string(), text);
        }
    }
}
