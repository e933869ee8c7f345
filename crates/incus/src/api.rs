//! Incus's REST API on its unix socket: the few calls the provider makes,
//! each bounded in time, answers decoded into the shapes it reads. Every
//! change Incus makes is an operation the caller waits for, so a call that
//! returns has finished (or failed) on the server.

use http_body_util::{BodyExt, Full};
use hyper::body::Bytes;
use hyper::{Method, Request};
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use hyperlocal::{UnixConnector, Uri};
use serde::Deserialize;
use serde::de::DeserializeOwned;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// One request's bound: long enough for a create or a delete on a busy
/// host (the operation itself is waited for separately).
const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);
/// How long an operation (create, start, stop, delete) may run.
pub const OPERATION_TIMEOUT: Duration = Duration::from_secs(180);

/// Why an API call failed.
#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    /// The socket could not be reached, or the call timed out: Incus may
    /// or may not have done it.
    #[error("Incus at {socket} did not answer: {detail}")]
    Unreachable {
        /// The API socket.
        socket: String,
        /// What failed.
        detail: String,
    },
    /// Incus answered with an error status and its message.
    #[error("Incus refused ({status}): {message}")]
    Status {
        /// The HTTP status.
        status: u16,
        /// Incus's own message.
        message: String,
    },
    /// An operation ran and failed, with Incus's message.
    #[error("Incus operation failed: {0}")]
    Operation(String),
    /// The answer was not what the API documents.
    #[error("unexpected answer from Incus: {0}")]
    Decode(String),
}

impl ApiError {
    /// True when Incus says the thing is not there.
    pub fn is_not_found(&self) -> bool {
        matches!(self, ApiError::Status { status: 404, .. })
    }
}

/// Incus's response envelope.
#[derive(Debug, Deserialize)]
struct Envelope<T> {
    #[serde(rename = "type")]
    kind: String,
    #[serde(default)]
    error: String,
    #[serde(default)]
    error_code: u16,
    #[serde(default)]
    operation: String,
    metadata: Option<T>,
}

/// What a finished operation says.
#[derive(Debug, Deserialize)]
struct Operation {
    status: String,
    #[serde(default)]
    err: String,
    /// An exec's end (its status, where its output was recorded).
    #[serde(default)]
    metadata: Option<ExecEnd>,
}

/// An exec operation's metadata once it ended.
#[derive(Debug, Default, Deserialize)]
struct ExecEnd {
    #[serde(rename = "return", default)]
    status: Option<i32>,
    /// Recorded output files by stream number ("1", "2").
    #[serde(default)]
    output: std::collections::BTreeMap<String, String>,
}

/// A command's end inside an instance: its exit status and its output
/// (standard output, then standard error).
#[derive(Debug)]
pub struct Executed {
    /// Its exit status.
    pub status: i32,
    /// What it printed.
    pub output: String,
}

/// A client of one Incus server and project.
#[derive(Clone)]
pub struct Api {
    socket: PathBuf,
    project: String,
    client: Client<UnixConnector, Full<Bytes>>,
}

impl std::fmt::Debug for Api {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Api")
            .field("socket", &self.socket)
            .field("project", &self.project)
            .finish()
    }
}

