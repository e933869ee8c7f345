//! The mission, end to end, on real engines (issue 3): from nothing, using
//! only drover's own commands, a 3-manager + 2-worker swarm of real
//! `dockerd` processes on loopback is brought up, then a new configuration
//! is rolled through it — followers first, then the leader the acting
//! controller runs on — while a watcher checks the quorum every 200 ms.
//! A second scenario kills -9 the leader's engine mid-rollout; a third tears
//! down a swarm-store cluster while reading the store through a follower; a
//! fourth kills two of three managers' engines and reads `status`, which
//! must say the quorum is lost.
//!
//! Everything started is stopped by PID (StateGuard, Etcd drop), also on
//! failure. Wall times are printed, never asserted.

mod support;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use support::{
    Lab, Watch, assert_converged_shape, bounded, desired_hashes, group_of, leader, watch,
};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rolls_a_new_config_through_managers_leader_last_without_losing_quorum() {
    bounded(900, leader_last_rollout()).await;
}

async fn leader_last_rollout() {
    let lab = Lab::new(71).await;
    let t0 = Instant::now();
    let one = lab.spec("one");
    let out = lab.drover(&[
        "bootstrap",
        "-f",
        one.to_str().unwrap(),
        "--wait",
        "--timeout",
        "8m",
    ]);
    assert_eq!(out.status.code(), Some(0), "bootstrap failed");
    let up = t0.elapsed();
    // A second bootstrap is refused: the cluster exists.
    let out = lab.drover(&["bootstrap", "-f", one.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("drover apply"));
    let before = assert_converged_shape(&lab).await;
    let old_leader = leader(&before).id.clone();
    let old_records = lab.records();

    let stop = Arc::new(AtomicBool::new(false));
    let seen = Arc::new(Mutex::new(Watch::default()));
    let watcher = watch(lab.dir.clone(), stop.clone(), seen.clone());
    let t1 = Instant::now();
    lab.apply(&lab.spec("two"), true);
    let rolled = t1.elapsed();
    stop.store(true, Ordering::SeqCst);
    watcher.await.unwrap();

    let after = assert_converged_shape(&lab).await;
    let hashes_two = desired_hashes(&lab);
    assert_ne!(leader(&after).id, old_leader, "the leader was not replaced");
    assert!(
        after.iter().all(|n| n.id != old_leader),
        "the original leader's node is still listed"
    );
    assert_destroyed_are_gone(&lab, &old_records);
    let w = std::mem::take(&mut *seen.lock().unwrap());
    eprintln!(
        "PHASES: bring-up {:.1}s, rollout {:.1}s; {}",
        up.as_secs_f64(),
        rolled.as_secs_f64(),
        w.summary()
    );
    w.assert_quorum_kept();

    // `plan` against the live cluster: nothing to do for the applied spec,
    // a manager roll for a changed one; nothing is committed by planning.
    let out = lab.drover(&["plan", "-f", lab.spec("two").to_str().unwrap()]);
    assert!(String::from_utf8_lossy(&out.stdout).contains("no step to take now"));
    let out = lab.drover(&["plan", "-f", lab.spec("three").to_str().unwrap()]);
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        text.contains("Roll in managers") && text.contains("demote node"),
        "{text}"
    );
    assert_eq!(
        desired_hashes(&lab),
        hashes_two,
        "plan changed the desired state"
    );

    // The audit trail: both revisions converged; the steps are in the events.
    let out = lab.drover(&["history", "--output", "json"]);
    let history: serde_json::Value = serde_json::from_slice(&out.stdout).expect("history json");
    assert!(
        history
            .as_array()
            .is_some_and(|h| h.len() == 2 && h.iter().all(|r| r["converged"] == true)),
        "{history}"
    );
    let out = lab.drover(&["events", "--output", "json"]);
    let events = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        events.contains("demote self") && events.contains("destroy instance"),
        "{events}"
    );
    assert!(
        !events.contains("SWMTKN"),
        "a join token reached the events"
    );

    // A paused group starts nothing: a changed spec is not rolled until resumed.
    assert_eq!(lab.drover(&["pause", "workers"]).status.code(), Some(0));
    lab.apply(&lab.spec("three"), false);
    let store = lab.store().await;
    let t = Instant::now();
    loop {
        // Managers roll first; once they are done, the paused workers must still wait.
        let doc = store.status().await.unwrap().unwrap_or_default();
        if doc["revision"] == 3 && group_of(&doc, "managers")["phase"] == "converged" {
            tokio::time::sleep(Duration::from_secs(5)).await;
            let doc = store.status().await.unwrap().unwrap_or_default();
            assert_eq!(group_of(&doc, "workers")["phase"], "paused", "{doc}");
            break;
        }
        assert!(
            t.elapsed() < Duration::from_secs(300),
            "managers did not converge: {doc}"
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    let untouched = lab
        .records()
        .iter()
        .filter(|r| r.tags["drover.group"] == "workers")
        .all(|r| r.tags.get("drover.config") == hashes_two.get("workers"));
    assert!(untouched, "a paused group was rolled");
    assert_eq!(lab.drover(&["resume", "workers"]).status.code(), Some(0));
    lab.apply(&lab.spec("three"), true);
    let hashes_three = desired_hashes(&lab);
    assert!(
        lab.records()
            .iter()
            .all(|r| r.tags.get("drover.config") == hashes_three.get(&r.tags["drover.group"]))
    );

    // The manager group goes last: refused while workers are declared, nothing changed.
    let out = lab.drover(&["destroy", "managers", "--yes"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("destroy workers first"));
    assert_eq!(
        desired_hashes(&lab),
        hashes_three,
        "a refused destroy changed the spec"
    );

    // A group missing from the file is kept; with --prune it is retired.
    let managers_only = lab.dir.join("managers-only.yaml");
    let three = std::fs::read_to_string(lab.spec("three")).unwrap();
    std::fs::write(
        &managers_only,
        &three[..three.find("- name: workers").unwrap()],
    )
    .unwrap();
    lab.apply(&managers_only, true);
    assert_eq!(
        lab.records().len(),
        5,
        "apply without --prune removed machines"
    );
    let out = lab.drover(&[
        "apply",
        "-f",
        managers_only.to_str().unwrap(),
        "--prune",
        "--wait",
        "--timeout",
        "5m",
    ]);
    assert_eq!(out.status.code(), Some(0));
    let records = lab.records();
    assert_eq!(records.len(), 3, "{records:#?}");
    assert!(records.iter().all(|r| r.tags["drover.group"] == "managers"));

    // Ending the swarm: the controller retires two managers while a watcher
    // checks the quorum; the last one (the leader) is removed from here.
    let stop = Arc::new(AtomicBool::new(false));
    let seen = Arc::new(Mutex::new(Watch::default()));
    let watcher = watch(lab.dir.clone(), stop.clone(), seen.clone());
    let t2 = Instant::now();
    let out = lab.drover(&["destroy", "managers", "--yes", "--timeout", "5m"]);
    stop.store(true, Ordering::SeqCst);
    watcher.await.unwrap();
    assert_eq!(out.status.code(), Some(0));
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(text.contains("the swarm is gone"), "{text}");
    assert!(lab.records().is_empty(), "{:#?}", lab.records());
    assert_destroyed_are_gone(&lab, &records);
    let w = std::mem::take(&mut *seen.lock().unwrap());
    eprintln!(
        "PHASES: teardown {:.1}s; {}",
        t2.elapsed().as_secs_f64(),
        w.summary()
    );
    w.assert_quorum_kept();
    let out = lab.drover(&["events", "--output", "json"]);
    let events: serde_json::Value = serde_json::from_slice(&out.stdout).expect("events json");
    let last = events
        .as_array()
        .and_then(|e| e.last())
        .cloned()
        .unwrap_or_default();
    assert_eq!(last["controller"], "drover destroy", "{last}");
    assert_eq!(last["outcome"], "ok", "{last}");
    let out = lab.drover(&["status", "--output", "json"]);
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).expect("status json");
    assert_eq!(group_of(&doc, "managers")["members"], 0, "{doc}");
    // Again: nothing left to do, said plainly.
    let out = lab.drover(&["destroy", "managers", "--yes"]);
    assert_eq!(out.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&out.stdout).contains("no machine left"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tears_down_a_swarm_store_cluster_read_through_a_manager_it_retires() {
    bounded(600, teardown_through_a_follower()).await;
}

/// The swarm store lives in the raft: `destroy` reads it through a follower's
/// engine, which the teardown retires first, and must find it again on a
/// manager that is left.
async fn teardown_through_a_follower() {
    let lab = managers_only(73).await;
    let nodes = lab.nodes().await.expect("the swarm answers");
    let leader_link = leader(&nodes).link.clone();
    let records = lab.records();
    let follower = records
        .iter()
        .find(|r| r.tags.get("drover.link") != leader_link.as_ref())
        .expect("a follower");
    let store = format!("swarm:{}", follower.endpoint());
    let out = lab.drover(&[
        "destroy",
        "managers",
        "--yes",
        "--timeout",
        "5m",
        "--store",
        &store,
    ]);
    assert_eq!(out.status.code(), Some(0));
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(text.contains("the swarm is gone"), "{text}");
    assert!(lab.records().is_empty(), "{:#?}", lab.records());
    assert_destroyed_are_gone(&lab, &records);
}

/// A lab on `net` with a swarm store, and its 3 managers brought up (no workers).
async fn managers_only(net: u8) -> Lab {
    let lab = Lab::with_swarm_store(net).await;
    let one = std::fs::read_to_string(lab.spec("one")).unwrap();
    let managers_only = lab.dir.join("managers-only.yaml");
    std::fs::write(&managers_only, &one[..one.find("- name: workers").unwrap()]).unwrap();
    lab.apply(&managers_only, true);
    lab
}

/// Each of `records` no longer in the provider has no engine running and no directory left.
fn assert_destroyed_are_gone(lab: &support::Lab, records: &[drover_local::InstanceRecord]) {
    let now_ids: Vec<String> = lab.records().iter().map(|r| r.id.clone()).collect();
    for r in records.iter().filter(|r| !now_ids.contains(&r.id)) {
        let pid = r.pid.expect("recorded pid");
        let alive = drover_local::procs::is_alive(pid)
            && drover_local::procs::is_ours(pid, &r.socket.display().to_string());
        assert!(
            !alive,
            "engine {pid} of destroyed instance {} still runs",
            r.id
        );
        let paths = drover_local::EnginePaths::new(r.socket.parent().unwrap());
        assert!(
            r.supervisor
                .is_none_or(|s| !drover_local::launcher::is_supervisor(s, &paths)),
            "supervisor of destroyed instance {} still runs",
            r.id
        );
        assert!(
            !lab.dir.join("instances").join(&r.id).exists(),
            "directory of destroyed {} left",
            r.id
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn completes_the_rollout_after_the_leader_engine_is_killed_mid_way() {
    bounded(900, leader_crash_mid_rollout()).await;
}

async fn leader_crash_mid_rollout() {
    let lab = Lab::new(72).await;
    let t0 = Instant::now();
    lab.apply(&lab.spec("one"), true);
    let up = t0.elapsed();
    lab.apply(&lab.spec_watching("two", "20s"), false);
    let store = lab.store().await;
    let rev = store.desired().await.unwrap().unwrap().rev;

    // Wait until the rollout is under way: one manager already runs the new
    // config and has joined, so the raft is whole again (3 reachable). A
    // crash while a `replace` holds fault tolerance at 0 would be a second
    // failure no manager group of 3 survives (use `surge` for that).
    let t1 = Instant::now();
    loop {
        let doc = store.status().await.unwrap().unwrap_or_default();
        let managers = group_of(&doc, "managers");
        let whole = doc["swarm"]["members"] == 3 && doc["swarm"]["reachable"] == 3;
        if doc["revision"] == rev && managers["current"].as_u64().unwrap_or(0) >= 1 && whole {
            break;
        }
        assert!(
            t1.elapsed() < Duration::from_secs(180),
            "rollout never started: {doc}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let nodes = lab.nodes().await.expect("swarm");
    let link = leader(&nodes).link.clone().expect("leader carries a link");
    let victim = lab
        .records()
        .into_iter()
        .find(|r| r.tags.get("drover.link") == Some(&link))
        .expect("leader's machine");
    // The leader's machine dies (supervisor and engine): drover replaces it.
    support::kill_machine(&victim);
    let killed_at = t1.elapsed();

    let t2 = Instant::now();
    loop {
        if store
            .history()
            .await
            .unwrap()
            .iter()
            .any(|r| r.rev == rev && r.converged)
        {
            break;
        }
        assert!(
            t2.elapsed() < Duration::from_secs(480),
            "rollout did not complete after the leader crash: {:?}",
            store.status().await.unwrap()
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    let recovered = t2.elapsed();
    let after = assert_converged_shape(&lab).await;
    assert!(
        after.iter().all(|n| n.link.as_ref() != Some(&link)),
        "the killed leader's node is still listed"
    );
    eprintln!(
        "PHASES: bring-up {:.1}s, leader killed {:.1}s into the rollout, converged {:.1}s after the kill",
        up.as_secs_f64(),
        killed_at.as_secs_f64(),
        recovered.as_secs_f64()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn status_says_a_lost_quorum_plainly_naming_the_silent_machines() {
    bounded(600, quorum_lost_status()).await;
}

/// Two of three managers' engines killed: no controller can publish, and
/// the swarm store cannot be read. `status` asks the engines itself and
/// says the quorum is lost, which machines are silent, exit code 3 — in
/// text and JSON.
async fn quorum_lost_status() {
    let lab = managers_only(74).await;
    let records = lab.records();
    assert_eq!(records.len(), 3, "{records:#?}");
    let (killed, survivor) = records.split_at(2);
    // Dead for good: a supervisor restarting the engines would give the
    // quorum back.
    support::kill_machines(&killed.iter().collect::<Vec<_>>());
    let store = format!("swarm:{}", survivor[0].endpoint());
    let killed_at = Instant::now();
    let t = Instant::now();
    // The survivor's raft notices within an election timeout.
    let out = loop {
        let out = lab.drover(&["status", "--store", &store]);
        if out.status.code() == Some(3) || t.elapsed() > Duration::from_secs(60) {
            break out;
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    };
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert_eq!(out.status.code(), Some(3), "{text}");
    assert!(
        text.contains("QUORUM LOST: 1 of 3 managers reachable"),
        "{text}"
    );
    for r in killed {
        assert!(
            text.contains(&format!("unreachable: machine {}", r.id)),
            "{text}"
        );
    }
    assert!(text.contains("--force-new-cluster"), "the runbook: {text}");
    eprintln!(
        "STATUS: quorum lost said {:.1}s after the kill",
        t.elapsed().as_secs_f64()
    );
    let json = lab.drover(&["status", "--store", &store, "-o", "json"]);
    assert_eq!(json.status.code(), Some(3));
    let doc: serde_json::Value = serde_json::from_slice(&json.stdout).expect("json");
    assert_eq!(doc["quorum"], "lost");
    assert_eq!(
        (doc["reachable"].as_u64(), doc["managers"].as_u64()),
        (Some(1), Some(3))
    );
    assert_eq!(
        doc["unreachable"].as_array().map(Vec::len),
        Some(2),
        "{doc}"
    );
    // The surviving manager's controller says it too, on its metrics.
    let t = Instant::now();
    let metrics = loop {
        let body = support::scrape(&survivor[0].address).unwrap_or_default();
        if body.lines().any(|l| l == "drover_swarm_leader_known 0")
            || t.elapsed() > Duration::from_secs(60)
        {
            break body;
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    };
    assert!(
        metrics.lines().any(|l| l == "drover_swarm_leader_known 0"),
        "{metrics}"
    );
    eprintln!(
        "METRICS: the survivor's controller said no leader {:.1}s after the kill",
        killed_at.elapsed().as_secs_f64()
    );
    assert!(
        metrics
            .lines()
            .any(|l| l.starts_with("drover_swarm_leader_seen_timestamp_seconds 1")),
        "the last leader seen: {metrics}"
    );
}
