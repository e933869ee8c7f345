//! The service budget gate: may a roll disrupt this node now, given the
//! tasks of the swarm's services that run on it ([`crate::budget`])?
//!
//! A service's tasks count as down when they are not running (desired
//! replicas minus running tasks: a drained node's tasks until they run
//! elsewhere) and, ahead of that, when they run on a node that is on its
//! way out: drained, the victim of an operation whose disruption began,
//! or disrupted earlier in this pass. The candidate node's own tasks are
//! added; the sum must stay within the budget. So after a drain the next
//! disruption of a node running the same service waits until the moved
//! tasks run again, unless the budget allows more at once.

mod reason;

pub(crate) use reason::{Block, Wait};

use super::DesiredGroup;
use super::group::Planner;
use super::memory::Timer;
use crate::budget::ServiceBudget;
use crate::journal::Operation;
use crate::model::{Availability, Node, Service, Services};
use reason::{Never, Source};
use std::collections::HashSet;
use std::time::Duration;

/// How soon a pass waiting on a budget looks again: tasks starting
/// elsewhere raise no node event, so it is learnt by asking (a pass
/// describes every provider: not much more often than the 2 s resync).
const LOOK_AGAIN: Duration = Duration::from_secs(1);

/// Whether a node may be disrupted, by its services' budgets.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Verdict {
    /// Within every budget.
    Go,
    /// Not now: a service's tasks are down already.
    Wait(Wait),
    /// Never as the tasks are placed: draining the node alone exceeds a
    /// budget, or a budget cannot be read.
    Never(Never),
}

/// The services and the nodes on their way out, for one pass.
pub(crate) struct Budgets<'a> {
    services: &'a Services,
    /// Node ids whose tasks are going or gone (owned: few, and only
    /// while there are services).
    going: HashSet<String>,
}

impl<'a> Budgets<'a> {
    /// The nodes on their way out: drained, or the victim of an operation
    /// whose disruption began ([`Operation::began_disrupting`]). Found only when
    /// there are services to keep.
    pub(crate) fn new(
        services: &'a Services,
        nodes: &'a [Node],
        journal: &'a [Operation],
        victim: impl Fn(&'a Operation) -> Option<&'a Node>,
    ) -> Budgets<'a> {
        let mut going = HashSet::new();
        if !matches!(services, Services::Known(s) if s.is_empty()) {
            let drained = nodes
                .iter()
                .filter(|n| n.availability == Availability::Drain);
            let disrupted = journal
                .iter()
                .filter(|op| op.began_disrupting())
                .filter_map(victim);
            going.extend(drained.chain(disrupted).map(|n| n.id.clone()));
        }
        Budgets { services, going }
    }

    /// May `node` be disrupted, with `default` the budget of services
    /// that declare none?
    fn verdict(&self, node: &Node, default: Option<ServiceBudget>) -> Verdict {
        let services = match self.services {
            Services::Known(s) => s,
            Services::Unknown(_) if node.running_tasks == 0 => return Verdict::Go,
            Services::Unknown(e) => {
                return Verdict::Wait(Wait::ServicesUnknown {
                    node: node.id.clone(),
                    tasks: node.running_tasks,
                    error: e.clone(),
                });
            }
        };
        let mut wait = None;
        for s in services.iter().filter(|s| s.running_on(&node.id) > 0) {
            match self.service_verdict(s, node, default) {
                Verdict::Go => {}
                Verdict::Wait(why) => {
                    wait.get_or_insert(why);
                }
                never => return never,
            }
        }
        wait.map_or(Verdict::Go, Verdict::Wait)
    }

    fn service_verdict(&self, s: &Service, node: &Node, default: Option<ServiceBudget>) -> Verdict {
        let Some(replicas) = s.replicas.filter(|r| *r > 0) else {
            // Global: its task goes with the node and comes with its successor.
            return Verdict::Go;
        };
        let budget = match ServiceBudget::from_labels(|k| s.labels.get(k).map(String::as_str)) {
            Ok(Some(b)) => (b, Source::Label),
            Ok(None) => match default {
                Some(b) => (b, Source::Group),
                None => return Verdict::Go,
            },
            Err(error) => {
                return Verdict::Never(Never::Unreadable {
                    service: s.name.clone(),
                    error,
                });
            }
        };
        let (b, from) = budget;
        let allowed = b.allowed_unavailable(replicas);
        let here = s.running_on(&node.id);
        if here > allowed {
            return Verdict::Never(Never::TooManyHere {
                service: s.name.clone(),
                budget: b,
                from,
                allowed,
                replicas,
                node: node.id.clone(),
                here,
            });
        }
        let missing = replicas.saturating_sub(s.running_total());
        let leaving: u32 = self
            .going
            .iter()
            .filter(|id| **id != node.id)
            .map(|id| s.running_on(id))
            .sum();
        let down = missing + leaving;
        if down + here > allowed {
            return Verdict::Wait(Wait::Spent {
                service: s.name.clone(),
                budget: b,
                from,
                down,
                replicas,
                node: node.id.clone(),
                here,
            });
        }
        Verdict::Go
    }

    /// Counts `node`'s tasks as leaving for the rest of the pass.
    fn spend(&mut self, node: &Node) {
        if !matches!(self.services, Services::Known(s) if s.is_empty()) {
            self.going.insert(node.id.clone());
        }
    }
}

/// What the budget gate says of a disruption.
pub(crate) enum Gate {
    /// Within every budget (the node's tasks are spent for the pass).
    Go,
    /// Not now, and why.
    Hold(Wait),
    /// Never as the tasks are placed, an unreadable label, or held past
    /// the group's `step_timeout`: the group is blocked, never rolled back
    /// (a rollback's steps would wait on the same budget).
    Block(Block),
}

impl Planner<'_> {
    /// The budget gate for `node`, disrupted by group `d`, its hold timed
    /// by the key `held` (an operation's id, or a member's before its
    /// operation begins). `Go` spends the node's tasks for the rest of the
    /// pass; a hold asks for the next pass soon.
    pub(crate) fn budget_gate(&mut self, d: &DesiredGroup, node: &Node, held: &str) -> Gate {
        let timeout = d.spec.update.step_timeout;
        match self.budgets.verdict(node, d.spec.update.service_budget) {
            Verdict::Go => {
                self.budgets.spend(node);
                Gate::Go
            }
            Verdict::Never(why) => Gate::Block(Block::Never(why)),
            Verdict::Wait(why) if self.clock.elapsed(Timer::Budget(held.to_string()), timeout) => {
                Gate::Block(Block::HeldTooLong { why, timeout })
            }
            Verdict::Wait(why) => {
                self.clock.wake_within(LOOK_AGAIN);
                Gate::Hold(why)
            }
        }
    }
}