/// A body to send: JSON, or a file's bytes with Incus's file headers.
pub enum Body<'a> {
    /// No body.
    Empty,
    /// A JSON document.
    Json(&'a serde_json::Value),
    /// A file for `POST /1.0/instances/NAME/files`: its bytes and mode.
    File { bytes: &'a [u8], mode: u32 },
    /// A directory for the same call.
    Directory { mode: u32 },
}

impl Api {
    /// A client of the Incus server on `socket`, acting in `project`.
    ///
    /// It keeps no idle connection: every request opens its own, which
    /// closes with the answer. Incus 6.0 accepts connections on its socket
    /// one at a time and reads each one's first bytes before it accepts the
    /// next, so one connection that is open but sends nothing stops its whole
    /// API. A pooling client leaves exactly that: when a request finds no idle
    /// connection it opens one, and if another request's connection comes
    /// back first it takes that one, parking the new, unused connection idle.
    /// Two machines started side by side did this here, and Incus then
    /// handled nothing for 90 s (LXC's start hooks timed out) or for good
    /// (docs/incus.md, "Known problems").
    pub fn new(socket: &Path, project: &str) -> Api {
        Api {
            socket: socket.to_path_buf(),
            project: project.to_string(),
            client: Client::builder(TokioExecutor::new())
                .pool_max_idle_per_host(0)
                .build(UnixConnector),
        }
    }

    /// `path` with the project and `query` (pairs, encoded) appended.
    fn url(&self, path: &str, query: &[(&str, &str)]) -> hyper::Uri {
        let mut q = form_urlencoded::Serializer::new(String::new());
        q.append_pair("project", &self.project);
        for (k, v) in query {
            q.append_pair(k, v);
        }
        Uri::new(&self.socket, &format!("{path}?{}", q.finish())).into()
    }

    fn unreachable(&self, detail: impl std::fmt::Display) -> ApiError {
        ApiError::Unreachable {
            socket: self.socket.display().to_string(),
            detail: detail.to_string(),
        }
    }

    /// One request; the envelope decoded, an error status turned into
    /// [`ApiError::Status`].
    async fn call<T: DeserializeOwned>(
        &self,
        method: Method,
        path: &str,
        query: &[(&str, &str)],
        body: Body<'_>,
        within: Duration,
    ) -> Result<Envelope<T>, ApiError> {
        let (status, body) = self.send(method, path, query, body, within).await?;
        let envelope: Envelope<T> = serde_json::from_slice(&body).map_err(|e| {
            ApiError::Decode(format!("{status}: {e}: {}", String::from_utf8_lossy(&body)))
        })?;
        if envelope.kind == "error" || !status.is_success() {
            return Err(ApiError::Status {
                status: if envelope.error_code != 0 {
                    envelope.error_code
                } else {
                    status.as_u16()
                },
                message: envelope.error,
            });
        }
        Ok(envelope)
    }

    /// A `GET` whose answer is raw bytes (a file's, a console log's), not an
    /// envelope; an error status is decoded as [`Self::call`] does.
    pub async fn get_raw(&self, path: &str, query: &[(&str, &str)]) -> Result<Bytes, ApiError> {
        let (status, body) = self
            .send(Method::GET, path, query, Body::Empty, REQUEST_TIMEOUT)
            .await?;
        if status.is_success() {
            return Ok(body);
        }
        let message = serde_json::from_slice::<Envelope<serde::de::IgnoredAny>>(&body)
            .map(|e| e.error)
            .unwrap_or_else(|_| String::from_utf8_lossy(&body).into_owned());
        Err(ApiError::Status {
            status: status.as_u16(),
            message,
        })
    }

    /// One request, within `within`: its status and body.
    async fn send(
        &self,
        method: Method,
        path: &str,
        query: &[(&str, &str)],
        body: Body<'_>,
        within: Duration,
    ) -> Result<(hyper::StatusCode, Bytes), ApiError> {
        let mut req = Request::builder().method(method).uri(self.url(path, query));
        let bytes = match body {
            Body::Empty => Bytes::new(),
            Body::Json(v) => {
                req = req.header("Content-Type", "application/json");
                Bytes::from(v.to_string())
            }
            Body::File { bytes, mode } => {
                req = file_headers(req, "file", mode);
                Bytes::copy_from_slice(bytes)
            }
            Body::Directory { mode } => {
                req = file_headers(req, "directory", mode);
                Bytes::new()
            }
        };
        let req = req
            .body(Full::new(bytes))
            .map_err(|e| ApiError::Decode(e.to_string()))?;
        let answer = async {
            let res = self
                .client
                .request(req)
                .await
                .map_err(|e| self.unreachable(e))?;
            let status = res.status();
            let body = res
                .into_body()
                .collect()
                .await
                .map_err(|e| self.unreachable(e))?
                .to_bytes();
            Ok::<_, ApiError>((status, body))
        };
        tokio::time::timeout(within, answer)
            .await
            .map_err(|_| self.unreachable(format!("no answer within {within:?}")))?
    }

    /// A `GET` whose metadata is a `T`.
    pub async fn get<T: DeserializeOwned>(
        &self,
        path: &str,
        query: &[(&str, &str)],
    ) -> Result<T, ApiError> {
        self.call::<T>(Method::GET, path, query, Body::Empty, REQUEST_TIMEOUT)
            .await?
            .metadata
            .ok_or_else(|| ApiError::Decode(format!("GET {path}: no metadata")))
    }

    /// A change: the request, then its operation waited for when Incus
    /// runs it in the background.
    pub async fn change(
        &self,
        method: Method,
        path: &str,
        query: &[(&str, &str)],
        body: Body<'_>,
    ) -> Result<(), ApiError> {
        let envelope = self
            .call::<serde::de::IgnoredAny>(method, path, query, body, REQUEST_TIMEOUT)
            .await?;
        if envelope.kind == "async" {
            self.wait(&envelope.operation).await?;
        }
        Ok(())
    }

    /// Waits for the operation at `path` (`/1.0/operations/ID`).
    async fn wait(&self, path: &str) -> Result<(), ApiError> {
        self.wait_within(path, OPERATION_TIMEOUT).await.map(drop)
    }

    /// Waits at most `within` for the operation at `path`; its metadata.
    async fn wait_within(&self, path: &str, within: Duration) -> Result<ExecEnd, ApiError> {
        let timeout = within.as_secs().max(1).to_string();
        let path = path.split('?').next().unwrap_or(path);
        let op: Operation = self
            .call::<Operation>(
                Method::GET,
                &format!("{path}/wait"),
                &[("timeout", &timeout)],
                Body::Empty,
                within + REQUEST_TIMEOUT,
            )
            .await?
            .metadata
            .ok_or_else(|| ApiError::Decode(format!("operation {path}: no metadata")))?;
        match op.status.as_str() {
            "Success" => Ok(op.metadata.unwrap_or_default()),
            _ => Err(ApiError::Operation(if op.err.is_empty() {
                op.status
            } else {
                op.err
            })),
        }
    }

    /// Runs `argv` in `instance` (no shell of the API's; nothing on any
    /// host's argv but this process's request), waiting at most `within`
    /// for its end: its status and output, the recorded output files
    /// deleted after they were read (nothing is left behind).
    pub async fn exec(
        &self,
        instance: &str,
        argv: &[String],
        within: Duration,
    ) -> Result<Executed, ApiError> {
        let body = serde_json::json!({
            "command": argv,
            "wait-for-websocket": false,
            "interactive": false,
            "record-output": true,
        });
        let path = format!("/1.0/instances/{instance}/exec");
        let envelope = self
            .call::<serde::de::IgnoredAny>(
                Method::POST,
                &path,
                &[],
                Body::Json(&body),
                REQUEST_TIMEOUT,
            )
            .await?;
        let end = self.wait_within(&envelope.operation, within).await?;
        let mut output = String::new();
        for file in end.output.values() {
            let file = file.split('?').next().unwrap_or(file);
            if let Ok(bytes) = self.get_raw(file, &[]).await {
                output.push_str(&String::from_utf8_lossy(&bytes));
            }
            let _ = self
                .call::<serde::de::IgnoredAny>(
                    Method::DELETE,
                    file,
                    &[],
                    Body::Empty,
                    REQUEST_TIMEOUT,
                )
                .await;
        }
        let status = end
            .status
            .ok_or_else(|| ApiError::Decode(format!("exec in {instance}: no exit status")))?;
        Ok(Executed { status, output })
    }
}

/// Incus's headers for a file or directory pushed into an instance: owned
/// by root, with `mode`.
fn file_headers(
    req: hyper::http::request::Builder,
    kind: &str,
    mode: u32,
) -> hyper::http::request::Builder {
    req.header("Content-Type", "application/octet-stream")
        .header("X-Incus-type", kind)
        .header("X-Incus-uid", "0")
        .header("X-Incus-gid", "0")
        .header("X-Incus-mode", format!("{mode:04o}"))
        .header("X-Incus-write", "overwrite")
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::{UnixListener, UnixStream};

    const ANSWER: &str = "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n\
        Content-Length: 31\r\n\r\n{\"type\":\"sync\",\"metadata\":\"ok\"}";

    /// Answers every request on `stream` (kept alive, as Incus does) until
    /// the client closes it.
    async fn serve(mut stream: UnixStream, mut head: Vec<u8>) {
        loop {
            while !head.windows(4).any(|w| w == b"\r\n\r\n") {
                let mut buf = [0u8; 1024];
                match stream.read(&mut buf).await {
                    Ok(0) | Err(_) => return,
                    Ok(n) => head.extend_from_slice(&buf[..n]),
                }
            }
            head.clear();
            if stream.write_all(ANSWER.as_bytes()).await.is_err() {
                return;
            }
        }
    }

    /// A server that accepts as Incus 6.0 does: the next connection only
    /// once the last one sent its first bytes. Counts the connections open.
    fn incus_like(socket: &Path, open: Arc<AtomicUsize>) {
        let listener = UnixListener::bind(socket).unwrap();
        tokio::spawn(async move {
            loop {
                let (mut stream, _) = listener.accept().await.unwrap();
                open.fetch_add(1, Ordering::SeqCst);
                let mut first = vec![0u8; 8];
                let n = stream.read(&mut first).await.unwrap_or(0);
                first.truncate(n);
                let open = open.clone();
                tokio::spawn(async move {
                    if n > 0 {
                        serve(stream, first).await;
                    }
                    open.fetch_sub(1, Ordering::SeqCst);
                });
            }
        });
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn no_connection_stays_open_after_its_answer_so_incus_keeps_accepting() {
        let dir = tempfile::tempdir().unwrap();
        let socket = dir.path().join("unix.socket");
        let open = Arc::new(AtomicUsize::new(0));
        incus_like(&socket, open.clone());
        let api = Api::new(&socket, "default");
        for round in 0..5 {
            let calls = (0..16).map(|_| {
                let api = api.clone();
                tokio::spawn(async move { api.get::<String>("/1.0", &[]).await })
            });
            for call in calls {
                let got = tokio::time::timeout(Duration::from_secs(10), call)
                    .await
                    .unwrap_or_else(|_| panic!("round {round}: the server stopped accepting"));
                assert_eq!(got.unwrap().unwrap(), "ok");
            }
        }
        let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
        while open.load(Ordering::SeqCst) > 0 && tokio::time::Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        assert_eq!(
            open.load(Ordering::SeqCst),
            0,
            "connections left open after their answers: an unused one would stop Incus accepting"
        );
    }
}
