//! Test plugins and the contract every provider keeps, for this crate's
//! tests: a scriptable fake plugin speaking raw HTTP (so it can also
//! misbehave), drover's own server over the simulator, the Python plugin,
//! and a raw client for the server's side of the wire. Everything started
//! is stopped and removed when its guard drops, also when a test fails.

#![allow(dead_code)] // each test file uses a part

use drover_core::spec::PluginAddress;
use drover_plugin::server;
use drover_plugin::{PluginProvider, Timeouts};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{UnixListener, UnixStream};

/// A golden fixture: `request` and `response`.
pub fn fixture(name: &str) -> Value {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(format!("{name}.json"));
    serde_json::from_str(&std::fs::read_to_string(&path).unwrap())
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// A short-pathed directory (socket paths are limited to 108 bytes).
pub fn short_dir() -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix("dp")
        .tempdir_in("/tmp")
        .unwrap()
}

/// How the fake plugin answers one request.
pub enum Reply {
    /// A JSON-RPC response; its `id` is set to the request's.
    Json(Value),
    /// Raw bytes after an HTTP status line (an error page, not JSON).
    Http(u16, String),
    /// Bytes that are no HTTP at all, then the connection closes.
    Garbage(&'static str),
    /// The JSON answer after a delay.
    Late(Duration, Value),
    /// No answer, ever.
    Hang,
    /// The connection closes before any answer (the plugin died mid-call).
    Die,
}

/// A function from a request to its reply.
pub type Script = Arc<dyn Fn(&Value) -> Reply + Send + Sync>;

/// A plugin whose every answer a test scripts, recording the requests.
pub struct FakePlugin {
    /// Its socket.
    pub socket: PathBuf,
    /// Every request body, in order.
    pub seen: Arc<Mutex<Vec<Value>>>,
    task: tokio::task::JoinHandle<()>,
    _dir: tempfile::TempDir,
}

impl Drop for FakePlugin {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl FakePlugin {
    /// Starts it.
    pub fn start(script: Script) -> FakePlugin {
        let dir = short_dir();
        let socket = dir.path().join("fake");
        let listener = UnixListener::bind(&socket).unwrap();
        let seen = Arc::new(Mutex::new(Vec::new()));
        let task = {
            let seen = seen.clone();
            tokio::spawn(async move {
                loop {
                    let Ok((conn, _)) = listener.accept().await else {
                        return;
                    };
                    tokio::spawn(serve_conn(conn, script.clone(), seen.clone()));
                }
            })
        };
        FakePlugin {
            socket,
            seen,
            task,
            _dir: dir,
        }
    }

    /// A client of it.
    pub fn client(&self, name: &str, timeouts: Timeouts) -> PluginProvider {
        PluginProvider::new(PluginAddress::parse(name).unwrap(), &self.socket, timeouts)
    }

    /// The requests seen for `method`.
    pub fn calls(&self, method: &str) -> Vec<Value> {
        self.seen
            .lock()
            .unwrap()
            .iter()
            .filter(|r| r["method"] == method)
            .cloned()
            .collect()
    }
}

/// Reads one HTTP/1.1 request's body (`None` at the end of the stream).
async fn read_request(conn: &mut UnixStream) -> Option<Vec<u8>> {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    let head_end = loop {
        if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break i + 4;
        }
        let n = conn.read(&mut chunk).await.ok()?;
        if n == 0 {
            return None;
        }
        buf.extend_from_slice(&chunk[..n]);
    };
    let head = String::from_utf8_lossy(&buf[..head_end]).to_lowercase();
    let len: usize = head
        .lines()
        .find_map(|l| l.strip_prefix("content-length:"))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0);
    while buf.len() < head_end + len {
        let n = conn.read(&mut chunk).await.ok()?;
        if n == 0 {
            return None;
        }
        buf.extend_from_slice(&chunk[..n]);
    }
    Some(buf[head_end..head_end + len].to_vec())
}

async fn write_http(conn: &mut UnixStream, status: u16, body: &[u8]) -> bool {
    let head = format!(
        "HTTP/1.1 {status} X\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n",
        body.len()
    );
    conn.write_all(head.as_bytes()).await.is_ok() && conn.write_all(body).await.is_ok()
}

async fn serve_conn(mut conn: UnixStream, script: Script, seen: Arc<Mutex<Vec<Value>>>) {
    while let Some(body) = read_request(&mut conn).await {
        let req: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
        seen.lock().unwrap().push(req.clone());
        let with_id = |mut v: Value| {
            v["id"] = req["id"].clone();
            serde_json::to_vec(&v).unwrap()
        };
        match script(&req) {
            Reply::Json(v) => {
                if !write_http(&mut conn, 200, &with_id(v)).await {
                    return;
                }
            }
            Reply::Late(d, v) => {
                tokio::time::sleep(d).await;
                if !write_http(&mut conn, 200, &with_id(v)).await {
                    return;
                }
            }
            Reply::Http(status, text) => {
                if !write_http(&mut conn, status, text.as_bytes()).await {
                    return;
                }
            }
            Reply::Garbage(bytes) => {
                let _ = conn.write_all(bytes.as_bytes()).await;
                return;
            }
            Reply::Hang => std::future::pending::<()>().await,
            Reply::Die => return,
        }
    }
}

