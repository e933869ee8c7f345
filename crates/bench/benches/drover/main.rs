//! drover's benchmarks (BENCHMARKS.md), printed as Markdown tables.
//!
//! `scripts/bench.sh [SECTION...] [--runs K] [--only TEXT] [--figures DIR]`, i.e.
//! `cargo bench -p drover-bench -- [planner] [rollout] [economy] [plugin] [--runs K] [--only TEXT] [--figures DIR]`
//! (all sections by default; `--only` keeps the rollout scenarios whose
//! name contains TEXT, and the planner and memory sizes equal to it, e.g.
//! `10000`; `--figures` writes the growth pictures there as SVG). Release
//! mode; every figure is a median. `scripts/bench.sh real-figures TSV DIR`
//! runs nothing: it draws the real-engine growth pictures of
//! `scripts/bench-scale.sh` from its TSV.
//! Not run by `cargo test`: it takes minutes and measures, never asserts
//! timings (it asserts only that each rollout really converged).

mod economy;
mod figures;
mod planner;
mod plugin_roll;
mod real_figures;
mod rollout;
mod simrun;
mod stats;

use std::path::PathBuf;
use std::process::ExitCode;

/// The drover binary's allocator (see `crates/drover/src/main.rs`): the
/// planner's and the controller's figures are those of the binary.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

const PLANNER_SIZES: [usize; 4] = [100, 1_000, 10_000, 100_000];

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("tokio runtime")
}

fn main() -> ExitCode {
    if std::env::var_os("RUST_LOG").is_some() {
        // The controller's own log, on stderr: where a roll's time goes.
        tracing_subscriber::fmt()
            .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
            .with_writer(std::io::stderr)
            .init();
    }
    // `cargo bench` passes `--bench`; anything else unknown is refused.
    let args: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| a != "--bench")
        .collect();
    if args.first().map(String::as_str) == Some("memory-child") {
        let Some(n) = args.get(1).and_then(|n| n.parse().ok()) else {
            return usage("memory-child needs a worker count");
        };
        let cloud_only = args.get(2).map(String::as_str) == Some("cloud");
        runtime().block_on(economy::memory(n, cloud_only));
        return ExitCode::SUCCESS;
    }
    if args.first().map(String::as_str) == Some("plugin-child") {
        let Some(socket) = args.get(1) else {
            return usage("plugin-child needs a socket path");
        };
        runtime().block_on(plugin_roll::serve(std::path::Path::new(socket)));
        return ExitCode::SUCCESS;
    }
    if args.first().map(String::as_str) == Some("real-figures") {
        return real_figures_mode(&args[1..]);
    }
    let mut runs = 3;
    let mut only = String::new();
    let mut figures_dir: Option<PathBuf> = None;
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
            "--figures" => match it.next() {
                Some(dir) => figures_dir = Some(PathBuf::from(dir)),
                None => return usage("--figures needs a directory"),
            },
            "planner" | "rollout" | "economy" | "plugin" => sections.push(a.clone()),
            other => return usage(&format!("unknown argument `{other}`")),
        }
    }
    if sections.is_empty() {
        sections = vec![
            "planner".into(),
            "economy".into(),
            "rollout".into(),
            "plugin".into(),
        ];
    }
    println!("# drover benchmarks");
    let keep = |n: &usize| only.is_empty() || n.to_string() == only;
    let mut growth = Growth::default();
    for s in &sections {
        match s.as_str() {
            "planner" => {
                let sizes: Vec<usize> = PLANNER_SIZES.into_iter().filter(keep).collect();
                growth.planner = planner::run(&sizes);
            }
            "plugin" => runtime().block_on(plugin_roll::run(runs, &only)),
            "economy" => {
                economy_section();
                let sizes: Vec<usize> = economy::MEMORY_SIZES.into_iter().filter(keep).collect();
                growth.memory = economy::memory_section(&sizes);
            }
            _ => {
                runtime().block_on(rollout::run(runs, &only));
            }
        }
    }
    if let Some(dir) = figures_dir
        && let Err(e) = growth.draw(&dir)
    {
        eprintln!(
            "drover-bench: drawing the growth pictures in {}: {e}",
            dir.display()
        );
        return ExitCode::FAILURE;
    }
    ExitCode::SUCCESS
}

/// `real-figures TSV DIR`: the growth pictures of `scripts/bench-scale.sh`
/// from its TSV (no benchmark runs).
fn real_figures_mode(args: &[String]) -> ExitCode {
    let [tsv, dir] = args else {
        return usage("real-figures needs the TSV of scripts/bench-scale.sh and a directory");
    };
    match real_figures::draw(std::path::Path::new(tsv), std::path::Path::new(dir)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("drover-bench: real-figures from {tsv} into {dir}: {e}");
            ExitCode::FAILURE
        }
    }
}

/// The steady state's provider calls per resync interval.
fn economy_section() {
    println!("\n## Provider API economy in steady state\n");
    println!(
        "| cluster | resync | intervals | describes | per interval (1 provider, 2 groups) | other calls |"
    );
    println!("|---|---|---|---|---|---|");
    let rt = runtime();
    rt.block_on(economy::steady_state(100));
    rt.block_on(economy::steady_state(1000));
}

/// What the growth pictures show: the planner's CPU per pass and the
/// controller's memory, against members.
#[derive(Default)]
struct Growth {
    planner: Vec<(f64, f64)>,
    /// The controller's share, bare and under the systemd unit's
    /// allocator environment.
    memory: [Vec<(f64, f64)>; 2],
}

impl Growth {
    /// Writes `planner-growth.svg` and `memory-growth.svg` into `dir`
    /// (each only when its section ran).
    fn draw(&self, dir: &std::path::Path) -> Result<(), Box<dyn std::error::Error>> {
        std::fs::create_dir_all(dir)?;
        if !self.planner.is_empty() {
            let chart = figures::Chart {
                title: "Planner: CPU of one pass mid-rollout",
                x_label: "members",
                y_label: "CPU ms (median)",
            };
            let curve = figures::Curve {
                name: "one pass".into(),
                points: self.planner.clone(),
            };
            figures::draw(&dir.join("planner-growth.svg"), &chart, &[curve], None)?;
        }
        if !self.memory[0].is_empty() {
            let chart = figures::Chart {
                title: "Controller memory (peak RSS share)",
                x_label: "members",
                y_label: "MB",
            };
            let [bare, unit] = &self.memory;
            let curves = [
                figures::Curve {
                    name: "controller's share, the binary bare".into(),
                    points: bare.clone(),
                },
                figures::Curve {
                    name: "under the systemd unit's allocator settings".into(),
                    points: unit.clone(),
                },
            ];
            let target = Some(("target at 10 000: 40 MB", 40.0));
            figures::draw(&dir.join("memory-growth.svg"), &chart, &curves, target)?;
        }
        Ok(())
    }
}

fn usage(why: &str) -> ExitCode {
    eprintln!(
        "drover-bench: {why}\nusage: scripts/bench.sh [planner] [rollout] [economy] [plugin] [--runs K] [--only TEXT] [--figures DIR]\n       scripts/bench.sh real-figures TSV DIR"
    );
    ExitCode::from(2)
}
