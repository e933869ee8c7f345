use super::*;

const NO_LEADER: &str = "The swarm does not have a leader";

fn peer(n: u8) -> Peer {
    Peer {
        node_id: format!("node{n}"),
        addr: format!("127.0.9.{n}:2377"),
    }
}

fn manager(n: u8, answer: EngineAnswer) -> Machine {
    Machine {
        id: format!("m{n}"),
        group: "managers".into(),
        address: format!("127.0.9.{n}"),
        raft: matches!(answer, EngineAnswer::NoLeader(_)).then(|| Raft {
            node_id: format!("node{n}"),
            peers: vec![peer(1), peer(2), peer(3)],
        }),
        answer,
    }
}

fn survivor(n: u8) -> Machine {
    manager(n, EngineAnswer::NoLeader(NO_LEADER.into()))
}

fn worker() -> Machine {
    Machine {
        id: "w1".into(),
        group: "workers".into(),
        address: "127.0.9.50".into(),
        answer: EngineAnswer::NotAManager,
        raft: None,
    }
}

fn evidence(machines: Vec<Machine>) -> Evidence {
    Evidence {
        machines,
        ..Evidence::default()
    }
}

fn reasons(d: Decision) -> Vec<Refusal> {
    match d {
        Decision::Refuse { reasons } => reasons,
        other => panic!("does not refuse: {other:?}"),
    }
}

/// Issue 18: two of three managers' machines destroyed through the
/// provider, and named gone by the operator (by address and by node id).
#[test]
fn two_destroyed_members_named_gone_and_the_survivor_is_recovered_from() {
    let e = Evidence {
        gone: vec!["127.0.9.1".into(), "node2".into()],
        ..evidence(vec![survivor(3), worker()])
    };
    let d = decide(&e).unwrap();
    let Decision::Proceed(r) = d else {
        panic!("{d:?}")
    };
    assert_eq!(r.survivor, "m3");
    assert_eq!(r.addr, "127.0.9.3:2377");
    assert_eq!(r.members, 3);
    let gone: Vec<_> = r.gone.iter().map(|g| g.member.node_id.as_str()).collect();
    assert_eq!(gone, ["node1", "node2"]);
    assert!(
        r.gone
            .iter()
            .all(|g| matches!(g.proof, Proof::Unlisted { .. }))
    );
}

/// A listed machine whose address the provider could not read (its state
/// query failed, or a provider that never tells addresses) may hold a lost
/// member no address matches: nothing is taken for gone, even when the
/// operator names the members. One whose engine is certainly down holds
/// no voter: the recovery goes on.
#[test]
fn a_listed_machine_of_unknown_address_that_may_run_refuses_naming_unmatched_members() {
    let unknown = |answer| Machine {
        address: String::new(),
        ..manager(7, answer)
    };
    let named = |m| Evidence {
        gone: vec!["127.0.9.1".into(), "node2".into()],
        ..evidence(vec![survivor(3), m])
    };
    let silent = unknown(EngineAnswer::Busy("does not answer".into()));
    let r = reasons(decide(&named(silent)).unwrap());
    let unknown_on: Vec<_> = r
        .iter()
        .filter_map(|x| match x {
            Refusal::AddressUnknown {
                node_id, machines, ..
            } => Some((node_id.as_str(), machines.as_str())),
            _ => None,
        })
        .collect();
    assert_eq!(unknown_on, [("node1", "m7"), ("node2", "m7")], "{r:?}");
    let down = unknown(EngineAnswer::Down("its machine is stopped".into()));
    assert!(matches!(
        decide(&named(down)).unwrap(),
        Decision::Proceed(_)
    ));
}

