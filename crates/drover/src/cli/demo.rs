//! The arguments of `drover demo` (the command itself: `cmd/demo.rs`).

use clap::{Args, Subcommand};
use std::path::PathBuf;
use std::time::Duration;

const DEFAULT_DIR: &str = "/tmp/drover-demo";

/// `drover demo` commands.
#[derive(Debug, Subcommand)]
pub enum DemoCommand {
    /// Build a real local swarm (dockerd engines on loopback, controllers on
    /// the managers, etcd as the store) and print what to try next. Safe to
    /// run twice.
    #[command(
        after_help = "Examples:\n  sudo drover demo up\n  sudo drover demo up --managers 5 --workers 1 --dir /tmp/d --pool 127.0.2.10-127.0.2.60 --etcd-port 23792\n\nNeeds root (it starts dockerd), dockerd and etcd. Managers take the first\naddresses of --pool (their logical ids), workers the rest.\nExit codes: 0 up, 2 bad input or missing software, 3 blocked, 4 timed out."
    )]
    Up(DemoUp),
    /// Stop every process the demo started and remove its directory.
    #[command(after_help = "Example:\n  sudo drover demo down --dir /tmp/drover-demo")]
    Down {
        /// The demo's directory.
        #[arg(long, default_value = DEFAULT_DIR)]
        dir: PathBuf,
    },
}

/// Arguments of `drover demo up`.
#[derive(Debug, Args)]
pub struct DemoUp {
    /// Managers (an odd number keeps fault tolerance whole).
    #[arg(long, default_value_t = 3)]
    pub managers: usize,
    /// Workers.
    #[arg(long, default_value_t = 2)]
    pub workers: usize,
    /// Where everything of the demo lives.
    #[arg(long, default_value = DEFAULT_DIR)]
    pub dir: PathBuf,
    /// Loopback addresses the demo may use (`A-B`, or comma-separated entries).
    #[arg(long, default_value = "127.0.1.10-127.0.1.60")]
    pub pool: String,
    /// etcd's client port on 127.0.0.1 (its peer port is this + 10).
    #[arg(long, default_value_t = 23791)]
    pub etcd_port: u16,
    /// Give up waiting for the swarm after this long.
    #[arg(long, default_value = "10m", value_parser = humantime::parse_duration)]
    pub timeout: Duration,
}
