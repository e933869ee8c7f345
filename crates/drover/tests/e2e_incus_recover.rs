//! A lost manager quorum on Incus machines, diagnosed and recovered by
//! drover through the incus provider (the engines asked through the
//! provider seam, Incus's own instance state first):
//!
//! 1. Two of three managers only paused (`incus pause`, frozen with their
//!    raft state): `recover` refuses, naming them; naming them gone is bad
//!    input; nothing changes (no record, no new cluster); resumed, they
//!    bring the quorum back by themselves.
//! 2. Two of three managers stopped for good (`incus stop --force`, then
//!    deleted): `status` says the quorum is lost, with the evidence (exit
//!    3); `recover --gone` their addresses brings the cluster back from the
//!    survivor in one run (a force-new-cluster that answers an error after
//!    forming the cluster goes on once the survivor leads), and the
//!    survivor's controller heals the group to 3.
//!
//! Its own bridge `drvt62` (10.203.62.0/24, NAT and routing off); the lab
//! deletes every machine on it and the bridge when it ends, also when the
//! test fails (frozen machines are resumed first).

mod support;

use drover_core::model::SwarmView;
use drover_incus::testkit::{Lab, incus};
use std::process::{Command, Output};
use std::time::{Duration, Instant};
use support::{bounded, leader, observe_endpoints};

const NET: &str = "drvt62";
const SUBNET: &str = "10.203.62";

