//! Ending a swarm: when may the last manager be removed?
//!
//! `drover destroy` of a manager group commits the group at size 0. The
//! leader's controller then retires every other manager the usual way (one
//! at a time, through the manager gate, the machine it runs on last), but
//! it can never remove the machine it runs on: that last step is taken from
//! outside the swarm, by the CLI, as `bootstrap` made the first manager.
//! This module decides, from one observation, whether that step is safe now:
//! everything else must be gone first, so no worker is left attached to a
//! swarm that no longer exists and no operation is cut off half-way.

use crate::journal::Operation;
use crate::model::{Described, Instance, Observed, SwarmView};
use crate::plan::Desired;
use crate::spec::Role;

/// Whether the last manager of a group may be removed now.
#[derive(Debug, Clone, PartialEq)]
pub enum LastManager<'a> {
    /// Remove this machine: it is the group's only one and the swarm's only member.
    Ready(&'a Instance),
    /// The group has no machine left: nothing to do.
    Gone,
    /// Not yet, and why (for the operator).
    Wait(String),
}

/// Decides whether the manager group `group`, committed at size 0, is down to
/// its last machine with nothing else left in the cluster.
pub fn last_manager<'a>(
    desired: &Desired,
    observed: &'a Observed,
    journal: &[Operation],
    group: &str,
) -> LastManager<'a> {
    let Some(d) = desired.groups.iter().find(|g| g.spec.name == group) else {
        return LastManager::Wait(format!("group {group} is not declared"));
    };
    if d.spec.role != Role::Manager || d.spec.allocation.size() != 0 {
        return LastManager::Wait(format!(
            "group {group} is not a manager group committed for destruction"
        ));
    }
    if let Some(other) = desired
        .groups
        .iter()
        .find(|g| g.spec.name != group && g.spec.allocation.size() > 0)
    {
        return LastManager::Wait(format!(
            "group {} still declares {} member(s): destroy it first",
            other.spec.name,
            other.spec.allocation.size()
        ));
    }
    if !journal.is_empty() {
        let ids: Vec<&str> = journal.iter().map(|o| o.id.as_str()).collect();
        return LastManager::Wait(format!(
            "{} operation(s) in flight: {}",
            ids.len(),
            ids.join(", ")
        ));
    }
    if let Some(why) = others_remaining(observed, group) {
        return LastManager::Wait(why);
    }
    let own = match observed.instances.get(group) {
        Some(Described::Ok(list)) => list.as_slice(),
        _ => &[],
    };
    let last = match own {
        [] => return LastManager::Gone,
        [one] => one,
        many => {
            return LastManager::Wait(format!(
                "{} managers left: the controller retires all but the one it runs on",
                many.len()
            ));
        }
    };
    match &observed.swarm {
        SwarmView::Ok(nodes) => {
            let others: Vec<&str> = nodes
                .iter()
                .filter(|n| n.link.is_none() || n.link.as_deref() != last.link())
                .map(|n| n.id.as_str())
                .collect();
            if !others.is_empty() {
                return LastManager::Wait(format!(
                    "the swarm still lists {} other node(s): {}",
                    others.len(),
                    others.join(", ")
                ));
            }
            LastManager::Ready(last)
        }
        // A machine that runs no swarm (or no engine) carries nothing to protect.
        SwarmView::Absent => LastManager::Ready(last),
        _ if !last.running => LastManager::Ready(last),
        SwarmView::NoQuorum(why) | SwarmView::Unavailable(why) => {
            LastManager::Wait(format!("the swarm cannot be asked: {why}"))
        }
    }
}

