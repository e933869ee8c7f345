//! Lifecycle hooks on real engines (issue 21): a swarm of 1 manager and 2
//! workers whose group declares all four hooks, each a script that records
//! its calls. During a roll of the workers the acting controller is killed
//! while the first `pre_drain` runs: its successor calls the hook again
//! with the same idempotency key, and the roll completes with every hook
//! called around its step. Then a hook that fails (a change freeze) blocks
//! the group with the hook's own words in `drover status`, and once it
//! passes the roll goes on by itself.
//!
//! Everything started is stopped by PID (controllers by the guard, engines
//! and etcd by the lab, the hook's sleeping process by the PID it wrote),
//! also on failure.

mod support;

use std::collections::BTreeMap;
use std::path::Path;
use std::time::{Duration, Instant};
use support::nemesis::HaltControllers;
use support::{Lab, bounded, wait_converged, wait_for};

/// The hook script: one line per call (point, key, machine, node, PID)
/// and its environment's names; a change freeze while `freeze` exists;
/// the first `pre_drain` sleeps (as its own PID) until the test kills it.
const HOOK: &str = r#"#!/bin/sh
dir=$(dirname "$0")
echo "$DROVER_HOOK $DROVER_IDEMPOTENCY_KEY ${DROVER_INSTANCE:--} ${DROVER_NODE:--} $$" >>"$dir/calls"
env >>"$dir/env"
echo >>"$dir/env"
if [ -e "$dir/freeze" ]; then
  echo "change freeze until 06:00" >&2
  exit 1
fi
if [ "$DROVER_HOOK" = pre_drain ] && [ ! -e "$dir/slept" ]; then
  touch "$dir/slept"
  exec sleep 300
fi
echo "recorded $DROVER_IDEMPOTENCY_KEY"
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hooks_run_around_their_steps_and_again_after_a_controller_crash() {
    bounded(900, hooks_kept()).await;
}

struct Run {
    // Field order = drop order: the controllers first, then the sleeping
    // hook, then the lab's engines and etcd.
    _halt: HaltControllers,
    sleeper: Sleeper,
    lab: Lab,
}

/// Kills the hook process the test left sleeping, by the PID it wrote.
#[derive(Default)]
struct Sleeper(Option<i32>);

impl Sleeper {
    fn kill(&mut self) {
        if let Some(pid) = self.0.take() {
            let _ = nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(pid),
                nix::sys::signal::Signal::SIGKILL,
            );
        }
    }
}

impl Drop for Sleeper {
    fn drop(&mut self) {
        self.kill();
    }
}

