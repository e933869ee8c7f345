//! # drover-store
//!
//! The three backends of [`drover_spi::Store`]:
//! - [`FileStore`] (`file:///path/state.db`): redb, one host, one controller
//!   (the file lock is the leadership);
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

mod etcd;
mod file;
mod format;
mod mem;
mod model;
mod swarm;
pub mod testkit;

pub use etcd::{EtcdOptions, EtcdStore};
pub use file::FileStore;
pub use mem::MemStore;
pub use model::Limits;
pub use swarm::{MEASURED_RAFT_LIMIT, SwarmOptions, SwarmStore};

use drover_spi::{Store, StoreError};
use std::path::PathBuf;
use std::time::Duration;

/// The backends [`open`] knows, by the scheme of their address.
pub const BACKENDS: &[&str] = &["file", "etcd", "swarm"];

/// What [`open`] accepts, for error messages.
const FORMS: &str = "file:///path/state.db, etcd://host:port[,host:port], \
                     etcds://host:port[?ca=..&cert=..&key=..&user=..], swarm (DOCKER_HOST) or \
                     swarm:ENDPOINT (unix:///path/docker.sock, tcp://host:port, https://host:port)";

/// A parsed store address.
#[derive(Debug, Clone, PartialEq)]
enum Address {
    File(PathBuf),
    Etcd {
        endpoints: String,
        prefix: Option<String>,
        ca: Option<PathBuf>,
        cert: Option<PathBuf>,
        key: Option<PathBuf>,
        user: Option<String>,
    },
    Swarm(Option<String>),
}

fn bad(url: &str, why: &str) -> StoreError {
    StoreError::BadAddress(format!("--store {url:?}: {why}; accepted forms: {FORMS}"))
}

fn parse(url: &str) -> Result<Address, StoreError> {
    if let Some(path) = url.strip_prefix("file://") {
        if !path.starts_with('/') {
            return Err(bad(
                url,
                "a file store needs an absolute path (three slashes: file:///var/lib/drover/state.db)",
            ));
        }
        return Ok(Address::File(PathBuf::from(path)));
    }
    if url == "swarm" {
        return Ok(Address::Swarm(None));
    }
    if let Some(ep) = url.strip_prefix("swarm:") {
        // The engine client checks the endpoint itself when connecting.
        if ep.is_empty() {
            return Err(bad(
                url,
                "name the engine after swarm: (swarm:unix:///var/run/docker.sock), \
                 or write swarm alone for DOCKER_HOST",
            ));
        }
        return Ok(Address::Swarm(Some(ep.to_string())));
    }
    if url.starts_with("etcd://") || url.starts_with("etcds://") {
        let (base, query) = url.split_once('?').unwrap_or((url, ""));
        etcd::parse_endpoints(base)?;
        let (mut prefix, mut ca, mut cert, mut key, mut user) = (None, None, None, None, None);
        for pair in query.split('&').filter(|p| !p.is_empty()) {
            let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
            match k {
                "prefix" => prefix = Some(v.to_string()),
                "ca" => ca = Some(PathBuf::from(v)),
                "cert" => cert = Some(PathBuf::from(v)),
                "key" => key = Some(PathBuf::from(v)),
                "user" => user = Some(v.to_string()),
                "password" => {
                    return Err(bad(
                        "etcd://…",
                        "never put a password in the store address (it would show in \
                         process listings); set DROVER_ETCD_PASSWORD instead",
                    ));
                }
                other => {
                    return Err(bad(
                        url,
                        &format!(
                            "unknown etcd option {other:?} (known: prefix, ca, cert, key, user)"
                        ),
                    ));
                }
            }
        }
        return Ok(Address::Etcd {
            endpoints: base.to_string(),
            prefix,
            ca,
            cert,
            key,
            user,
        });
    }
    Err(bad(url, "unknown store address"))
}

