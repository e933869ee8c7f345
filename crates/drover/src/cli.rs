//! Command-line interface (clap). Every command has an example in `--help`.

mod change;
pub mod demo;
mod engine;
mod live;
mod local;
mod parse;
mod sim;
mod store;

pub use change::{AdoptArgs, ApplyArgs};
pub use engine::{EngineCommand, PluginCommand};
pub use live::{GcArgs, RecoverArgs};
pub use local::LocalArgs;
pub use parse::command;
pub use sim::{SimCommand, SimRollout};
pub use store::StoreArgs;

use clap::{Args, Parser, Subcommand, ValueEnum};
use std::path::PathBuf;

/// drover keeps Docker Swarm clusters at the shape their operator declared,
/// heals them, and rolls changes through them without losing manager quorum.
#[derive(Debug, Parser)]
#[command(name = "drover", version, propagate_version = true)]
pub struct Cli {
    /// Log format on stderr (the level comes from DROVER_LOG, default info).
    #[arg(
        long,
        global = true,
        env = "DROVER_LOG_FORMAT",
        value_enum,
        default_value = "text"
    )]
    pub log_format: LogFormat,
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

/// Log line format.
#[derive(Debug, Clone, Copy, ValueEnum, PartialEq, Eq)]
pub enum LogFormat {
    /// Human-readable.
    Text,
    /// One JSON object per line.
    Json,
}

