//! An engine upgrade by replacement on Incus machines (issue 39): a swarm
//! of 3 pet managers (a spare slot) and 2 workers on Debian 12 machines
//! (`docker.io` 20.10) is rolled to Debian 13 machines (26.1) by changing
//! the groups' image. Before, during and after, every node's engine
//! version is read from the swarm: 20.10 on all before, both versions side
//! by side during, 26.1 on all after; `drover plan` shows each member's
//! version and the order (managers first, the leader last) before anything
//! happens; the 200 ms quorum watcher sees no violation; `status` and
//! `events` tell the story.
//!
//! Its own bridge `drvt66` (10.203.66.0/24, NAT and routing off); the lab
//! deletes every machine on it and the bridge when it ends, also when the
//! test fails.

#[path = "e2e_incus/split.rs"]
mod split;
mod support;

use drover_incus::testkit::{Lab, Suite, image_of};
use std::collections::BTreeSet;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};
use support::{bounded, budgeted, observe_endpoints};

const NET: &str = "drvt66";
const SUBNET: &str = "10.203.66";

/// The cluster file on `image`: drover mounted from the host on every
/// machine, the managers' controllers on the swarm store.
fn spec(image: &str) -> String {
    let bin = env!("CARGO_BIN_EXE_drover");
    let props = format!(
        "{{image: {image}, network: {NET}, storage_pool: drover, memory: 1GiB, devices: {{drover-bin: {{type: disk, source: {bin}, path: /usr/local/bin/drover, readonly: 'true'}}}}}}"
    );
    format!(
        "groups:\n\
         - name: managers\n  role: manager\n  allocation:\n    logical_ids: [{SUBNET}.11, {SUBNET}.12, {SUBNET}.13]\n    spare_ids: [{SUBNET}.14]\n  instance:\n    provider: incus\n    properties: {props}\n\
         - name: workers\n  role: worker\n  allocation: {{size: 2}}\n  instance:\n    provider: incus\n    properties: {props}\n"
    )
}

/// The engine sockets of the lab's machines.
fn sockets(lab: &Lab) -> Vec<String> {
    lab.machines()
        .iter()
        .map(|m| {
            format!(
                "unix://{}",
                lab.engine_dir().join(format!("{m}.sock")).display()
            )
        })
        .collect()
}