/// How [`open_with`] opens a store.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OpenOptions {
    /// Create a file store whose file does not exist. Only commands that
    /// can start a cluster (apply, bootstrap, adopt, import, the
    /// controller) do: a typo in a read-only command's address must say
    /// "no store there", not show an empty store it just created.
    pub create: bool,
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
        let store = connect(address).await?;
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
        Err(_) => Err(StoreError::Unavailable(format!(
            "{what} did not answer within {}: check that the address in --store is the \
             store's and that nothing (a firewall, a proxy) holds the connection open \
             without answering; a slow link may need a longer --store-timeout",
            drover_core::spec::format_duration(options.timeout)
        ))),
    }
}

impl Address {
    /// The store as one phrase, for messages ("etcd at 10.0.0.1:2379").
    fn describe(&self) -> String {
        match self {
            Address::File(path) => format!("the file store {}", path.display()),
            Address::Etcd { endpoints, .. } => {
                let hosts = endpoints.split_once("://").map_or("", |(_, h)| h);
                format!("etcd at {}", hosts.replace(',', ", "))
            }
            Address::Swarm(Some(ep)) => format!("the docker engine at {ep}"),
            Address::Swarm(None) => format!(
                "the docker engine at {}",
                drover_engine::DockerEnv::from_process().host(None)
            ),
        }
    }
}

async fn connect(address: Address) -> Result<Box<dyn Store>, StoreError> {
    Ok(match address {
        Address::File(path) => Box::new(FileStore::open(path)?),
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

    fn err(url: &str) -> String {
        match parse(url) {
            Err(e) => e.to_string(),
            Ok(a) => panic!("{url} parsed as {a:?}"),
        }
    }

    #[test]
    fn parses_every_form() {
        assert_eq!(
            parse("file:///var/lib/drover/state.db").unwrap(),
            Address::File("/var/lib/drover/state.db".into())
        );
        assert_eq!(parse("swarm").unwrap(), Address::Swarm(None));
        assert_eq!(
            parse("swarm:unix:///run/d.sock").unwrap(),
            Address::Swarm(Some("unix:///run/d.sock".into()))
        );
        assert_eq!(
            parse("swarm:tcp://10.0.0.5:2376").unwrap(),
            Address::Swarm(Some("tcp://10.0.0.5:2376".into()))
        );
        match parse("etcds://a:2379,b:2379?prefix=/drover/x&ca=/ca.pem&user=u").unwrap() {
            Address::Etcd {
                endpoints,
                prefix,
                ca,
                user,
                ..
            } => {
                assert_eq!(endpoints, "etcds://a:2379,b:2379");
                assert_eq!(prefix.as_deref(), Some("/drover/x"));
                assert_eq!(ca, Some(PathBuf::from("/ca.pem")));
                assert_eq!(user.as_deref(), Some("u"));
            }
            a => panic!("{a:?}"),
        }
        assert_eq!(
            etcd::parse_endpoints("etcd://127.0.0.1:2379,10.0.0.2:2379").unwrap(),
            (
                vec![
                    "http://127.0.0.1:2379".to_string(),
                    "http://10.0.0.2:2379".to_string()
                ],
                false
            )
        );
    }

    #[test]
    fn refuses_the_rest_clearly() {
        assert!(err("/var/lib/state.db").contains("--store"));
        assert!(err("/var/lib/state.db").contains("file:///"));
        assert!(err("file://state.db").contains("absolute path"));
        assert!(err("swarm:").contains("DOCKER_HOST"));
        assert!(err("etcd://").contains("no etcd endpoint"));
        assert!(err("etcd://h:1?bogus=1").contains("unknown etcd option"));
        let e = err("etcd://h:1?user=u&password=hunter2");
        assert!(
            e.contains("DROVER_ETCD_PASSWORD") && !e.contains("hunter2"),
            "{e}"
        );
        assert!(err("redis://h").contains("unknown store address"));
        for (url, why) in [
            ("etcd://h:notaport", "not a number"),
            ("etcd://h:0", "not a number"),
            ("etcd://h:2379,g", "has no port"),
            ("etcd://:2379", "has no host"),
            ("etcd://::1:2379", "has no host"),
        ] {
            let e = err(url);
            assert!(e.contains("--store") && e.contains(why), "{url}: {e}");
        }
        assert!(parse("etcd://[::1]:2379").is_ok());
    }

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
