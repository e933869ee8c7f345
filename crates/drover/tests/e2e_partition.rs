//! Issue 36, item 4, on real engines (127.0.155.x): a manager roll whose
//! new manager is told to join through the leader — the first of its join
//! addresses — just as that leader is cut off from the swarm ports
//! (iptables rules and a cgroup, `support::nemesis::Partition`), held for
//! [`CUT`] as the partition on Incus machines was (issue 36: there the new
//! manager's join ended in swarm state `error` and was waited out for the
//! whole `startup_timeout`, counted from the new controller's take-over).
//!
//! The roll must end converged, fault tolerance back to 1, within [`BOUND`]
//! of the cut, the quorum kept throughout (the partitioned engine's own
//! minority view is not asked; a leaderless stretch while the cut is on is
//! an election unless it lasts more than 45 s); and the new manager either
//! joined through another manager it was given (its boot log says the
//! leader's address failed) or was replaced with the reason said (an event
//! naming it as never joined or its join failed). Which one happened, and
//! when, is printed. Everything started is stopped by PID, and the rules
//! deleted, when the lab drops, also on failure.

mod support;

use drover_core::model::tags;
use drover_local::InstanceRecord;
use drover_spi::InstanceProvider;
use std::collections::BTreeSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use support::nemesis::{self, Fault, Partition, Seen};
use support::{Lab, bounded};

const NET: u8 = 155;
/// How long the leader stays cut off (the Incus runs' partition).
const CUT: Duration = Duration::from_secs(60);
/// From the cut to the roll converged with fault tolerance 1: the cut
/// itself, an election (9-24 s), the new manager's join through the cut
/// leader given up after `JOIN_BEFORE_NEXT` (30 s) and the next address
/// tried, or, failing that, its replacement (its join `error` seen for
/// 15 s, or its `startup_timeout` of 60 s from its creation) and the
/// replacement's boot and join; then the rest of the roll of 3 (each ~10 s
/// here); and when the cut leader was replaced while cut off, its node,
/// left Down as a manager by spec out of the raft, is removed after its
/// grace (`health.unhealthy_after`, 30 s here).
const BOUND: Duration = Duration::from_secs(300);

fn spec_text(release: &str) -> String {
    format!(
        "groups:
- name: managers
  role: manager
  allocation: {{size: 3}}
  instance: {{provider: local}}
  flavor: {{engine_labels: {{release: {release}}}}}
  update: {{strategy: surge, watch: 3s}}
  health: {{startup_timeout: 60s, unhealthy_after: 30s}}
"
    )
}

