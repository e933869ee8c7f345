//! Command-line interface (clap). Every command has an example in `--help`.

pub mod demo;
mod parse;

pub use parse::command;

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
    /// Run the reconciler next to a manager's engine (one per manager; only the leader's acts).
    #[command(
        after_help = "Example:\n  DROVER_STORE=etcd://127.0.0.1:2379 drover controller --engine unix:///var/run/docker.sock"
    )]
    Controller {
        /// This manager's engine.
        #[arg(
            long,
            env = "DOCKER_HOST",
            default_value = "unix:///var/run/docker.sock"
        )]
        engine: String,
        /// The store.
        #[command(flatten)]
        store: StoreArgs,
        /// The local provider.
        #[command(flatten)]
        local: LocalArgs,
        /// Prometheus endpoint: HOST:PORT, `auto` (this manager's address
        /// when loopback, else 127.0.0.1; port 9464) or `off`.
        #[arg(long, env = "DROVER_METRICS_ADDR", default_value = "auto")]
        metrics_addr: String,
    },
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
        after_help = "Examples:\n  drover destroy workers          # asks you to type the group name\n  drover destroy workers --yes\n  drover destroy managers --yes --local-dir /var/lib/drover-local\n\nA worker group is committed at size 0 and its members are retired (drained first).\nA manager group goes last: every other group must be destroyed first. The\ncontroller retires the managers one at a time, the leader last; this command\nfollows and removes that last machine itself, from outside the swarm (it needs\nthe provider: --local-dir). Run it again to resume after a timeout.\nExit codes: 0 done, 2 bad input, 3 blocked, 4 timed out."
    )]
    Destroy {
        /// The group.
        group: String,
        /// Do not ask for confirmation.
        #[arg(long)]
        yes: bool,
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

/// Where the store is.
#[derive(Debug, Args)]
pub struct StoreArgs {
    /// Store address: `file:///path/state.db`, `etcd://host:port`, `swarm`
    /// (the swarm's own raft, through the engine the docker CLI would use:
    /// DOCKER_HOST, DOCKER_TLS_VERIFY, DOCKER_CERT_PATH) or `swarm:ENDPOINT`.
    #[arg(long = "store", env = "DROVER_STORE", default_value = "swarm")]
    pub url: String,
    /// How long opening the store (connecting and the first read) may take
    /// before drover gives up and says what to check (e.g. 5s, 30s, 1m).
    #[arg(
        long = "store-timeout",
        env = "DROVER_STORE_TIMEOUT",
        default_value = "5s",
        value_name = "DURATION",
        value_parser = parse::positive_duration
    )]
    pub store_timeout: std::time::Duration,
}

