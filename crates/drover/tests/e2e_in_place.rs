//! `update.strategy: in_place` on real engines (issue 39): 3 pet managers
//! with a spare slot and 2 workers on the local provider, whose update
//! command runs on this host against the member's engine (the local
//! provider's machines are this host's processes) and whose engines are
//! restarted after it by their supervisor.
//!
//! 1. A roll updates every machine where it is: the same machines after,
//!    each tagged with the new config; every manager's update ran while
//!    its engine was out of the raft and every update while its node was
//!    drained; managers first, the leader last; the 200 ms quorum watcher
//!    sees no violation; the acting controller is killed during an update
//!    and its successor finishes the roll.
//! 2. A command that fails leaves its machine out of service and blocks
//!    the group with the command's exit status and last line, nothing
//!    else touched; a command that hangs is stopped at its timeout and
//!    blocks; `drover replace` replaces the failed machine by a new one; a
//!    fixed command rolls on to the end.
//!
//! Engines, controllers and etcd are stopped by PID by the lab, also on
//! failure.

mod support;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use support::in_place::{Update, machines, record, spec, updates};
use support::nemesis::Halted;
use support::{Lab, Watch, bounded, wait_converged, wait_for};

const NET: u8 = 177;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn machines_are_updated_where_they_are_and_a_failed_update_blocks() {
    bounded(1500, in_place()).await;
}