/// Why the cluster still holds something besides `group` (a machine of
/// another group, declared or not), or cannot be known to hold nothing
/// (a failed describe); `None` when only `group` is left. The manager
/// group goes last: its retirement starts only once this is `None`.
pub fn others_remaining(observed: &Observed, group: &str) -> Option<String> {
    observed
        .instances
        .iter()
        .find_map(|(name, described)| match described {
            Described::Failed(why) => Some(format!("cannot describe group {name}: {why}")),
            Described::Ok(list) if name != group && !list.is_empty() => {
                Some(format!("group {name} still has {} machine(s)", list.len()))
            }
            Described::Ok(_) => None,
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hash::config_hash;
    use crate::model::{Node, Tags, tags};
    use crate::plan::DesiredGroup;
    use crate::spec::{Allocation, parse_str};
    use std::collections::BTreeMap;

    const SPEC: &str = "groups:
  - name: managers
    role: manager
    allocation: { size: 3 }
    instance: { provider: local }
  - name: workers
    role: worker
    allocation: { size: 2 }
    instance: { provider: local }
";

    fn desired(workers: u32) -> Desired {
        let loaded = parse_str(SPEC);
        let spec = loaded.spec.expect("valid spec");
        let groups = spec
            .groups
            .into_iter()
            .map(|mut g| {
                g.allocation = Allocation::Size {
                    size: if g.name == "workers" { workers } else { 0 },
                    zones: Vec::new(),
                };
                DesiredGroup {
                    hash: config_hash(&g),
                    spec: g,
                    paused: false,
                    is_rollback: false,
                }
            })
            .collect();
        Desired {
            cluster_id: "c1".into(),
            groups,
            orphan_grace: spec.gc.orphan_grace,
            held: Default::default(),
            replace: Default::default(),
            skip_drain: Default::default(),
            control: spec.control,
        }
    }

    fn machine(id: &str, group: &str) -> Instance {
        Instance {
            id: id.into(),
            tags: Tags::from([
                (tags::CLUSTER, "c1".to_string()),
                (tags::GROUP, group.to_string()),
                (tags::LINK, format!("link-{id}")),
            ]),
            running: true,
            created_ms: 0,
        }
    }

    fn node(id: &str, leader: bool) -> Node {
        crate::testkit::labelled_node(
            &format!("node-{id}"),
            &format!("link-{id}"),
            "managers",
            Some(leader),
        )
    }

    fn world(managers: &[&str], workers: &[&str], nodes: Vec<Node>) -> Observed {
        let list =
            |ids: &[&str], g: &str| Described::Ok(ids.iter().map(|i| machine(i, g)).collect());
        Observed {
            instances: BTreeMap::from([
                ("managers".into(), list(managers, "managers")),
                ("workers".into(), list(workers, "workers")),
            ]),
            swarm: SwarmView::Ok(nodes),
            self_link: None,
            left_reports: Vec::new(),
            services: Default::default(),
            boots: Default::default(),
            complete_listings: Default::default(),
        }
    }

    fn waits(r: LastManager<'_>, what: &str) {
        match r {
            LastManager::Wait(why) => assert!(why.contains(what), "{why}"),
            other => panic!("expected to wait for {what}, got {other:?}"),
        }
    }

    #[test]
    fn the_last_manager_alone_in_the_swarm_is_ready() {
        let w = world(&["m1"], &[], vec![node("m1", true)]);
        assert_eq!(
            last_manager(&desired(0), &w, &[], "managers"),
            LastManager::Ready(&machine("m1", "managers"))
        );
    }

    #[test]
    fn workers_still_declared_or_present_come_first() {
        let w = world(&["m1"], &["w1"], vec![node("m1", true)]);
        waits(
            last_manager(&desired(2), &w, &[], "managers"),
            "destroy it first",
        );
        waits(
            last_manager(&desired(0), &w, &[], "managers"),
            "group workers still has 1",
        );
    }

    #[test]
    fn other_managers_and_other_nodes_come_first() {
        let w = world(
            &["m1", "m2"],
            &[],
            vec![node("m1", true), node("m2", false)],
        );
        waits(
            last_manager(&desired(0), &w, &[], "managers"),
            "2 managers left",
        );
        // The machine is gone but the swarm still lists its node.
        let w = world(&["m1"], &[], vec![node("m1", true), node("m2", false)]);
        waits(last_manager(&desired(0), &w, &[], "managers"), "node-m2");
    }

    #[test]
    fn an_operation_in_flight_or_an_unknown_world_waits() {
        let w = world(&["m1"], &[], vec![node("m1", true)]);
        let op: Operation = serde_json::from_value(serde_json::json!({
            "id": "op-1", "group": "managers", "kind": "retire", "role": "manager",
            "victim": null, "target": null, "surge": false, "done": []
        }))
        .expect("operation");
        waits(last_manager(&desired(0), &w, &[op], "managers"), "op-1");
        let mut failed = w.clone();
        failed
            .instances
            .insert("workers".into(), Described::Failed("timeout".into()));
        waits(
            last_manager(&desired(0), &failed, &[], "managers"),
            "cannot describe",
        );
        let mut unasked = w.clone();
        unasked.swarm = SwarmView::Unavailable("engine down".into());
        waits(
            last_manager(&desired(0), &unasked, &[], "managers"),
            "cannot be asked",
        );
    }

    #[test]
    fn a_group_not_committed_for_destruction_is_never_ready() {
        let w = world(&["m1"], &[], vec![node("m1", true)]);
        waits(
            last_manager(&desired(0), &w, &[], "workers"),
            "not a manager group",
        );
        assert_eq!(
            last_manager(&desired(0), &world(&[], &[], vec![]), &[], "managers"),
            LastManager::Gone
        );
    }
}
