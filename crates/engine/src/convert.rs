//! Engine answers converted to drover's observation types.

use bollard::models::{
    NodeSpecAvailabilityEnum, NodeSpecRoleEnum, NodeState as BNodeState, Reachability,
};
use drover_core::budget::{MAX_UNAVAILABLE_LABEL, MIN_AVAILABLE_LABEL};
use drover_core::model::{Availability, Node, NodeState, RaftMember, Service, tags};
use std::collections::{BTreeMap, HashMap};

pub(crate) fn parse_labels(labels: Option<Vec<String>>) -> BTreeMap<String, String> {
    labels
        .unwrap_or_default()
        .into_iter()
        .filter_map(|l| {
            l.split_once('=')
                .map(|(k, v)| (k.to_string(), v.to_string()))
        })
        .collect()
}

/// Converts a replicated or global service to drover's model (without
/// its tasks); `None` for jobs.
pub(crate) fn convert_service(s: &bollard::models::Service) -> Option<Service> {
    let spec = s.spec.as_ref()?;
    let mode = spec.mode.as_ref();
    let replicas = match mode.and_then(|m| m.replicated.as_ref()) {
        Some(r) => Some(r.replicas.unwrap_or(1).clamp(0, i64::from(u32::MAX)) as u32),
        None if mode.is_some_and(|m| m.global.is_some()) => None,
        // A job, or no mode at all (the engine defaults to one replica).
        None if mode.is_some() => return None,
        None => Some(1),
    };
    let labels = spec
        .labels
        .iter()
        .flatten()
        .filter(|(k, _)| [MAX_UNAVAILABLE_LABEL, MIN_AVAILABLE_LABEL].contains(&k.as_str()))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    Some(Service {
        id: s.id.clone()?,
        name: spec.name.clone().unwrap_or_default(),
        replicas,
        labels,
        running: BTreeMap::new(),
    })
}

/// Converts an engine node (plus per-node running task counts) to drover's model.
pub fn convert_node(n: &bollard::models::Node, running: &HashMap<String, u32>) -> Node {
    let id = n.id.clone().unwrap_or_default();
    let labels = n
        .description
        .as_ref()
        .and_then(|d| d.engine.as_ref())
        .and_then(|e| e.labels.clone())
        .unwrap_or_default();
    let spec = n.spec.clone().unwrap_or_default();
    // Engine labels are set when drover builds the machine; an adopted
    // machine's engine was started by someone else, so `drover adopt` puts
    // drover's labels on the swarm node instead (engine labels win).
    let label = |key: &str| {
        labels
            .get(key)
            .or_else(|| spec.labels.as_ref().and_then(|l| l.get(key)))
            .cloned()
    };
    let state = match n.status.as_ref().and_then(|s| s.state) {
        Some(BNodeState::READY) => NodeState::Ready,
        Some(BNodeState::DOWN) => NodeState::Down,
        Some(BNodeState::DISCONNECTED) => NodeState::Disconnected,
        _ => NodeState::Unknown,
    };
    let availability = match spec.availability {
        Some(NodeSpecAvailabilityEnum::DRAIN) => Availability::Drain,
        Some(NodeSpecAvailabilityEnum::PAUSE) => Availability::Pause,
        _ => Availability::Active,
    };
    let raft = n.manager_status.as_ref().map(|m| RaftMember {
        leader: m.leader.unwrap_or(false),
        reachable: matches!(m.reachability, Some(Reachability::REACHABLE)),
        addr: m.addr.clone().unwrap_or_default(),
    });
    Node {
        running_tasks: running.get(&id).copied().unwrap_or(0),
        locked: false,
        left: false,
        engine_no_manager: false,
        engine_version: n
            .description
            .as_ref()
            .and_then(|d| d.engine.as_ref())
            .and_then(|e| e.engine_version.clone()),
        id,
        link: label(tags::LINK),
        cluster: label(tags::CLUSTER),
        group: label(tags::GROUP),
        state,
        availability,
        manager_role: matches!(spec.role, Some(NodeSpecRoleEnum::MANAGER)),
        raft,
    }
}