/// The `local` provider's settings (real dockerd processes on loopback).
#[derive(Debug, Args)]
pub struct LocalArgs {
    /// Directory where the local provider keeps its machines.
    #[arg(long, env = "DROVER_LOCAL_DIR")]
    pub local_dir: Option<PathBuf>,
    /// Loopback addresses it may use: `127.0.0.11-127.0.0.40`, comma-separated entries.
    #[arg(
        long,
        env = "DROVER_LOCAL_POOL",
        default_value = "127.0.0.11-127.0.0.60"
    )]
    pub local_pool: String,
    /// Run each new machine's engine under a supervisor that restarts it
    /// when it exits (0.5 s, then 1, 2, 4 s; like systemd's
    /// `Restart=always`); `false`: an engine that exits stays down and its
    /// machine reads as stopped. Boot scripts pass it on to the controllers
    /// they start.
    #[arg(
        long,
        env = "DROVER_LOCAL_SUPERVISE",
        default_value_t = true,
        action = clap::ArgAction::Set,
        value_name = "BOOL"
    )]
    pub local_supervise: bool,
    /// The incus provider: the directory, on the Incus host, where each
    /// machine's engine socket appears (root only). Giving it enables the
    /// provider; its machines' controllers get it from their boot script.
    #[arg(long, env = "DROVER_INCUS_ENGINES", value_name = "DIR")]
    pub incus_engines: Option<PathBuf>,
    /// Incus's API socket, as this process reaches it.
    #[arg(long, env = "INCUS_SOCKET", default_value = drover_incus::DEFAULT_SOCKET)]
    pub incus_socket: PathBuf,
    /// The Incus project the machines live in.
    #[arg(long, env = "DROVER_INCUS_PROJECT", default_value = "default")]
    pub incus_project: String,
    /// Incus's API socket on the Incus host: managers' controllers reach
    /// it through a proxy device to this path.
    #[arg(long, env = "DROVER_INCUS_HOST_SOCKET", default_value = drover_incus::DEFAULT_SOCKET)]
    pub incus_host_socket: PathBuf,
    /// Where this process sees `--incus-engines` when it is mounted
    /// elsewhere (a manager's controller: its boot environment sets it);
    /// default: `--incus-engines` itself.
    #[arg(long, env = "DROVER_INCUS_ENGINES_MOUNT", value_name = "DIR")]
    pub incus_engines_mount: Option<PathBuf>,
    /// InfraKit instance plugins to wire, `NAME[/TYPE]` (repeatable or
    /// comma-separated): groups with `provider: plugin` use them
    /// (docs/plugins.md).
    #[arg(
        long = "plugin",
        env = "DROVER_PLUGINS",
        value_delimiter = ',',
        value_name = "NAME[/TYPE]"
    )]
    pub plugins: Vec<String>,
    /// Where the plugins' sockets are (default: $INFRAKIT_HOME/plugins,
    /// else ~/.infrakit/plugins).
    #[arg(long, env = "INFRAKIT_PLUGINS_DIR", value_name = "DIR")]
    pub plugins_dir: Option<PathBuf>,
    /// The ec2 provider: EC2 instances in `--ec2-region`. Credentials come
    /// from the standard AWS chain only (environment, profile, web
    /// identity, ECS, instance metadata), never from a flag.
    #[arg(long, env = "DROVER_EC2", default_value_t = false, action = clap::ArgAction::Set, value_name = "BOOL")]
    pub ec2: bool,
    /// The region the ec2 provider works in (a group's
    /// `instance.properties.region` must match it).
    #[arg(long, env = "AWS_REGION", value_name = "REGION")]
    pub ec2_region: Option<String>,
    /// Another EC2 endpoint than the region's (a VPC endpoint, or moto's
    /// in tests), as `https://HOST[:PORT]`.
    #[arg(long, env = "DROVER_EC2_ENDPOINT", value_name = "URL")]
    pub ec2_endpoint: Option<String>,
}

impl LocalArgs {
    /// The arguments as given by nothing but their defaults and the
    /// environment (for commands that build them, like `demo up`).
    pub fn parsed_defaults() -> LocalArgs {
        #[derive(clap::Parser)]
        struct Only {
            #[command(flatten)]
            args: LocalArgs,
        }
        <Only as clap::Parser>::parse_from(["drover"]).args
    }
}

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
        default_value = "unix:///var/run/docker.sock"
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

/// Engine-side helpers.
#[derive(Debug, Subcommand)]
pub enum EngineCommand {
    /// Join this engine (DOCKER_HOST) to a swarm with the token in
    /// $DROVER_JOIN_TOKEN, so the token never appears in any argv.
    #[command(
        after_help = "Example (in a boot script):\n  drover engine join --role worker --address 127.0.0.21 --remote 127.0.0.11:2377"
    )]
    Join {
        /// manager or worker (informational: the token decides).
        #[arg(long)]
        role: String,
        /// This engine's listen and advertise address (port 2377 is added).
        #[arg(long)]
        address: String,
        /// A manager's address (host:port).
        #[arg(long)]
        remote: String,
        /// This engine.
        #[arg(
            long,
            env = "DOCKER_HOST",
            default_value = "unix:///var/run/docker.sock"
        )]
        engine: String,
    },
}

/// drover's providers as InfraKit instance plugins (docs/plugins.md).
#[derive(Debug, Subcommand)]
pub enum PluginCommand {
    /// Serve one of drover's providers (local, incus, ec2, sim) as an InfraKit
    /// instance plugin (Instance/0.6.1 and 0.5.0) on a unix socket, until
    /// SIGINT or SIGTERM; the socket is removed on exit.
    #[command(
        after_help = "Examples:\n  drover plugin serve local --socket ~/.infrakit/plugins/drover-local --local-dir /var/lib/drover-local --local-pool 127.0.0.11-127.0.0.40\n  drover plugin serve sim --socket /tmp/plugins/sim\n\nExit codes: 0 stopped by a signal, 2 bad input (unknown provider, its flags missing, the socket in use)."
    )]
    Serve {
        /// The provider: local, incus, ec2 or sim.
        provider: String,
        /// The socket to listen on (owner-only; its file name is the plugin's name).
        #[arg(long)]
        socket: PathBuf,
        /// The provider's settings.
        #[command(flatten)]
        local: LocalArgs,
    },
}
