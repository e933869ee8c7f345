//! The arguments of the engine-side helpers and of drover's providers
//! served as plugins.

use super::LocalArgs;
use clap::Subcommand;
use std::path::PathBuf;

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
        /// Managers' addresses (host:port), comma separated: tried in turn
        /// until one takes the join (a failed attempt is cleared first).
        #[arg(long)]
        remote: String,
        /// This engine.
        #[arg(
            long,
            env = "DOCKER_HOST",
            default_value = "unix:///var/run/docker.sock",
            value_parser = super::parse::NoSecret("--engine", false)
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
        after_help = "Examples:\n  drover plugin serve local --socket ~/.infrakit/plugins/drover-local --local-dir /var/lib/drover-local --local-pool 127.0.0.11-127.0.0.40\n  drover plugin serve sim --socket /tmp/plugins/sim\n\nExit codes: 0 stopped by a signal, 2 bad input (unknown provider, its flags missing, the socket in use, or something not a socket at its path: never replaced)."
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
