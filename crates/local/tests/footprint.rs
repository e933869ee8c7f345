//! Five engines (3 managers + 2 workers) on 127.0.45.x: proves the machine
//! holds 5+ engines and prints each one's footprint (see README.md).

use drover_core::spec::Role;
use drover_core::template::default_boot_script;
use drover_local::procs;
use drover_local::testkit::{self, StateGuard};
use drover_spi::{Cluster, InstanceProvider, Unfenced};
use drover_swarm::SwarmCluster;
use std::path::Path;
use std::time::{Duration, Instant};

/// Stand-in for `drover engine join` in boot scripts (see testkit).
#[tokio::test]
async fn drover_shim() {
    testkit::run_shim_from_env().await;
}

fn group_rss_mb(pgid: i32, dir: &Path) -> u64 {
    let mut pids = procs::group_members(pgid);
    pids.extend(procs::pids_matching(&format!("{}/", dir.display())));
    pids.sort();
    pids.dedup();
    pids.into_iter()
        .filter_map(|p| std::fs::read_to_string(format!("/proc/{p}/status")).ok())
        .filter_map(|s| {
            s.lines()
                .find(|l| l.starts_with("VmRSS:"))
                .and_then(|l| l.split_whitespace().nth(1)?.parse::<u64>().ok())
        })
        .sum::<u64>()
        / 1024
}

fn disk_kb(p: &Path) -> u64 {
    let out = std::process::Command::new("du")
        .arg("-sk")
        .arg(p)
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout)
        .split_whitespace()
        .next()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn five_engines_footprint() {
    let state = testkit::short_tempdir("df").unwrap();
    let _guard = StateGuard {
        state_dir: state.clone(),
    };
    let p = testkit::shimmed_provider(&state, "127.0.45.10-127.0.45.20");
    let t0 = Instant::now();
    let m1 = testkit::first_manager(&p, "c45").await;
    eprintln!("manager 1: start+ready+init {:?}", t0.elapsed());
    let rec = p.record(&m1).unwrap().unwrap();
    let c = SwarmCluster::new(rec.endpoint(), None);
    let mut ids = vec![m1];
    for role in [Role::Manager, Role::Manager, Role::Worker, Role::Worker] {
        let jm = c.join_material(role).await.unwrap().unwrap();
        let t0 = Instant::now();
        let id = p
            .provision(
                testkit::request(
                    "c45",
                    role.as_str(),
                    role,
                    default_boot_script(drover_core::spec::LOCAL_PROVIDER, role),
                    &jm.addr,
                    false,
                    vec![("DROVER_JOIN_TOKEN".into(), jm.token.clone())],
                ),
                &Unfenced,
            )
            .await
            .unwrap();
        eprintln!("{}: start+ready+join {:?}", role.as_str(), t0.elapsed());
        ids.push(id);
    }
    tokio::time::sleep(Duration::from_secs(5)).await;
    let idle = p
        .provision(
            testkit::request(
                "c45",
                "plain",
                Role::Plain,
                default_boot_script(drover_core::spec::LOCAL_PROVIDER, Role::Plain),
                "",
                false,
                vec![],
            ),
            &Unfenced,
        )
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_secs(3)).await;
    let r = p.record(&idle).unwrap().unwrap();
    eprintln!(
        "idle engine (no swarm): rss {} MB, data-root {} KB",
        group_rss_mb(r.pgid.unwrap(), &state.join("instances").join(&idle)),
        disk_kb(&state.join("instances").join(&idle).join("root"))
    );
    p.destroy(&idle).await.unwrap();
    let mut total = 0;
    for (i, id) in ids.iter().enumerate() {
        let r = p.record(id).unwrap().unwrap();
        let rss = group_rss_mb(r.pgid.unwrap(), &state.join("instances").join(id));
        total += rss;
        let dir = state.join("instances").join(id).join("root");
        eprintln!(
            "{} {}: rss(dockerd+containerd) {rss} MB, data-root {} KB",
            if i < 3 { "manager" } else { "worker" },
            r.address,
            disk_kb(&dir)
        );
    }
    eprintln!("total rss of 5 engines in a swarm: {total} MB");
    let running = p.describe(&Default::default()).await.unwrap();
    assert_eq!(running.iter().filter(|i| i.running).count(), 5);
    let t0 = Instant::now();
    for id in &ids {
        p.destroy(id).await.unwrap();
    }
    eprintln!(
        "destroying 5 engines (sequentially) took {:?}",
        t0.elapsed()
    );
}
