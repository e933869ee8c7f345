use super::*;
use crate::verdict::quorum::QuorumVerdict;

fn raft_node(id: &str, leader: bool, reachable: bool) -> crate::model::Node {
    crate::model::Node {
        id: id.into(),
        link: Some(format!("l-{id}")),
        cluster: None,
        group: Some("managers".into()),
        state: crate::model::NodeState::Ready,
        availability: crate::model::Availability::Active,
        manager_role: true,
        raft: Some(crate::model::RaftMember {
            leader,
            reachable,
            addr: String::new(),
        }),
        running_tasks: 0,
        locked: false,
        left: false,
        engine_no_manager: false,
        engine_version: None,
    }
}

/// A controller's view over three passes: led, then leaderless (what
/// the engine no longer lists is carried over), with the time it last
/// knew a leader kept.
#[test]
fn a_view_keeps_what_a_leaderless_engine_cannot_say() {
    let led = SwarmView::Ok(vec![
        raft_node("n1", true, true),
        raft_node("n2", false, true),
        raft_node("n3", false, false),
    ]);
    let v1 = EngineView::next(None, &led, Some("l-n2"), 1_000);
    assert_eq!(v1.answer, EngineAnswer::Led);
    assert!(v1.leader_known());
    assert_eq!(
        (v1.node.as_deref(), v1.manager, v1.members),
        (Some("n2"), true, Some((3, 2)))
    );
    assert_eq!(v1.leader.as_ref().map(|l| l.node.as_str()), Some("n1"));
    let lost = SwarmView::NoQuorum("The swarm does not have a leader".into());
    let v2 = EngineView::next(Some(&v1), &lost, Some("l-n2"), 50_000);
    assert!(!v2.leader_known());
    assert_eq!(v2.leader, None);
    assert_eq!(
        (v2.node.as_deref(), v2.members, v2.leader_seen_ms),
        (Some("n2"), Some((3, 2)), Some(1_000))
    );
    // Its hand-over's leave is kept until it is listed under another id.
    let mut v3 = v2.clone();
    v3.left = Some(Left {
        node: "n2".into(),
        at_ms: 60_000,
    });
    let absent = EngineView::next(Some(&v3), &SwarmView::Absent, Some("l-n2"), 61_000);
    assert!(!absent.manager);
    assert_eq!(
        absent.left_report().map(|r| (r.link, r.node)),
        Some(("l-n2".to_string(), "n2".to_string()))
    );
    let mut rejoined = raft_node("n9", false, true);
    rejoined.link = Some("l-n2".into());
    let again = SwarmView::Ok(vec![raft_node("n1", true, true), rejoined]);
    assert_eq!(
        EngineView::next(Some(&absent), &again, Some("l-n2"), 62_000).left,
        None
    );
}

fn beat<'a>(holder: &'a str, at_ms: u64, view: &'a EngineView) -> Beat<'a> {
    Beat {
        holder,
        at_ms,
        view,
    }
}

/// Issue 18, a lost quorum seen from the heartbeats: two of three
/// managers' machines died with their controllers; the survivor's
/// engine has had no leader. Busy at first (an election may still end),
/// lost once no leader was known for a minute; the dead ones are named
/// by their last (stale) heartbeat.
#[test]
fn heartbeats_of_a_survivor_without_a_leader_for_a_minute_say_the_quorum_is_lost() {
    let led = SwarmView::Ok(vec![
        raft_node("n1", true, true),
        raft_node("n2", false, true),
        raft_node("n3", false, true),
    ]);
    let t0 = 1_000_000;
    let last = |link: &str| EngineView::next(None, &led, Some(link), t0);
    let (v1, v2) = (last("l-n1"), last("l-n2"));
    let lost = SwarmView::NoQuorum("The swarm does not have a leader".into());
    let survivor = |now| EngineView::next(Some(&last("l-n3")), &lost, Some("l-n3"), now);
    let s = survivor(t0 + 30_000);
    let beats = [
        beat("c1", t0, &v1),
        beat("c2", t0, &v2),
        beat("c3", t0 + 30_000, &s),
    ];
    // 30 s: an election may still be running.
    let early = judge_heartbeats(&beats, t0 + 30_000);
    assert_eq!(early.verdict, QuorumVerdict::Unknown);
    assert_eq!(early.leader_seen_ms, Some(t0));
    // 100 s: c1 and c2 beat last 100 s ago (stale), no leader for 100 s.
    let s = survivor(t0 + 100_000);
    let beats = [
        beat("c1", t0, &v1),
        beat("c2", t0, &v2),
        beat("c3", t0 + 99_000, &s),
    ];
    let late = judge_heartbeats(&beats, t0 + 100_000);
    let QuorumVerdict::Lost {
        reachable,
        managers,
        silent,
        engine_says,
        ..
    } = &late.verdict
    else {
        panic!("not lost: {late:?}");
    };
    assert_eq!((*reachable, *managers), (1, 3));
    assert_eq!(engine_says, "The swarm does not have a leader");
    let names: Vec<&str> = silent.iter().map(|(m, _)| m.as_str()).collect();
    assert_eq!(
        names,
        [
            "l-n1 (last heartbeat 100s ago)",
            "l-n2 (last heartbeat 100s ago)"
        ]
    );
    assert_eq!(
        late.ages,
        vec![
            ("c1".to_string(), 100_000, false),
            ("c2".to_string(), 100_000, false),
            ("c3".to_string(), 1_000, true),
        ]
    );
}

