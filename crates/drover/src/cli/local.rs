//! Where the machines are: the providers' settings (the `local`
//! engines, Incus, EC2, hosts over SSH, external plugins).

use clap::Args;
use std::path::PathBuf;

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
    #[arg(long, env = "DROVER_INCUS_PROJECT", default_value = "default", value_parser = super::parse::NoSecret("--incus-project", false))]
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
    /// The ssh provider: the directory where it keeps its connections to
    /// the hosts (one OpenSSH control socket and client configuration per
    /// host) and the hosts' engine sockets forwarded over them (this
    /// user's only). Giving it enables the provider; its inventories, keys
    /// and known_hosts files come from the groups' properties (docs/ssh.md).
    #[arg(long, env = "DROVER_SSH_DIR", value_name = "DIR")]
    pub ssh_dir: Option<PathBuf>,
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
    #[arg(long, env = "AWS_REGION", value_name = "REGION", value_parser = super::parse::NoSecret("--ec2-region", false))]
    pub ec2_region: Option<String>,
    /// Another EC2 endpoint than the region's (a VPC endpoint, or moto's
    /// in tests), as `https://HOST[:PORT]`.
    #[arg(long, env = "DROVER_EC2_ENDPOINT", value_name = "URL", value_parser = super::parse::Ec2Endpoint)]
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