fn managers(lab: &Lab) -> Vec<InstanceRecord> {
    lab.records()
        .into_iter()
        .filter(|r| r.tags.get(tags::GROUP).map(String::as_str) == Some("managers"))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_manager_told_to_join_through_a_leader_cut_off_joins_or_is_replaced() {
    bounded(900, async {
        let lab = Lab::new(NET).await;
        let write = |release: &str| {
            let path = lab.dir.join(format!("partition-{release}.yaml"));
            std::fs::write(&path, spec_text(release)).expect("write spec");
            path
        };
        let r0 = write("r0");
        let bootstrap = ["apply", "-f", r0.to_str().unwrap(), "--wait"];
        let out = lab.drover_with(&bootstrap, &[("DROVER_LOG", "info")]);
        assert_eq!(out.status.code(), Some(0), "bootstrap apply failed");

        let nodes = lab.nodes().await.expect("the swarm answers");
        let leader = support::leader(&nodes).clone();
        let before = managers(&lab);
        let machine = before
            .iter()
            .find(|r| r.tags.get(tags::LINK) == leader.link.as_ref())
            .expect("the leader's machine")
            .clone();
        let pid = nemesis::engine_pid(&machine).expect("the leader's dockerd");
        let peers: Vec<String> = before
            .iter()
            .filter(|r| r.id != machine.id)
            .map(|r| r.address.clone())
            .collect();
        let known: BTreeSet<String> = before.iter().map(|r| r.id.clone()).collect();

        let stop = Arc::new(AtomicBool::new(false));
        let fault = Arc::new(Mutex::new(Fault::default()));
        let seen = Arc::new(Mutex::new(Seen::default()));
        let watcher = nemesis::watch(
            lab.dir.clone(),
            lab.dir.join("keep"),
            stop.clone(),
            fault.clone(),
            seen.clone(),
        );

        let r1 = write("r1");
        let since = support::epoch_ms();
        let mut apply = lab
            .drover_command(&["apply", "-f", r1.to_str().unwrap(), "--wait"])
            .spawn()
            .expect("spawn apply");

        // The roll's first new manager: cut its leader off the moment its
        // machine is recorded, before its engine is up and told to join.
        let appeared = Instant::now() + Duration::from_secs(120);
        let newcomer = loop {
            if let Some(r) = managers(&lab).into_iter().find(|r| !known.contains(&r.id)) {
                break r;
            }
            assert!(Instant::now() < appeared, "the roll made no new manager");
            tokio::time::sleep(Duration::from_millis(25)).await;
        };
        {
            let mut f = fault.lock().unwrap();
            f.on = true;
            f.skip.insert(machine.endpoint());
        }
        let tag = format!("drover-partition-{NET}");
        let cut = Partition::isolate(pid, &machine.address, &peers, &tag);
        let cut_at = Instant::now();
        eprintln!(
            "new manager {} ({}); leader {} on {} ({}) cut off from {peers:?}",
            newcomer.id, newcomer.address, leader.id, machine.id, machine.address
        );

        // Held for CUT; the new manager's boot log read as it goes (its
        // machine may be destroyed later).
        let mut boot_lines = Vec::new();
        while cut_at.elapsed() < CUT {
            if let Ok(Some(log)) = lab.provider().boot_log(&newcomer.id).await {
                boot_lines = log.lines().to_vec();
            }
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
        drop(cut);
        fault.lock().unwrap().skip.clear();
        eprintln!("healed the cut after {:?}", cut_at.elapsed());

        let status = loop {
            if let Some(s) = apply.try_wait().expect("apply") {
                break s;
            }
            if let Ok(Some(log)) = lab.provider().boot_log(&newcomer.id).await {
                boot_lines = log.lines().to_vec();
            }
            if cut_at.elapsed() >= BOUND {
                lab.drover(&["status"]);
                lab.drover(&["events", "--since", "15m"]);
                panic!("the roll did not end within {BOUND:?} of the cut");
            }
            tokio::time::sleep(Duration::from_millis(500)).await;
        };
        let ended = cut_at.elapsed();
        fault.lock().unwrap().on = false;
        if !status.success() {
            lab.drover(&["status"]);
            lab.drover(&["events", "--since", "15m"]);
        }
        assert!(status.success(), "the roll did not converge after the cut");
        stop.store(true, Ordering::SeqCst);
        watcher.await.unwrap();
        let seen = std::mem::take(&mut *seen.lock().unwrap());
        eprintln!("{}", seen.summary());
        seen.watch.assert_quorum_kept();

        let nodes = lab.nodes().await.expect("the swarm answers");
        assert_eq!(support::fault_tolerance(&nodes), 1, "{nodes:#?}");
        let store = lab.store().await;
        let events = store.events(since).await.expect("events");
        let about: Vec<String> = events
            .iter()
            .filter(|e| e.target.as_deref() == Some(newcomer.id.as_str()))
            .map(|e| format!("{:?} {} {}: {}", e.action, e.outcome, e.target.as_deref().unwrap_or(""), e.reason))
            .collect();
        let link = newcomer.tags.get(tags::LINK).cloned();
        let joined = nodes
            .iter()
            .any(|n| n.link == link && n.raft.is_some());
        let leader_failed = format!("joining through {}:2377 failed", machine.address);
        eprintln!(
            "ended {ended:?} after the cut (bound {BOUND:?}); new manager {} {}; its boot log: {boot_lines:#?}; events about it: {about:#?}",
            newcomer.id,
            if joined { "joined" } else { "was replaced" }
        );
        if joined {
            assert!(
                boot_lines.iter().any(|l| l.contains(&leader_failed)),
                "it joined, yet its boot log does not say the cut leader failed: {boot_lines:#?}"
            );
        } else {
            assert!(
                about.iter().any(|e| e.contains("never joined") || e.contains("join")),
                "it was replaced without the reason said: {about:#?}"
            );
        }
    })
    .await;
}
