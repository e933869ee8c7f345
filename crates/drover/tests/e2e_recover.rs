//! `drover recover` on real engines (issue 18, "A lost quorum is
//! recovered, on evidence"). Two of three manager machines are lost; the
//! swarm store lives in the raft, so nothing can be read or written until
//! the quorum is back.
//!
//! 1. Both lost machines destroyed through the provider: `recover
//!    --dry-run` prints the plan and changes nothing (still no leader);
//!    `recover` forces a new cluster on the survivor, the controller
//!    rebuilds the manager group to 3, and the swarm still holds the
//!    survivor's service and its worker (same node id).
//! 2. One lost machine merely paused (SIGSTOP to its engine's process
//!    group, as a frozen VM), the other destroyed:
//!    `recover` refuses with exit 2 naming the paused machine, and
//!    nothing changes.
//! 3. A `recover` cut short right after force-new-cluster (the CLI
//!    SIGKILLed the moment its recovery record appears; force-new-cluster
//!    completed by the test through the engine API if the kill came first):
//!    the swarm has a leader, the gone members' node entries and no audit
//!    event. A rerun finishes that recovery — the entries removed, the
//!    event written, the record gone — without a second force-new-cluster;
//!    a third run finds nothing to recover; the controller rebuilds.
//!
//! Addresses 127.0.120.x, 127.0.121.x and 127.0.122.x. Everything started
//! is stopped by PID (StateGuard, Etcd drop, `Child::kill`), also on
//! failure; a paused machine is continued (SIGCONT, its whole process
//! group) by its guard first.

mod support;

use drover_core::model::{NodeState, SwarmView};
use drover_local::InstanceRecord;
use drover_spi::InstanceProvider;
use std::process::Command;
use std::time::{Duration, Instant};
use support::{Lab, bounded, leader, nemesis};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn recovers_a_quorum_lost_with_two_destroyed_managers_keeping_services_and_workers() {
    bounded(600, destroyed_then_recovered()).await;
}

