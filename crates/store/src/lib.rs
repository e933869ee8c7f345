//! # drover-store
//!
//! The three backends of [`drover_spi::Store`]:
//! - [`FileStore`] (`file:///path/state.db`): redb, one host, one writer
//!   at a time (the file lock is the leadership), readers beside it;
//! - [`EtcdStore`] (`etcd://host:port[,host:port]`, `etcds://` for TLS):
//!   keys under a prefix, txn compares, a leased leader record;
//! - [`SwarmStore`] (`swarm`, `swarm:ENDPOINT`): the swarm's own raft, as
//!   compressed labels of the swarm spec, written with the swarm object's
//!   version, reached like the docker CLI reaches an engine.
//!
//! Start with [`open`]. Every backend keeps the same contract (see
//! `README.md` and the contract tests in `tests/contract.rs`): spec commits
//! are compare-and-swap on the revision; every controller write is refused
//! by the store itself, atomically with the write, when the caller's epoch
//! is stale.
//!
//! Writing the store is the power to destroy the fleet: guard it like root.

// Production functions stay short enough to read at once (clippy.toml:
// 80 lines); tests may be long scenarios.
#![cfg_attr(not(test), deny(clippy::too_many_lines))]

mod address;
mod etcd;
mod file;
mod following;
mod format;
mod holder;
mod mem;
mod model;
mod swarm;
#[cfg(feature = "testkit")]
pub mod testkit;

pub use etcd::{EtcdOptions, EtcdStore};
pub use file::{Access, FileStore};
pub use following::FollowingStore;
pub use mem::MemStore;
pub use model::Limits;
pub use swarm::{MEASURED_RAFT_LIMIT, SwarmOptions, SwarmStore};

use address::{Address, parse};
use drover_spi::{Store, StoreError};
use std::time::Duration;

/// The backends [`open`] knows, by the scheme of their address.
pub const BACKENDS: &[&str] = &["file", "etcd", "swarm"];

/// How [`open_with`] opens a store.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OpenOptions {
    /// Create a file store whose file does not exist. Only commands that
    /// can start a cluster (apply, bootstrap, adopt, import, the
    /// controller) do: a typo in a read-only command's address must say
    /// "no store there", not show an empty store it just created.
    pub create: bool,
    /// Only read: a file store is opened read-only ([`Access::ReadOnly`]),
    /// so the command works beside the controller that writes it. Without
    /// it a file store is opened [`Access::Shared`]: one writer, readers
    /// beside it, a second writer refused at once naming the holder.
    pub read_only: bool,
    /// How long connecting and the first read may take. An endpoint that
    /// accepts and never answers would otherwise hold the caller for the
    /// backend's own timeouts (10 s for etcd, 60 s for an engine), silently.
    pub timeout: Duration,
}

/// The default of [`OpenOptions::timeout`]: a store on the same network
/// answers in milliseconds; 5 s leaves room for TLS and a slow link.
pub const DEFAULT_OPEN_TIMEOUT: Duration = Duration::from_secs(5);

impl Default for OpenOptions {
    fn default() -> Self {
        OpenOptions {
            create: true,
            read_only: false,
            timeout: DEFAULT_OPEN_TIMEOUT,
        }
    }
}

/// Opens the store at `url` as [`open_with`] does with the default
/// [`OpenOptions`] (a missing file store is created).
///
/// # Errors
/// As [`open_with`].
pub async fn open(url: &str) -> Result<Box<dyn Store>, StoreError> {
    open_with(url, OpenOptions::default()).await
}

/// Opens the store at `url`:
/// - `file:///path/state.db`
/// - `etcd://host:port[,host:port][?prefix=/drover/NAME]`, or `etcds://` with
///   `ca=`, `cert=`, `key=` (PEM paths) and `user=`; the password comes only
///   from the `DROVER_ETCD_PASSWORD` environment variable;
/// - `swarm` (the engine the docker CLI would use: `DOCKER_HOST` or the
///   default socket, TLS per `DOCKER_TLS_VERIFY` / `DOCKER_CERT_PATH`) or
///   `swarm:ENDPOINT` (`unix:///path/docker.sock`, `tcp://host:port`,
///   `https://host:port`).
///
/// # Errors
/// [`StoreError::BadAddress`] for anything else, naming the argument and
/// the accepted forms; [`StoreError::NotFound`] for a file store that does
/// not exist when `options.create` is false; [`StoreError::Unavailable`],
/// naming the endpoint, when it does not answer within `options.timeout`;
/// otherwise what the backend's constructor returns.
pub async fn open_with(url: &str, options: OpenOptions) -> Result<Box<dyn Store>, StoreError> {
    let address = parse(url)?;
    if let Address::File(path) = &address
        && !options.create
        && !path.exists()
    {
        return Err(StoreError::NotFound(format!(
            "--store {url}: no store there ({} does not exist); check the path \
             (apply, bootstrap or import create a store, no other command does)",
            path.display()
        )));
    }
    let what = address.describe();
    let opening = async {
        let store = connect(address, options.read_only).await?;
        let now_ms = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as u64);
        // Writes the previous format (the safe one) until this succeeds; a bad
        // heartbeat record is reported by whoever reads it next.
        let _ = store.negotiate_format(now_ms).await;
        Ok(store)
    };
    match tokio::time::timeout(options.timeout, opening).await {
        Ok(opened) => opened,
        Err(_) => Err(silent(&what, options.timeout)),
    }
}

