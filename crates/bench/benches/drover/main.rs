//! drover's benchmarks (BENCHMARKS.md), printed as Markdown tables.
//!
//! `scripts/bench.sh [SECTION...] [--runs K] [--only TEXT]`, i.e.
//! `cargo bench -p drover-bench -- [planner] [rollout] [economy] [--runs K] [--only TEXT]`
//! (all sections by default; `--only` keeps the rollout scenarios whose
//! name contains TEXT, and the planner size equal to it, e.g. `10000`). Release mode; every figure is a median.
//! Not run by `cargo test`: it takes minutes and measures, never asserts
//! timings (it asserts only that each rollout really converged).

mod economy;
mod planner;
mod rollout;
mod simrun;
mod stats;

use std::process::{Command, ExitCode};

/// The drover binary's allocator (see `crates/drover/src/main.rs`): the
/// planner's and the controller's figures are those of the binary.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

const PLANNER_SIZES: [usize; 4] = [100, 1_000, 10_000, 100_000];
const MEMORY_AT: usize = 10_000;
const MEMORY_RUNS: usize = 5;

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("tokio runtime")
}

/// Peak RSS (MB) of a fresh process running the controller at `n` workers,
/// or holding only the simulated cloud (`cloud_only`).
fn memory_in_child(n: usize, cloud_only: bool) -> f64 {
    let exe = std::env::current_exe().expect("own path");
    let what = if cloud_only { "cloud" } else { "controller" };
    let out = Command::new(exe)
        .args(["memory-child", &n.to_string(), what])
        .output()
        .expect("run the memory child");
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

fn main() -> ExitCode {
    // `cargo bench` passes `--bench`; anything else unknown is refused.
    let args: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| a != "--bench")
        .collect();
    if args.first().map(String::as_str) == Some("memory-child") {
        let n = args
            .get(1)
            .and_then(|n| n.parse().ok())
            .unwrap_or(MEMORY_AT);
        let cloud_only = args.get(2).map(String::as_str) == Some("cloud");
        runtime().block_on(economy::memory(n, cloud_only));
        return ExitCode::SUCCESS;
    }
    let mut runs = 3;
    let mut only = String::new();
    let mut sections = Vec::new();
    let mut it = args.iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "--runs" => match it.next().and_then(|r| r.parse().ok()).filter(|r| *r > 0) {
                Some(r) => runs = r,
                None => return usage("--runs needs a positive count"),
            },
            "--only" => match it.next() {
                Some(text) => only.clone_from(text),
                None => return usage("--only needs a text"),
            },
            "planner" | "rollout" | "economy" => sections.push(a.clone()),
            other => return usage(&format!("unknown argument `{other}`")),
        }
    }
    if sections.is_empty() {
        sections = vec!["planner".into(), "economy".into(), "rollout".into()];
    }
    println!("# drover benchmarks");
    for s in &sections {
        match s.as_str() {
            "planner" => {
                let sizes: Vec<usize> = PLANNER_SIZES
                    .into_iter()
                    .filter(|n| only.is_empty() || n.to_string() == only)
                    .collect();
                planner::run(&sizes);
            }
            "economy" => {
                println!("\n## Provider API economy in steady state\n");
                println!(
                    "| cluster | resync | intervals | describes | per interval (1 provider, 2 groups) | other calls |"
                );
                println!("|---|---|---|---|---|---|");
                let rt = runtime();
                rt.block_on(economy::steady_state(100));
                rt.block_on(economy::steady_state(1000));
                // A peak depends on how start-up's copies overlap: medians.
                let median_of = |cloud_only| {
                    let runs: Vec<f64> = (0..MEMORY_RUNS)
                        .map(|_| memory_in_child(MEMORY_AT, cloud_only))
                        .collect();
                    let all: Vec<String> = runs.iter().map(|r| format!("{r:.1}")).collect();
                    (stats::median_ms(&runs), all.join(" "))
                };
                let (both, both_runs) = median_of(false);
                let (cloud, cloud_runs) = median_of(true);
                println!(
                    "\n## Memory\n\nPeak RSS at 3 managers + {MEMORY_AT} workers (start-up and steady state), each run in a fresh process, median of {MEMORY_RUNS}:\n\n| process | peak RSS MB | runs |\n|---|---|---|\n| controller + simulated cloud | {both:.1} | {both_runs} |\n| simulated cloud alone | {cloud:.1} | {cloud_runs} |\n| controller's share (difference; target < 50 MB) | {:.1} | |",
                    both - cloud
                );
            }
            _ => {
                runtime().block_on(rollout::run(runs, &only));
            }
        }
    }
    ExitCode::SUCCESS
}

fn usage(why: &str) -> ExitCode {
    eprintln!(
        "drover-bench: {why}\nusage: scripts/bench.sh [planner] [rollout] [economy] [--runs K] [--only TEXT]"
    );
    ExitCode::from(2)
}
