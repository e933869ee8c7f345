//! `drover status` reading the controllers' heartbeats (issue 18, "a lost
//! quorum is seen"): with a stale published status and a store outside the
//! raft (here a file store, no Docker needed), it shows what each
//! controller's engine last said and how long ago, and says a quorum is
//! lost from those beats alone (no `--local-dir`), exit 3, JSON too.

use drover_core::model::{Availability, Node, NodeState, RaftMember, SwarmView};
use drover_core::quorum_probe::EngineView;
use drover_spi::{FORMAT, Heartbeat, Provenance, StatusJson};
use std::process::{Command, Output, Stdio};
use std::time::{SystemTime, UNIX_EPOCH};

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("clock after 1970")
        .as_millis() as u64
}

fn manager(id: &str, leader: bool) -> Node {
    Node {
        id: id.into(),
        link: Some(format!("link-{id}")),
        cluster: Some("c1".into()),
        group: Some("managers".into()),
        state: NodeState::Ready,
        availability: Availability::Active,
        manager_role: true,
        raft: Some(RaftMember {
            leader,
            reachable: true,
            addr: String::new(),
        }),
        running_tasks: 0,
        locked: false,
        left: false,
        engine_no_manager: false,
        engine_version: None,
    }
}

/// A file store holding a revision, a status published `status_age_ms`
/// ago, and `beats`.
async fn seed(url: &str, status_age_ms: u64, beats: &[Heartbeat]) {
    let store = drover_store::open(url).await.expect("store");
    store.init_cluster("c1").await.unwrap();
    let spec = drover_core::spec::parse_str(
        "groups:\n- name: managers\n  role: manager\n  allocation: {size: 3}\n  instance: {provider: local}\n",
    )
    .spec
    .expect("valid spec");
    let who = Provenance {
        who: "test".into(),
        at_ms: 1,
        message: String::new(),
    };
    store.commit(0, &spec, who, false).await.unwrap();
    let epoch = store.campaign("test").await.unwrap();
    let doc = StatusJson::new(&serde_json::json!({
        "observed_at_ms": now_ms() - status_age_ms, "controller": "link-n1", "epoch": epoch,
        "revision": 1, "groups": [],
        "swarm": {"members": 3, "reachable": 3, "fault_tolerance": 1, "leader_link": "link-n1", "problem": null},
        "instances": [], "operations": 0, "explanation": []
    }))
    .unwrap();
    store.publish_status(epoch, doc).await.unwrap();
    for b in beats {
        store.heartbeat(b).await.unwrap();
    }
}

fn beat(holder: &str, at_ms: u64, engine: EngineView) -> Heartbeat {
    Heartbeat {
        holder: holder.into(),
        format: FORMAT,
        at_ms,
        engine: Some(engine),
        seat: None,
        waiting: None,
    }
}

fn status(url: &str, json: bool) -> (Option<i32>, String) {
    let mut args = vec!["status", "--store", url];
    if json {
        args.extend(["--output", "json"]);
    }
    let out: Output = Command::new(env!("CARGO_BIN_EXE_drover"))
        .args(&args)
        .env_remove("DROVER_LOCAL_DIR")
        .env_remove("DROVER_STORE")
        .stdin(Stdio::null())
        .output()
        .expect("run drover");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    eprintln!("{text}");
    (out.status.code(), text)
}

/// Two managers' machines died with their controllers 100 s ago (their
/// last beats knew the leader); the survivor's controller beats on, its
/// engine without a leader since then: quorum lost, from the heartbeats.
#[tokio::test]
async fn a_stale_status_and_a_survivor_without_a_leader_for_100s_is_a_lost_quorum() {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("file://{}", dir.path().join("state.db").display());
    let led = SwarmView::Ok(vec![
        manager("n1", true),
        manager("n2", false),
        manager("n3", false),
    ]);
    let t0 = now_ms() - 100_000;
    let last = |l: &str| EngineView::next(None, &led, Some(l), t0);
    let lost = SwarmView::NoQuorum("The swarm does not have a leader.".into());
    let survivor = EngineView::next(Some(&last("link-n3")), &lost, Some("link-n3"), now_ms());
    seed(
        &url,
        100_000,
        &[
            beat("link-n1", t0, last("link-n1")),
            beat("link-n2", t0, last("link-n2")),
            beat("link-n3", now_ms() - 1_000, survivor),
        ],
    )
    .await;
    let (code, text) = status(&url, false);
    assert_eq!(code, Some(3), "{text}");
    assert!(
        text.contains("QUORUM LOST: 1 of 3 managers reachable, no leader since"),
        "{text}"
    );
    assert!(
        text.contains("link-n1 (last heartbeat 100s ago)"),
        "the dead are named: {text}"
    );
    assert!(
        text.contains("link-n3 (1s ago): no leader: The swarm does not have a leader."),
        "{text}"
    );
    assert!(text.contains("100s ago, too old to judge)"), "{text}");
    let (code, text) = status(&url, true);
    assert_eq!(code, Some(3));
    let doc: serde_json::Value = serde_json::from_str(&text[..=text.rfind('}').unwrap()])
        .unwrap_or_else(|e| panic!("{e}: {text}"));
    assert_eq!(doc["quorum"], "lost");
    assert_eq!(doc["evidence"], "heartbeats");
    assert_eq!(doc["heartbeats"].as_array().map(Vec::len), Some(3));
    assert_eq!(doc["heartbeats"][2]["judged"], true);
}

/// A stale status while the controllers' engines still know the leader
/// (the acting controller alone is stuck): no alarm, exit 0, and the
/// beats are shown under the warning.
#[tokio::test]
async fn a_stale_status_with_fresh_beats_that_know_a_leader_is_no_lost_quorum() {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("file://{}", dir.path().join("state.db").display());
    let led = SwarmView::Ok(vec![
        manager("n1", true),
        manager("n2", false),
        manager("n3", false),
    ]);
    let now = now_ms();
    let view = |l: &str| EngineView::next(None, &led, Some(l), now);
    seed(
        &url,
        120_000,
        &[
            beat("link-n2", now - 2_000, view("link-n2")),
            beat("link-n3", now - 1_000, view("link-n3")),
        ],
    )
    .await;
    let (code, text) = status(&url, false);
    assert_eq!(code, Some(0), "{text}");
    assert!(!text.contains("QUORUM LOST"), "{text}");
    assert!(
        text.contains("WARNING: no controller has published"),
        "{text}"
    );
    assert!(
        text.contains("link-n3 (1s ago): leader link-n1, 3 managers, 3 reachable"),
        "{text}"
    );
}
