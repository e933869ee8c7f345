//! Commands follow the swarm (issue 38, item 7), on real engines with the
//! swarm store: a command given one manager's engine keeps going when that
//! manager leaves, and says it cannot see a swarm rather than that none
//! exists.
//!
//! One lab (127.0.175.x), 3 managers and no workers, `update: {watch: 2s}`:
//! - `plan --store swarm:E` given a manager's engine and no `--local-dir`
//!   sees the swarm through E (3 managers, never "no swarm exists yet");
//! - `apply --wait` given one manager's engine follows a roll that
//!   replaces every manager, that one included, to its end (exit 0);
//! - `plan --store` given that engine, now stopped, and no `--local-dir`
//!   says it cannot see the swarm;
//! - `status`, while the acting controller is stopped (SIGSTOP) and its
//!   last document grows old, says so at the top and answers the swarm
//!   line from a live manager's own view;
//! - `destroy managers` given a follower's engine ends the swarm.
//!
//! Everything started is stopped by PID (StateGuard, Etcd drop), also on
//! failure. Wall times are printed, never asserted.

mod support;

use std::time::Instant;
use support::{Lab, bounded, leader};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn commands_follow_the_swarm_through_a_manager_roll_and_a_teardown() {
    bounded(600, follow_the_swarm()).await;
}

/// Three managers, no workers, each release a label (a pets roll).
fn managers(lab: &Lab, release: &str) -> String {
    let n = lab.net;
    let text = format!(
        "groups:
- name: managers
  role: manager
  allocation:
    logical_ids: [127.0.{n}.11, 127.0.{n}.12, 127.0.{n}.13]
  instance: {{provider: local}}
  flavor: {{engine_labels: {{release: {release}}}}}
  update: {{watch: 2s, min_fault_tolerance: 0}}
  health: {{startup_timeout: 60s}}
"
    );
    let path = lab.dir.join(format!("managers-{release}.yaml"));
    std::fs::write(&path, text).expect("write spec");
    path.to_str().expect("UTF-8").to_string()
}

/// The acting controller (the leader machine's) stopped with SIGSTOP, and
/// continued when dropped (also on failure).
struct Stopped(i32);

impl Drop for Stopped {
    fn drop(&mut self) {
        let pid = nix::unistd::Pid::from_raw(self.0);
        let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGCONT);
    }
}

/// `status` past two passes of the acting controller's silence: the
/// published document is old, and said to be; the swarm line is asked now.
async fn old_status_is_said_and_the_swarm_asked_live(lab: &Lab) {
    let nodes = lab.nodes().await.expect("the swarm answers");
    let link = leader(&nodes)
        .link
        .clone()
        .expect("the leader carries a link");
    let record = lab
        .records()
        .into_iter()
        .find(|r| r.tags.get("drover.link") == Some(&link))
        .expect("the leader's machine");
    let pid = drover_local::procs::group_members(record.pgid.expect("a process group"))
        .into_iter()
        .find(|&p| support::is_controller(p))
        .expect("the acting controller");
    let stopped = Stopped(pid);
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(pid),
        nix::sys::signal::Signal::SIGSTOP,
    )
    .expect("SIGSTOP");
    tokio::time::sleep(std::time::Duration::from_secs(7)).await;
    let store = format!("swarm:{}", record.endpoint());
    let out = lab.drover(&["status", "--store", &store]);
    drop(stopped);
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert_eq!(out.status.code(), Some(0), "{text}");
    assert!(
        text.starts_with("NOTE: this status was published"),
        "the old document is not said to be old: {text}"
    );
    assert!(
        text.contains("swarm (live): 3 managers, 3 reachable, fault tolerance 1"),
        "{text}"
    );
}

/// `drover ARGS` with the lab's environment but no `--local-dir`.
fn without_machines(lab: &Lab, args: &[&str]) -> std::process::Output {
    let mut cmd = lab.drover_command(args);
    cmd.env_remove("DROVER_LOCAL_DIR");
    support::run_printed(cmd, args)
}

async fn follow_the_swarm() {
    let lab = Lab::with_swarm_store(175).await;
    let t0 = Instant::now();
    lab.apply(std::path::Path::new(&managers(&lab, "one")), true);
    let up = t0.elapsed();
    let nodes = lab.nodes().await.expect("the swarm answers");
    let leader_link = leader(&nodes).link.clone();
    let follower = lab
        .records()
        .into_iter()
        .find(|r| r.tags.get("drover.link") != leader_link.as_ref())
        .expect("a follower");
    let given = format!("swarm:{}", follower.endpoint());

    // Seen through the engine given alone.
    let two = managers(&lab, "two");
    let out = without_machines(&lab, &["plan", "-f", &two, "--store", &given]);
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert_eq!(out.status.code(), Some(0), "{text}");
    assert!(text.contains("swarm: 3 managers, 3 reachable"), "{text}");

    // The roll replaces the follower whose engine apply was given.
    let t1 = Instant::now();
    let out = lab.drover(&[
        "apply",
        "-f",
        &two,
        "--store",
        &given,
        "--wait",
        "--timeout",
        "6m",
    ]);
    let rolled = t1.elapsed();
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert_eq!(
        out.status.code(),
        Some(0),
        "apply --wait did not follow the roll: {text}"
    );
    assert!(
        lab.records().iter().all(|r| r.id != follower.id),
        "the roll did not replace the engine apply was given"
    );

    // That engine is stopped now: the swarm runs, and cannot be seen from
    // what this command was given.
    let out = without_machines(&lab, &["plan", "-f", &two, "--store", &given]);
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(text.contains("swarm: cannot be seen from here"), "{text}");
    assert!(!text.contains("no swarm exists yet"), "{text}");
    assert_ne!(out.status.code(), Some(0), "{text}");

    old_status_is_said_and_the_swarm_asked_live(&lab).await;

    // Torn down through a follower's engine: it is retired first, and the
    // leader is found where it is needed.
    let nodes = lab.nodes().await.expect("the swarm answers");
    let leader_link = leader(&nodes).link.clone();
    let follower = lab
        .records()
        .into_iter()
        .find(|r| r.tags.get("drover.link") != leader_link.as_ref())
        .expect("a follower");
    let given = format!("swarm:{}", follower.endpoint());
    let t2 = Instant::now();
    let out = lab.drover(&[
        "destroy",
        "managers",
        "--yes",
        "--timeout",
        "4m",
        "--store",
        &given,
    ]);
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert_eq!(out.status.code(), Some(0), "{text}");
    assert!(text.contains("the swarm is gone"), "{text}");
    assert!(lab.records().is_empty(), "{:#?}", lab.records());
    eprintln!(
        "PHASES: bring-up {:.1}s, roll followed {:.1}s, teardown {:.1}s",
        up.as_secs_f64(),
        rolled.as_secs_f64(),
        t2.elapsed().as_secs_f64()
    );
}
