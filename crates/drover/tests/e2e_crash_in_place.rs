//! The crash matrix for updates in place (`update.strategy: in_place`), on
//! real engines: 3 pet managers with a spare slot and 2 workers on the
//! local provider, the swarm store, an update command that records what
//! the swarm said of its member while it ran (`support::in_place::record`,
//! 3 s). During the roll the *acting* controller is SIGKILLed at every
//! distinct step boundary of the in-place operations — each the first time
//! the store shows it (`support::crash`, as `e2e_crash` does for a roll by
//! replacement): for a manager its demotion (the leader's own, a
//! hand-over), the wait out of the raft, the drain, the update started and
//! done, the promotion, the wait until healthy, the activation; for a
//! worker the drain, the update, the wait until healthy, the activation.
//! The boot script's restart loop brings the controller back. Steps often
//! share a commit (an operation's `begin` and its demotion, an update's end
//! and the promotion): a point seen while its controller is still dead
//! from the kill before fires at a later member, or in the next roll (a new
//! release, at most `ROUNDS`); every point must fire.
//!
//! After the rolls: each completed at the declared shape (every manager back
//! in the raft, every node Ready and Active); the same machines as before
//! it, each tagged with the new config; every member's update ran exactly
//! once (a controller killed during an update leaves its run going: its
//! successor's run waits for it on the machine and finds its mark) while
//! its node was out of the raft and drained, and its machine's mark says
//! the new config's update is done; no orphan engine, no duplicate logical
//! id, no operation left in the journal, no swarm secret in the store; the
//! 200 ms quorum watcher saw no violation.
//!
//! Engines and controllers are stopped by PID (the lab, `HaltControllers`),
//! also on failure.

mod support;

use drover_core::journal::Step;
use drover_core::model::Availability;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use support::crash::{self, Point, after, done, during, journaled};
use support::in_place::{machines, record, spec, updates};
use support::nemesis::Halted;
use support::{Lab, Watch, assert_converged_shape, bounded, watch};

const NET: u8 = 181;
/// At most this many rolls to reach every point.
const ROUNDS: usize = 5;

const M: &str = "managers";
const W: &str = "workers";

const POINTS: &[Point] = &[
    journaled(
        "a manager's update journaled, before its first step",
        M,
        "Roll",
    ),
    during("during a manager's demotion", M, "demote node"),
    after(
        "after a manager's demotion, waiting for it to leave the raft",
        M,
        "demote node",
    ),
    done(
        "a manager out of the raft (recorded with its drain's start)",
        M,
        Step::AwaitOutOfRaft,
    ),
    during("during a manager's drain", M, "drain node"),
    after(
        "after a manager's drain, before its update",
        M,
        "drain node",
    ),
    during("during a manager's update", M, "update instance"),
    after(
        "after a manager's update, before its promotion",
        M,
        "update instance",
    ),
    during("during a manager's promotion", M, "promote node"),
    after(
        "after a manager's promotion, while it is watched healthy",
        M,
        "promote node",
    ),
    done(
        "a manager healthy (recorded with its activation's start)",
        M,
        Step::AwaitHealthy,
    ),
    during("during a manager's activation", M, "activate node"),
    after(
        "after a manager's activation, before its operation ends",
        M,
        "activate node",
    ),
    during(
        "during the leader's own demotion (its hand-over)",
        M,
        "demote self",
    ),
    journaled("a worker's update journaled, before its drain", W, "Roll"),
    during("during a worker's drain", W, "drain node"),
    after("after a worker's drain, before its update", W, "drain node"),
    during("during a worker's update", W, "update instance"),
    after(
        "after a worker's update, while it is watched healthy",
        W,
        "update instance",
    ),
    done(
        "a worker healthy (recorded with its activation's start)",
        W,
        Step::AwaitHealthy,
    ),
    during("during a worker's activation", W, "activate node"),
    after(
        "after a worker's activation, before its operation ends",
        W,
        "activate node",
    ),
];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_update_in_place_survives_the_acting_controller_killed_at_every_step_boundary() {
    bounded(1500, crash_matrix()).await;
}