/// Stale heartbeats prove nothing: one fresh beat that knows a leader
/// holds the quorum; engines that cannot be asked (controllers alive,
/// engines busy) are no lost quorum before the election bound.
#[test]
fn a_fresh_beat_that_knows_a_leader_holds_and_busy_engines_are_no_loss_yet() {
    let led = SwarmView::Ok(vec![
        raft_node("n1", true, true),
        raft_node("n2", false, true),
        raft_node("n3", false, true),
    ]);
    let now = 10_000_000;
    let held = EngineView::next(None, &led, Some("l-n1"), now);
    let old_lost = EngineView::next(
        Some(&held),
        &SwarmView::NoQuorum("no leader".into()),
        Some("l-n2"),
        now - 200_000,
    );
    let beats = [
        beat("c1", now - 1_000, &held),
        beat("c2", now - 200_000, &old_lost),
    ];
    assert_eq!(judge_heartbeats(&beats, now).verdict, QuorumVerdict::Held);
    let busy = |link| {
        EngineView::next(
            Some(&EngineView::next(None, &led, Some(link), now - 20_000)),
            &SwarmView::Unavailable("connection refused".into()),
            Some(link),
            now,
        )
    };
    let (b1, b2) = (busy("l-n1"), busy("l-n2"));
    let survivor = EngineView::next(
        Some(&EngineView::next(None, &led, Some("l-n3"), now - 20_000)),
        &SwarmView::NoQuorum("no leader".into()),
        Some("l-n3"),
        now,
    );
    let beats = [
        beat("c1", now, &b1),
        beat("c2", now, &b2),
        beat("c3", now, &survivor),
    ];
    assert_eq!(
        judge_heartbeats(&beats, now).verdict,
        QuorumVerdict::Unknown
    );
    // A minute later the same answers: no election ended, so the
    // engines that cannot be asked are gone.
    let later = now + 60_000;
    let beats = [
        beat("c1", later, &b1),
        beat("c2", later, &b2),
        beat("c3", later, &survivor),
    ];
    assert!(matches!(
        judge_heartbeats(&beats, later).verdict,
        QuorumVerdict::Lost {
            reachable: 1,
            managers: 3,
            ..
        }
    ));
}

#[test]
fn a_heartbeat_view_reads_back_from_its_json_and_an_old_heartbeat_has_none() {
    let led = SwarmView::Ok(vec![raft_node("n1", true, true)]);
    let v = EngineView::next(None, &led, Some("l-n1"), 5);
    let json = serde_json::to_string(&v).expect("serialises");
    assert_eq!(
        serde_json::from_str::<EngineView>(&json).expect("parses"),
        v
    );
    let lost = EngineView::next(Some(&v), &SwarmView::NoQuorum("x".into()), None, 6);
    let json = serde_json::to_string(&lost).expect("serialises");
    assert!(
        json.contains(r#""answer":{"state":"no_leader","says":"x"}"#),
        "{json}"
    );
}

#[test]
fn an_engine_in_no_swarm_does_not_vote_and_an_unavailable_one_may() {
    assert_eq!(
        EngineAnswer::of_view(&SwarmView::Absent),
        EngineAnswer::NotAManager
    );
    let down = SwarmView::Unavailable("connection refused".into());
    assert!(matches!(
        EngineAnswer::of_view(&down),
        EngineAnswer::Busy(_)
    ));
}
