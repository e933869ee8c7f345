//! Command-line interface (clap). Every command has an example in `--help`.

use clap::{Args, Parser, Subcommand, ValueEnum};
use std::path::PathBuf;

/// drover keeps Docker Swarm clusters at the shape their operator declared,
/// heals them, and rolls changes through them without losing manager quorum.
#[derive(Debug, Parser)]
#[command(name = "drover", version, propagate_version = true)]
pub struct Cli {
    /// The command.
    #[command(subcommand)]
    pub command: Command,
}

/// Output format.
#[derive(Debug, Clone, Copy, ValueEnum, PartialEq, Eq)]
pub enum Output {
    /// Human-readable.
    Table,
    /// Machine-readable JSON (stable field names).
    Json,
}

/// The commands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Check a cluster file: every problem at once, as FILE:LINE:COL: path: reason.
    #[command(
        after_help = "Example:\n  drover validate -f examples/cluster.yaml\n\nExit codes: 0 valid (warnings may be printed), 2 invalid."
    )]
    Validate {
        /// The cluster file (YAML or JSON).
        #[arg(short = 'f', long = "file")]
        file: PathBuf,
    },
    /// Show the ordered steps a change would take, with the manager
    /// fault-tolerance timeline and where leadership moves.
    #[command(
        after_help = "Examples:\n  drover plan -f examples/cluster-sim.yaml --sim\n  drover plan -f new.yaml --sim --from old.yaml --output json\n\nWith --sim the plan is computed against a simulated cluster built from --from\n(default: the same file with a forced roll), so it needs no Docker."
    )]
    Plan {
        /// The desired cluster file.
        #[arg(short = 'f', long = "file")]
        file: PathBuf,
        /// Plan against a simulated cluster (no Docker needed).
        #[arg(long)]
        sim: bool,
        /// With --sim: the cluster file the simulated cluster runs now
        /// (default: the same file, every member rolled).
        #[arg(long)]
        from: Option<PathBuf>,
        /// Output format.
        #[arg(long, value_enum, default_value = "table")]
        output: Output,
    },
    /// The simulator: try drover without Docker.
    #[command(subcommand)]
    Sim(SimCommand),
    /// Print shell completions.
    #[command(after_help = "Example:\n  drover completions bash > /etc/bash_completion.d/drover")]
    Completions {
        /// The shell.
        shell: clap_complete::Shell,
    },
}

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
    /// The cluster file the simulated cluster starts from.
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
    #[arg(long, value_enum, default_value = "table")]
    pub output: Output,
}