async fn destroyed_then_recovered() {
    let lab = lab_with_workers(120, 1).await;
    let nodes = lab.nodes().await.expect("the swarm answers");
    let worker_node = nodes
        .iter()
        .find(|n| n.raft.is_none())
        .expect("a worker node")
        .id
        .clone();
    let leader_link = leader(&nodes).link.clone().expect("the leader's link");
    let managers = manager_records(&lab);
    service_create(&managers[0].endpoint(), "probe");

    // The leader and one follower go at once (one at a time, the survivors'
    // controller would start replacing the first before the second goes).
    let (mut lost, mut followers): (Vec<_>, Vec<_>) = managers
        .into_iter()
        .partition(|r| r.tags.get("drover.link") == Some(&leader_link));
    lost.push(followers.remove(0));
    let survivor = followers.remove(0);
    let lost_addresses: Vec<String> = lost.iter().map(|r| r.address.clone()).collect();
    destroy_all(&lab, &lost).await;
    let t_lost = Instant::now();

    // Until the survivor's engine answers again (it holds every swarm
    // call ~20 s after losing its peers), recover finds nothing to
    // recover from. Then, unnamed, the lost members refuse it: a member on
    // no listed machine may be a manager drover never made.
    let refused = until_said(
        &lab,
        &["recover", "--dry-run"],
        "on no machine the provider lists",
        120,
    )
    .await;
    assert_eq!(refused.status.code(), Some(2), "{}", stdout(&refused));
    for a in &lost_addresses {
        assert!(
            stdout(&refused).contains(&format!("--gone {a}")),
            "{}",
            stdout(&refused)
        );
    }
    let mut named: Vec<&str> = vec!["recover"];
    for a in &lost_addresses {
        named.extend(["--gone", a.as_str()]);
    }
    let with = |extra: &[&'static str]| -> Vec<&str> {
        let mut v = named.clone();
        v.extend_from_slice(extra);
        v
    };
    // Named gone, the dry run shows the plan.
    let dry = until_said(&lab, &with(&["--dry-run"]), "plan (--dry-run", 120).await;
    assert_eq!(dry.status.code(), Some(0), "dry run would proceed");
    let text = stdout(&dry);
    assert!(
        text.contains(&format!("--force-new-cluster on {}", survivor.id)),
        "{text}"
    );
    eprintln!(
        "DRY RUN: would proceed {:.1}s after the loss",
        t_lost.elapsed().as_secs_f64()
    );
    // `status` says so too, counting the members the survivor lists.
    let status = lab.drover(&["status"]);
    assert_eq!(status.status.code(), Some(3));
    let said = stdout(&status);
    assert!(
        said.contains("QUORUM LOST: 1 of 3 managers reachable"),
        "{said}"
    );
    assert!(said.contains("2 raft member(s) on no machine"), "{said}");
    assert!(said.contains("drover recover"), "the runbook: {said}");
    let json = lab.drover(&with(&["--dry-run", "-o", "json"]));
    let doc: serde_json::Value = serde_json::from_slice(&json.stdout).expect("json");
    assert_eq!(doc["decision"]["decision"], "proceed", "{doc}");
    assert_eq!(doc["decision"]["gone"].as_array().map(Vec::len), Some(2));
    assert_eq!(doc["done"], serde_json::Value::Null);
    assert_no_leader(&survivor).await;
    assert_eq!(lab.records().len(), 2, "a dry run changed the machines");

    let t = Instant::now();
    let out = lab.drover(&with(&[]));
    assert_eq!(out.status.code(), Some(0), "recover failed");
    let text = stdout(&out);
    assert!(text.contains("recovered:"), "{text}");
    assert!(!text.contains("WARNING"), "{text}");
    eprintln!("RECOVER: took {:.1}s", t.elapsed().as_secs_f64());

    // The controller rebuilds the manager group; the worker and the
    // service were kept.
    let t = Instant::now();
    let nodes = loop {
        let nodes = lab.nodes().await.unwrap_or_default();
        let reachable = nodes
            .iter()
            .filter(|n| n.raft.as_ref().is_some_and(|r| r.reachable))
            .count();
        let all_ready = nodes.iter().all(|n| n.state == NodeState::Ready);
        if reachable == 3 && nodes.len() == 4 && all_ready {
            break nodes;
        }
        assert!(
            t.elapsed() < Duration::from_secs(300),
            "the manager group was not rebuilt: {nodes:#?}"
        );
        tokio::time::sleep(Duration::from_secs(1)).await;
    };
    eprintln!(
        "REBUILT: 3 managers, every node Ready, {:.1}s after recover",
        t.elapsed().as_secs_f64()
    );
    assert!(
        nodes
            .iter()
            .any(|n| n.id == worker_node && n.state == NodeState::Ready),
        "the worker was not kept: {nodes:#?}"
    );
    assert!(
        service_exists(&survivor.endpoint(), "probe"),
        "the service is gone"
    );
    assert_eq!(lab.records().len(), 4, "{:#?}", lab.records());
    // Read through the survivor: a manager that just joined answers "being
    // prepared" for a moment.
    let store = format!("swarm:{}", survivor.endpoint());
    let out = lab.drover(&["events", "--output", "json", "--store", &store]);
    let events: serde_json::Value = serde_json::from_slice(&out.stdout).expect("events json");
    let recovery = events
        .as_array()
        .into_iter()
        .flatten()
        .find(|e| e["action"] == "recover")
        .unwrap_or_else(|| panic!("no recover event: {events}"));
    assert_eq!(recovery["controller"], "drover recover");
    assert_eq!(recovery["target"], survivor.id.as_str());
    assert!(
        recovery["reason"]
            .as_str()
            .is_some_and(|r| r.contains("2 of 3 raft members lost")),
        "{recovery}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refuses_while_a_lost_managers_engine_is_merely_paused() {
    bounded(420, paused_refused()).await;
}

async fn paused_refused() {
    let lab = lab_with_workers(121, 0).await;
    let nodes = lab.nodes().await.expect("the swarm answers");
    let leader_link = leader(&nodes).link.clone().expect("the leader's link");
    let managers = manager_records(&lab);
    let (leaders, followers): (Vec<_>, Vec<_>) = managers
        .into_iter()
        .partition(|r| r.tags.get("drover.link") == Some(&leader_link));
    let (paused, survivor) = (&followers[0], &followers[1]);
    let pgid = paused.pgid.expect("pgid");
    assert!(drover_local::procs::is_ours(
        pgid,
        &paused.socket.display().to_string()
    ));
    let stopped = nemesis::Stopped::stop_group(pgid);
    destroy_all(&lab, &leaders).await;
    // The leader's controller may have started the paused engine: its end
    // orphaned the paused group, which the kernel continued.
    stopped.again();

    // The destroyed leader is named gone (it is, and the operator knows it):
    // the paused machine alone must refuse the recovery.
    let destroyed = leaders[0].address.clone();
    let out = until_said(
        &lab,
        &["recover", "--dry-run", "--gone", &destroyed],
        "may still be running",
        120,
    )
    .await;
    assert_eq!(out.status.code(), Some(2), "a dry run that would refuse");
    let out = lab.drover(&["recover", "--gone", &destroyed]);
    assert_eq!(out.status.code(), Some(2), "recover did not refuse");
    let text = stdout(&out);
    assert!(
        text.contains(&format!("refused: {} ({}:2377", paused.id, paused.address)),
        "{text}"
    );
    assert!(text.contains("nothing was changed"), "{text}");
    assert!(
        String::from_utf8_lossy(&out.stderr).contains(&paused.id),
        "stderr names the machine"
    );
    // Nothing changed: still no leader, the survivor still lists the old
    // raft of 3, the machines are those there were.
    assert_no_leader(survivor).await;
    let engine = drover_engine::Engine::connect(&survivor.endpoint())
        .await
        .expect("survivor");
    let info = engine.info().await.expect("info");
    assert_eq!(info.raft_peers.len(), 3, "{info:?}");
    assert_eq!(lab.records().len(), 2);
    // An unknown machine named gone is bad input, said plainly.
    let out = lab.drover(&["recover", "--gone", "inothere"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--gone inothere"));
    // Nor does the operator's word make a paused engine gone.
    let out = lab.drover(&["recover", "--gone", &destroyed, "--gone", &paused.id]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("is running but does not answer"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_no_leader(survivor).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rerun_finishes_a_recovery_cut_short_after_force_new_cluster() {
    bounded(600, cut_short_then_finished()).await;
}

async fn cut_short_then_finished() {
    let lab = lab_with_workers(122, 0).await;
    let nodes = lab.nodes().await.expect("the swarm answers");
    let leader_link = leader(&nodes).link.clone().expect("the leader's link");
    let (mut lost, mut followers): (Vec<_>, Vec<_>) = manager_records(&lab)
        .into_iter()
        .partition(|r| r.tags.get("drover.link") == Some(&leader_link));
    lost.push(followers.remove(0));
    let survivor = followers.remove(0);
    let lost_nodes: Vec<String> = lost
        .iter()
        .map(|r| {
            let link = r.tags.get("drover.link");
            let n = nodes.iter().find(|n| n.link.as_ref() == link);
            n.expect("the lost machine's node").id.clone()
        })
        .collect();
    destroy_all(&lab, &lost).await;
    let mut args: Vec<&str> = vec!["recover"];
    for r in &lost {
        args.extend(["--gone", r.address.as_str()]);
    }
    let mut dry = args.clone();
    dry.push("--dry-run");
    let out = until_said(&lab, &dry, "plan (--dry-run", 120).await;
    assert_eq!(out.status.code(), Some(0), "a dry run would proceed");

    // The crash: recover SIGKILLed the moment its record appears (written
    // right before force-new-cluster, which takes ~1 s).
    let record = lab.dir.join("recovery.json");
    assert!(!record.exists());
    let mut child = lab
        .drover_command(&args)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("spawn drover recover");
    let t = Instant::now();
    while !record.exists() {
        if let Some(status) = child.try_wait().expect("try_wait") {
            panic!("recover ended ({status}) before its record was seen");
        }
        assert!(t.elapsed() < Duration::from_secs(60), "no recovery record");
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    child.kill().expect("kill drover recover");
    child.wait().expect("reap drover recover");
    let text = std::fs::read_to_string(&record).expect("the record");
    for id in &lost_nodes {
        assert!(text.contains(id.as_str()), "{id} not in the record: {text}");
    }
    assert!(text.contains(survivor.id.as_str()), "{text}");

    // Whatever reached the engine before the kill, the state the crash
    // leaves: the new cluster formed, nothing after it done. A request the
    // engine received completes without its client (16–21 s this long
    // after the loss, swarm-facts.md), and a second one meanwhile breaks
    // it ("address already in use"): force it here only after that long.
    let engine = drover_engine::Engine::connect(&survivor.endpoint())
        .await
        .expect("survivor");
    let t = Instant::now();
    let mut forced_here = false;
    let nodes = loop {
        if let SwarmView::Ok(nodes) = engine.observe().await {
            break nodes;
        }
        if !forced_here && t.elapsed() > Duration::from_secs(90) {
            eprintln!("the kill came before force-new-cluster reached the engine: forcing it here");
            forced_here = true;
            let addr = format!("{}:2377", survivor.address);
            if let Err(e) = engine.force_new_cluster(&addr).await {
                eprintln!("force-new-cluster: {e}");
            }
        }
        assert!(t.elapsed() < Duration::from_secs(150), "no leader");
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    for id in &lost_nodes {
        assert!(
            nodes.iter().any(|n| &n.id == id),
            "{id} was removed before the crash: {nodes:#?}"
        );
    }
    let tokens = engine.join_tokens().await.expect("join tokens");
    for secret in [&tokens.worker, &tokens.manager] {
        assert!(
            !text.contains(secret.expose()),
            "a join token in the record"
        );
    }
    let store = format!("swarm:{}", survivor.endpoint());
    assert!(recover_events(&lab, &store).is_empty(), "recorded already");

    // Before issue 18's last gap was closed, this rerun refused (the swarm
    // has a leader) and the entries stayed until a `docker node rm` by hand.
    let out = lab.drover(&dry);
    assert_eq!(out.status.code(), Some(0), "a dry run would finish");
    assert!(stdout(&out).contains("finish the recovery started at"));
    assert!(record.exists(), "a dry run removed the record");
    let out = lab.drover(&args);
    assert_eq!(out.status.code(), Some(0), "the rerun failed");
    let text = stdout(&out);
    assert!(text.contains("finished the recovery started at"), "{text}");
    assert!(text.contains("no second force-new-cluster"), "{text}");
    for id in &lost_nodes {
        assert!(
            text.contains(&format!("removed the node entry of gone member {id}")),
            "{text}"
        );
    }
    assert!(text.contains("recorded in the audit log"), "{text}");
    assert!(!text.contains("WARNING"), "{text}");
    assert!(!record.exists(), "the record was kept");
    let nodes = lab.nodes().await.expect("the swarm answers");
    assert!(
        nodes.iter().all(|n| !lost_nodes.contains(&n.id)),
        "{nodes:#?}"
    );
    let events = recover_events(&lab, &store);
    assert_eq!(events.len(), 1, "{events:#?}");
    assert_eq!(events[0]["target"], survivor.id.as_str());
    assert!(
        events[0]["reason"].as_str().is_some_and(
            |r| r.contains("2 of 3 raft members lost") && r.contains("finished by a rerun")
        ),
        "{}",
        events[0]
    );

    // Finished: a third run has nothing to recover, and changes nothing.
    let out = lab.drover(&["recover"]);
    assert_eq!(out.status.code(), Some(2), "{}", stdout(&out));
    assert!(
        stdout(&out).contains("nothing to recover"),
        "{}",
        stdout(&out)
    );
    assert_eq!(recover_events(&lab, &store).len(), 1);

    // Nothing blocks the controller now: it rebuilds the manager group.
    let t = Instant::now();
    loop {
        let nodes = lab.nodes().await.unwrap_or_default();
        let reachable = nodes
            .iter()
            .filter(|n| n.raft.as_ref().is_some_and(|r| r.reachable))
            .count();
        if reachable == 3 && nodes.iter().all(|n| n.state == NodeState::Ready) {
            break;
        }
        assert!(
            t.elapsed() < Duration::from_secs(300),
            "the manager group was not rebuilt: {nodes:#?}"
        );
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    eprintln!(
        "REBUILT after the finishing rerun in {:.1}s",
        t.elapsed().as_secs_f64()
    );
}

/// The `recover` events in the audit log, read through `store`.
fn recover_events(lab: &Lab, store: &str) -> Vec<serde_json::Value> {
    let out = lab.drover(&["events", "--output", "json", "--store", store]);
    assert_eq!(out.status.code(), Some(0), "drover events");
    let events: serde_json::Value = serde_json::from_slice(&out.stdout).expect("events json");
    events
        .as_array()
        .into_iter()
        .flatten()
        .filter(|e| e["action"] == "recover")
        .cloned()
        .collect()
}

/// A swarm-store lab on `net` with 3 pet managers and `workers` workers, converged.
async fn lab_with_workers(net: u8, workers: usize) -> Lab {
    let lab = Lab::with_swarm_store(net).await;
    let text = std::fs::read_to_string(lab.spec("one")).unwrap();
    let text = if workers == 0 {
        text[..text.find("- name: workers").unwrap()].to_string()
    } else {
        text.replace("size: 2", &format!("size: {workers}"))
    };
    let spec = lab.dir.join("recover.yaml");
    std::fs::write(&spec, text).unwrap();
    lab.apply(&spec, true);
    lab
}

fn manager_records(lab: &Lab) -> Vec<InstanceRecord> {
    lab.records()
        .into_iter()
        .filter(|r| r.tags.get("drover.group").map(String::as_str) == Some("managers"))
        .collect()
}

/// Destroys `records` through the provider, all at once.
async fn destroy_all(lab: &Lab, records: &[InstanceRecord]) {
    let provider = lab.provider();
    let gone = records.iter().map(|r| provider.destroy(&r.id));
    for r in futures_util::future::join_all(gone).await {
        r.expect("destroy");
    }
}

/// Runs `drover args` until its output says `what` (or `secs` pass).
async fn until_said(lab: &Lab, args: &[&str], what: &str, secs: u64) -> std::process::Output {
    let t = Instant::now();
    loop {
        let out = lab.drover(args);
        if stdout(&out).contains(what) || t.elapsed() > Duration::from_secs(secs) {
            return out;
        }
        tokio::time::sleep(Duration::from_secs(2)).await;
    }
}

fn stdout(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

async fn assert_no_leader(r: &InstanceRecord) {
    let engine = drover_engine::Engine::connect(&r.endpoint())
        .await
        .expect("survivor");
    let view = engine.observe().await;
    assert!(matches!(view, SwarmView::NoQuorum(_)), "{view:?}");
}

/// `docker service create` of a service with no tasks (nothing to pull:
/// the point is that the swarm's objects survive the recovery).
fn service_create(endpoint: &str, name: &str) {
    let out = Command::new("docker")
        .args([
            "-H",
            endpoint,
            "service",
            "create",
            "--detach",
            "--no-resolve-image",
        ])
        .args(["--name", name, "--replicas", "0", "--network", "host"])
        .args(["drover-busybox:1", "/bin/sleep", "3600"])
        .output()
        .expect("the docker CLI");
    assert!(out.status.success(), "{out:?}");
}

fn service_exists(endpoint: &str, name: &str) -> bool {
    Command::new("docker")
        .args(["-H", endpoint, "service", "inspect", name])
        .output()
        .is_ok_and(|o| o.status.success())
}
