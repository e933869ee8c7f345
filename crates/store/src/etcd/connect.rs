//! Reaching etcd: the `--store` address, the connection options (TLS,
//! user) and the first question that proves the store answers.

use super::refusal::{self, Peer};
use super::{EtcdStore, probe};
use crate::format::WriteFormat;
use crate::model::Limits;
use drover_spi::StoreError;
use etcd_client::{Certificate, Client, ConnectOptions, Identity, TlsOptions};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
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
/// neither. A refusal of this client's credentials is
/// [`StoreError::Refused`] (from the error itself, else from a direct look
/// at the endpoints, [`probe`]); anything else is `Unavailable` (retry).
async fn unusable(
    peer: &Peer,
    eps: &[String],
    tls: Option<Arc<rustls::ClientConfig>>,
    e: &etcd_client::Error,
) -> StoreError {
    if let Some(refused) = refusal::refusal(peer, e) {
        return refused;
    }
    // The client's error keeps its causes in the status it wraps.
    let inner: &(dyn std::error::Error + 'static) = match e {
        etcd_client::Error::GRpcStatus(s) => s,
        other => other,
    };
    let endpoints = &peer.shown;
    if let etcd_client::Error::GRpcStatus(s) = e
        && !crate::model::is_transport(inner)
    {
        return StoreError::Unavailable(format!(
            "etcd at {endpoints} could not answer ({}): retry, and see etcd's log if it \
             persists",
            s.message()
        ));
    }
    let cause = crate::model::root_cause(inner);
    let hostports: Vec<String> = eps.iter().map(|ep| host_port(ep)).collect();
    if let Some(refused) = probe::refusal(peer, &hostports, tls).await {
        return refused;
    }
    StoreError::Unavailable(format!(
        "cannot reach etcd at {endpoints} ({cause}): check that etcd is running there and \
         that --store names its client address (port 2379 by default)"
    ))
}

