//! When the first request to etcd fails in a way that does not say why
//! (`connection closed`, `tls handshake eof`, a broken pipe), ask one
//! endpoint directly, sending no secret, which side of the connection
//! refuses:
//!
//! - over `etcds://`, a TLS handshake with the same CA and client
//!   certificate: under TLS 1.3 the client has finished its handshake
//!   before etcd checks the client certificate, so the refusal (an alert)
//!   reaches tonic as a bare "connection closed" about half the time; read
//!   here, right after the handshake and before anything is written, it
//!   always arrives. A handshake cut before the server spoke TLS is checked
//!   once more with a plain gRPC question (no user, no password): an etcd
//!   that answers it speaks no TLS;
//! - over `etcd://`, a TLS handshake trusting no CA: a server that presents
//!   a certificate speaks only TLS.
//!
//! Each step is bounded ([`STEP`]); anything else learned is nothing, and
//! the caller keeps its "cannot reach" (retry).

use super::refusal::{self, Peer};
use drover_spi::StoreError;
use rustls::pki_types::ServerName;
use std::sync::Arc;
use std::time::Duration;
use tokio::io::AsyncReadExt;
use tokio::net::TcpStream;
use tokio::time::timeout;

/// The bound of each step (connect, handshake, the read after it).
const STEP: Duration = Duration::from_secs(2);

/// What one endpoint did with a TLS handshake.
#[derive(Debug)]
enum Handshake {
    /// Nothing learned: not reached, timed out, or an unexpected answer.
    Unknown,
    /// rustls rejected the server's certificate (rustls's reason).
    ServerNotTrusted(String),
    /// The server refused the client's certificate (the alert it sent).
    ClientRefused(String),
    /// The server cut the handshake, reset it, or answered something else
    /// than TLS (confirmed by [`answers_plain`] before it is said).
    NotTls,
    /// The handshake completed and the server kept the connection.
    Accepted,
}

/// A rustls config for `etcd://` endpoints: trusts no CA, so a server that
/// speaks TLS fails on its certificate (which proves it speaks TLS).
pub(crate) fn trusting_nothing() -> Arc<rustls::ClientConfig> {
    let config = rustls::ClientConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .expect("ring supports the default protocol versions")
        .with_root_certificates(rustls::RootCertStore::empty())
        .with_no_client_auth();
    Arc::new(config)
}

/// The crypto provider tonic (etcd-client's `tls` feature) uses too.
pub(crate) fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// `host:port` → the name rustls checks the certificate against.
fn server_name(hostport: &str) -> Option<ServerName<'static>> {
    let host = hostport.rsplit_once(':')?.0;
    let host = host.trim_start_matches('[').trim_end_matches(']');
    ServerName::try_from(host.to_string()).ok()
}

/// The rustls error an I/O error of tokio-rustls carries, as text.
fn tls_text(e: &std::io::Error) -> String {
    e.get_ref()
        .map_or_else(|| e.to_string(), ToString::to_string)
}

async fn handshake(hostport: &str, config: Arc<rustls::ClientConfig>) -> Handshake {
    let Some(name) = server_name(hostport) else {
        return Handshake::Unknown;
    };
    let Ok(Ok(tcp)) = timeout(STEP, TcpStream::connect(hostport)).await else {
        return Handshake::Unknown;
    };
    let connector = tokio_rustls::TlsConnector::from(config);
    let mut stream = match timeout(STEP, connector.connect(name, tcp)).await {
        Err(_) => return Handshake::Unknown,
        Ok(Err(e)) => {
            let text = tls_text(&e);
            return if let Some(d) = text.split_once("invalid peer certificate:") {
                Handshake::ServerNotTrusted(d.1.trim().to_string())
            } else if let Some((_, alert)) = text.split_once("received fatal alert:") {
                match refusal::is_certificate_alert(alert.trim()) {
                    true => Handshake::ClientRefused(format!("alert {}", alert.trim())),
                    false => Handshake::Unknown,
                }
            } else {
                // "tls handshake eof", bytes that are no TLS record, or a
                // reset (a server closing on the unread rest of the hello):
                // no TLS answer, which the caller confirms with a plain one.
                Handshake::NotTls
            };
        }
        Ok(Ok(s)) => s,
    };
    // Read before writing anything: the server has then read all we sent,
    // so its alert is not lost to a reset when it closes.
    let mut byte = [0u8; 1];
    match timeout(STEP / 2, stream.read(&mut byte)).await {
        // Silent for a while, or talking: it kept the connection.
        Err(_) | Ok(Ok(1..)) => Handshake::Accepted,
        Ok(Err(e)) => {
            let text = tls_text(&e);
            match text.split_once("received fatal alert:") {
                Some((_, alert)) if refusal::is_certificate_alert(alert.trim()) => {
                    Handshake::ClientRefused(format!("alert {}", alert.trim()))
                }
                _ => Handshake::Unknown,
            }
        }
        Ok(Ok(0)) => Handshake::Unknown,
    }
}

/// True when a plain (no TLS) etcd answers at `hostport`: any answer of
/// the server itself, an error included. No user, no password is sent.
async fn answers_plain(hostport: &str) -> bool {
    let options = etcd_client::ConnectOptions::new()
        .with_connect_timeout(STEP)
        .with_timeout(STEP);
    let asked = async {
        let mut client =
            etcd_client::Client::connect([format!("http://{hostport}")], Some(options)).await?;
        client.status().await
    };
    match timeout(STEP * 2, asked).await {
        Ok(Ok(_)) => true,
        Ok(Err(etcd_client::Error::GRpcStatus(s))) => std::error::Error::source(&s).is_none(),
        _ => false,
    }
}

/// Why `hostports` refuse this client, when a direct look tells for sure;
/// `config` is the TLS the client uses (`etcds://`), else `None`.
pub(crate) async fn refusal(
    peer: &Peer,
    hostports: &[String],
    config: Option<Arc<rustls::ClientConfig>>,
) -> Option<StoreError> {
    for hostport in hostports {
        let found = match &config {
            Some(c) => match handshake(hostport, c.clone()).await {
                Handshake::ServerNotTrusted(d) => Some(refusal::server_not_trusted(peer, &d)),
                Handshake::ClientRefused(how) => {
                    Some(refusal::client_certificate_refused(peer, &how))
                }
                Handshake::NotTls if answers_plain(hostport).await => Some(refusal::not_tls(peer)),
                _ => None,
            },
            None => match handshake(hostport, trusting_nothing()).await {
                Handshake::ServerNotTrusted(_) | Handshake::ClientRefused(_) => {
                    Some(refusal::only_tls(peer))
                }
                _ => None,
            },
        };
        if found.is_some() {
            return found;
        }
    }
    None
}
