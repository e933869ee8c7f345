use super::*;

fn probe(machine: &str, group: &str, answer: EngineAnswer) -> Probe {
    Probe {
        machine: machine.into(),
        group: group.into(),
        answer,
        raft_members: None,
    }
}

fn silent() -> EngineAnswer {
    EngineAnswer::Down("its engine is not running".into())
}

#[test]
fn two_of_three_managers_silent_and_the_third_without_a_leader_is_a_lost_quorum() {
    let probes = [
        probe("m1", "managers", silent()),
        probe("m2", "managers", silent()),
        probe(
            "m3",
            "managers",
            EngineAnswer::NoLeader("The swarm does not have a leader".into()),
        ),
        probe("w1", "workers", EngineAnswer::NotAManager),
    ];
    let QuorumVerdict::Lost {
        reachable,
        managers,
        silent,
        ..
    } = judge(&probes)
    else {
        panic!("not lost: {:?}", judge(&probes));
    };
    assert_eq!((reachable, managers), (1, 3));
    let names: Vec<&str> = silent.iter().map(|(m, _)| m.as_str()).collect();
    assert_eq!(names, ["m1", "m2"]);
}

/// Two of three managers' machines destroyed: the provider lists the
/// survivor alone, whose engine still lists a raft of 3.
#[test]
fn members_the_survivor_lists_without_a_machine_count_as_lost() {
    let survivor = Probe {
        raft_members: Some(3),
        ..probe("m3", "managers", EngineAnswer::NoLeader("no leader".into()))
    };
    let verdict = judge(&[
        survivor.clone(),
        probe("w1", "workers", EngineAnswer::NotAManager),
    ]);
    assert!(
        matches!(
            verdict,
            QuorumVerdict::Lost {
                reachable: 1,
                managers: 3,
                unlisted: 2,
                ..
            }
        ),
        "{verdict:?}"
    );
    let without_the_raft = Probe {
        raft_members: None,
        ..survivor
    };
    assert_eq!(judge(&[without_the_raft]), QuorumVerdict::Unknown);
}

#[test]
fn one_engine_that_knows_a_leader_means_the_quorum_holds() {
    let probes = [
        probe("m1", "managers", silent()),
        probe("m2", "managers", EngineAnswer::Led),
        probe("m3", "managers", EngineAnswer::NoLeader("election".into())),
    ];
    assert_eq!(judge(&probes), QuorumVerdict::Held);
}

/// During an election the followers' engines hold every call: busy
/// members may still vote, so nothing is concluded from them (no false
/// alarm, no runbook recommending a new cluster). Paused machines are the
/// same (their provider says so): they may resume with a majority.
#[test]
fn busy_or_paused_managers_beside_one_without_a_leader_are_no_lost_quorum() {
    let busy = || EngineAnswer::Busy("no answer within 3s".into());
    let probes = [
        probe("m1", "managers", busy()),
        probe("m2", "managers", busy()),
        probe("m3", "managers", EngineAnswer::NoLeader("election".into())),
    ];
    assert_eq!(judge(&probes), QuorumVerdict::Unknown);
    let one_down = [
        probe("m1", "managers", silent()),
        probe("m2", "managers", busy()),
        probe("m3", "managers", EngineAnswer::NoLeader("election".into())),
    ];
    assert_eq!(judge(&one_down), QuorumVerdict::Unknown, "2 of 3 may vote");
    let paused = || super::machine::engine_answer(Power::Paused, None);
    let probes = [
        probe("m1", "managers", paused()),
        probe("m2", "managers", paused()),
        probe("m3", "managers", EngineAnswer::NoLeader("no leader".into())),
    ];
    assert_eq!(judge(&probes), QuorumVerdict::Unknown);
    let stopped = || super::machine::engine_answer(Power::Stopped, None);
    let probes = [
        probe("m1", "managers", stopped()),
        probe("m2", "managers", stopped()),
        probe("m3", "managers", EngineAnswer::NoLeader("no leader".into())),
    ];
    assert!(matches!(judge(&probes), QuorumVerdict::Lost { .. }));
}

#[test]
fn nothing_is_concluded_when_no_engine_answers_as_a_manager() {
    let probes = [
        probe("m1", "managers", silent()),
        probe("w1", "workers", EngineAnswer::NotAManager),
    ];
    assert_eq!(judge(&probes), QuorumVerdict::Unknown);
    assert_eq!(judge(&[]), QuorumVerdict::Unknown);
}

#[test]
fn the_count_is_lost_below_a_majority_only() {
    assert!(too_few_to_vote(1, 3));
    assert!(!too_few_to_vote(2, 3));
    assert!(too_few_to_vote(2, 5) && !too_few_to_vote(3, 5));
    assert!(!may_vote(&EngineAnswer::NotAManager));
    assert!(!may_vote(&silent()));
    assert!(may_vote(&EngineAnswer::Busy("x".into())));
}

/// Status: the engines asked now decide when they can; else the heartbeats.
#[test]
fn the_engines_decide_before_the_heartbeats() {
    let lost = judge(&[
        probe("m1", "managers", silent()),
        probe("m2", "managers", silent()),
        probe("m3", "managers", EngineAnswer::NoLeader("x".into())),
    ]);
    assert_eq!(
        of_both(lost.clone(), &QuorumVerdict::Held),
        (lost.clone(), Source::Engines)
    );
    assert_eq!(
        of_both(QuorumVerdict::Unknown, &lost),
        (lost, Source::Heartbeats)
    );
    assert_eq!(Source::Heartbeats.as_str(), "heartbeats");
}