/// The commands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Check a cluster file: every problem at once, as FILE:LINE:COL: path: reason.
    #[command(
        after_help = "Examples:\n  drover validate -f examples/cluster.yaml\n  generate-cluster | drover validate -f - -o json\n\nExit codes: 0 valid (warnings may be printed), 2 invalid."
    )]
    Validate {
        /// The cluster file (YAML or JSON); - reads standard input.
        #[arg(short = 'f', long = "file")]
        file: PathBuf,
        /// Output format: json prints {file, valid, groups, problems: [{file, line, col, path, severity, reason}]}.
        #[arg(short = 'o', long, value_enum, default_value = "table")]
        output: Output,
    },
    /// Show the ordered steps a change would take, with the manager
    /// fault-tolerance timeline and where leadership moves.
    #[command(
        after_help = "Examples:\n  drover plan -f examples/cluster-sim.yaml --sim\n  drover plan -f new.yaml --sim --from old.yaml --output json\n  drover plan -f cluster.yaml --store etcd://127.0.0.1:2379 --local-dir /var/lib/drover-local\n\nAgainst a store it shows the next steps the leader's controller would take now.\nWith --sim the plan is computed against a simulated cluster built from --from\n(default: the same file with a forced roll), so it needs no Docker."
    )]
    Plan {
        /// The desired cluster file; - reads standard input.
        #[arg(short = 'f', long = "file")]
        file: PathBuf,
        /// Plan against a simulated cluster (no Docker needed).
        #[arg(long)]
        sim: bool,
        /// With --sim: the cluster file the simulated cluster runs now
        /// (default: the same file, every member rolled).
        #[arg(long)]
        from: Option<PathBuf>,
        /// Without --sim: the live cluster's store.
        #[command(flatten)]
        store: StoreArgs,
        /// Without --sim: the local provider.
        #[command(flatten)]
        local: LocalArgs,
        /// Output format.
        #[arg(short = 'o', long, value_enum, default_value = "table")]
        output: Output,
    },
    /// Validate, show what changes, commit it to the store; bootstraps the
    /// first manager when no swarm exists yet.
    #[command(
        after_help = "Examples:\n  drover apply -f cluster.yaml --store etcd://127.0.0.1:2379 --local-dir /var/lib/drover-local --local-pool 127.0.0.11-127.0.0.40 --wait\n  drover apply -f cluster.yaml --dry-run\n\nGroups missing from the file are kept unless --prune is given.\nExit codes: 0 applied (and converged with --wait), 2 bad input, 3 blocked, 4 timed out."
    )]
    Apply(ApplyArgs),
    /// Create a cluster from nothing: the first manager (swarm init) through
    /// the provider, its controller, and the spec in the new cluster's store.
    #[command(
        after_help = "Example:\n  drover bootstrap -f cluster.yaml --store etcd://127.0.0.1:2379 --local-dir /var/lib/drover-local --local-pool 127.0.0.11-127.0.0.40 --wait\n\nRefuses when the store already holds a cluster (use apply).\nExit codes: 0 done (and converged with --wait), 2 bad input, 3 blocked, 4 timed out."
    )]
    Bootstrap(ApplyArgs),
    /// Bring an existing swarm built by hand under management, replacing nothing.
    #[command(
        after_help = "Examples:\n  drover adopt -f cluster.yaml --engine unix:///srv/m1/sock --machine /srv/m1 --machine /srv/w1 --dry-run\n  drover adopt -f cluster.yaml --engine unix:///srv/m1/sock --map 3k2j9x=/srv/w2 --store etcd://127.0.0.1:2379 --local-dir /var/lib/drover-local\n\nEach machine is matched to the node its engine reports (or the node --map names),\ntagged as adopted and rolled only once its group's spec changes.\nNodes nobody names are listed and never touched."
    )]
    Adopt(AdoptArgs),
    /// Show each group's phase, fault tolerance and the controller's heartbeat.
    #[command(
        after_help = "Examples:\n  drover status --store etcd://127.0.0.1:2379\n  drover status workers --output json\n\nWhen the published status is older than 30s or the store cannot be read, the managers'\nengines are asked directly (with --local-dir): a lost quorum is said plainly, exit code 3."
    )]
    Status {
        /// Only this group.
        group: Option<String>,
        /// The store.
        #[command(flatten)]
        store: StoreArgs,
        /// The machines, whose managers' engines are asked directly when
        /// the published status is stale or the store cannot be read.
        #[command(flatten)]
        local: LocalArgs,
        /// Output format.
        #[arg(short = 'o', long, value_enum, default_value = "table")]
        output: Output,
    },
    /// Run the reconciler next to a manager's engine (only the leader's acts), or off the cluster with --external (one acts at a time)
    #[command(
        after_help = "Examples:\n  DROVER_STORE=etcd://127.0.0.1:2379 drover controller --engine unix:///var/run/docker.sock\n  drover controller --external --store etcd://10.0.0.5:2379 --local-dir /var/lib/drover/machines"
    )]
    Controller(ControllerArgs),
    /// Stop starting new operations in a group (those in flight finish).
    #[command(after_help = "Example:\n  drover pause workers --store etcd://127.0.0.1:2379")]
    Pause {
        /// The group.
        group: String,
        /// The store.
        #[command(flatten)]
        store: StoreArgs,
    },
    /// Let a paused group roll and heal again.
    #[command(after_help = "Example:\n  drover resume workers --store etcd://127.0.0.1:2379")]
    Resume {
        /// The group.
        group: String,
        /// The store.
        #[command(flatten)]
        store: StoreArgs,
    },
    /// The audit log: who did which step to what, why, and how it ended.
    #[command(
        after_help = "Examples:\n  drover events --since 10m\n  drover events --output json\n  drover events --follow --output json   # one JSON object per line\n\nOPERATION is the parent operation (journal id) every step belongs to."
    )]
    Events {
        /// Only events newer than this.
        #[arg(long, default_value = "24h", value_parser = humantime::parse_duration)]
        since: std::time::Duration,
        /// Keep printing new events as they are recorded (Ctrl-C to stop).
        #[arg(long)]
        follow: bool,
        /// The store.
        #[command(flatten)]
        store: StoreArgs,
        /// Output format.
        #[arg(short = 'o', long, value_enum, default_value = "table")]
        output: Output,
    },
    /// The desired-state revisions, with who committed them, when and why.
    #[command(after_help = "Example:\n  drover history --store etcd://127.0.0.1:2379")]
    History {
        /// The store.
        #[command(flatten)]
        store: StoreArgs,
        /// Output format.
        #[arg(short = 'o', long, value_enum, default_value = "table")]
        output: Output,
    },
    /// Garbage collection: what the controller collects (dead nodes,
    /// machines that never joined, orphans), by which rule and on what evidence.
    #[command(
        after_help = "Examples:\n  drover gc --dry-run --store etcd://127.0.0.1:2379 --local-dir /var/lib/drover-local\n  drover gc --dry-run --output json\n  drover gc --timeout 15m\n\nThe leader's controller collects continuously; the CLI never destroys anything\nitself. --dry-run lists and exits; without it, drover gc lists and then follows\nuntil the controller has collected every listed item.\nExit codes: 0 done, 2 bad input, 3 a group is blocked, 4 timed out."
    )]
    Gc(GcArgs),
    /// Recover a lost manager quorum: force a new cluster on the surviving
    /// manager, only when every lost member's machine is gone for good.
    #[command(
        after_help = "Examples:\n  drover recover --dry-run --local-dir /var/lib/drover-local\n  drover recover --local-dir /var/lib/drover-local\n  drover recover --gone 127.0.0.12 --gone 127.0.0.13 --local-dir /var/lib/drover-local   # members you know are gone for good\n\nEvidence: every machine of the provider, its engine asked directly, and the raft\nmembers the surviving managers list. Every lost member must be named gone with\n--gone: its machine if the provider still lists one (it may still run: paused,\npartitioned), else its address or node id (drover cannot tell a machine it\ndestroyed from a manager it never made). Unnamed, recover refuses, naming each.\nNever automatic.\nExit codes: 0 recovered (or, with --dry-run, would recover), 1 the recovery failed,\n2 refused or bad input (nothing changed)."
    )]
    Recover(RecoverArgs),
    /// Keep drover's hands off one instance (no heal, retire or roll) while
    /// you debug it; `--release` gives it back.
    #[command(after_help = "Examples:\n  drover hold i74bbb7c7\n  drover hold i74bbb7c7 --release")]
    Hold {
        /// The instance id (as `drover status` lists it).
        instance: String,
        /// Release a held instance.
        #[arg(long)]
        release: bool,
        /// The store.
        #[command(flatten)]
        store: StoreArgs,
    },
    /// Replace one instance (e.g. a machine that misbehaves), with the safety
    /// rules of a roll.
    #[command(
        after_help = "Examples:\n  drover replace i55fb83e9\n  drover replace i55fb83e9 --skip-drain   # its node is stuck or its tasks are expendable"
    )]
    Replace {
        /// The instance id (as `drover status` lists it).
        instance: String,
        /// Destroy it without draining its node first (its tasks are
        /// rescheduled only once the node is gone).
        #[arg(long)]
        skip_drain: bool,
        /// The store.
        #[command(flatten)]
        store: StoreArgs,
    },
    /// Commit the group's spec from an earlier revision (default: the last
    /// converged one in which it differed).
    #[command(
        after_help = "Examples:\n  drover rollback workers\n  drover rollback managers --to 3"
    )]
    Rollback {
        /// The group.
        group: String,
        /// The revision to take the group's spec from.
        #[arg(long)]
        to: Option<u64>,
        /// The store.
        #[command(flatten)]
        store: StoreArgs,
    },
    /// What changed between two revisions (secrets redacted).
    #[command(
        after_help = "Examples:\n  drover diff 2        # revision 2 -> the current one\n  drover diff 2 4"
    )]
    Diff {
        /// The older revision.
        from: u64,
        /// The newer revision (default: the current one).
        to: Option<u64>,
        /// The store.
        #[command(flatten)]
        store: StoreArgs,
    },
    /// A forced roll: replace every member of the group, safely, one by one.
    #[command(after_help = "Example:\n  drover restart workers")]
    Restart {
        /// The group.
        group: String,
        /// The store.
        #[command(flatten)]
        store: StoreArgs,
    },
    /// Retire every member of a group; a manager group (last) ends the swarm.
    #[command(
        after_help = "Examples:\n  drover destroy workers          # asks you to type the group name\n  drover destroy workers --yes\n  drover destroy managers --yes --local-dir /var/lib/drover-local\n  drover destroy edge --yes --forget-machines --plugin vsphere\n\nA worker group is committed at size 0 and its members are retired (drained first).\nA manager group goes last: every other group must be destroyed first. The\ncontroller retires the managers one at a time, the leader last; this command\nfollows and removes that last machine itself, from outside the swarm (it needs\nthe provider: --local-dir). Run it again to resume after a timeout.\nA group whose provider cannot be described is refused; --forget-machines takes\nit out of the desired state instead, listing the machines it may leave running.\nExit codes: 0 done, 2 bad input, 3 blocked, 4 timed out."
    )]
    Destroy {
        /// The group.
        group: String,
        /// Do not ask for confirmation.
        #[arg(long)]
        yes: bool,
        /// For a group whose provider cannot be described (gone for
        /// good): take it out of the desired state without destroying its
        /// machines, which may keep running (they are listed and recorded
        /// as events). Refused while the provider answers.
        #[arg(long)]
        forget_machines: bool,
        /// How long to follow a manager group's retirement before giving up (resumable).
        #[arg(long, default_value = "15m", value_parser = humantime::parse_duration)]
        timeout: std::time::Duration,
        /// The store.
        #[command(flatten)]
        store: StoreArgs,
        /// The local provider (for a manager group's last machine).
        #[command(flatten)]
        local: LocalArgs,
    },
    /// Print the cluster id, every revision and the controls as JSON.
    #[command(after_help = "Example:\n  drover export > cluster-backup.json")]
    Export {
        /// The store.
        #[command(flatten)]
        store: StoreArgs,
    },
    /// Recreate an export in an empty store (e.g. to move to another backend).
    #[command(
        after_help = "Example:\n  drover import -f cluster-backup.json --store file:///var/lib/drover/state.db"
    )]
    Import {
        /// A file written by `drover export`; - reads standard input.
        #[arg(short = 'f', long = "file")]
        file: PathBuf,
        /// The store.
        #[command(flatten)]
        store: StoreArgs,
    },
    /// A real local swarm to try drover on: `demo up`, `demo down`.
    #[command(subcommand)]
    Demo(demo::DemoCommand),
    /// Engine-side helpers used by boot scripts.
    #[command(subcommand)]
    Engine(EngineCommand),
    /// The simulator: try drover without Docker.
    #[command(subcommand)]
    Sim(SimCommand),
    /// drover's providers as InfraKit instance plugins.
    #[command(subcommand)]
    Plugin(PluginCommand),
    /// Print drover's version, the git commit it was built from and what it was built with.
    #[command(after_help = "Examples:\n  drover version\n  drover version -o json")]
    Version {
        /// Output format.
        #[arg(short = 'o', long, value_enum, default_value = "table")]
        output: Output,
    },
    /// Print shell completions.
    #[command(after_help = "Example:\n  drover completions bash > /etc/bash_completion.d/drover")]
    Completions {
        /// The shell.
        shell: clap_complete::Shell,
    },
}

