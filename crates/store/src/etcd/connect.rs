//! Reaching etcd: the `--store` address, the connection options (TLS,
//! user) and the first question that proves the store answers.

use super::EtcdStore;
use crate::format::WriteFormat;
use crate::model::Limits;
use drover_spi::StoreError;
use etcd_client::{Certificate, Client, ConnectOptions, Identity, TlsOptions};
use std::path::PathBuf;
use std::sync::Mutex;
use std::time::Duration;

/// Connection and layout options.
#[derive(Clone)]
pub struct EtcdOptions {
    /// Key prefix, without trailing slash (default `/drover/default`).
    pub prefix: String,
    /// CA bundle (PEM) to verify the servers (`etcds://`).
    pub ca: Option<PathBuf>,
    /// Client certificate (PEM), with `key`, for mutual TLS.
    pub cert: Option<PathBuf>,
    /// Client key (PEM).
    pub key: Option<PathBuf>,
    /// etcd user (auth enabled).
    pub user: Option<String>,
    /// etcd password for `user`. Never logged, never in a URL.
    pub password: Option<String>,
    /// Leader lease TTL (default 5 s).
    pub lease_ttl: Duration,
    /// History and event caps.
    pub limits: Limits,
}

impl std::fmt::Debug for EtcdOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EtcdOptions")
            .field("prefix", &self.prefix)
            .field("ca", &self.ca)
            .field("cert", &self.cert)
            .field("key", &self.key)
            .field("user", &self.user)
            .field("password", &self.password.as_ref().map(|_| "<redacted>"))
            .field("lease_ttl", &self.lease_ttl)
            .field("limits", &self.limits)
            .finish()
    }
}

impl Default for EtcdOptions {
    fn default() -> Self {
        EtcdOptions {
            prefix: "/drover/default".into(),
            ca: None,
            cert: None,
            key: None,
            user: None,
            password: None,
            lease_ttl: Duration::from_secs(5),
            limits: Limits::default(),
        }
    }
}

/// The endpoints as an operator wrote them (`10.0.0.1:2379, 10.0.0.2:2379`).
fn endpoints_shown(eps: &[String]) -> String {
    eps.iter()
        .map(|e| e.split_once("://").map_or(e.as_str(), |(_, hp)| hp))
        .collect::<Vec<_>>()
        .join(", ")
}

/// One sentence for an etcd that cannot be used at all, naming the
/// endpoints and what to check: the transport library's error chain
/// (`status: Unavailable, message: "tcp connect error", source: …`) says
/// neither.
fn unusable(endpoints: &str, e: &etcd_client::Error) -> StoreError {
    // The client's error keeps its causes in the status it wraps.
    let inner: &(dyn std::error::Error + 'static) = match e {
        etcd_client::Error::GRpcStatus(s) => s,
        other => other,
    };
    let cause = crate::model::root_cause(inner);
    match e {
        etcd_client::Error::GRpcStatus(s) if !crate::model::is_transport(inner) => {
            StoreError::Unavailable(format!(
                "etcd at {endpoints} refused the request ({}): check the user in --store \
                 and DROVER_ETCD_PASSWORD",
                s.message()
            ))
        }
        _ => StoreError::Unavailable(format!(
            "cannot reach etcd at {endpoints} ({cause}): check that etcd is running there \
             and that --store names its client address (port 2379 by default)"
        )),
    }
}

/// Splits `etcd://h:p,h:p` / `etcds://...` into endpoints and TLS-ness.
pub(crate) fn parse_endpoints(url: &str) -> Result<(Vec<String>, bool), StoreError> {
    let (rest, tls) = if let Some(r) = url.strip_prefix("etcds://") {
        (r, true)
    } else if let Some(r) = url.strip_prefix("etcd://") {
        (r, false)
    } else {
        return Err(StoreError::BadAddress(format!(
            "{url:?} is not an etcd address: write etcd://host:port[,host:port] \
             (or etcds:// for TLS)"
        )));
    };
    let rest = rest.split(['?', '/']).next().unwrap_or("");
    let scheme = if tls { "https" } else { "http" };
    let mut eps = Vec::new();
    for hostport in rest.split(',').filter(|s| !s.is_empty()) {
        check_endpoint(url, hostport)?;
        eps.push(format!("{scheme}://{hostport}"));
    }
    if eps.is_empty() {
        return Err(StoreError::BadAddress(format!(
            "{url:?} names no etcd endpoint: write etcd://host:port[,host:port]"
        )));
    }
    Ok((eps, tls))
}

