//! Provider API economy in steady state, and the controller's memory.

use crate::simrun::{Bench, Calls, Images, seeded_cloud, spec};
use drover_core::spec::ClusterSpec;
use drover_sim::Timings;
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