/// Review finding: a raft member on no listed machine may be a manager
/// drover never made (joined by hand, another state dir) that is only
/// paused: its absence from the describe proves nothing. Without the
/// operator's word the recovery refuses, naming it.
#[test]
fn members_on_no_listed_machine_refuse_until_the_operator_names_them() {
    let d = decide(&evidence(vec![survivor(3), worker()])).unwrap();
    let r = reasons(d);
    let unaccounted: Vec<_> = r
        .iter()
        .filter_map(|x| match x {
            Refusal::Unaccounted { node_id, .. } => Some(node_id.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(unaccounted, ["node1", "node2"], "{r:?}");
    assert!(r[0].to_string().contains("--gone 127.0.9.1"), "{}", r[0]);
    // Unnamed, they may still vote: 3 of 3, not a known loss.
    assert!(
        r.iter()
            .any(|x| matches!(x, Refusal::NotLost { may_vote: 3, .. })),
        "{r:?}"
    );
    // One named is not enough.
    let e = Evidence {
        gone: vec!["127.0.9.1".into()],
        ..evidence(vec![survivor(3), worker()])
    };
    assert!(matches!(decide(&e).unwrap(), Decision::Refuse { .. }));
}

/// Design rule 11: a paused engine (SIGSTOP) does not answer, but its
/// machine is listed: it may come back with a majority elsewhere.
#[test]
fn a_lost_member_whose_machine_is_still_listed_refuses_naming_it() {
    let paused = manager(2, EngineAnswer::Busy("no answer within 3s".into()));
    let e = Evidence {
        gone: vec!["127.0.9.1".into()],
        ..evidence(vec![paused, survivor(3)])
    };
    let d = decide(&e).unwrap();
    let r = reasons(d);
    assert_eq!(r.len(), 2, "{r:?}");
    assert!(
        matches!(&r[0], Refusal::MayStillRun { machine, .. } if machine == "m2"),
        "{r:?}"
    );
    assert!(r[0].to_string().contains("--gone m2"), "{}", r[0]);
}

#[test]
fn a_listed_machine_named_gone_by_the_operator_counts_as_gone() {
    let stopped = manager(2, EngineAnswer::Down("its engine is not running".into()));
    let e = Evidence {
        gone: vec!["m2".into(), "127.0.9.1".into()],
        ..evidence(vec![stopped, survivor(3)])
    };
    let Decision::Proceed(r) = decide(&e).unwrap() else {
        panic!()
    };
    assert!(r.gone.contains(&Gone {
        member: peer(2),
        proof: Proof::Operator {
            machine: "m2".into()
        }
    }));
}

#[test]
fn an_engine_that_knows_a_leader_means_nothing_to_recover() {
    let d = decide(&evidence(vec![manager(1, EngineAnswer::Led), survivor(3)])).unwrap();
    assert!(matches!(&reasons(d)[..], [Refusal::QuorumHeld { machine }] if machine == "m1"));
}

/// Two of three may still vote (one busy in an election): no loss.
#[test]
fn enough_members_that_may_vote_are_an_election_not_a_loss() {
    let busy = manager(2, EngineAnswer::Busy("no answer within 3s".into()));
    let d = decide(&evidence(vec![busy, survivor(3)]));
    // m1 is on no listed machine and unnamed (may vote), m2 busy
    // (may), m3 answers: 3 of 3.
    assert!(matches!(
        &reasons(d.unwrap())[..],
        [
            Refusal::Unaccounted { .. },
            Refusal::MayStillRun { .. },
            Refusal::NotLost {
                may_vote: 3,
                members: 3,
                quorum: 2
            }
        ]
    ));
}

#[test]
fn no_answering_manager_is_nothing_to_recover_from() {
    let d = decide(&evidence(vec![worker()])).unwrap();
    assert_eq!(reasons(d), [Refusal::NoSurvivor]);
}

/// Five managers, three destroyed, two survive: the operator chooses.
#[test]
fn several_survivors_need_the_operator_to_name_one() {
    let five = |n: u8| {
        let mut m = survivor(n);
        m.raft.as_mut().unwrap().peers = (1..=5).map(peer).collect();
        m
    };
    let named = Evidence {
        gone: (1..=3).map(|n| format!("node{n}")).collect(),
        ..evidence(vec![five(4), five(5)])
    };
    let d = decide(&named).unwrap();
    assert!(
        matches!(&reasons(d)[..], [Refusal::SeveralSurvivors { candidates }] if candidates == &["m4", "m5"])
    );
    let e = Evidence {
        from: Some("m5".into()),
        gone: (1..=3).map(|n| format!("node{n}")).collect(),
        ..evidence(vec![five(4), five(5)])
    };
    let Decision::Proceed(r) = decide(&e).unwrap() else {
        panic!()
    };
    assert_eq!((r.survivor.as_str(), r.gone.len()), ("m5", 3));
}

#[test]
fn names_the_operator_gives_must_be_machines_that_fit() {
    let e = |gone: &str, from: Option<&str>| Evidence {
        gone: vec![gone.into()]
            .into_iter()
            .filter(|g: &String| !g.is_empty())
            .collect(),
        from: from.map(Into::into),
        ..evidence(vec![
            manager(2, EngineAnswer::Busy("x".into())),
            survivor(3),
            worker(),
        ])
    };
    assert!(matches!(
        decide(&e("nope", None)),
        Err(BadInput::UnknownMachine { flag: "--gone", .. })
    ));
    assert!(matches!(
        decide(&e("m3", None)),
        Err(BadInput::GoneAnswers { .. })
    ));
    assert!(matches!(
        decide(&e("w1", None)),
        Err(BadInput::GoneNotAMember { .. })
    ));
    assert!(matches!(
        decide(&e("", Some("w1"))),
        Err(BadInput::FromNotASurvivor { .. })
    ));
    assert!(matches!(
        decide(&e("", Some("zz"))),
        Err(BadInput::UnknownMachine { flag: "--from", .. })
    ));
    // Review finding: m2's engine runs but is silent (paused?): the
    // operator's word does not make it gone.
    assert!(matches!(
        decide(&e("m2", Some("m3"))),
        Err(BadInput::GoneStillRuns { .. })
    ));
    // A member on no listed machine is named by address or node id.
    assert!(decide(&e("127.0.9.1", None)).is_ok());
    assert!(decide(&e("node1", None)).is_ok());
    assert!(matches!(
        decide(&e("127.0.9.2", None)),
        Err(BadInput::UnknownMachine { .. })
    ));
}

/// The record a run writes before force-new-cluster: members 1 and 2
/// named gone (by address and by node id), survivor m3.
fn started() -> Started {
    let e = Evidence {
        gone: vec!["127.0.9.1".into(), "node2".into()],
        ..evidence(vec![survivor(3), worker()])
    };
    let Decision::Proceed(r) = decide(&e).unwrap() else {
        panic!()
    };
    Started::new(r, 1_700_000_000_000)
}

fn node(n: u8, state: NodeState, in_raft: bool) -> Node {
    Node {
        id: format!("node{n}"),
        link: None,
        cluster: None,
        group: None,
        state,
        availability: crate::model::Availability::Active,
        manager_role: true,
        raft: in_raft.then(|| crate::model::RaftMember {
            leader: n == 3,
            reachable: true,
            addr: format!("127.0.9.{n}:2377"),
        }),
        running_tasks: 0,
        locked: false,
        left: false,
        engine_no_manager: false,
        engine_version: None,
    }
}

/// After force-new-cluster the survivor leads; what a rerun sees.
fn after_force(nodes: Vec<Node>) -> Evidence {
    Evidence {
        started: Some(started()),
        listed: Some(Listed {
            by: "m3".into(),
            nodes,
        }),
        ..evidence(vec![manager(3, EngineAnswer::Led), worker()])
    }
}

fn finishing(e: &Evidence) -> Finish {
    match decide(e).unwrap() {
        Decision::Finish(f) => f,
        other => panic!("does not finish: {other:?}"),
    }
}

/// Issue 18's last gap: the run was cut short right after
/// force-new-cluster. The rerun finds the record and a leader: it
/// finishes that recovery (the gone members' entries, the audit event),
/// it does not refuse "nothing to recover", and it never forces a new
/// cluster again.
#[test]
fn a_rerun_after_force_new_cluster_finishes_the_recorded_recovery() {
    let e = after_force(vec![
        node(1, NodeState::Down, false),
        node(2, NodeState::Unknown, false),
        node(3, NodeState::Ready, true),
    ]);
    let f = finishing(&e);
    assert_eq!(f.through, "m3");
    assert_eq!(f.started, started());
    let remove: Vec<_> = f.tail.remove.iter().map(|p| p.node_id.as_str()).collect();
    assert_eq!(remove, ["node1", "node2"]);
    assert!(f.tail.absent.is_empty() && f.tail.kept.is_empty());
    // The operator may repeat the first run's names, by any of them.
    for gone in [
        vec!["127.0.9.1", "node2"],
        vec!["node1", "127.0.9.2"],
        vec![],
    ] {
        let e = Evidence {
            gone: gone.iter().map(|g| g.to_string()).collect(),
            from: Some("m3".into()),
            ..e.clone()
        };
        assert_eq!(finishing(&e).tail.remove.len(), 2, "{gone:?}");
    }
}

#[test]
fn finishing_removes_no_node_the_record_does_not_name() {
    let e = after_force(vec![
        node(1, NodeState::Down, false),
        node(4, NodeState::Down, false),
    ]);
    let f = finishing(&e);
    assert_eq!(f.tail.remove, [peer(1)]);
    assert_eq!(
        f.tail.absent,
        [peer(2)],
        "node2 was removed before the crash"
    );
    // Naming another node now is bad input, not a licence.
    for (gone, from) in [("127.0.9.4", None), ("node4", None), ("node1", Some("m1"))] {
        let e = Evidence {
            gone: vec![gone.into()],
            from: from.map(Into::into),
            ..e.clone()
        };
        let err = decide(&e).unwrap_err();
        assert!(
            matches!(
                err,
                BadInput::NotRecorded { .. } | BadInput::FromNotRecorded { .. }
            ),
            "{err:?}"
        );
    }
}

/// A member named gone that is back (it rejoined the raft, or is
/// Ready) keeps its entry: the engine would refuse, and it is no
/// garbage.
#[test]
fn a_recorded_member_that_is_back_keeps_its_node_entry() {
    let f = finishing(&after_force(vec![
        node(1, NodeState::Ready, false),
        node(2, NodeState::Unknown, true),
    ]));
    assert!(f.tail.remove.is_empty(), "{f:?}");
    assert_eq!(
        f.tail.kept,
        [
            Kept {
                member: peer(1),
                why: Back::Ready
            },
            Kept {
                member: peer(2),
                why: Back::RaftMember
            }
        ]
    );
}

/// A record and no engine that knows a leader: force-new-cluster did
/// not take effect (the run stopped before it). The evidence is judged
/// afresh, on the operator's word again.
#[test]
fn a_record_without_a_leader_is_judged_afresh() {
    let fresh = Evidence {
        started: Some(started()),
        now_ms: started().at_ms + FORMING_MS,
        ..evidence(vec![survivor(3), worker()])
    };
    assert!(matches!(
        &reasons(decide(&fresh).unwrap())[..],
        [
            Refusal::Unaccounted { .. },
            Refusal::Unaccounted { .. },
            Refusal::NotLost { .. }
        ]
    ));
    let named = Evidence {
        gone: vec!["127.0.9.1".into(), "127.0.9.2".into()],
        ..fresh
    };
    assert!(matches!(decide(&named).unwrap(), Decision::Proceed(_)));
    // A listing by an engine that does not lead is no leader.
    let e = Evidence {
        listed: Some(Listed {
            by: "m3".into(),
            nodes: vec![],
        }),
        ..named
    };
    assert!(matches!(decide(&e).unwrap(), Decision::Proceed(_)));
}

/// A rerun right after a run killed during force-new-cluster: the
/// engine goes on forming the new cluster without its client (16–21 s);
/// a second force-new-cluster meanwhile would break it.
#[test]
fn a_record_without_a_leader_yet_refuses_while_the_cluster_may_be_forming() {
    let s = started();
    let e = Evidence {
        started: Some(s.clone()),
        gone: vec!["127.0.9.1".into(), "127.0.9.2".into()],
        now_ms: s.at_ms + 20_000,
        ..evidence(vec![survivor(3), worker()])
    };
    let r = reasons(decide(&e).unwrap());
    assert_eq!(
        r,
        [Refusal::MayStillBeForming {
            survivor: "m3".into(),
            ago_s: 20,
            wait_s: 100
        }]
    );
    assert!(r[0].to_string().contains("again in 100s"), "{}", r[0]);
}

/// Without a record, a leader still means nothing to recover.
#[test]
fn a_leader_without_a_record_is_nothing_to_recover() {
    let e = Evidence {
        started: None,
        ..after_force(vec![node(1, NodeState::Down, false)])
    };
    assert!(matches!(
        &reasons(decide(&e).unwrap())[..],
        [Refusal::QuorumHeld { .. }]
    ));
}

#[test]
fn the_record_reads_back_as_written_and_names_its_operation() {
    let s = started();
    let text = serde_json::to_string(&s).unwrap();
    assert_eq!(serde_json::from_str::<Started>(&text).unwrap(), s);
    assert_eq!(s.op(), "recover-1700000000000");
    assert!(
        text.contains("node1") && text.contains("127.0.9.2:2377"),
        "{text}"
    );
}

mod props {
    use super::*;
    use proptest::prelude::*;

    /// How one of five raft members' machine stands.
    #[derive(Debug, Clone)]
    enum Fate {
        Answers,
        Led,
        Destroyed,
        Stopped,
        Busy,
        NoLongerAManager,
    }

    fn fate() -> impl Strategy<Value = Fate> {
        prop_oneof![
            Just(Fate::Answers),
            Just(Fate::Led),
            Just(Fate::Destroyed),
            Just(Fate::Stopped),
            Just(Fate::Busy),
            Just(Fate::NoLongerAManager),
        ]
    }

    fn machines(fates: &[Fate]) -> Vec<Machine> {
        let n = fates.len() as u8;
        fates
            .iter()
            .enumerate()
            .filter_map(|(i, f)| {
                let i = i as u8 + 1;
                let answer = match f {
                    Fate::Answers => EngineAnswer::NoLeader(NO_LEADER.into()),
                    Fate::Led => EngineAnswer::Led,
                    Fate::Destroyed => return None,
                    Fate::Stopped => EngineAnswer::Down("not running".into()),
                    Fate::Busy => EngineAnswer::Busy("no answer".into()),
                    Fate::NoLongerAManager => EngineAnswer::NotAManager,
                };
                let mut m = manager(i, answer);
                if let Some(r) = m.raft.as_mut() {
                    r.peers = (1..=n).map(peer).collect();
                }
                Some(m)
            })
            .collect()
    }

    fn state() -> impl Strategy<Value = NodeState> {
        prop_oneof![
            Just(NodeState::Ready),
            Just(NodeState::Down),
            Just(NodeState::Unknown),
            Just(NodeState::Disconnected),
        ]
    }

    proptest! {
        /// Design rule 11: never a new cluster while a lost member is
        /// not named by the operator (its machine, or its address when
        /// no listed machine holds it), nor while any engine knows a
        /// leader; and every member the recovery drops is named.
        #[test]
        fn never_proceeds_while_a_lost_members_machine_may_still_run(
            fates in proptest::collection::vec(fate(), 1..=7),
            named in proptest::collection::vec(any::<bool>(), 7),
        ) {
            let ms = machines(&fates);
            // The operator names machines, and destroyed members by address.
            let gone: Vec<String> = fates
                .iter()
                .enumerate()
                .zip(&named)
                .filter(|(_, n)| **n)
                .filter_map(|((i, f), _)| match f {
                    Fate::Destroyed => Some(format!("127.0.9.{}", i + 1)),
                    Fate::Answers | Fate::Led => None,
                    _ => Some(format!("m{}", i + 1)),
                })
                .collect();
            let e = Evidence { machines: ms.clone(), gone: gone.clone(), ..Evidence::default() };
            let Ok(Decision::Proceed(r)) = decide(&e) else { return Ok(()); };
            prop_assert!(ms.iter().all(|m| m.answer != EngineAnswer::Led));
            for m in ms.iter().filter(|m| m.raft.is_none()) {
                prop_assert!(gone.contains(&m.id), "{} may still run: {:?}", m.id, r);
            }
            // A member on no listed machine is dropped only when named.
            for (i, f) in fates.iter().enumerate() {
                if matches!(f, Fate::Destroyed) {
                    let host = format!("127.0.9.{}", i + 1);
                    prop_assert!(gone.contains(&host), "{host} dropped unnamed: {:?}", r);
                }
            }
            let answering = ms.iter().filter(|m| m.raft.is_some()).count();
            prop_assert!(answering < quorum(fates.len()));
            prop_assert_eq!(answering + r.gone.len(), fates.len());
        }

        /// Issue 18: with a recovery recorded and any engine knowing a
        /// leader, a rerun never forces a new cluster again; it removes
        /// only node entries the record names gone, listed, neither
        /// Ready nor in the raft; the operator's names must be the
        /// record's.
        #[test]
        fn a_rerun_never_forces_again_nor_removes_an_unrecorded_node(
            fates in proptest::collection::vec(fate(), 1..=7),
            recorded in proptest::collection::vec(any::<bool>(), 9),
            listed in proptest::collection::vec(
                proptest::option::of((state(), any::<bool>())), 9),
            names in proptest::collection::vec(0u8..9, 0..3),
            by in 0usize..7,
        ) {
            let ms = machines(&fates);
            let gone: Vec<Gone> = (1..=9u8)
                .filter(|n| recorded[*n as usize - 1])
                .map(|n| Gone {
                    member: peer(n),
                    proof: Proof::Unlisted { named: format!("127.0.9.{n}") },
                })
                .collect();
            let started = Started::new(
                Recovery {
                    survivor: "m1".into(),
                    node_id: "node1".into(),
                    addr: "127.0.9.1:2377".into(),
                    members: 9,
                    gone,
                },
                7,
            );
            let nodes: Vec<Node> = listed
                .iter()
                .enumerate()
                .filter_map(|(i, l)| l.map(|(st, raft)| node(i as u8 + 1, st, raft)))
                .collect();
            let by = ms.get(by % ms.len().max(1)).map_or("m1".into(), |m| m.id.clone());
            let e = Evidence {
                machines: ms.clone(),
                gone: names.iter().map(|n| format!("node{}", n + 1)).collect(),
                started: Some(started.clone()),
                listed: Some(Listed { by: by.clone(), nodes: nodes.clone() }),
                ..Evidence::default()
            };
            let leads = ms.iter().any(|m| m.id == by && m.answer == EngineAnswer::Led);
            match decide(&e) {
                Ok(Decision::Proceed(r)) => {
                    prop_assert!(!leads, "forced again though {by} leads: {r:?}");
                }
                Ok(Decision::Finish(f)) => {
                    prop_assert!(leads);
                    for p in &f.tail.remove {
                        prop_assert!(started.recovery.gone.iter().any(|g| g.member == *p));
                        let n = nodes.iter().find(|n| n.id == p.node_id);
                        prop_assert!(n.is_some_and(|n| n.state != NodeState::Ready && n.raft.is_none()), "{p:?}");
                    }
                    let accounted = f.tail.remove.len() + f.tail.absent.len() + f.tail.kept.len();
                    prop_assert_eq!(accounted, started.recovery.gone.len());
                    for name in &e.gone {
                        prop_assert!(started.recovery.gone.iter().any(|g| &g.member.node_id == name));
                    }
                }
                Ok(Decision::Refuse { .. }) => {}
                Err(err) => prop_assert!(
                    !leads || matches!(err, BadInput::NotRecorded { .. }),
                    "{err:?}"
                ),
            }
        }
    }
}
