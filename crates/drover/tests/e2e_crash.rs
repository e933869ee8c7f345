//! The crash matrix on real engines (issue 4): a rolling update of 3
//! managers + 2 workers, during which the *acting* controller is killed
//! with SIGKILL at every distinct step boundary it passes — each the first
//! time its event shows up in the store (a kill lands within ~0.2 s of the
//! event: the step has just started, or just finished and the next one is
//! not yet under way). The manager boot script runs the controller under a
//! restart loop (as systemd's `Restart=always` would), so the same manager's
//! controller comes back and resumes from the journal.
//!
//! After the rollout, for all kill points at once: it completed; no orphan
//! engine, no duplicate logical id, no stale Down node, no operation left in
//! the journal; the 200 ms watcher never saw quorum lost; a raw dump of the
//! swarm store (every label, decompressed) holds no swarm secret.
//!
//! The store is the swarm's own (the default on a swarm): `apply` creates
//! the first manager, then commits into its raft; every controller uses the
//! store on its own engine.

mod support;

use drover_spi::Event;
use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use support::{Lab, Watch, assert_converged_shape, bounded, watch};

/// A step boundary: the acting controller is killed the first time an
/// event matching it appears.
struct Point {
    name: &'static str,
    group: &'static str,
    action: &'static str,
    /// Start of the step description (`Action::describe`), or the op kind.
    reason: &'static str,
    /// `started`, `ok` or `journaled`.
    outcome: &'static str,
}

const fn point(
    name: &'static str,
    group: &'static str,
    action: &'static str,
    reason: &'static str,
    outcome: &'static str,
) -> Point {
    Point {
        name,
        group,
        action,
        reason,
        outcome,
    }
}

const POINTS: &[Point] = &[
    point(
        "manager roll journaled, before its first step",
        "managers",
        "begin",
        "Roll",
        "journaled",
    ),
    point(
        "during a manager's demotion",
        "managers",
        "step",
        "demote node",
        "started",
    ),
    point(
        "after demote, before out-of-raft and destroy",
        "managers",
        "step",
        "demote node",
        "ok",
    ),
    point(
        "during a manager's destroy",
        "managers",
        "step",
        "destroy instance",
        "started",
    ),
    point(
        "after destroy, before node removal",
        "managers",
        "step",
        "destroy instance",
        "ok",
    ),
    point(
        "after node removal, before provision",
        "managers",
        "step",
        "remove node",
        "ok",
    ),
    point(
        "during a manager's provision",
        "managers",
        "step",
        "provision",
        "started",
    ),
    point(
        "after provision, before health",
        "managers",
        "step",
        "provision",
        "ok",
    ),
    point(
        "during the leader's self-demotion",
        "managers",
        "step",
        "demote self",
        "started",
    ),
    point(
        "worker roll journaled, before its drain",
        "workers",
        "begin",
        "Roll",
        "journaled",
    ),
    point(
        "during a worker's drain",
        "workers",
        "step",
        "drain node",
        "started",
    ),
    point(
        "after drain, before destroy",
        "workers",
        "step",
        "drain node",
        "ok",
    ),
    point(
        "after a worker's destroy, before node removal",
        "workers",
        "step",
        "destroy instance",
        "ok",
    ),
    point(
        "after a worker's provision, before health",
        "workers",
        "step",
        "provision",
        "ok",
    ),
];