async fn in_place() {
    let run = Halted::new(Lab::new(NET).await);
    let lab = &run.lab;
    let log = lab.dir.join("updates");
    let out = lab.drover(&[
        "bootstrap",
        "-f",
        &spec(lab, &record(&log, "v1"), "5m"),
        "--wait",
        "--timeout",
        "8m",
    ]);
    assert_eq!(out.status.code(), Some(0), "bootstrap failed");
    let before = machines(lab);
    assert_eq!(before.len(), 5, "{before:?}");

    // 1. The roll, under the watcher; the acting controller killed while
    // the first update runs (the command sleeps 3 s).
    let stop = Arc::new(AtomicBool::new(false));
    let seen = Arc::new(Mutex::new(Watch::default()));
    let watcher = support::watch(lab.dir.clone(), stop.clone(), seen.clone());
    let t0 = Instant::now();
    apply(lab, &spec(lab, &record(&log, "v2"), "5m"));
    wait_telling(lab, Duration::from_secs(120), || {
        updates(&log)
            .iter()
            .any(|u| u.release == "v2")
            .then_some(())
    });
    let leader = leader_link(lab).await;
    let killed = support::kill_controller(lab, &leader).expect("the acting controller");
    eprintln!(
        "killed the acting controller {killed} during the first update, {:.1}s into the roll",
        t0.elapsed().as_secs_f64()
    );
    wait_converged(lab, Duration::from_secs(600));
    let roll = t0.elapsed();
    stop.store(true, Ordering::SeqCst);
    watcher.await.unwrap();
    let seen = seen.lock().unwrap();
    eprintln!("{}", seen.summary());
    seen.assert_quorum_kept();
    eprintln!("MEASURED in place: a roll of 3+2 machines {roll:?}");

    let after = machines(lab);
    for (id, group) in &before {
        assert_eq!(after.get(id), Some(group), "{id} was kept: {after:?}");
    }
    let hashes = support::desired_hashes(lab);
    for r in lab.records() {
        let group = r.tags.get("drover.group").cloned().unwrap_or_default();
        if group == "managers" && !before.contains_key(&r.id) {
            continue; // the spare slot's temporary member, retired
        }
        assert_eq!(r.tags.get("drover.config"), hashes.get(&group), "{}", r.id);
    }
    let v2: Vec<Update> = updates(&log)
        .into_iter()
        .filter(|u| u.release == "v2")
        .collect();
    for (id, group) in &before {
        let mine: Vec<&Update> = v2.iter().filter(|u| &u.instance == id).collect();
        assert!(!mine.is_empty(), "{id} was updated: {v2:#?}");
        for u in mine {
            assert_eq!(
                u.manager, "false",
                "{id} ran its update as a raft member: {u:?}"
            );
            assert_eq!(
                u.availability, "drain",
                "{id} ran its update in service: {u:?}"
            );
            let _ = group;
        }
    }
    // Managers first, the leader last.
    let first_worker = v2.iter().position(|u| before[&u.instance] == "workers");
    let last_manager = v2.iter().rposition(|u| before[&u.instance] == "managers");
    assert!(first_worker > last_manager, "managers first: {v2:#?}");
    let last = &v2[last_manager.expect("a manager was updated")];
    let leader_machine = lab
        .records()
        .into_iter()
        .find(|r| r.tags.get("drover.link") == Some(&leader))
        .map(|r| r.id);
    assert_eq!(
        Some(&last.instance),
        leader_machine.as_ref(),
        "the leader last: {v2:#?}"
    );

    // 2. A failing command: blocked with its status and last line.
    let failing = "echo 'E: Unable to locate package docker.io=99'; exit 3";
    apply(lab, &spec(lab, failing, "5m"));
    let said = wait_for(Duration::from_secs(180), || {
        let out = lab.drover(&["status", "managers"]);
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        text.contains("exited with status 3").then_some(text)
    });
    assert!(
        said.contains("E: Unable to locate package docker.io=99"),
        "{said}"
    );
    let failed = blocked_machine(&said);
    // Nothing else touched: every machine still runs (beside them the
    // spare slot's temporary member, which joined before the update).
    let now = machines(lab);
    assert!(before.keys().all(|id| now.contains_key(id)), "{now:?}");
    assert_eq!(now.len(), 6, "{now:?}");
    // The hanging command: stopped at its timeout, blocked.
    apply(lab, &spec(lab, "sleep 600", "3s"));
    let said = wait_for(Duration::from_secs(180), || {
        let out = lab.drover(&["status", "managers"]);
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        text.contains("ran past its timeout").then_some(text)
    });
    assert_eq!(blocked_machine(&said), failed, "the same machine: {said}");
    // The operator replaces it: a new machine takes its slot.
    let out = lab.drover(&["replace", &failed]);
    assert_eq!(out.status.code(), Some(0), "replace failed");
    wait_for(Duration::from_secs(240), || {
        (!machines(lab).contains_key(&failed)).then_some(())
    });
    // A fixed command rolls the rest to the end.
    apply(lab, &spec(lab, &record(&log, "v3"), "5m"));
    wait_converged(lab, Duration::from_secs(600));
    assert_eq!(machines(lab).len(), 5);
}

/// The machine a blocked group's reason names (`the in-place update of
/// ID (`).
fn blocked_machine(status: &str) -> String {
    let at = status
        .find("the in-place update of ")
        .unwrap_or_else(|| panic!("no blocked update in: {status}"));
    status[at + "the in-place update of ".len()..]
        .split(' ')
        .next()
        .unwrap_or_default()
        .to_string()
}

async fn leader_link(lab: &Lab) -> String {
    let nodes = lab.nodes().await.expect("the swarm answers");
    support::leader(&nodes)
        .link
        .clone()
        .expect("the leader's link")
}

fn apply(lab: &Lab, spec: &str) {
    let out = lab.drover(&["apply", "-f", spec]);
    assert_eq!(out.status.code(), Some(0), "apply failed");
}

/// [`wait_for`], printing what drover says (status, events) when it waited
/// in vain.
fn wait_telling<T>(lab: &Lab, limit: Duration, mut f: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + limit;
    loop {
        if let Some(t) = f() {
            return t;
        }
        if Instant::now() >= deadline {
            lab.drover(&["status"]);
            lab.drover(&["events", "--since", "1h"]);
            panic!("waited {limit:?} in vain");
        }
        std::thread::sleep(Duration::from_millis(300));
    }
}
