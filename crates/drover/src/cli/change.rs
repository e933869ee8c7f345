//! The arguments of the commands that change a cluster from a cluster
//! file: `apply` (and `bootstrap`) and `adopt`.

use super::{LocalArgs, StoreArgs};
use clap::Args;
use std::path::PathBuf;

/// Arguments of `drover apply`.
#[derive(Debug, Args)]
pub struct ApplyArgs {
    /// The cluster file; - reads standard input.
    #[arg(short = 'f', long = "file")]
    pub file: PathBuf,
    /// Show what would change; commit nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// Follow the rollout until converged, blocked or timed out.
    #[arg(long)]
    pub wait: bool,
    /// With --wait: give up after this long.
    #[arg(long, default_value = "30m", value_parser = humantime::parse_duration)]
    pub timeout: std::time::Duration,
    /// Remove groups that the file no longer declares.
    #[arg(long)]
    pub prune: bool,
    /// Why (recorded in the history).
    #[arg(short = 'm', long, default_value = "")]
    pub message: String,
    /// The store.
    #[command(flatten)]
    pub store: StoreArgs,
    /// The local provider.
    #[command(flatten)]
    pub local: LocalArgs,
}

/// Arguments of `drover adopt`.
#[derive(Debug, Args)]
pub struct AdoptArgs {
    /// The cluster file: the groups the machines join; - reads standard input.
    #[arg(short = 'f', long = "file")]
    pub file: PathBuf,
    /// A manager of the swarm to adopt.
    #[arg(
        long,
        env = "DOCKER_HOST",
        default_value = "unix:///var/run/docker.sock",
        value_parser = super::parse::NoSecret("--engine", false)
    )]
    pub engine: String,
    /// A machine to adopt, as its provider names it (local: the engine's directory).
    #[arg(long = "machine")]
    pub machines: Vec<String>,
    /// NODE=MACHINE: adopt MACHINE as swarm node NODE (id or unique prefix),
    /// for providers that cannot ask the machine's engine.
    #[arg(long)]
    pub map: Vec<String>,
    /// The worker group adopted workers join, when the file has several.
    #[arg(long)]
    pub workers: Option<String>,
    /// Show the matches; change nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// The store.
    #[command(flatten)]
    pub store: StoreArgs,
    /// The local provider.
    #[command(flatten)]
    pub local: LocalArgs,
}
