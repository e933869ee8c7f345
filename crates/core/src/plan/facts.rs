//! What a pass reads and never changes, built once before any stage runs:
//! the world, the groups' views (managers first), the nodes that may be
//! stale, the raft members promoted by hand or carried by no machine, and
//! the manager trouble every manager gate quotes. The stages read these
//! and write only the planner's own outputs (actions, claims, reasons).

use super::PlanInput;
use super::fast::Set;
use super::refusal::Refusal;
use super::view::View;
use super::world::World;
use crate::journal::{Operation, Victim};
use crate::model::{Node, NodeState};
use crate::spec::Role;
use std::rc::Rc;

/// The pass's read-only facts.
pub(crate) struct Facts<'a> {
    pub(crate) input: PlanInput<'a>,
    pub(crate) world: World<'a>,
    /// Managers first; shared, so a group's view can be read while the
    /// planner acts.
    pub(crate) views: Vec<Rc<View<'a>>>,
    pub(crate) desired_managers: usize,
    /// The fault tolerance a voluntary disruption of a manager must leave
    /// (the manager group's [`roll_floor`](crate::spec::GroupSpec::roll_floor)).
    pub(crate) roll_floor: i64,
    /// A manager no operation in flight works on that is unhealthy, or a
    /// manager group that cannot be described: every manager gate says so.
    pub(crate) manager_trouble: Option<Refusal>,
    /// Positions of the nodes that may be stale: no owned member of any
    /// group carries their link, or a rejoined Ready node with the same
    /// link superseded them. Found once per pass, in one scan of the
    /// nodes; `Planner::stale_nodes` reads only these.
    pub(crate) unclaimed: Vec<u32>,
    /// Raft members (or nodes joining or leaving it) that a member of a
    /// group declaring workers carries: promoted by hand. Their removal
    /// passes the manager gate (usually empty).
    pub(crate) promoted: Vec<&'a Node>,
    /// The raft members that no owned machine carries (an engine that lost
    /// drover's labels, a machine that lost its link tag, a partial
    /// describe, a machine gone) and that are not another cluster's: a
    /// machine whose node cannot be found may be one of them
    /// (`Planner::unmatched_member`). A handful at most.
    pub(crate) unmatched: Vec<&'a Node>,
}

impl<'a> Facts<'a> {
    pub(crate) fn new(input: PlanInput<'a>) -> Self {
        // Sized up front: a filtered iterator's hint is zero, and growing
        // sets of 10 000 ids rehashed them several times.
        let ids = |id: fn(&Victim) -> Option<&String>| {
            let mut set = Set::with_capacity_and_hasher(input.journal.len(), Default::default());
            set.extend(
                input
                    .journal
                    .iter()
                    .filter_map(|o| id(o.victim.as_ref()?))
                    .map(String::as_str),
            );
            set
        };
        let world = World::new(input.observed, ids(|v| v.node.as_ref()));
        let victims: Set<&str> = ids(|v| v.instance.as_ref());
        let mut views: Vec<View<'a>> = input
            .desired
            .groups
            .iter()
            .map(|d| {
                View::new(
                    d,
                    &input.desired.cluster_id,
                    input.observed,
                    &world,
                    &victims,
                )
            })
            .collect();
        // Managers first: they roll first and their state gates everything.
        views.sort_by_key(|v| v.d.spec.role != Role::Manager);
        let desired_managers = input
            .desired
            .groups
            .iter()
            .filter(|g| g.spec.role == Role::Manager)
            .map(|g| g.spec.allocation.size())
            .sum();
        let unclaimed = unclaimed_nodes(&world, &views);
        let promoted = world
            .raft_nodes()
            .filter(|&(k, _)| {
                views
                    .iter()
                    .any(|v| v.d.spec.role == Role::Worker && !v.unclaimed(k as usize))
            })
            .map(|(_, n)| n)
            .collect();
        let cluster = input.desired.cluster_id.as_str();
        let unmatched = world
            .raft_nodes()
            .filter(|(k, n)| n.raft.is_some() && unclaimed.binary_search(k).is_ok())
            .map(|(_, n)| n)
            .filter(|n| n.cluster.as_deref().is_none_or(|c| c == cluster))
            .collect();
        let manager_trouble = first_unhealthy_manager_outside_ops(&views, input.journal);
        Facts {
            input,
            world,
            views: views.into_iter().map(Rc::new).collect(),
            desired_managers,
            roll_floor: input.desired.roll_floor(),
            manager_trouble,
            unclaimed,
            promoted,
            unmatched,
        }
    }
}

fn first_unhealthy_manager_outside_ops(
    views: &[View<'_>],
    journal: &[Operation],
) -> Option<Refusal> {
    // Asked only of unhealthy managers (a handful): a scan of the
    // operations each, rather than a set of every operation's links.
    let busy = |link: &str| {
        journal.iter().any(|o| {
            o.id == link || o.victim.as_ref().and_then(|v| v.link.as_deref()) == Some(link)
        })
    };
    views
        .iter()
        .filter(|v| v.d.spec.role == Role::Manager)
        .find_map(|v| match &v.described {
            Err(e) => Some(Refusal::ManagerUndescribed {
                group: v.d.spec.name.clone(),
                error: e.to_string(),
            }),
            Ok(insts) => insts
                .iter()
                .filter(|i| !i.healthy())
                .find(|i| !i.link().is_some_and(busy))
                .map(|i| Refusal::ManagerUnhealthy(i.id.clone())),
        })
}

/// Positions of the nodes no owned member of any of `views` carries, or
/// that a Ready node with the same link superseded (a node that joins again
/// always gets a new id): the nodes that may be stale.
fn unclaimed_nodes(world: &World<'_>, views: &[View<'_>]) -> Vec<u32> {
    if views.iter().all(|v| v.d.spec.role == Role::Plain) {
        return Vec::new();
    }
    let superseded = |n: &Node| {
        world.links_shared()
            && world
                .with_link(n.link.as_deref())
                .any(|m| m.id != n.id && m.state == NodeState::Ready)
    };
    world
        .nodes()
        .iter()
        .enumerate()
        .filter(|&(k, n)| views.iter().all(|v| v.unclaimed(k)) || superseded(n))
        .map(|(k, _)| k as u32)
        .collect()
}
