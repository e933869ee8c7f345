//! Ghost raft members: a raft member whose node is a worker by spec and
//! whose own engine runs no manager (or is gone), unreachable past
//! [`GHOST_BOUND`].
//!
//! Measured on a demo cluster: the leader's engine killed and restarted
//! (0.5 s) right after its own demotion was accepted came back with its old
//! manager state, rejoined the raft under a new raft id, got its worker
//! certificate and stopped its manager. The swarm then lists the node a
//! worker by spec, Ready, and still a raft member, unreachable, for ever:
//! swarmkit's role manager (`manager/role_manager.go`, `reconcileRole`)
//! acts on a node only while its observed role (`Node.Role`) differs from
//! its spec (`Spec.DesiredRole`), and both read worker. Every raft change
//! then waits on a member that never leaves, at fault tolerance 0 for a
//! 3-manager raft. A promote then a demote (two node updates, the node's
//! spec re-read before each) makes the role manager see a manager asked to
//! be a worker and remove the member (`removeMember`, behind its own quorum
//! check) within seconds: the heal, [`Action::HealGhost`].

use super::Action;
use super::group::Planner;
use super::memory::Timer;
use super::op::{StepState, StepWait};
use super::refusal::Refusal;
use crate::journal::{Operation, Step};
use crate::model::{Node, NodeState};
use serde::{Deserialize, Serialize};
use std::fmt;
use std::time::Duration;

/// How long a worker's raft member must stay unreachable, with its engine
/// running no manager, before it is taken for a ghost and healed; also the
/// least time between two heals of one ghost. A demotion removes the
/// member in 0.07-0.6 s here, and swarmkit's role manager retries a removal
/// every 5 s: two of its rounds pass first.
pub const GHOST_BOUND: Duration = Duration::from_secs(10);

/// What shows that a worker's unreachable raft member has nothing behind it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum GhostEvidence {
    /// Its engine answers that it runs no manager.
    EngineNoManager,
    /// Its engine answers that it is in no swarm.
    EngineLeft,
    /// The leader lists its node Down: its engine is gone.
    NodeDown,
}

impl GhostEvidence {
    /// The evidence `n` is a ghost, if it is a worker by spec whose raft
    /// member is unreachable and something shows no manager runs behind it.
    pub(crate) fn of(n: &Node) -> Option<Self> {
        let unreachable = n.raft.as_ref().is_some_and(|r| !r.reachable);
        if n.manager_role || !unreachable {
            return None;
        }
        if n.left {
            Some(GhostEvidence::EngineLeft)
        } else if n.state == NodeState::Down {
            Some(GhostEvidence::NodeDown)
        } else if n.engine_no_manager {
            Some(GhostEvidence::EngineNoManager)
        } else {
            None
        }
    }
}

impl fmt::Display for GhostEvidence {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            GhostEvidence::EngineNoManager => "its engine runs no manager",
            GhostEvidence::EngineLeft => "its engine is in no swarm",
            GhostEvidence::NodeDown => "its node is down",
        })
    }
}

/// A ghost raft member as the swarm's status shows it (`swarm.ghosts`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Ghost {
    /// The swarm node id.
    pub node: String,
    /// What shows nothing runs behind it.
    pub evidence: GhostEvidence,
    /// For how long this controller has seen it so, in whole seconds.
    pub seen_s: u64,
}

impl fmt::Display for Ghost {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "ghost raft member {}: a worker by spec, unreachable, {}, for {}s: healed by a promote and a demote",
            self.node, self.evidence, self.seen_s
        )
    }
}

impl<'a> Planner<'a> {
    /// The raft's ghosts, with their nodes: each seen so for [`GHOST_BOUND`]
    /// on this controller's clock (a member seen so for less is only
    /// timed). Found once per pass, before any operation advances.
    pub(crate) fn find_ghosts(&self) -> Vec<(&'a Node, Ghost)> {
        let world = &self.facts.world;
        world
            .raft_nodes()
            .filter_map(|(_, n)| Some((n, GhostEvidence::of(n)?)))
            .filter(|(n, _)| self.clock.elapsed(Timer::Ghost(n.id.clone()), GHOST_BOUND))
            .map(|(n, evidence)| {
                let seen = self.clock.running_for(&Timer::Ghost(n.id.clone()));
                let ghost = Ghost {
                    node: n.id.clone(),
                    evidence,
                    seen_s: seen.as_secs(),
                };
                (n, ghost)
            })
            .collect()
    }

    /// True when `n` is one of this pass's ghosts.
    pub(crate) fn is_ghost(&self, n: &Node) -> bool {
        self.ghosts.iter().any(|(g, _)| g.id == n.id)
    }

    /// Step `step` of `op` waits for its victim's node `n` to leave the
    /// raft (`wait` says so): when `n` is a ghost, its heal instead, through
    /// the gate for removing an unreachable member (one raft change at a
    /// time, a leader), at most once per [`GHOST_BOUND`].
    pub(crate) fn out_of_raft_or_heal<'o>(
        &self,
        op: &Operation,
        step: Step,
        n: &'o Node,
        wait: StepWait<'o>,
    ) -> StepState<'o> {
        if !self.is_ghost(n) {
            return StepState::Wait(wait);
        }
        match self.ghost_heal(&op.id, step, n) {
            Ok(heal) => StepState::Act(heal),
            Err(Some(no)) => StepState::Wait(StepWait::GhostHeal { node: &n.id, no }),
            Err(None) => StepState::Wait(StepWait::GhostHealed {
                node: &n.id,
                every: GHOST_BOUND,
            }),
        }
    }

    /// The heal of ghost `n` for operation `op` (at `step`), or why not now:
    /// a gate's refusal, or `None` while the last heal is not
    /// [`GHOST_BOUND`] old (swarmkit removes the member within seconds of
    /// one).
    fn ghost_heal(&self, op: &str, step: Step, n: &Node) -> Result<Action, Option<Refusal>> {
        if let Some(no) = self.unreachable_manager_gate(Some(op), Some(n)) {
            return Err(Some(no));
        }
        if !self
            .clock
            .every(Timer::GhostHealed(n.id.clone()), GHOST_BOUND)
        {
            return Err(None);
        }
        Ok(Action::HealGhost {
            op: op.to_string(),
            step,
            node: n.id.clone(),
        })
    }

    /// Heals the ghosts no operation in flight works on (a demotion by
    /// hand, an operation already over): each under the id `ghost-<node>`,
    /// which no journal entry carries. An operation's ghost is healed by
    /// its own step ([`Self::out_of_raft_or_heal`]).
    pub(crate) fn heal_unclaimed_ghosts(&mut self) {
        let world = &self.facts.world;
        let claimed = |n: &Node| {
            self.ops.iter().any(|o| {
                o.victim.as_ref().is_some_and(|v| {
                    world
                        .victim_node(v.link.as_deref(), v.node.as_deref())
                        .is_some_and(|m| m.id == n.id)
                })
            })
        };
        let unclaimed: Vec<&'a Node> = (self.ghosts.iter())
            .map(|(n, _)| *n)
            .filter(|n| !claimed(n))
            .collect();
        for n in unclaimed {
            let id = format!("ghost-{}", n.id);
            match self.ghost_heal(&id, Step::AwaitOutOfRaft, n) {
                Ok(heal) => self.out.actions.push(heal),
                Err(Some(no)) => self.out.explanation.push(format!(
                    "swarm: ghost raft member {}: its heal waits: {no}",
                    n.id
                )),
                Err(None) => {}
            }
        }
    }
}
