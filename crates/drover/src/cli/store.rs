//! Where the store is: every command that reads or writes the desired
//! state takes these.

use super::parse;
use clap::Args;

/// Where the store is.
#[derive(Debug, Args)]
pub struct StoreArgs {
    /// Store address: `file:///path/state.db`, `etcd://host:port`, `swarm`
    /// (the swarm's own raft, through the engine the docker CLI would use:
    /// DOCKER_HOST, DOCKER_TLS_VERIFY, DOCKER_CERT_PATH) or `swarm:ENDPOINT`.
    #[arg(long = "store", env = "DROVER_STORE", default_value = "swarm", value_parser = parse::NoSecret("--store", true))]
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
