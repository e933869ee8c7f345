//! What etcd's refusals mean for the operator: a failed request whose
//! cause is this client's credentials (user, password, certificates, TLS
//! or not) is [`StoreError::Refused`], one sentence naming the endpoints
//! and the option to fix, never the password; everything else stays
//! [`StoreError::Unavailable`] (retry).
//!
//! The texts matched are what etcd 3.4 and `etcd-client` 0.21 (tonic over
//! rustls) return, observed against a real etcd
//! (`crates/store/tests/credentials.rs`):
//!
//! | case | what the client sees |
//! |---|---|
//! | wrong user or password | `InvalidArgument`, `etcdserver: authentication failed, invalid user ID or password` |
//! | no user, authentication on | `InvalidArgument`, `etcdserver: user name is empty` (with a client certificate etcd takes its common name for the user: `PermissionDenied`) |
//! | a user without the grant | `PermissionDenied`, `etcdserver: permission denied` |
//! | a user, authentication off | `FailedPrecondition`, `etcdserver: authentication is not enabled` |
//! | etcd's certificate not trusted | transport error `invalid peer certificate: UnknownIssuer` (or `BadSignature`, …) |
//! | client certificate missing or refused | `received fatal alert: BadCertificate`, or only `connection closed` (TLS 1.3: the client is done with the handshake before etcd checks its certificate; see [`super::probe`]) |

use drover_spi::StoreError;
use std::path::PathBuf;

/// The store as messages name it: no secret in here.
#[derive(Debug, Clone)]
pub(crate) struct Peer {
    /// The endpoints as an operator wrote them (`10.0.0.1:2379, 10.0.0.2:2379`).
    pub(crate) shown: String,
    /// The key prefix.
    pub(crate) prefix: String,
    /// The etcd user (`?user=`).
    pub(crate) user: Option<String>,
    /// `etcds://`.
    pub(crate) tls: bool,
    /// `?ca=`.
    pub(crate) ca: Option<PathBuf>,
    /// `?cert=`.
    pub(crate) cert: Option<PathBuf>,
}

/// The texts of `e` and of every cause below it (an I/O error's own
/// payload included: rustls's errors travel inside `std::io::Error`).
fn texts(e: &etcd_client::Error) -> Vec<String> {
    let mut out = vec![e.to_string()];
    let mut cur: Option<&(dyn std::error::Error + 'static)> = match e {
        etcd_client::Error::GRpcStatus(s) => {
            out.push(s.message().to_string());
            std::error::Error::source(s)
        }
        etcd_client::Error::TransportError(t) => Some(t),
        etcd_client::Error::IoError(io) => Some(io),
        _ => None,
    };
    while let Some(c) = cur {
        out.push(c.to_string());
        if let Some(inner) = c
            .downcast_ref::<std::io::Error>()
            .and_then(|io| io.get_ref())
        {
            out.push(inner.to_string());
        }
        cur = c.source();
    }
    out
}

/// The text after `marker` in the innermost of `texts` holding it (the
/// outer layers quote their causes, with more around them).
fn after<'a>(texts: &'a [String], marker: &str) -> Option<&'a str> {
    texts
        .iter()
        .rev()
        .find_map(|t| t.split_once(marker).map(|(_, rest)| rest.trim()))
}

/// A refusal `e` shows for certain, or `None` (maybe transient, or
/// ambiguous: then [`super::probe`] may tell).
pub(crate) fn refusal(peer: &Peer, e: &etcd_client::Error) -> Option<StoreError> {
    let texts = texts(e);
    if let etcd_client::Error::GRpcStatus(s) = e
        && std::error::Error::source(s).is_none()
    {
        return answered(peer, s.message());
    }
    if let Some(detail) = after(&texts, "invalid peer certificate:") {
        return Some(server_not_trusted(peer, detail));
    }
    if let Some(alert) = after(&texts, "received fatal alert:")
        && is_certificate_alert(alert)
    {
        return Some(client_certificate_refused(peer, &format!("alert {alert}")));
    }
    None
}

/// A failed request of a connected store as a [`StoreError`]: a refusal
/// of this client's credentials or grants is `Refused` (a password changed
/// or a role revoked while drover runs), etcd's request limit `TooLarge`,
/// the rest `Unavailable` (retry).
pub(crate) fn store_error(peer: &Peer, e: etcd_client::Error) -> StoreError {
    if let Some(refused) = refusal(peer, &e) {
        return refused;
    }
    match &e {
        etcd_client::Error::GRpcStatus(s) if s.message().contains("too large") => {
            StoreError::TooLarge(format!("etcd: {}", s.message()))
        }
        _ => crate::model::unavailable("etcd", e),
    }
}

/// TLS alerts a server sends when it does not accept the client's
/// certificate (rustls's names; Go's etcd sends `BadCertificate` both for
/// none and for one it does not trust).
pub(crate) fn is_certificate_alert(alert: &str) -> bool {
    [
        "BadCertificate",
        "CertificateRequired",
        "UnknownCA",
        "UnsupportedCertificate",
        "CertificateUnknown",
        "CertificateRevoked",
        "CertificateExpired",
        "AccessDenied",
    ]
    .iter()
    .any(|a| alert.starts_with(a))
}