/// The store `what` did not answer within `timeout`.
fn silent(what: &str, timeout: Duration) -> StoreError {
    StoreError::Unavailable(format!(
        "{what} did not answer within {}: check that the address in --store is the \
         store's and that nothing (a firewall, a proxy) holds the connection open \
         without answering; a slow link may need a longer --store-timeout",
        drover_core::spec::format_duration(timeout)
    ))
}

/// Opens the store at `url` as [`open_with`] does, except that a swarm
/// store follows the swarm ([`FollowingStore`]): opened through another
/// manager when the engine named is none, and read through another when
/// the one in use leaves. `machines` are the provider's engines, tried
/// after the managers the swarm itself lists. For commands, never for a
/// manager's own controller (its store is its own engine's).
///
/// # Errors
/// As [`open_with`]; a swarm store no manager of which answers is
/// [`StoreError::Unavailable`] naming every engine tried.
pub async fn open_following(
    url: &str,
    options: OpenOptions,
    machines: Option<std::sync::Arc<dyn drover_engine::PeerEndpoints>>,
) -> Result<Box<dyn Store>, StoreError> {
    let address = parse(url)?;
    let what = address.describe();
    let Address::Swarm(endpoint) = address else {
        return open_with(url, options).await;
    };
    let opening = async {
        let store = FollowingStore::open(endpoint.as_deref(), machines).await?;
        let _ = store.negotiate_format(now_ms()).await;
        Ok(Box::new(store) as Box<dyn Store>)
    };
    match tokio::time::timeout(options.timeout, opening).await {
        Ok(opened) => opened,
        Err(_) => Err(silent(&what, options.timeout)),
    }
}

fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// Whom the store at `url` can serve ([`Store::reach`]), known before it
/// is opened: a command refuses a `control:` the store cannot serve before
/// it makes or writes anything.
pub fn reach_of(url: &str) -> Result<drover_spi::Reach, StoreError> {
    use drover_spi::Reach;
    Ok(match parse(url)? {
        Address::File(_) => Reach::OneHost,
        Address::Swarm(_) => Reach::InRaft,
        Address::Etcd { .. } => Reach::Network,
    })
}

/// True when `url` names a file store (one writer at a time: a command
/// that wrote it and goes on reading opens it again read-only).
pub fn is_file_store(url: &str) -> bool {
    matches!(parse(url), Ok(Address::File(_)))
}

async fn connect(address: Address, read_only: bool) -> Result<Box<dyn Store>, StoreError> {
    Ok(match address {
        Address::File(path) => {
            let access = match read_only {
                true => Access::ReadOnly,
                false => Access::Shared,
            };
            Box::new(FileStore::open_as(path, access, Limits::default())?)
        }
        Address::Swarm(ep) => Box::new(SwarmStore::connect(ep.as_deref()).await?),
        Address::Etcd {
            endpoints,
            prefix,
            ca,
            cert,
            key,
            user,
        } => {
            let mut o = EtcdOptions {
                ca,
                cert,
                key,
                user,
                password: std::env::var("DROVER_ETCD_PASSWORD").ok(),
                ..EtcdOptions::default()
            };
            if let Some(p) = prefix {
                o.prefix = p;
            }
            Box::new(EtcdStore::connect(&endpoints, o).await?)
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_missing_file_store_is_created_only_when_asked() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("typo.db");
        let url = format!("file://{}", path.display());
        let existing = OpenOptions {
            create: false,
            ..OpenOptions::default()
        };
        match open_with(&url, existing).await {
            Err(StoreError::NotFound(m)) => assert!(m.contains("does not exist"), "{m}"),
            other => panic!("{:?}", other.map(|_| ())),
        }
        assert!(!path.exists());
        drop(open_with(&url, OpenOptions::default()).await.unwrap());
        assert!(path.exists());
        drop(open_with(&url, existing).await.unwrap());
    }
}
