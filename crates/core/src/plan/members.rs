//! Per-instance status: each owned machine joined to its swarm node, judged
//! by the same health rules the planner uses (so `drover status` and the
//! metrics can never disagree with what the planner acted on).

use super::Desired;
use super::health::{Health, judge};
use super::world::World;
use crate::model::{Described, Observed};
use serde::{Deserialize, Serialize};

/// One owned instance as one observation shows it. Field names are stable
/// (docs/status.md).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MemberStatus {
    /// The provider's instance id.
    pub id: String,
    /// Its group.
    pub group: String,
    /// The slot's logical id, if the group has pets.
    pub logical_id: Option<String>,
    /// The swarm node it became, once joined.
    pub node_id: Option<String>,
    /// `manager` when its node is a raft member, else `worker` once joined,
    /// else the group's declared role.
    pub role: String,
    /// Its node leads the swarm.
    pub leader: bool,
    /// `healthy`, `unhealthy`, `pending` (not joined yet) or `unknown`.
    pub health: String,
    /// Why it is unhealthy, when it is.
    pub health_reason: Option<String>,
    /// Built from the group's desired config hash.
    pub current: bool,
    /// Creation time, ms since the Unix epoch (as the provider reports it).
    pub created_ms: u64,
    /// An operator holds it (`drover hold`): no heal, retire or roll.
    pub held: bool,
    /// While it has not joined: what it shows of its boot (its boot log's
    /// last lines, its engine's failed join), when the controller fetched
    /// any (docs/status.md).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub boot: Option<crate::boot::BootFacts>,
}

/// Every owned instance of every declared group whose describe succeeded,
/// in declared group order, then by id.
pub fn member_status(desired: &Desired, observed: &Observed) -> Vec<MemberStatus> {
    let world = World::new(observed, Default::default());
    let mut out = Vec::new();
    for g in &desired.groups {
        let Some(Described::Ok(list)) = observed.instances.get(&g.spec.name) else {
            continue;
        };
        let mut owned: Vec<_> = list
            .iter()
            .filter(|i| i.owned_by(&desired.cluster_id, &g.spec.name))
            .collect();
        owned.sort_by(|a, b| a.id.cmp(&b.id));
        for inst in owned {
            let node = world.node_for(inst.link());
            let raft = node.and_then(|n| n.raft.as_ref());
            let (health, reason) = match judge(g.spec.role, inst.running, inst.link(), &world) {
                Health::Healthy => ("healthy", None),
                Health::Unhealthy(why) => ("unhealthy", Some(why.to_string())),
                Health::Pending => ("pending", None),
                Health::Unknown => ("unknown", None),
            };
            let role = match node {
                Some(_) if raft.is_some() => "manager",
                Some(_) => "worker",
                None => g.spec.role.as_str(),
            };
            out.push(MemberStatus {
                id: inst.id.clone(),
                group: g.spec.name.clone(),
                logical_id: inst.logical_id().map(str::to_string),
                node_id: node.map(|n| n.id.clone()),
                role: role.to_string(),
                leader: raft.is_some_and(|r| r.leader),
                health: health.to_string(),
                health_reason: reason,
                current: inst.config() == Some(g.hash.as_str()),
                created_ms: inst.created_ms,
                held: desired.held.contains(&inst.id),
                boot: (health == "pending")
                    .then(|| observed.boots.get(&inst.id).cloned())
                    .flatten(),
            });
        }
    }
    out
}