fn matches(p: &Point, e: &Event) -> bool {
    e.group.as_deref() == Some(p.group)
        && e.action == p.action
        && e.reason.starts_with(p.reason)
        && e.outcome == p.outcome
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rollout_survives_the_acting_controller_killed_at_every_step_boundary() {
    bounded(840, crash_matrix()).await;
}

async fn crash_matrix() {
    let lab = Lab::with_swarm_store(91).await;
    let t0 = Instant::now();
    lab.apply(&lab.spec("one"), true);
    let up = t0.elapsed();
    assert_converged_shape(&lab).await;
    let store = lab.store().await;
    // Events are bounded (200 on the swarm store): remember them, not a count.
    let key = |e: &Event| format!("{e:?}");
    let mut processed: HashSet<String> = store.events(0).await.unwrap().iter().map(key).collect();

    let stop = Arc::new(AtomicBool::new(false));
    let seen = Arc::new(Mutex::new(Watch::default()));
    let watcher = watch(lab.dir.clone(), stop.clone(), seen.clone());
    let t1 = Instant::now();
    lab.apply(&lab.spec("two"), false);
    let rev = store.desired().await.unwrap().unwrap().rev;

    let mut fired = vec![false; POINTS.len()];
    let mut kills: Vec<(&str, String, f64)> = Vec::new();
    loop {
        tokio::time::sleep(Duration::from_millis(150)).await;
        assert!(
            t1.elapsed() < Duration::from_secs(600),
            "the rollout did not complete; kills so far {kills:#?}"
        );
        // The store is on a manager's engine; managers come and go.
        let Some(store) = lab.try_store().await else {
            continue;
        };
        let Ok(events) = store.events(0).await else {
            continue;
        };
        for e in &events {
            if !processed.insert(key(e)) {
                continue;
            }
            let Some(i) = POINTS
                .iter()
                .enumerate()
                .position(|(i, p)| !fired[i] && matches(p, e))
            else {
                continue;
            };
            if let Some(pid) = support::kill_controller(&lab, &e.controller) {
                fired[i] = true;
                kills.push((
                    POINTS[i].name,
                    format!("pid {pid} on {}", e.controller),
                    t1.elapsed().as_secs_f64(),
                ));
            }
        }
        if store
            .history()
            .await
            .is_ok_and(|h| h.iter().any(|r| r.rev == rev && r.converged))
        {
            break;
        }
    }
    let rolled = t1.elapsed();
    stop.store(true, Ordering::SeqCst);
    watcher.await.unwrap();

    for (name, whom, at) in &kills {
        eprintln!("KILL at {at:.1}s: {name} ({whom})");
    }
    let missed: Vec<&str> = POINTS
        .iter()
        .zip(&fired)
        .filter(|(_, f)| !**f)
        .map(|(p, _)| p.name)
        .collect();
    assert!(
        kills.len() >= 10,
        "only {} kill points reached; missed {missed:?}",
        kills.len()
    );

    // Completed, at the declared shape: 3 managers all reachable, 2 Ready
    // workers, no Down/Unknown node, every node backed by a machine, every
    // machine on the new config, 5 machines in all.
    assert_converged_shape(&lab).await;
    let records = lab.records();
    let mut ids: Vec<&String> = records
        .iter()
        .filter_map(|r| r.logical_id.as_ref())
        .collect();
    let n = ids.len();
    ids.sort();
    ids.dedup();
    assert_eq!(ids.len(), n, "duplicate logical id: {records:#?}");
    // The first handle's manager is gone: open the store on a current one.
    let store = lab.store().await;
    assert!(
        store.journal().await.unwrap().is_empty(),
        "operations left in the journal"
    );
    // No orphan engine: every dockerd of this lab belongs to a recorded machine.
    let dir = lab.dir.display().to_string();
    let engines: Vec<i32> = drover_local::procs::pids_matching(&dir)
        .into_iter()
        .filter(|&p| drover_local::procs::cmdline(p).is_some_and(|c| c.starts_with("dockerd")))
        .collect();
    for pid in &engines {
        assert!(
            records.iter().any(|r| {
                let paths = drover_local::EnginePaths::new(r.socket.parent().unwrap());
                drover_local::launcher::running_engine_pid(&paths, r.pid) == Some(*pid)
            }),
            "orphan engine {pid}: {:?}",
            drover_local::procs::cmdline(*pid)
        );
    }
    assert_eq!(engines.len(), records.len(), "engines {engines:?}");

    // The swarm store dumped raw (every label it keeps, decompressed) after a
    // rollout full of joins, campaigns and crashes: no swarm secret in it.
    let url = lab.store_url();
    let endpoint = url.strip_prefix("swarm:").expect("a swarm store url");
    let raw = drover_store::SwarmStore::connect(Some(endpoint))
        .await
        .expect("swarm store")
        .raw_dump()
        .await
        .expect("raw dump");
    let labels: Vec<&str> = raw.iter().map(|(k, _)| k.as_str()).collect();
    for section in ["revisions", "journal", "status", "events"] {
        assert!(
            labels.iter().any(|l| l.ends_with(section)),
            "no {section} label in the dump: {labels:?}"
        );
    }
    for (label, bytes) in &raw {
        let text = String::from_utf8_lossy(bytes);
        assert!(
            !text.contains("SWMTKN-") && !text.contains("SWMKEY-"),
            "a swarm secret in the store's {label}"
        );
    }

    let w = std::mem::take(&mut *seen.lock().unwrap());
    eprintln!(
        "PHASES: bring-up {:.1}s, rollout with {} controller kills {:.1}s; missed points {missed:?}; {}",
        up.as_secs_f64(),
        kills.len(),
        rolled.as_secs_f64(),
        w.summary()
    );
    w.assert_quorum_kept();
}
