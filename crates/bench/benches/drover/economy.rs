//! Provider API economy in steady state, and the controller's memory.

use crate::simrun::{Bench, Calls, Images, seeded_cloud, spec};
use drover_core::spec::ClusterSpec;
use drover_sim::Timings;
use std::process::Command;
use std::time::Duration;

const RESYNC: Duration = Duration::from_millis(250);
const INTERVALS: u32 = 20;

fn cluster(workers: usize) -> ClusterSpec {
    let images = Images {
        managers: "v1",
        workers: "v1",
    };
    spec(3, workers, 1, "1s", images)
}

/// A controller over 3 managers and `workers` workers, converged.
async fn converged(workers: usize) -> Bench {
    Bench::start(
        &cluster(workers),
        Timings::default(),
        RESYNC,
        Duration::ZERO,
    )
    .await
}

/// Describes per resync interval once converged (one per provider: the
/// bench has one, serving both groups), and any other call (the target:
/// none).
pub async fn steady_state(workers: usize) {
    let b = converged(workers).await;
    tokio::time::sleep(RESYNC).await;
    let before = Calls::get(&b.calls.describe);
    let others = || {
        Calls::get(&b.calls.provision) + Calls::get(&b.calls.destroy) + Calls::get(&b.calls.label)
    };
    let others_before = others();
    tokio::time::sleep(RESYNC * INTERVALS).await;
    let describes = Calls::get(&b.calls.describe) - before;
    let per = describes as f64 / f64::from(INTERVALS);
    println!(
        "| 3 managers + {workers} workers | {} ms | {INTERVALS} | {describes} | {per:.2} | {} |",
        RESYNC.as_millis(),
        others() - others_before
    );
    b.stop().await;
}

/// This process's peak resident set, in MB (Linux).
pub fn peak_rss_mb() -> Option<f64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kb: f64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb / 1024.0)
}

/// Runs a controller over `workers` simulated workers in steady state for
/// a few resyncs, then reports the process's peak RSS. The simulated cloud
/// lives in the same process: with `cloud_only`, the same cloud is held as
/// long without any controller, so the difference is the controller's own
/// share (what it observes, plans, journals and publishes included).
pub async fn memory(workers: usize, cloud_only: bool) {
    if cloud_only {
        let cloud = seeded_cloud(&cluster(workers), Timings::default());
        tokio::time::sleep(RESYNC * 8).await;
        assert!(cloud.world().instances.len() > workers);
    } else {
        let b = converged(workers).await;
        tokio::time::sleep(RESYNC * 8).await;
        b.stop().await;
    }
    println!("{:.1}", peak_rss_mb().expect("VmHWM in /proc/self/status"));
}

/// Sizes (workers) whose memory is measured: the growth picture's points.
pub const MEMORY_SIZES: [usize; 3] = [1_000, 10_000, 100_000];
/// The size the target is set at (< 40 MB).
const MEMORY_TARGET_AT: usize = 10_000;

/// Fresh processes per figure; fewer at 100 000 (each takes about a
/// minute there).
fn memory_runs(workers: usize) -> usize {
    if workers >= 100_000 { 3 } else { 5 }
}

/// The allocator's environment in `deploy/systemd/drover-controller.service`
/// (docs/deploy.md): no transparent huge pages, freed memory returned at
/// once. The memory table measures the binary bare and under it.
const UNIT_ENV: [(&str, &str); 2] = [("MIMALLOC_ALLOW_THP", "0"), ("MIMALLOC_PURGE_DELAY", "0")];

/// How a memory child runs: bare (every [`UNIT_ENV`] variable removed) or
/// under the unit's environment.
#[derive(Clone, Copy)]
enum Env {
    Bare,
    Unit,
}

/// Peak RSS (MB) of a fresh process running the controller at `workers`,
/// or holding only the simulated cloud (`cloud_only`).
fn memory_in_child(workers: usize, cloud_only: bool, env: Env) -> f64 {
    let exe = std::env::current_exe().expect("own path");
    let what = if cloud_only { "cloud" } else { "controller" };
    let mut cmd = Command::new(exe);
    cmd.args(["memory-child", &workers.to_string(), what]);
    for (k, v) in UNIT_ENV {
        match env {
            Env::Bare => cmd.env_remove(k),
            Env::Unit => cmd.env(k, v),
        };
    }
    let out = cmd.output().expect("run the memory child");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "memory child failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let last = text.trim().lines().last().unwrap_or_default();
    last.parse()
        .unwrap_or_else(|_| panic!("memory child printed `{last}`"))
}

/// The controller's share (MB): the median of fresh processes with the
/// controller less the median of the cloud alone; and both medians' runs.
fn share(workers: usize, env: Env) -> (f64, String) {
    let median = |cloud_only| {
        let runs: Vec<f64> = (0..memory_runs(workers))
            .map(|_| memory_in_child(workers, cloud_only, env))
            .collect();
        let all: Vec<String> = runs.iter().map(|r| format!("{r:.1}")).collect();
        (crate::stats::median_ms(&runs), all.join(" "))
    };
    let (both, both_runs) = median(false);
    let (cloud, cloud_runs) = median(true);
    (
        both - cloud,
        format!("{both:.1} − {cloud:.1} ({both_runs} / {cloud_runs})"),
    )
}

/// The memory table at each of `sizes`; returns (members, controller's
/// share in MB) bare and under the unit's environment, for the growth
/// picture.
pub fn memory_section(sizes: &[usize]) -> [Vec<(f64, f64)>; 2] {
    println!(
        "\n## Memory\n\nPeak RSS at 3 managers + N workers (start-up and steady state), each run in a fresh process; the controller's share is the median with the controller less the median of the simulated cloud held alone (target < 40 MB at {MEMORY_TARGET_AT} workers). Bare: the binary as it is; unit: under `MIMALLOC_ALLOW_THP=0 MIMALLOC_PURGE_DELAY=0` (the systemd unit's):\n"
    );
    println!(
        "| workers | bare: **share** MB | bytes per member | unit: **share** MB | bytes per member | bare: MB (runs) | unit: MB (runs) |"
    );
    println!("|---|---|---|---|---|---|---|");
    let mut points = [Vec::new(), Vec::new()];
    for &n in sizes {
        let members = n + 3;
        let per = |mb: f64| mb * 1024.0 * 1024.0 / members as f64;
        let (bare, bare_runs) = share(n, Env::Bare);
        let (unit, unit_runs) = share(n, Env::Unit);
        println!(
            "| {n} | **{bare:.1}** | {:.0} | **{unit:.1}** | {:.0} | {bare_runs} | {unit_runs} |",
            per(bare),
            per(unit)
        );
        points[0].push((members as f64, bare));
        points[1].push((members as f64, unit));
    }
    points
}
