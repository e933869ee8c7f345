//! The arguments of the commands that look at a live cluster from
//! outside it and follow what its controller does: `gc` and `recover`.

use super::{LocalArgs, Output, StoreArgs};
use clap::Args;

/// Arguments of `drover gc`.
#[derive(Debug, Args)]
pub struct GcArgs {
    /// List what would be collected and why; wait for nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// Without --dry-run: give up following after this long.
    #[arg(long, default_value = "15m", value_parser = humantime::parse_duration)]
    pub timeout: std::time::Duration,
    /// The store, the provider, the output format.
    #[command(flatten)]
    pub live: LiveArgs,
}

/// A live cluster looked at from outside (`gc`, `recover`): its store, the
/// provider's machines, and how to print what was found.
#[derive(Debug, Args)]
pub struct LiveArgs {
    /// The store.
    #[command(flatten)]
    pub store: StoreArgs,
    /// The local provider.
    #[command(flatten)]
    pub local: LocalArgs,
    /// Output format (json: the fields in docs/cli.md).
    #[arg(short = 'o', long, value_enum, default_value = "table")]
    pub output: Output,
}

/// Arguments of `drover recover`.
#[derive(Debug, Args)]
pub struct RecoverArgs {
    /// Print the evidence and the plan; change nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// A lost raft member you know is gone for good: its machine, or, when
    /// the provider lists no machine at its address, that address or its
    /// node id (repeatable).
    #[arg(long = "gone", value_name = "MACHINE|ADDRESS|NODE")]
    pub gone: Vec<String>,
    /// With several surviving managers: the one to recover from.
    #[arg(long, value_name = "MACHINE")]
    pub from: Option<String>,
    /// The store (the audit event is written there after the recovery),
    /// the provider (its machines are the evidence), the output format.
    #[command(flatten)]
    pub live: LiveArgs,
}
