//! The manager gate: may a manager be disrupted or added right now?
//!
//! Every voluntary manager step passes through here, computed worst-case
//! (the replacement never joins) as the design brief's safety contract says.

use super::group::Planner;
use super::refusal::{Quorum, Refusal};
use super::view::Member;
use crate::journal::{OpKind, Operation, Step};
use crate::model::{Node, NodeState};
use crate::quorum;
use crate::spec::Role;

impl Planner<'_> {
    /// `op`, of a group declaring workers, is changing the raft like a
    /// manager operation: its demotion of a raft member (a worker promoted
    /// by hand) is planned in this pass, or has landed (its intent says
    /// Demote and the node no longer has the manager role). An intent alone
    /// is not enough: the call may never have reached the swarm, and a
    /// demote that did not happen must not hold a heal. Until then the op
    /// has touched nothing in the raft and waits at the gate like any
    /// other: a heal goes first (a manager operation that has disrupted
    /// nothing steps aside the same way), or the two wait on each other for
    /// ever. The node is found by link or by the id the victim recorded (an
    /// engine that lost drover's labels keeps its node id).
    pub(crate) fn removes_raft_member(&self, op: &Operation) -> bool {
        if op.role != Role::Worker {
            return false;
        }
        let Some(n) = op.victim.as_ref().and_then(|v| {
            self.facts
                .world
                .victim_node(v.link.as_deref(), v.node.as_deref())
        }) else {
            return false;
        };
        let landed = op.intent.as_ref().is_some_and(|i| i.step == Step::Demote) && !n.manager_role;
        n.in_raft() && (landed || self.demoting.contains(&op.id))
    }

    /// Why `inst`'s node is in doubt: more than one node that is not Down
    /// carries its link (its operation provisioned again after a machine
    /// vanished whose node has not yet turned Down, or whose engine still
    /// runs). Draining one and destroying the machine could take the
    /// other's tasks, or its raft seat, away unprepared; a dead engine's
    /// node turns Down within ~15 s.
    pub(crate) fn node_in_doubt(&self, inst: &Member<'_>) -> Option<Refusal> {
        let live: Vec<&str> = self
            .facts
            .world
            .with_link(inst.link())
            .filter(|n| n.state != NodeState::Down)
            .map(|n| n.id.as_str())
            .collect();
        (live.len() > 1).then(|| Refusal::NodeInDoubt {
            nodes: live.iter().map(|n| n.to_string()).collect(),
            link: inst.link().unwrap_or_default().to_string(),
        })
    }

    /// Why `inst`, a member of a `role` group, may not be taken out of
    /// service now as far as the raft goes. Every removal of a raft member
    /// passes the manager gate, whatever group declared the machine (a
    /// worker promoted by hand included); a machine whose node cannot be
    /// found may be an unmatched raft member ([`Self::unmatched_member`]).
    /// `floor`: the fault tolerance the removal must leave ([`Self::floor_of`]).
    pub(crate) fn member_gate(&self, role: Role, inst: &Member<'_>, floor: i64) -> Option<Refusal> {
        if role == Role::Plain {
            return None;
        }
        match inst.node {
            None => self.unmatched_member(&inst.id, inst.link()).or_else(|| {
                (role == Role::Manager)
                    .then(|| self.unreachable_manager_gate(None, None))
                    .flatten()
            }),
            Some(n) if role == Role::Manager || n.in_raft() => {
                self.removal_gate(Some(n), None, floor)
            }
            Some(_) => None,
        }
    }

    /// Why machine `id` (tagged with `link`), whose node cannot be found,
    /// may be a raft member: a raft member carried by no owned machine
    /// that could be this one's: a node without a link label (its engine
    /// lost drover's labels) or, for a machine that lost its link tag, any.
    /// A node labelled with another link is another machine's (gone, or
    /// left out of the describe), never this one. Taking such a machine out
    /// of service without demoting it first could cost the quorum, and
    /// drover cannot tell: it blocks and says so (design rules 1 and 10).
    pub(crate) fn unmatched_member(&self, id: &str, link: Option<&str>) -> Option<Refusal> {
        let could_be = self
            .facts
            .unmatched
            .iter()
            .find(|n| n.link.is_none() || link.is_none());
        could_be.map(|n| Refusal::UnmatchedMember {
            machine: id.to_string(),
            node: n.id.clone(),
            link: n.link.clone(),
        })
    }

    /// An operation other than `except` that changes the raft is in
    /// flight: a manager group's, or one whose victim is a raft member
    /// although its group declares workers (promoted by hand). A heal
    /// waits for such an operation; an in-place update's promotion back
    /// therefore does not wait for the heal (`Planner::promote` says why
    /// that order keeps the safety rules), or the two would wait on each
    /// other until the step timeout.
    fn other_manager_op(&self, except: Option<&str>) -> Option<Refusal> {
        self.ops
            .iter()
            .find(|o| {
                (o.role == Role::Manager || self.removes_raft_member(o))
                    && Some(o.id.as_str()) != except
            })
            .map(|o| Refusal::ManagerOpInFlight(o.id.clone()))
    }

    /// Why nothing may change the raft while another member's membership
    /// is changing (one removal at a time, even when no journal entry
    /// explains the change). `except`'s own victim and new member are its
    /// business.
    pub(crate) fn membership_changing(
        &self,
        except: Option<&str>,
        own: Option<&Node>,
    ) -> Option<Refusal> {
        let op = except.and_then(|id| self.ops.iter().find(|o| o.id == id));
        let mine = |n: &Node| {
            own.is_some_and(|o| o.id == n.id)
                || op.is_some_and(|o| {
                    let link = n.link.as_deref();
                    link == Some(o.id.as_str())
                        || o.victim.as_ref().is_some_and(|v| {
                            (link.is_some() && v.link.as_deref() == link)
                                || v.node.as_deref() == Some(n.id.as_str())
                        })
                })
        };
        self.facts
            .world
            .in_transition(mine)
            .map(|n| Refusal::MembershipChanging {
                node: n.id.clone(),
                joining: n.manager_role,
            })
    }

    /// The gate for taking `node` out of the raft, chosen by raft facts
    /// alone (design rule 10): a reachable member may go only through the
    /// worst-case check; an unreachable one (or a machine with no member)
    /// raises fault tolerance by going, so only one-at-a-time applies.
    /// Node status (`unknown` for seconds after every election) is never
    /// consulted here.
    pub(crate) fn removal_gate(
        &self,
        node: Option<&Node>,
        except: Option<&str>,
        floor: i64,
    ) -> Option<Refusal> {
        match node.and_then(|n| n.raft.as_ref()) {
            Some(r) if r.reachable => self.healthy_manager_gate(except, node, floor),
            _ => self.unreachable_manager_gate(except, node),
        }
    }

    /// Why a healthy, reachable manager may not be disrupted now (or `None`:
    /// it may), leaving at least `floor` of fault tolerance.
    pub(crate) fn healthy_manager_gate(
        &self,
        except: Option<&str>,
        own: Option<&Node>,
        floor: i64,
    ) -> Option<Refusal> {
        if !self.facts.world.swarm_ok() {
            return Some(Refusal::SwarmUnasked);
        }
        if let Some(no) = self.other_manager_op(except) {
            return Some(no);
        }
        if let Some(why) = self.membership_changing(except, own) {
            return Some(why);
        }
        if let Some(why) = &self.facts.manager_trouble {
            return Some(why.clone());
        }
        if let Some(why) = self.heal_first() {
            return Some(why);
        }
        // Never below 0, whatever the floor; a positive floor says so.
        let after =
            quorum::ft_after_removing_healthy(self.facts.world.members, self.facts.world.reachable);
        (after < floor.max(0)).then_some(Refusal::Quorum(Quorum::FaultTolerance {
            after,
            members: self.facts.world.members,
            floor,
            declared: self.facts.input.desired.floor_declared(),
        }))
    }

    /// The fault tolerance removing `op`'s victim must leave: the roll's
    /// floor for a voluntary disruption (a roll, a retirement); none beyond
    /// the quorum for a heal (its victim is broken already, and waiting
    /// would not make the raft safer).
    pub(crate) fn floor_of(&self, op: &Operation) -> i64 {
        match op.kind {
            OpKind::Roll | OpKind::Retire => self.facts.roll_floor,
            _ => 0,
        }
    }

    /// Why no healthy member may be disrupted (heal first): a raft member is
    /// unreachable, or the raft is short of its declared size.
    pub(crate) fn heal_first(&self) -> Option<Refusal> {
        if self.facts.world.reachable < self.facts.world.members {
            return Some(Refusal::Quorum(Quorum::Unreachable {
                unreachable: self.facts.world.members - self.facts.world.reachable,
                members: self.facts.world.members,
            }));
        }
        // A worker promoted by hand counts for the quorum, not for the
        // declared managers: it runs no controller, so a raft made whole by
        // it could be handed over to nodes that finish nothing.
        let by_hand = self
            .facts
            .promoted
            .iter()
            .filter(|n| n.raft.is_some())
            .count();
        let declared = self.facts.world.members.saturating_sub(by_hand);
        (declared < self.facts.desired_managers).then_some(Refusal::Quorum(Quorum::RaftShort {
            declared,
            by_hand,
            desired: self.facts.desired_managers,
        }))
    }

    /// Why an unreachable manager may not be demoted now. Demoting it raises
    /// fault tolerance, so only quorum and one-at-a-time matter.
    pub(crate) fn unreachable_manager_gate(
        &self,
        except: Option<&str>,
        own: Option<&Node>,
    ) -> Option<Refusal> {
        if !self.facts.world.swarm_ok() {
            return Some(Refusal::NoLeader);
        }
        self.other_manager_op(except)
            .or_else(|| self.membership_changing(except, own))
    }

    /// Why a manager may not be added now. A join that enters the raft and
    /// then fails counts as one more unreachable member; that risk is taken
    /// only while every current member is reachable (growing a raft always
    /// passes through it, as `swarm join` itself does) or when fault
    /// tolerance would survive it anyway.
    pub(crate) fn add_manager_gate(&self) -> Option<Refusal> {
        if !self.facts.world.swarm_ok() {
            return Some(Refusal::NoLeaderToJoin);
        }
        let all_reachable = self.facts.world.reachable == self.facts.world.members;
        let after =
            quorum::fault_tolerance(self.facts.world.members + 1, self.facts.world.reachable);
        (!all_reachable && after < 0).then(|| {
            Refusal::Quorum(Quorum::AddWhileUnreachable {
                unreachable: self.facts.world.members - self.facts.world.reachable,
                members: self.facts.world.members,
                after,
                // An unreachable member no machine carries is never healed by
                // drover (it cannot tell which machine, if any, it is): say so,
                // or the operator waits for a heal that cannot come.
                unhealable: self
                    .facts
                    .unmatched
                    .iter()
                    .find(|n| n.raft.as_ref().is_some_and(|r| !r.reachable))
                    .map(|n| n.id.clone()),
            })
        })
    }
}