async fn crash_matrix() {
    let run = Halted::new(Lab::with_swarm_store(NET).await);
    let lab = &run.lab;
    let log = lab.dir.join("updates");
    let t0 = Instant::now();
    lab.apply(Path::new(&spec(lab, &record(&log, "v1"), "5m")), true);
    let up = t0.elapsed();
    assert_converged_shape(lab).await;
    let before = machines(lab);
    assert_eq!(before.len(), 5, "{before:?}");

    // Rolls (a new release each) until every point fired, at most ROUNDS:
    // points that share a commit with one fired before fire at a later
    // member, or in the next roll.
    let stop = Arc::new(AtomicBool::new(false));
    let seen = Arc::new(Mutex::new(Watch::default()));
    let watcher = watch(lab.dir.clone(), stop.clone(), seen.clone());
    let mut m = crash::Matrix::new(POINTS);
    let mut rolls = Vec::new();
    for round in 1..=ROUNDS {
        let release = format!("v{}", round + 1);
        let store = lab.store().await;
        let old_events = crash::events_now(&*store).await;
        lab.apply(Path::new(&spec(lab, &record(&log, &release), "5m")), false);
        let rev = store.desired().await.unwrap().unwrap().rev;
        let in_place = |op: &drover_core::journal::Operation| op.in_place;
        let took = m
            .roll(lab, rev, old_events, in_place, Duration::from_secs(600))
            .await;
        eprintln!("ROLL {round} ({release}): {:.1}s", took.as_secs_f64());
        rolls.push((release, took));
        if m.missed().is_empty() {
            break;
        }
    }
    stop.store(true, Ordering::SeqCst);
    watcher.await.unwrap();
    m.print();
    assert!(
        m.missed().is_empty(),
        "{} of {} kill points reached in {} rolls; missed {:?}",
        m.kills.len(),
        POINTS.len(),
        rolls.len(),
        m.missed()
    );

    // Completed at the declared shape (3 reachable managers, 2 Ready
    // workers, every node backed by a machine, every machine on the new
    // config, 5 in all), every node back in service.
    let nodes = assert_converged_shape(lab).await;
    for n in &nodes {
        assert_eq!(n.availability, Availability::Active, "{n:#?}");
    }
    // The same machines, the managers' raft members among them.
    assert_eq!(machines(lab), before, "the machines were kept");
    let records = lab.records();
    for n in nodes.iter().filter(|n| n.raft.is_some()) {
        let r = records
            .iter()
            .find(|r| r.tags.get("drover.link") == n.link.as_ref())
            .expect("its machine");
        assert_eq!(before.get(&r.id).map(String::as_str), Some("managers"));
    }
    crash::assert_nothing_left_behind(lab).await;
    crash::assert_no_secret_in_the_swarm_store(lab).await;

    // In every roll every member updated once, out of the raft and
    // drained; each machine's mark says the last config's update is done.
    let hashes = support::desired_hashes(lab);
    let runs = updates(&log);
    let provider = lab.provider();
    for (id, group) in &before {
        for (release, _) in &rolls {
            let mine: Vec<_> = runs
                .iter()
                .filter(|u| &u.release == release && &u.instance == id)
                .collect();
            assert_eq!(
                mine.len(),
                1,
                "{id}'s update to {release} ran once: {runs:#?}"
            );
            assert_eq!(
                (mine[0].manager.as_str(), mine[0].availability.as_str()),
                ("false", "drain"),
                "{id}'s update to {release} ran out of the raft and drained"
            );
        }
        let marks: Vec<String> = std::fs::read_dir(provider.update_dir(id))
            .unwrap_or_else(|e| panic!("{id} has no update directory: {e}"))
            .filter_map(|e| e.ok())
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|n| n.starts_with("updated-"))
            .collect();
        assert!(
            marks.len() == 1 && marks[0].ends_with(&format!("-{}", hashes[group])),
            "{id}'s mark says its update to {} is done: {marks:?}",
            hashes[group]
        );
    }

    let w = std::mem::take(&mut *seen.lock().unwrap());
    eprintln!(
        "PHASES: bring-up {:.1}s, in-place rolls {:?} with {} controller kills; {}",
        up.as_secs_f64(),
        rolls
            .iter()
            .map(|(r, t)| format!("{r} {:.1}s", t.as_secs_f64()))
            .collect::<Vec<_>>(),
        m.kills.len(),
        w.summary()
    );
    w.assert_quorum_kept();
}
