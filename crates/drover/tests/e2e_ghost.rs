//! Issue 36, item 3, on real engines (127.0.154.x): a roll of 3 pet
//! managers (with a spare slot) whose leader's engine is killed (`kill -9`,
//! restarted by its machine's supervisor in 0.5 s) the moment its own
//! demotion is accepted — the instant that, on the demo cluster, left a
//! ghost raft member (a worker by spec, still in the raft, unreachable) and
//! a next leader waiting for it for ever at fault tolerance 0. The roll
//! must converge and fault tolerance be back to 1 within [`BOUND`] of the
//! kill; whether the ghost appeared (and was healed) is printed, from the
//! events, and a ghost that stayed must have had a heal started. On a
//! loaded machine the demotion may be seen only after the roll destroyed
//! the machine: such a run kills nothing and says so (`MISSED`). The
//! ghost itself is made reliably by `crates/swarm/tests/ghost.rs`.
//! Everything started is stopped by PID when the lab drops.

mod support;

use std::time::{Duration, Instant};
use support::{Lab, bounded, observe_endpoints};

const NET: u8 = 154;
/// From the demotion seen to the kill.
const KILL_AFTER: Duration = Duration::from_millis(600);
/// From the kill to the roll converged with fault tolerance 1: the ghost
/// (~8 s to form, `GHOST_BOUND` 10 s), its heal (< 1 s), the hand-over's
/// wait for the leave (`LEAVE_BOUND` 45 s: the ghost's engine never left),
/// the replacement's join and watch, the spare's retirement. Measured
/// here: 15.7 s (killed as the demotion was seen) and 5.6 s (600 ms
/// after); neither run formed a ghost (printed), so the bound is that
/// sum's, not a measurement of the ghost's path.
const BOUND: Duration = Duration::from_secs(240);

fn spec_text(release: &str) -> String {
    let n = NET;
    format!(
        "groups:
- name: managers
  role: manager
  allocation: {{logical_ids: [127.0.{n}.11, 127.0.{n}.12, 127.0.{n}.13], spare_ids: [127.0.{n}.14]}}
  instance: {{provider: local}}
  flavor: {{engine_labels: {{release: {release}}}}}
  update: {{watch: 3s}}
  health: {{startup_timeout: 60s}}
"
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_leader_killed_right_after_its_self_demotion_still_lets_the_roll_end() {
    bounded(900, async {
        let lab = Lab::new(NET).await;
        let write = |release: &str| {
            let path = lab.dir.join(format!("ghost-{release}.yaml"));
            std::fs::write(&path, spec_text(release)).expect("write spec");
            path
        };
        let r0 = write("r0");
        let r0 = r0.to_str().expect("utf-8 path");
        let bootstrap = ["apply", "-f", r0, "--timeout", "8m", "--wait"];
        let out = lab.drover_with(&bootstrap, &[("DROVER_LOG", "info")]);
        assert_eq!(out.status.code(), Some(0), "bootstrap apply failed");

        let nodes = lab.nodes().await.expect("the swarm answers");
        let leader = support::leader(&nodes).clone();
        let records = lab.records();
        let leader_machine = records
            .iter()
            .find(|r| r.tags.get("drover.link") == leader.link.as_ref())
            .expect("the leader's machine")
            .clone();
        eprintln!("leader {} on {}", leader.id, leader_machine.id);

        let r1 = write("r1");
        let mut apply = lab
            .drover_command(&[
                "apply",
                "-f",
                r1.to_str().unwrap(),
                "--wait",
                "--timeout",
                "8m",
            ])
            .spawn()
            .expect("spawn apply");
        let committed = support::epoch_ms();

        // Watched through the other managers' engines only: asking the
        // demoting leader's own engine slows its manager's shutdown.
        let demoted = Instant::now() + Duration::from_secs(400);
        loop {
            assert!(Instant::now() < demoted, "the leader never demoted itself");
            let others: Vec<String> = lab
                .records()
                .iter()
                .filter(|r| {
                    r.id != leader_machine.id
                        && r.tags.get("drover.group").map(String::as_str) == Some("managers")
                })
                .map(drover_local::InstanceRecord::endpoint)
                .collect();
            // Demoted, or already gone from the list (the hand-over ended
            // between two samples on a loaded machine), or the roll over.
            if let Ok(nodes) = observe_endpoints(&others).await
                && nodes
                    .iter()
                    .all(|n| n.id != leader.id || !n.manager_role)
            {
                break;
            }
            if apply.try_wait().expect("apply").is_some() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        // 600 ms after: the delay that made a ghost at the first try in
        // `crates/swarm/tests/ghost.rs` (an immediate kill did not).
        tokio::time::sleep(KILL_AFTER).await;
        // On a loaded machine the demotion may be seen late, after the
        // hand-over ended and the roll destroyed the machine: then there is
        // nothing to kill, and the roll must still end (said, not hidden).
        match support::nemesis::engine_pid(&leader_machine) {
            Some(pid) => {
                let _ = nix::sys::signal::kill(
                    nix::unistd::Pid::from_raw(pid),
                    nix::sys::signal::Signal::SIGKILL,
                );
                eprintln!("killed the leader's engine (PID {pid}) right after its self-demotion");
            }
            None => eprintln!(
                "MISSED: the leader's engine was gone {KILL_AFTER:?} after its demotion was seen (its machine already destroyed by the roll): nothing killed"
            ),
        }
        let killed = Instant::now();

        // Sampled every 500 ms until the roll ends: how long the raft held a
        // ghost (a worker by spec, unreachable in it).
        let mut ghost_seen: Option<(Duration, Duration)> = None;
        let status = loop {
            if let Some(s) = apply.try_wait().expect("apply") {
                break s;
            }
            assert!(
                killed.elapsed() < BOUND,
                "the roll did not end within {BOUND:?}"
            );
            if let Some(nodes) = lab.nodes().await
                && nodes
                    .iter()
                    .any(|n| !n.manager_role && n.raft.as_ref().is_some_and(|r| !r.reachable))
            {
                let at = killed.elapsed();
                ghost_seen = Some(ghost_seen.map_or((at, at), |(first, _)| (first, at)));
            }
            tokio::time::sleep(Duration::from_millis(500)).await;
        };
        let converged = killed.elapsed();
        if !status.success() {
            lab.drover(&["status"]);
            lab.drover(&["events", "--since", "15m"]);
        }
        assert!(status.success(), "the roll did not converge after the kill");
        let nodes = lab.nodes().await.expect("the swarm answers");
        assert_eq!(support::fault_tolerance(&nodes), 1, "{nodes:#?}");
        let store = lab.store().await;
        let events = store.events(committed).await.expect("events");
        let heals = events
            .iter()
            .filter(|e| e.reason.starts_with("heal ghost raft member"))
            .count();
        eprintln!(
            "converged with fault tolerance 1 {converged:?} after the kill (bound {BOUND:?}); \
             ghost seen (first, last after the kill): {ghost_seen:?}; heal events: {heals}"
        );
        assert!(converged < BOUND);
        if ghost_seen.is_some_and(|(first, last)| last - first > Duration::from_secs(15)) {
            assert!(heals > 0, "a ghost stayed, yet no heal was started");
        }
    })
    .await;
}
