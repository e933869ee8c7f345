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
//!
//! The kill loop and the checks after it are `support::crash`'s, shared
//! with `e2e_crash_in_place` (the same matrix for updates in place).

mod support;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use support::crash::{self, Point, point};
use support::{Lab, Watch, assert_converged_shape, bounded, watch};

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
    let before = crash::events_now(&*store).await;

    let stop = Arc::new(AtomicBool::new(false));
    let seen = Arc::new(Mutex::new(Watch::default()));
    let watcher = watch(lab.dir.clone(), stop.clone(), seen.clone());
    lab.apply(&lab.spec("two"), false);
    let rev = store.desired().await.unwrap().unwrap().rev;

    let mut m = crash::Matrix::new(POINTS);
    let rolled = m
        .roll(&lab, rev, before, |_| true, Duration::from_secs(600))
        .await;
    stop.store(true, Ordering::SeqCst);
    watcher.await.unwrap();

    m.print();
    assert!(
        m.kills.len() >= 10,
        "only {} kill points reached; missed {:?}",
        m.kills.len(),
        m.missed()
    );

    // Completed, at the declared shape: 3 managers all reachable, 2 Ready
    // workers, no Down/Unknown node, every node backed by a machine, every
    // machine on the new config, 5 machines in all.
    assert_converged_shape(&lab).await;
    crash::assert_nothing_left_behind(&lab).await;
    crash::assert_no_secret_in_the_swarm_store(&lab).await;

    let w = std::mem::take(&mut *seen.lock().unwrap());
    eprintln!(
        "PHASES: bring-up {:.1}s, rollout with {} controller kills {:.1}s; missed points {:?}; {}",
        up.as_secs_f64(),
        m.kills.len(),
        rolled.as_secs_f64(),
        m.missed(),
        w.summary()
    );
    w.assert_quorum_kept();
}