/// Arguments of `drover controller`.
#[derive(Debug, Args)]
pub struct ControllerArgs {
    /// This manager's engine.
    #[arg(
        long,
        env = "DOCKER_HOST",
        default_value = "unix:///var/run/docker.sock",
        value_parser = parse::NoSecret("--engine", false)
    )]
    pub engine: String,
    /// Run off the cluster (an admin host), without an engine of its
    /// own: one of any number of external controllers taking turns by
    /// the store's lease, acting where the cluster file's `control:`
    /// admits them (docs/control.md). Needs an etcd store; --engine is
    /// not used.
    #[arg(long)]
    pub external: bool,
    /// The name this controller holds the term and beats under
    /// (default: `external@HOST/PID` with --external).
    #[arg(long, requires = "external", value_parser = parse::NoSecret("--name", false))]
    pub name: Option<String>,
    /// The store.
    #[command(flatten)]
    pub store: StoreArgs,
    /// The local provider.
    #[command(flatten)]
    pub local: LocalArgs,
    /// Prometheus endpoint: HOST:PORT, `auto` (this manager's address
    /// when loopback, else 127.0.0.1; port 9464) or `off`.
    #[arg(long, env = "DROVER_METRICS_ADDR", default_value = "auto")]
    pub metrics_addr: String,
}