/// Each ready node's engine version, as the swarm lists it.
async fn versions(lab: &Lab) -> Vec<String> {
    let nodes = observe_endpoints(&sockets(lab)).await.unwrap_or_default();
    nodes
        .iter()
        .filter(|n| n.state == drover_core::model::NodeState::Ready)
        .filter_map(|n| n.engine_version.clone())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_swarm_is_rolled_from_engine_20_10_to_26_1_by_new_machines() {
    let lab = Lab::new(NET, SUBNET);
    let _logs = support::IncusLogsOnFailure(&lab);
    bounded(2400, upgrade(&lab)).await;
}

async fn upgrade(lab: &Lab) {
    let engines = lab.engine_dir().to_path_buf();
    let files = tempfile::tempdir().unwrap();
    let old = files.path().join("bookworm.yaml");
    std::fs::write(&old, spec(&lab.image)).unwrap();
    support::incus_bootstrap(&engines, old.to_str().unwrap());
    let before = until_five(
        lab,
        Suite::Bookworm.engine_series(),
        Duration::from_secs(600),
    )
    .await;

    // A service whose budget the roll keeps, its image on every machine.
    let rootfs = budgeted::rootfs(files.path());
    let mut imported = BTreeSet::new();
    for m in &before {
        assert!(budgeted::import(m, &rootfs), "busybox on {m}");
        imported.insert(m.clone());
    }
    budgeted::create(&sockets(lab));
    support::wait_for(Duration::from_secs(120), || {
        (budgeted::running(&sockets(lab)) == Some(2)).then_some(())
    });

    let new = files.path().join("trixie.yaml");
    std::fs::write(&new, spec(&image_of(Suite::Trixie))).unwrap();
    let store = format!("swarm:{}", sockets(lab)[0]);
    // The plan, before anything: each member's engine now, and the order.
    let plan = support::drover_incus(
        &engines,
        &["plan", "-f", new.to_str().unwrap(), "--store", &store],
    );
    assert!(plan.status.success(), "plan failed");
    let said = String::from_utf8_lossy(&plan.stdout).into_owned();
    let rows: Vec<&str> = said
        .lines()
        .filter(|l| l.contains("replaced by a new machine"))
        .collect();
    assert_eq!(rows.len(), 5, "every member in the order: {said}");
    assert!(
        rows.iter()
            .all(|r| r.contains(Suite::Bookworm.engine_series())),
        "each member's engine version: {said}"
    );
    let managers_first = rows.iter().take(3).all(|r| r.contains("managers"));
    assert!(managers_first, "managers first: {said}");
    assert!(
        rows[2].contains("(the leader: last)"),
        "the leader last: {said}"
    );

    // The roll, under the quorum watcher and a version sampler.
    let watched = budgeted::Watched::start(&engines);
    let recorder = split::Recorder::start(NET);
    let from_ms = support::epoch_ms();
    let t0 = Instant::now();
    let out = support::drover_incus(
        &engines,
        &["apply", "-f", new.to_str().unwrap(), "--store", &store],
    );
    assert!(out.status.success(), "the roll was not committed");
    let mut mixed = false;
    let after = loop {
        let v = versions(lab).await;
        let series: BTreeSet<&str> = v
            .iter()
            .map(|x| {
                if x.starts_with(Suite::Trixie.engine_series()) {
                    "26.1"
                } else {
                    "other"
                }
            })
            .collect();
        mixed |= series.len() == 2;
        let machines = lab.machines();
        // Each new machine gets the image once its engine answers.
        for m in &machines {
            if !imported.contains(m) && budgeted::import(m, &rootfs) {
                imported.insert(m.clone());
            }
        }
        if machines.len() == 5
            && v.len() == 5
            && series == BTreeSet::from(["26.1"])
            && machines.iter().all(|m| !before.contains(m))
            && converged(lab, &engines)
        {
            break machines;
        }
        assert!(
            t0.elapsed() < Duration::from_secs(1500),
            "not rolled to 26.1 within 1500 s: {} machines, versions {v:?}",
            machines.len()
        );
        tokio::time::sleep(Duration::from_secs(1)).await;
    };
    let roll = t0.elapsed();
    let to_ms = support::epoch_ms();
    let boots = recorder.finish();
    watched.assert_kept().await;
    assert!(
        mixed,
        "both engine versions ran side by side during the roll"
    );
    eprintln!("MEASURED incus upgrade 20.10 -> 26.1 by replacement (3+2, a spare slot): {roll:?}");

    // The story, as an operator reads it.
    let store = format!(
        "swarm:unix://{}",
        engines.join(format!("{}.sock", after[0])).display()
    );
    let status = support::drover_incus(&engines, &["status", "--store", &store]);
    let text = String::from_utf8_lossy(&status.stdout).into_owned();
    assert!(text.contains("converged"), "{text}");
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_drover"));
    let args = ["events", "--since", "2h", "--store", &store];
    cmd.args(args).env("RUST_LOG", "warn");
    let events = support::run_printed(cmd, &args);
    let log = String::from_utf8_lossy(&events.stdout).into_owned();
    for m in &before {
        assert!(log.contains(m.as_str()), "the events name {m}: {log}");
    }

    // The roll against its machine-bound minimum (BENCHMARKS.md §9).
    let out = Command::new(env!("CARGO_BIN_EXE_drover"))
        .args([
            "events", "--since", "2h", "--output", "json", "--store", &store,
        ])
        .output()
        .expect("drover events");
    let events: Vec<drover_spi::Event> =
        serde_json::from_slice(&out.stdout).expect("drover events --output json");
    let watch_ms = |group: &str| if group == "managers" { 10_000 } else { 5_000 };
    eprintln!(
        "{}",
        split::Split::new(&events, &boots, from_ms, to_ms, watch_ms)
    );
}

/// Every group converged on its desired config, as the status published
/// in the swarm store (read through whichever machine's engine serves it)
/// says.
fn converged(lab: &Lab, engines: &Path) -> bool {
    for m in lab.machines() {
        let store = format!(
            "swarm:unix://{}",
            engines.join(format!("{m}.sock")).display()
        );
        let out = Command::new(env!("CARGO_BIN_EXE_drover"))
            .args([
                "status",
                "--output",
                "json",
                "--store",
                &store,
                "--incus-engines",
            ])
            .arg(engines)
            .output()
            .expect("drover status");
        let Ok(doc) = serde_json::from_slice::<serde_json::Value>(&out.stdout) else {
            continue;
        };
        let Some(groups) = doc["groups"].as_array() else {
            continue;
        };
        return groups
            .iter()
            .all(|g| g["phase"] == "converged" && g["current"] == g["desired"]);
    }
    false
}

/// Waits until the lab runs 5 machines whose nodes are all Ready on an
/// engine of `series`; the machines.
async fn until_five(lab: &Lab, series: &str, within: Duration) -> Vec<String> {
    let t0 = Instant::now();
    loop {
        let v = versions(lab).await;
        if lab.machines().len() == 5 && v.len() == 5 && v.iter().all(|x| x.starts_with(series)) {
            return lab.machines();
        }
        assert!(
            t0.elapsed() < within,
            "not 5 nodes on {series} within {within:?}: {v:?}"
        );
        tokio::time::sleep(Duration::from_secs(2)).await;
    }
}
