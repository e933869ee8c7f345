use super::*;
use crate::journal::OpKind;
use crate::spec::Role;
use crate::testkit;

fn group(phase: Phase, reason: Option<&str>) -> GroupStatus {
    serde_json::from_value(serde_json::json!({
        "name": "workers", "role": "worker", "phase": phase.as_str(), "reason": reason,
        "desired_hash": "h", "desired": 0, "members": 2, "current": 2, "healthy": 0, "in_flight": 0,
    }))
    .expect("a group status")
}

fn member(id: &str, node: Option<&str>) -> MemberStatus {
    serde_json::from_value(serde_json::json!({
        "id": id, "group": "workers", "logical_id": null, "node_id": node, "role": "worker",
        "leader": false, "health": "unknown", "health_reason": null, "current": true,
        "created_ms": 0, "held": false,
    }))
    .expect("a member status")
}

fn node(id: &str, group: &str, state: NodeState, manager: bool) -> Node {
    Node {
        state,
        ..testkit::labelled_node(id, &format!("link-{id}"), group, manager.then_some(false))
    }
}

fn op(id: &str, victim: Option<&str>, making: bool) -> Operation {
    Operation {
        victim: victim.map(testkit::victim),
        target: making.then(testkit::first_attempt),
        ..testkit::op(id, "workers", OpKind::Roll, Role::Worker)
    }
}

#[test]
fn a_provider_answering_here_decides_and_one_failing_here_needs_the_controllers_word() {
    let unobservable = group(Phase::Unobservable, Some("provider describe failed: x"));
    let published = Published {
        providers: None,
        group: Some(&unobservable),
    };
    assert!(matches!(
        reach("plugin:p", Some(Ok(())), published),
        Reach::Answers(_)
    ));
    // Failing here is not enough alone: the acting controller decides.
    let refused = Some(Err("connection refused".into()));
    let unknown = reach("plugin:p", refused.clone(), Published::default());
    assert!(matches!(unknown, Reach::Unknown(_)), "{unknown:?}");
    let wired = ["plugin:p".to_string()];
    let converged = group(Phase::Converged, None);
    let described = Published {
        providers: Some(&wired),
        group: Some(&converged),
    };
    let answers = reach("plugin:p", refused.clone(), described);
    assert!(matches!(answers, Reach::Answers(_)), "{answers:?}");
    let gone = reach("plugin:p", refused, published);
    assert_eq!(
        gone,
        Reach::Gone {
            why: "provider plugin:p does not answer here: connection refused, and the acting \
                  controller cannot describe the group (provider describe failed: x)"
                .into(),
            configured_here: true,
        }
    );
}

#[test]
fn a_provider_not_configured_here_is_judged_by_the_acting_controller() {
    let wired = ["plugin:p".to_string()];
    let unobservable = group(Phase::Unobservable, Some("provider describe failed: gone"));
    let converged = group(Phase::Converged, None);
    // The controller could not describe the group: gone.
    let r = reach(
        "plugin:p",
        None,
        Published {
            providers: Some(&wired),
            group: Some(&unobservable),
        },
    );
    assert!(
        matches!(&r, Reach::Gone { why, configured_here: false } if why.contains("provider describe failed: gone")),
        "{r:?}"
    );
    // Not wired there either: gone.
    let r = reach(
        "plugin:q",
        None,
        Published {
            providers: Some(&wired),
            group: None,
        },
    );
    assert!(
        matches!(
            r,
            Reach::Gone {
                configured_here: false,
                ..
            }
        ),
        "{r:?}"
    );
    // Wired there and described: it answers.
    let r = reach(
        "plugin:p",
        None,
        Published {
            providers: Some(&wired),
            group: Some(&converged),
        },
    );
    assert!(matches!(r, Reach::Answers(_)), "{r:?}");
    // Nothing published: nobody knows.
    assert!(matches!(
        reach("plugin:p", None, Published::default()),
        Reach::Unknown(_)
    ));
}

#[test]
fn every_machine_last_known_is_listed_once_with_where_it_was_learnt() {
    let members = [member("i-1", Some("n1")), member("i-2", None)];
    let journal = [
        // Replacing i-2 (already known) with a machine in the making.
        op("op-a", Some("i-2"), true),
        // Removing i-3, which the status no longer lists.
        op("op-b", Some("i-3"), false),
    ];
    let nodes = [
        node("n1", "workers", NodeState::Ready, false),
        node("n9", "workers", NodeState::Down, false),
        node("m1", "managers", NodeState::Ready, true),
    ];
    let known = last_known("workers", &members, &journal, &nodes);
    let shown: Vec<String> = known.iter().map(ToString::to_string).collect();
    assert_eq!(
        shown,
        [
            "i-1 (node n1), from the published status",
            "i-2, from the published status",
            "a machine tagged drover.link=op-a, from the journal",
            "i-3, from the journal",
            "node n9, from the swarm's nodes",
        ]
    );
    let ids: Vec<&str> = known.iter().map(Known::id).collect();
    assert_eq!(ids, ["i-1", "i-2", "op-a", "i-3", "n9"]);
}

#[test]
fn only_a_down_node_out_of_the_raft_is_removed() {
    let nodes = [
        node("up", "workers", NodeState::Ready, false),
        node("dead", "workers", NodeState::Down, false),
        node("dead-manager", "workers", NodeState::Down, true),
        node("other", "edge", NodeState::Down, false),
    ];
    let (removed, left) = removable(&nodes, "workers");
    let ids = |v: Vec<&Node>| v.iter().map(|n| n.id.clone()).collect::<Vec<_>>();
    assert_eq!(ids(removed), ["dead"]);
    assert_eq!(ids(left), ["up", "dead-manager"]);
}
