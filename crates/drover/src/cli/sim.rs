//! The arguments of `drover sim` (the simulator: no engine, no store).

use super::Output;
use clap::{Args, Subcommand};
use std::path::PathBuf;

/// Simulator commands.
#[derive(Debug, Subcommand)]
pub enum SimCommand {
    /// Bring a cluster up in the simulator, then roll a change through it,
    /// printing every step with the fault tolerance before and after.
    #[command(
        after_help = "Examples:\n  drover sim rollout -f examples/cluster-sim.yaml\n  drover sim rollout -f old.yaml --to new.yaml --seed 7 --crashes-per-min 2\n\nTimings are those measured on real engines (swarm-facts.md)."
    )]
    Rollout(SimRollout),
}

/// Arguments of `drover sim rollout`.
#[derive(Debug, Args)]
pub struct SimRollout {
    /// The cluster file the simulated cluster starts from; - reads standard input.
    #[arg(short = 'f', long = "file")]
    pub file: PathBuf,
    /// The cluster file to roll to (default: the same file, every member rolled).
    #[arg(long)]
    pub to: Option<PathBuf>,
    /// Seed of the simulation (same seed, same run).
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Engine crashes per simulated minute during the rollout.
    #[arg(long, default_value_t = 0.0)]
    pub crashes_per_min: f64,
    /// Probability that a new machine never joins.
    #[arg(long, default_value_t = 0.0)]
    pub never_join: f64,
    /// Probability that a provision call fails.
    #[arg(long, default_value_t = 0.0)]
    pub provision_failure: f64,
    /// Spontaneous leader changes per simulated minute.
    #[arg(long, default_value_t = 0.0)]
    pub leader_changes_per_min: f64,
    /// For how long (simulated) faults are injected, e.g. 5m.
    #[arg(long, default_value = "5m", value_parser = humantime::parse_duration)]
    pub faults_for: std::time::Duration,
    /// Output format.
    #[arg(short = 'o', long, value_enum, default_value = "table")]
    pub output: Output,
}