/// etcd answered the request with an error about who asks.
fn answered(peer: &Peer, message: &str) -> Option<StoreError> {
    let e = &peer.shown;
    let text = if message.contains("authentication failed") {
        let who = peer.user.as_deref().unwrap_or_default();
        format!(
            "etcd at {e} refused the user {who:?} (authentication failed: wrong user name or \
             password): check ?user= in --store and the password in DROVER_ETCD_PASSWORD"
        )
    } else if message.contains("user name is empty") {
        format!(
            "etcd at {e} requires a user (authentication is on there) and --store names none: \
             add ?user=NAME to --store and set its password in DROVER_ETCD_PASSWORD"
        )
    } else if message.contains("authentication is not enabled") {
        let who = peer.user.as_deref().unwrap_or_default();
        format!(
            "etcd at {e} has authentication off, yet --store names the user {who:?}: remove \
             ?user= (and DROVER_ETCD_PASSWORD), or turn authentication on in etcd"
        )
    } else if message.contains("permission denied") {
        denied(peer)
    } else {
        return None;
    };
    Some(StoreError::Refused(text))
}

/// `PermissionDenied`: the user (or, without one, the client certificate's
/// common name) has no grant on drover's keys.
fn denied(peer: &Peer) -> String {
    let (e, p) = (&peer.shown, &peer.prefix);
    match &peer.user {
        Some(u) => format!(
            "etcd at {e} denied the user {u:?} access to the prefix {p} (permission denied): \
             grant one of its roles readwrite on it (etcdctl role grant-permission ROLE \
             --prefix=true readwrite {p}/), or name a user that has it with ?user="
        ),
        None if peer.tls => format!(
            "etcd at {e} denied access to the prefix {p}: authentication is on there and \
             --store names no user (etcd then takes the client certificate's common name for \
             one): add ?user=NAME to --store and set its password in DROVER_ETCD_PASSWORD"
        ),
        None => format!(
            "etcd at {e} denied access to the prefix {p}: authentication is on there and \
             --store names no user: add ?user=NAME to --store and set its password in \
             DROVER_ETCD_PASSWORD"
        ),
    }
}

/// rustls rejected the server's certificate (`detail`: rustls's name for
/// why, `UnknownIssuer`, `BadSignature`, `NotValidForName…`, `Expired…`).
pub(crate) fn server_not_trusted(peer: &Peer, detail: &str) -> StoreError {
    let e = &peer.shown;
    let detail = detail.trim();
    StoreError::Refused(if detail.starts_with("NotValidForName") {
        format!(
            "etcd at {e} presented a certificate that is not for the host in --store \
             (invalid peer certificate: {detail}): connect by a name or address its \
             subjectAltName lists, or reissue etcd's certificate with this one"
        )
    } else if detail.starts_with("Expired") || detail.starts_with("NotValidYet") {
        format!(
            "etcd at {e} presented a certificate outside its validity period (invalid peer \
             certificate: {detail}): renew etcd's --cert-file, or check this host's clock"
        )
    } else if let Some(ca) = &peer.ca {
        format!(
            "etcd at {e} presented a certificate the CA in ?ca={} did not sign (invalid peer \
             certificate: {detail}): give in ?ca= the CA that signed etcd's --cert-file",
            ca.display()
        )
    } else {
        format!(
            "etcd at {e} presented a certificate drover cannot verify (invalid peer \
             certificate: {detail}) and --store names no CA: add ?ca=FILE, the CA that signed \
             etcd's --cert-file"
        )
    })
}

/// The server refused the client's certificate (or that it sent none):
/// `how` is what it did (`alert BadCertificate`).
pub(crate) fn client_certificate_refused(peer: &Peer, how: &str) -> StoreError {
    let e = &peer.shown;
    StoreError::Refused(match &peer.cert {
        None => format!(
            "etcd at {e} requires a client certificate ({how} when none was sent) and --store \
             gives none: add ?cert=FILE&key=FILE, a certificate signed by the CA in etcd's \
             --trusted-ca-file"
        ),
        Some(cert) => format!(
            "etcd at {e} refused the client certificate ?cert={} ({how}): give in ?cert= and \
             ?key= a certificate for client authentication signed by the CA in etcd's \
             --trusted-ca-file",
            cert.display()
        ),
    })
}

/// `etcds://` to a server that answered plain gRPC.
pub(crate) fn not_tls(peer: &Peer) -> StoreError {
    StoreError::Refused(format!(
        "etcd at {} answers without TLS, and etcds:// asks for TLS: write etcd:// in --store \
         (without ?ca=, ?cert=, ?key=), or turn TLS on in etcd (--cert-file, --key-file)",
        peer.shown
    ))
}

/// `etcd://` to a server that answers only TLS.
pub(crate) fn only_tls(peer: &Peer) -> StoreError {
    StoreError::Refused(format!(
        "etcd at {} answers only TLS: write etcds:// in --store with ?ca=FILE, the CA that \
         signed its certificate (and ?cert=FILE&key=FILE if it requires client certificates)",
        peer.shown
    ))
}

#[cfg(test)]
mod tests;