/// `http://h:p` → `h:p`.
fn host_port(ep: &str) -> String {
    ep.split_once("://").map_or(ep, |(_, hp)| hp).to_string()
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

/// The TLS files of `options`, read and checked before anything is
/// dialled (an unreadable or wrong file is bad input naming its option):
/// tonic's settings, and the same trust as a rustls config for [`probe`].
fn tls_material(
    options: &EtcdOptions,
    shown: &str,
) -> Result<(TlsOptions, Arc<rustls::ClientConfig>), StoreError> {
    use rustls::pki_types::pem::PemObject;
    use rustls::pki_types::{CertificateDer, PrivateKeyDer};
    let bad = |what: String| StoreError::BadAddress(format!("{what} for etcd at {shown}"));
    let read = |opt: &str, p: &PathBuf| {
        std::fs::read(p).map_err(|e| {
            bad(format!("cannot read ?{opt}={} ({e})", p.display()))
                .with(": check the path in --store")
        })
    };
    let certs =
        |opt: &str, p: &PathBuf, pem: &[u8], fix: &str| match CertificateDer::pem_slice_iter(pem)
            .collect::<Result<Vec<_>, _>>()
        {
            Ok(certs) if !certs.is_empty() => Ok(certs),
            _ => Err(bad(format!("?{opt}={} holds no PEM certificate", p.display())).with(fix)),
        };
    let mut t = TlsOptions::new();
    let mut roots = rustls::RootCertStore::empty();
    if let Some(ca) = &options.ca {
        let pem = read("ca", ca)?;
        let fix = ": give the CA certificate (PEM) that signed etcd's --cert-file";
        for cert in certs("ca", ca, &pem, fix)? {
            roots
                .add(cert)
                .map_err(|e| bad(format!("?ca={} ({e})", ca.display())).with(fix))?;
        }
        t = t.ca_certificate(Certificate::from_pem(pem));
    }
    let builder = rustls::ClientConfig::builder_with_provider(probe::provider())
        .with_safe_default_protocol_versions()
        .expect("ring supports the default protocol versions")
        .with_root_certificates(roots);
    let config = match (&options.cert, &options.key) {
        (Some(c), Some(k)) => {
            let (cert_pem, key_pem) = (read("cert", c)?, read("key", k)?);
            let chain = certs("cert", c, &cert_pem, ": give the client certificate (PEM)")?;
            let key = PrivateKeyDer::from_pem_slice(&key_pem).map_err(|_| {
                bad(format!("?key={} holds no PEM private key", k.display()))
                    .with(": give the client certificate's key (PEM)")
            })?;
            let config = builder.with_client_auth_cert(chain, key).map_err(|e| {
                bad(format!(
                    "?key={} does not go with ?cert={} ({e})",
                    k.display(),
                    c.display()
                ))
                .with(": give the certificate's own key")
            })?;
            t = t.identity(Identity::from_pem(cert_pem, key_pem));
            config
        }
        (None, None) => builder.with_no_client_auth(),
        _ => {
            return Err(bad("?cert= without ?key= (or ?key= without ?cert=)".into())
                .with(": give both, or neither"));
        }
    };
    Ok((t, Arc::new(config)))
}

/// A [`StoreError::BadAddress`] sentence with what to do appended.
trait With {
    fn with(self, fix: &str) -> StoreError;
}

impl With for StoreError {
    fn with(self, fix: &str) -> StoreError {
        match self {
            StoreError::BadAddress(m) => StoreError::BadAddress(format!("{m}{fix}")),
            other => other,
        }
    }
}

impl EtcdStore {
    /// Connects to `etcd://host:port[,host:port]` (or `etcds://` for TLS,
    /// which needs at least `options.ca`) and checks that it answers.
    ///
    /// # Errors
    /// [`StoreError::BadAddress`] for a malformed address or TLS file;
    /// [`StoreError::Refused`] when etcd refuses these credentials (user,
    /// password, certificates, TLS or not, the grant on the prefix);
    /// [`StoreError::Unavailable`] when it cannot be reached (retry).
    pub async fn connect(endpoints: &str, options: EtcdOptions) -> Result<EtcdStore, StoreError> {
        let (eps, tls) = parse_endpoints(endpoints)?;
        let shown = endpoints_shown(&eps);
        let mut co = ConnectOptions::new()
            .with_connect_timeout(Duration::from_secs(5))
            .with_timeout(Duration::from_secs(10));
        if let (Some(u), Some(p)) = (&options.user, &options.password) {
            co = co.with_user(u.clone(), p.clone());
        } else if let Some(u) = &options.user {
            return Err(StoreError::Refused(format!(
                "etcd at {shown}: --store names the user {u:?} but DROVER_ETCD_PASSWORD is not \
                 set: set it to that user's password"
            )));
        }
        let config = if tls {
            let (t, config) = tls_material(&options, &shown)?;
            co = co.with_tls(t);
            Some(config)
        } else if options.ca.is_some() || options.cert.is_some() || options.key.is_some() {
            return Err(StoreError::BadAddress(format!(
                "TLS files (?ca=, ?cert=, ?key=) given for {endpoints}: use etcds:// to connect \
                 with TLS"
            )));
        } else {
            None
        };
        let peer = Peer {
            shown,
            prefix: options.prefix.trim_end_matches('/').to_string(),
            user: options.user.clone(),
            tls,
            ca: options.ca.clone(),
            cert: options.cert.clone(),
        };
        let client = match Client::connect(eps.clone(), Some(co)).await {
            Ok(client) => client,
            Err(e) => return Err(unusable(&peer, &eps, config, &e).await),
        };
        let store = EtcdStore {
            client,
            prefix: peer.prefix.clone(),
            lease_ttl: options.lease_ttl,
            limits: options.limits,
            lease: Mutex::new(None),
            format: WriteFormat::default(),
            peer,
        };
        if let Err(e) = store.kv().get(store.key("rev"), None).await {
            return Err(unusable(&store.peer, &eps, config, &e).await);
        }
        Ok(store)
    }
}
