//! Provider API economy in steady state, and the controller's memory.

use crate::simrun::{Bench, Calls, Images, spec};
use drover_sim::Timings;
use std::time::Duration;

const RESYNC: Duration = Duration::from_millis(250);
const INTERVALS: u32 = 20;

/// Describes per group per resync interval once converged (the target: 1),
/// and any other call (the target: none).
pub async fn steady_state(workers: usize) {
    let s = spec(
        3,
        workers,
        1,
        "1s",
        Images {
            managers: "v1",
            workers: "v1",
        },
    );
    let b = Bench::start(&s, Timings::default(), RESYNC, Duration::ZERO).await;
    tokio::time::sleep(RESYNC).await;
    let before = Calls::get(&b.calls.describe);
    let others = || {
        Calls::get(&b.calls.provision) + Calls::get(&b.calls.destroy) + Calls::get(&b.calls.label)
    };
    let others_before = others();
    tokio::time::sleep(RESYNC * INTERVALS).await;
    let describes = Calls::get(&b.calls.describe) - before;
    let per = describes as f64 / (s.groups.len() as f64 * f64::from(INTERVALS));
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
/// a few resyncs and a rolling update of 10% of them, then reports the
/// process's peak RSS (the simulated cloud lives in the same process: the
/// figure is an upper bound for the controller).
pub async fn memory(workers: usize) {
    let m = (workers / 10).max(1);
    let images = |w| Images {
        managers: "v1",
        workers: w,
    };
    let before = spec(3, workers, m, "0s", images("v1"));
    let t = Timings {
        provision: 0,
        join: 0,
        out_of_raft: 0,
        tasks_per_worker: 0,
        ..Timings::default()
    };
    let mut b = Bench::start(&before, t, RESYNC, Duration::ZERO).await;
    tokio::time::sleep(RESYNC * 4).await;
    let after = spec(3, workers, m, "0s", images("v2"));
    b.roll(&after, Duration::from_secs(900)).await;
    b.stop().await;
    println!("{:.1}", peak_rss_mb().expect("VmHWM in /proc/self/status"));
}
