//! One JSON-RPC call to a plugin's socket: `POST /` with the request,
//! the response envelope checked (version, id, result or error). Time
//! bounds belong to the caller, which knows whether a call that got no
//! answer may have been done.

use crate::wire;
use http_body_util::{BodyExt, Full};
use hyper::body::Bytes;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use hyperlocal::{UnixConnector, Uri};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

/// How a call failed, by what it means for the plugin's state.
#[derive(Debug, Clone, thiserror::Error)]
pub(crate) enum CallError {
    /// The socket could not be connected: nothing was sent.
    #[error("no connection to {socket}: {detail}")]
    NotSent {
        /// The plugin's socket.
        socket: String,
        /// What failed.
        detail: String,
    },
    /// Sent, but the connection broke before a whole answer came back:
    /// it may have been done.
    #[error("sent, but the answer was lost: {0}")]
    Lost(String),
    /// Sent, and no answer within the caller's bound (the connection still
    /// up: the plugin is slow or hung): it may have been done.
    #[error("no answer within {0:?}")]
    TimedOut(std::time::Duration),
    /// The plugin answered with a JSON-RPC error.
    #[error("{} (JSON-RPC error {})", .0.message, .0.code)]
    Rpc(wire::RpcError),
    /// The answer is not a JSON-RPC 2.0 response to this request (an HTTP
    /// error page, another protocol, garbage).
    #[error("not a JSON-RPC answer: {0}")]
    Malformed(String),
}

/// A client of one plugin socket; cheap to clone (a call may outlive its
/// caller's wait, see `client.rs`).
#[derive(Clone)]
pub(crate) struct Rpc {
    socket: PathBuf,
    http: Client<UnixConnector, Full<Bytes>>,
    next_id: Arc<AtomicU64>,
}

/// The longest answer read before the body is called malformed: no SPI
/// answer of a sane plugin comes near it.
const MAX_ANSWER: usize = 64 << 20;

impl Rpc {
    /// A client of the plugin listening on `socket`.
    pub(crate) fn new(socket: &Path) -> Rpc {
        Rpc {
            socket: socket.to_path_buf(),
            http: Client::builder(TokioExecutor::new()).build(UnixConnector),
            next_id: Arc::new(AtomicU64::new(1)),
        }
    }

    /// Calls `method` with `params`; the result's value.
    pub(crate) async fn call(&self, method: &str, params: Value) -> Result<Value, CallError> {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let body = serde_json::to_vec(&wire::Request {
            jsonrpc: "2.0".into(),
            method: method.into(),
            params,
            id: id.into(),
        })
        .map_err(|e| CallError::Malformed(e.to_string()))?;
        let req = hyper::Request::post(hyper::Uri::from(Uri::new(&self.socket, "/")))
            .header("Content-Type", "application/json")
            .body(Full::new(Bytes::from(body)))
            .map_err(|e| CallError::Malformed(e.to_string()))?;
        let res = self.http.request(req).await.map_err(|e| {
            if e.is_connect() {
                CallError::NotSent {
                    socket: self.socket.display().to_string(),
                    detail: source_chain(&e),
                }
            } else {
                CallError::Lost(source_chain(&e))
            }
        })?;
        let status = res.status();
        let body = res
            .into_body()
            .collect()
            .await
            .map_err(|e| CallError::Lost(source_chain(&e)))?
            .to_bytes();
        if body.len() > MAX_ANSWER {
            return Err(CallError::Malformed(format!(
                "an answer of {} bytes",
                body.len()
            )));
        }
        let answer: wire::Response = serde_json::from_slice(&body).map_err(|e| {
            let text = String::from_utf8_lossy(&body[..body.len().min(200)]).into_owned();
            CallError::Malformed(format!("HTTP {status}, {e}: {text:?}"))
        })?;
        if answer.jsonrpc != "2.0" || answer.id != id {
            return Err(CallError::Malformed(format!(
                "version {:?}, id {} for request {id}",
                answer.jsonrpc, answer.id
            )));
        }
        match (answer.result, answer.error) {
            (_, Some(e)) => Err(CallError::Rpc(e)),
            (Some(v), None) => Ok(v),
            (None, None) => Err(CallError::Malformed("neither result nor error".into())),
        }
    }
}

/// An error with its causes, which hyper keeps in its sources.
fn source_chain(e: &dyn std::error::Error) -> String {
    let mut out = e.to_string();
    let mut cur = e.source();
    while let Some(s) = cur {
        out.push_str(": ");
        out.push_str(&s.to_string());
        cur = s.source();
    }
    out
}