/// `host:port` with a host and a numeric port: the etcd client would
/// otherwise read `host:notaport` as `host` on port 80 and dial it.
fn check_endpoint(url: &str, hostport: &str) -> Result<(), StoreError> {
    let bad = |why: String| {
        StoreError::BadAddress(format!(
            "--store {url:?}: the etcd endpoint {hostport:?} {why}; write host:port, \
             e.g. etcd://127.0.0.1:2379 (2379 is etcd's client port)"
        ))
    };
    let Some((host, port)) = hostport.rsplit_once(':') else {
        return Err(bad("has no port".into()));
    };
    let bracketed = host.starts_with('[') && host.ends_with(']');
    if host.is_empty() || (host.contains(':') && !bracketed) {
        return Err(bad(
            "has no host (an IPv6 address goes in brackets: [::1]:2379)".into(),
        ));
    }
    match port.parse::<u16>() {
        Ok(p) if p > 0 => Ok(()),
        _ => Err(bad(format!(
            "has the port {port:?}, not a number from 1 to 65535"
        ))),
    }
}

impl EtcdStore {
    /// Connects to `etcd://host:port[,host:port]` (or `etcds://` for TLS,
    /// which needs at least `options.ca`) and checks that it answers.
    pub async fn connect(endpoints: &str, options: EtcdOptions) -> Result<EtcdStore, StoreError> {
        let (eps, tls) = parse_endpoints(endpoints)?;
        let mut co = ConnectOptions::new()
            .with_connect_timeout(Duration::from_secs(5))
            .with_timeout(Duration::from_secs(10));
        if let (Some(u), Some(p)) = (&options.user, &options.password) {
            co = co.with_user(u.clone(), p.clone());
        } else if options.user.is_some() {
            return Err(StoreError::BadAddress(
                "etcd user given without a password: set DROVER_ETCD_PASSWORD".into(),
            ));
        }
        if tls {
            let read = |p: &PathBuf| {
                std::fs::read(p).map_err(|e| {
                    StoreError::BadAddress(format!("cannot read {}: {e}", p.display()))
                })
            };
            let mut t = TlsOptions::new();
            if let Some(ca) = &options.ca {
                t = t.ca_certificate(Certificate::from_pem(read(ca)?));
            }
            match (&options.cert, &options.key) {
                (Some(c), Some(k)) => t = t.identity(Identity::from_pem(read(c)?, read(k)?)),
                (None, None) => {}
                _ => {
                    return Err(StoreError::BadAddress(
                        "etcd client TLS needs both cert and key".into(),
                    ));
                }
            }
            co = co.with_tls(t);
        } else if options.ca.is_some() || options.cert.is_some() {
            return Err(StoreError::BadAddress(format!(
                "TLS files given for {endpoints}: use etcds:// to connect with TLS"
            )));
        }
        let shown = endpoints_shown(&eps);
        let client = Client::connect(eps, Some(co))
            .await
            .map_err(|e| unusable(&shown, &e))?;
        let store = EtcdStore {
            client,
            prefix: options.prefix.trim_end_matches('/').to_string(),
            lease_ttl: options.lease_ttl,
            limits: options.limits,
            lease: Mutex::new(None),
            format: WriteFormat::default(),
        };
        store
            .kv()
            .get(store.key("rev"), None)
            .await
            .map_err(|e| unusable(&shown, &e))?;
        Ok(store)
    }
}