async fn hooks_kept() {
    let lab = Lab::new(111).await;
    let mut run = Run {
        _halt: HaltControllers(lab.dir.clone()),
        sleeper: Sleeper::default(),
        lab,
    };
    let lab = &run.lab;
    let hooks = lab.dir.join("hooks");
    std::fs::create_dir_all(&hooks).unwrap();
    let script = hooks.join("hook.sh");
    std::fs::write(&script, HOOK).unwrap();
    std::fs::set_permissions(&script, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();

    let out = lab.drover(&[
        "bootstrap",
        "-f",
        &spec(lab, &script, "one"),
        "--wait",
        "--timeout",
        "8m",
    ]);
    assert_eq!(out.status.code(), Some(0), "bootstrap failed");
    let manager = lab
        .records()
        .into_iter()
        .find(|r| r.tags.get("drover.group").map(String::as_str) == Some("managers"))
        .and_then(|r| r.tags.get("drover.link").cloned())
        .expect("the manager's link");

    // The roll; the acting controller dies while the first pre_drain runs.
    let t0 = Instant::now();
    let out = lab.drover(&["apply", "-f", &spec(lab, &script, "two")]);
    assert_eq!(out.status.code(), Some(0), "apply failed");
    let first = wait_for(Duration::from_secs(120), || {
        calls(&hooks).into_iter().find(|c| c.point == "pre_drain")
    });
    run.sleeper.0 = Some(first.pid);
    let killed = support::kill_controller(lab, &manager).expect("the acting controller");
    run.sleeper.kill();
    eprintln!(
        "killed controller {killed} during hook {} ({:.1}s into the roll)",
        first.key,
        t0.elapsed().as_secs_f64()
    );
    wait_converged(lab, Duration::from_secs(300));
    eprintln!(
        "PHASE: roll with hooks and a controller crash {:.1}s",
        t0.elapsed().as_secs_f64()
    );

    let seen = calls(&hooks);
    let again = seen.iter().filter(|c| c.key == first.key).count();
    assert!(
        again >= 2,
        "pre_drain {} was not called again: {seen:#?}",
        first.key
    );
    // Every worker replaced had its four hooks, each key's points in order.
    let mut by_op: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for c in &seen {
        let op = c.key.split('/').next().unwrap_or_default();
        let points = by_op.entry(op).or_default();
        if points.last() != Some(&c.point.as_str()) {
            points.push(&c.point);
        }
    }
    let ops: Vec<_> = by_op.iter().filter(|(_, p)| p[0] == "pre_drain").collect();
    assert_eq!(ops.len(), 2, "two workers rolled: {by_op:#?}");
    for (op, points) in &ops {
        assert_eq!(
            **points,
            ["pre_drain", "pre_destroy", "post_provision", "post_join"],
            "operation {op}"
        );
    }
    assert!(
        seen.iter()
            .filter(|c| c.point == "pre_drain" || c.point == "pre_destroy")
            .all(|c| c.instance != "-" && c.node != "-"),
        "a leaving member's hooks name its machine and node: {seen:#?}"
    );
    // The hook's environment holds its facts, never the controller's own
    // settings (the store's address, the engine, a join token).
    let env = std::fs::read_to_string(hooks.join("env")).unwrap();
    let store = lab.store_url();
    for secret in [
        "DROVER_STORE",
        "DROVER_JOIN_TOKEN",
        "DOCKER_HOST",
        "DROVER_LOCAL_DIR",
        store.as_str(),
    ] {
        assert!(!env.contains(secret), "{secret} reached a hook: {env}");
    }
    assert!(env.contains("DROVER_IDEMPOTENCY_KEY") && env.contains("DROVER_NODE"));
    // What the hooks said is in the audit log.
    let events = lab.drover(&["events", "--since", "1h"]);
    let events = String::from_utf8_lossy(&events.stdout);
    assert!(events.contains("recorded "), "{events}");

    // A change freeze: the hook fails, the group is blocked with its words.
    std::fs::write(hooks.join("freeze"), "").unwrap();
    let t1 = Instant::now();
    let out = lab.drover(&["apply", "-f", &spec(lab, &script, "three")]);
    assert_eq!(out.status.code(), Some(0), "apply failed");
    wait_for(Duration::from_secs(120), || {
        let out = lab.drover(&["status", "workers"]);
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        text.contains("change freeze until 06:00").then_some(())
    });
    eprintln!(
        "blocked by the hook after {:.1}s",
        t1.elapsed().as_secs_f64()
    );
    std::fs::remove_file(hooks.join("freeze")).unwrap();
    wait_converged(lab, Duration::from_secs(300));
    eprintln!("PHASE: freeze and thaw {:.1}s", t1.elapsed().as_secs_f64());
}

/// The cluster file: 1 manager, 2 workers (release `label`) rolled one
/// at a time, every hook the script.
fn spec(lab: &Lab, script: &Path, label: &str) -> String {
    let hook = format!("{{command: [{}], timeout: 5m}}", script.display());
    let workers = format!(
        "  flavor: {{engine_labels: {{release: {label}}}}}
  update: {{max_in_flight: 1, canaries: 0, watch: 1s, step_timeout: 10m}}
  hooks:
    pre_drain: {hook}
    pre_destroy: {hook}
    post_provision: {hook}
    post_join: {hook}
"
    );
    lab.one_manager_spec(label, 2, &workers)
}

#[derive(Debug)]
struct Call {
    point: String,
    key: String,
    instance: String,
    node: String,
    pid: i32,
}

fn calls(dir: &Path) -> Vec<Call> {
    let text = std::fs::read_to_string(dir.join("calls")).unwrap_or_default();
    text.lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split(' ').collect();
            Some(Call {
                point: f.first()?.to_string(),
                key: f.get(1)?.to_string(),
                instance: f.get(2)?.to_string(),
                node: f.get(3)?.to_string(),
                pid: f.get(4)?.parse().ok()?,
            })
        })
        .collect()
}