/// Three pet managers, drover mounted from the host, the swarm store.
fn spec(lab: &Lab) -> String {
    let bin = env!("CARGO_BIN_EXE_drover");
    format!(
        "groups:\n\
         - name: managers\n  role: manager\n  allocation:\n    logical_ids: [{SUBNET}.11, {SUBNET}.12, {SUBNET}.13]\n  instance:\n    provider: incus\n    properties: {{image: {image}, network: {NET}, storage_pool: drover, memory: 1GiB, devices: {{drover-bin: {{type: disk, source: {bin}, path: /usr/local/bin/drover, readonly: 'true'}}}}}}\n",
        image = lab.image
    )
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// Resumes frozen machines when dropped (before the lab deletes them).
struct Thaw(Vec<String>);

impl Drop for Thaw {
    fn drop(&mut self) {
        for m in &self.0 {
            let _ = Command::new("incus").args(["start", m]).output();
        }
    }
}

/// Machine `name`'s address (its logical id tag).
fn address_of(name: &str) -> String {
    let out = incus(&["config", "get", name, "user.drover.logical-id"]);
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// The engine endpoint of machine `name`.
fn endpoint(lab: &Lab, name: &str) -> String {
    format!(
        "unix://{}",
        lab.engine_dir().join(format!("{name}.sock")).display()
    )
}

/// The swarm store, read through machine `name`'s engine.
fn store_of(lab: &Lab, name: &str) -> String {
    format!("swarm:{}", endpoint(lab, name))
}

/// What machine `name`'s engine says of the swarm now.
async fn view(lab: &Lab, name: &str) -> SwarmView {
    let at = endpoint(lab, name);
    let connect = drover_engine::Engine::connect(&at);
    match tokio::time::timeout(Duration::from_secs(3), connect).await {
        Ok(Ok(engine)) => tokio::time::timeout(Duration::from_secs(5), engine.observe())
            .await
            .unwrap_or_else(|_| SwarmView::Unavailable("no answer in 5s".into())),
        _ => SwarmView::Unavailable("cannot connect".into()),
    }
}

/// Waits until `name`'s engine knows no leader (its peers lost).
async fn until_leaderless(lab: &Lab, name: &str, within: Duration) {
    let t0 = Instant::now();
    loop {
        let seen = view(lab, name).await;
        if matches!(seen, SwarmView::NoQuorum(_)) {
            return;
        }
        eprintln!("{:?} {name}: {seen:?}", t0.elapsed());
        assert!(t0.elapsed() < within, "{name} still knows a leader");
        tokio::time::sleep(Duration::from_secs(2)).await;
    }
}

/// Waits until the lab runs 3 machines whose engines list 3 reachable
/// raft members with a leader; the machines.
async fn until_three_managers(lab: &Lab, within: Duration) -> Vec<String> {
    let t0 = Instant::now();
    loop {
        let machines = lab.machines();
        let endpoints: Vec<String> = machines.iter().map(|m| endpoint(lab, m)).collect();
        if let Ok(nodes) = observe_endpoints(&endpoints).await {
            let reachable = nodes
                .iter()
                .filter(|n| n.raft.as_ref().is_some_and(|r| r.reachable))
                .count();
            let in_raft = nodes.iter().filter(|n| n.raft.is_some()).count();
            let led = nodes
                .iter()
                .any(|n| n.raft.as_ref().is_some_and(|r| r.leader));
            if machines.len() == 3 && reachable == 3 && in_raft == 3 && led {
                return machines;
            }
        }
        assert!(
            t0.elapsed() < within,
            "no 3 reachable managers within {within:?}: machines {machines:?}"
        );
        tokio::time::sleep(Duration::from_secs(3)).await;
    }
}

/// The leader and one follower (lost together), and the survivor.
async fn split(lab: &Lab, machines: &[String]) -> (Vec<String>, String) {
    let endpoints: Vec<String> = machines.iter().map(|m| endpoint(lab, m)).collect();
    let nodes = observe_endpoints(&endpoints).await.expect("a leader");
    let leader_addr = leader(&nodes).raft.as_ref().expect("raft").addr.clone();
    let mut lost: Vec<String> = machines
        .iter()
        .filter(|m| leader_addr.starts_with(&format!("{}:", address_of(m))))
        .cloned()
        .collect();
    let others: Vec<String> = machines
        .iter()
        .filter(|m| !lost.contains(m))
        .cloned()
        .collect();
    lost.push(others[0].clone());
    eprintln!(
        "leader at {leader_addr}: losing {lost:?}, {} survives",
        others[1]
    );
    (lost, others[1].clone())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lost_quorum_on_incus_machines_is_diagnosed_refused_while_paused_and_recovered() {
    let lab = Lab::new(NET, SUBNET);
    let _logs = support::IncusLogsOnFailure(&lab);
    let mut thaw = Thaw(Vec::new());
    bounded(1800, scenario(&lab, &mut thaw)).await;
}

async fn scenario(lab: &Lab, thaw: &mut Thaw) {
    let engines = lab.engine_dir().to_path_buf();
    let files = tempfile::tempdir().unwrap();
    let file = files.path().join("cluster.yaml");
    std::fs::write(&file, spec(lab)).unwrap();
    let f = file.to_str().unwrap();
    support::incus_bootstrap(&engines, f);
    let machines = until_three_managers(lab, Duration::from_secs(600)).await;
    let record = engines.join("recovery.json");

    // 1. Paused: it may resume with its raft state. Refused, nothing changed.
    let (paused, survivor) = split(lab, &machines).await;
    thaw.0 = paused.clone();
    incus(
        &[
            &["pause"],
            &paused.iter().map(String::as_str).collect::<Vec<_>>()[..],
        ]
        .concat(),
    );
    until_leaderless(lab, &survivor, Duration::from_secs(240)).await;
    let store = store_of(lab, &survivor);
    let status = support::drover_incus(&engines, &["status", "--store", &store]);
    assert_ne!(
        status.status.code(),
        Some(3),
        "paused members may still vote"
    );
    let refused = support::drover_incus(&engines, &["recover", "--store", &store]);
    assert_eq!(refused.status.code(), Some(2), "{}", stdout(&refused));
    for m in &paused {
        assert!(
            stdout(&refused).contains(&format!("{m} ({}", address_of(m))),
            "names {m}: {}",
            stdout(&refused)
        );
    }
    assert!(stdout(&refused).contains("its machine is paused"));
    assert!(stdout(&refused).contains("nothing was changed"));
    let named = support::drover_incus(
        &engines,
        &[
            "recover", "--store", &store, "--gone", &paused[0], "--gone", &paused[1],
        ],
    );
    assert_eq!(named.status.code(), Some(2));
    assert!(
        stderr(&named).contains("paused or partitioned, not gone"),
        "{}",
        stderr(&named)
    );
    assert!(!record.exists(), "no recovery was recorded");
    assert!(
        matches!(view(lab, &survivor).await, SwarmView::NoQuorum(_)),
        "no new cluster was forced"
    );
    incus(
        &[
            &["start"],
            &paused.iter().map(String::as_str).collect::<Vec<_>>()[..],
        ]
        .concat(),
    );
    thaw.0.clear();
    let machines = until_three_managers(lab, Duration::from_secs(180)).await;

    // 2. Stopped for good and deleted: diagnosed and recovered.
    let (gone, survivor) = split(lab, &machines).await;
    let gone_addresses: Vec<String> = gone.iter().map(|m| address_of(m)).collect();
    let names: Vec<&str> = gone.iter().map(String::as_str).collect();
    incus(&[&["stop", "--force"], &names[..]].concat());
    incus(&[&["delete"], &names[..]].concat());
    let store = store_of(lab, &survivor);
    let t0 = Instant::now();
    let status = loop {
        let status = support::drover_incus(&engines, &["status", "--store", &store]);
        if status.status.code() == Some(3) || t0.elapsed() > Duration::from_secs(180) {
            break status;
        }
        tokio::time::sleep(Duration::from_secs(5)).await;
    };
    assert_eq!(
        status.status.code(),
        Some(3),
        "status says the quorum is lost"
    );
    let said = stdout(&status);
    assert!(
        said.contains("QUORUM LOST: 1 of 3 managers reachable"),
        "{said}"
    );
    assert!(
        said.contains("2 raft member(s) on no machine the provider lists"),
        "{said}"
    );
    let mut args = vec!["recover", "--store", store.as_str()];
    for a in &gone_addresses {
        args.extend(["--gone", a.as_str()]);
    }
    // Force-new-cluster may answer an error after forming the new cluster
    // (seen here: "update out of sequence" on its cluster settings): the
    // run goes on once the survivor leads, and says so.
    let recovered = support::drover_incus(&engines, &args);
    println!("recover: {}", stdout(&recovered));
    assert!(
        recovered.status.success(),
        "recover failed: {}",
        stderr(&recovered)
    );
    assert!(
        stdout(&recovered).contains(&format!("recovered: {survivor} is the only manager")),
        "{}",
        stdout(&recovered)
    );
    assert!(!record.exists(), "the recovery finished");
    let healed = until_three_managers(lab, Duration::from_secs(900)).await;
    assert!(healed.contains(&survivor), "{healed:?}");
}