/// drover's own server over a simulated cloud, on a socket of its own.
pub struct ServedSim {
    /// Its socket.
    pub socket: PathBuf,
    /// The cloud behind it.
    pub cloud: drover_sim::SimCloud,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    task: Option<tokio::task::JoinHandle<std::io::Result<()>>>,
    _dir: tempfile::TempDir,
}

impl ServedSim {
    /// Starts it over a fresh cloud.
    pub fn start() -> ServedSim {
        let timings = drover_sim::Timings {
            provision: 20,
            ..Default::default()
        };
        ServedSim::serve(drover_sim::SimCloud::new(drover_sim::World::new(
            7, timings,
        )))
    }

    /// Starts it over `cloud`.
    pub fn serve(cloud: drover_sim::SimCloud) -> ServedSim {
        let dir = short_dir();
        let socket = dir.path().join("sim");
        let (listener, guard) = server::bind(&socket).unwrap();
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let provider = Arc::new(cloud.clone());
        let task = tokio::spawn(async move {
            let _guard = guard;
            server::serve(provider, listener, async {
                let _ = stopped.await;
            })
            .await
        });
        ServedSim {
            socket,
            cloud,
            stop: Some(stop),
            task: Some(task),
            _dir: dir,
        }
    }

    /// A client of it.
    pub fn client(&self, timeouts: Timeouts) -> PluginProvider {
        PluginProvider::new(PluginAddress::parse("sim").unwrap(), &self.socket, timeouts)
    }

    /// Stops the server; its socket is gone afterwards.
    pub async fn stop(mut self) {
        if let Some(s) = self.stop.take() {
            let _ = s.send(());
        }
        if let Some(t) = self.task.take() {
            t.await.unwrap().unwrap();
        }
    }
}

impl Drop for ServedSim {
    fn drop(&mut self) {
        if let Some(t) = &self.task {
            t.abort();
        }
    }
}

/// One raw `POST /` to `socket`: the status and the body as JSON.
pub async fn post(socket: &Path, body: &Value) -> (u16, Value) {
    let bytes = serde_json::to_vec(body).unwrap();
    http(socket, "POST", "/", &bytes).await
}

/// One raw `GET path` to `socket`: the status and the body as JSON.
pub async fn get(socket: &Path, path: &str) -> (u16, Value) {
    http(socket, "GET", path, &[]).await
}

async fn http(socket: &Path, method: &str, path: &str, bytes: &[u8]) -> (u16, Value) {
    let mut conn = UnixStream::connect(socket).await.unwrap();
    let head = format!(
        "{method} {path} HTTP/1.1\r\nHost: h\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        bytes.len()
    );
    conn.write_all(head.as_bytes()).await.unwrap();
    conn.write_all(bytes).await.unwrap();
    let mut out = Vec::new();
    conn.read_to_end(&mut out).await.unwrap();
    let text = String::from_utf8_lossy(&out).into_owned();
    let status: u16 = text[9..12].parse().unwrap();
    let (_, body) = text.split_once("\r\n\r\n").unwrap();
    // axum answers `Connection: close` requests without chunking.
    (status, serde_json::from_str(body).unwrap_or(Value::Null))
}

/// The Python plugin (`tests/plugin.py`), stopped by its PID when dropped.
pub struct PythonPlugin {
    /// Its socket.
    pub socket: PathBuf,
    /// Its state directory.
    pub state: PathBuf,
    child: std::process::Child,
    _dir: tempfile::TempDir,
}

impl PythonPlugin {
    /// Starts `python3 tests/plugin.py` with `args`, waits for its socket.
    pub fn start(args: &[&str]) -> PythonPlugin {
        let dir = short_dir();
        let socket = dir.path().join("py");
        let state = dir.path().join("state");
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/plugin.py");
        let child = std::process::Command::new("python3")
            .arg(&script)
            .arg("--socket")
            .arg(&socket)
            .arg("--state")
            .arg(&state)
            .args(args)
            .spawn()
            .expect("python3");
        let plugin = PythonPlugin {
            socket,
            state,
            child,
            _dir: dir,
        };
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while !plugin.socket.exists() {
            assert!(
                std::time::Instant::now() < deadline,
                "no socket from plugin.py"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        plugin
    }

    /// A client of it.
    pub fn client(&self, timeouts: Timeouts) -> PluginProvider {
        PluginProvider::new(PluginAddress::parse("py").unwrap(), &self.socket, timeouts)
    }
}

impl Drop for PythonPlugin {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
