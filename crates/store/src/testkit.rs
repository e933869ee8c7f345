//! Throwaway servers for tests (this crate's and the end-to-end ones): an
//! `etcd` and a single-node swarm `dockerd` (optionally with TLS), each in
//! its own short tempdir on loopback, stopped by PID in `Drop`.

mod certs;
mod dockerd;

pub use certs::TestCerts;
pub use dockerd::Dockerd;

use nix::sys::signal::{Signal, kill, killpg};
use nix::unistd::Pid;
use std::net::TcpListener;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};
use tempfile::TempDir;

/// A free TCP port on 127.0.0.1.
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("free port")
}

/// SIGTERM (the group when `group`), wait up to `grace`, then SIGKILL.
pub fn stop(child: &mut Child, group: bool, grace: Duration) {
    let pid = Pid::from_raw(child.id() as i32);
    let signal = |s| {
        let _ = if group { killpg(pid, s) } else { kill(pid, s) };
    };
    signal(Signal::SIGTERM);
    let deadline = Instant::now() + grace;
    while Instant::now() < deadline {
        if let Ok(Some(_)) = child.try_wait() {
            return;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    signal(Signal::SIGKILL);
    let _ = child.wait();
}

/// A log file in `dir` for a child's output.
pub fn log_file(dir: &Path, name: &str) -> Stdio {
    std::fs::File::create(dir.join(name))
        .map(Stdio::from)
        .unwrap_or_else(|_| Stdio::null())
}

/// A throwaway single-member etcd on free loopback ports.
pub struct Etcd {
    child: Child,
    /// Holds the data dir until the process is gone (removed on drop).
    _dir: TempDir,
    /// `etcd://127.0.0.1:P`
    pub url: String,
}

impl Etcd {
    /// Starts etcd and waits until it answers. Its ports are picked free
    /// before it binds them, so another process may take one meanwhile
    /// (tests run side by side): an etcd that exits before it answers is
    /// started again on other ports, up to 3 times.
    pub async fn start() -> Etcd {
        Etcd::start_with(&[]).await
    }

    /// [`Etcd::start`] with more of etcd's flags (e.g. a small
    /// `--max-request-bytes`, to see a write refused).
    pub async fn start_with(flags: &[&str]) -> Etcd {
        for _ in 0..2 {
            if let Some(etcd) = Etcd::try_start(flags).await {
                return etcd;
            }
        }
        Etcd::try_start(flags)
            .await
            .expect("etcd exited before it answered, 3 times")
    }

    /// One start: `None` when etcd exited before it answered.
    async fn try_start(flags: &[&str]) -> Option<Etcd> {
        let dir = tempfile::Builder::new()
            .prefix("de")
            .tempdir_in("/tmp")
            .unwrap();
        let (p, q) = (free_port(), free_port());
        let client = format!("http://127.0.0.1:{p}");
        let peer = format!("http://127.0.0.1:{q}");
        let child = Command::new("etcd")
            .arg("--data-dir")
            .arg(dir.path().join("data"))
            .args(["--name", "default"])
            .args(["--listen-client-urls", &client])
            .args(["--advertise-client-urls", &client])
            .args(["--listen-peer-urls", &peer])
            .args(["--initial-advertise-peer-urls", &peer])
            .args(["--initial-cluster", &format!("default={peer}")])
            .args(flags)
            .stdout(log_file(dir.path(), "etcd.log"))
            .stderr(log_file(dir.path(), "etcd.err"))
            .spawn()
            .expect("spawn etcd");
        let mut etcd = Etcd {
            child,
            _dir: dir,
            url: format!("etcd://127.0.0.1:{p}"),
        };
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            if let Ok(mut c) = etcd_client::Client::connect([client.as_str()], None).await
                && c.get("probe", None).await.is_ok()
            {
                return Some(etcd);
            }
            if let Ok(Some(_)) = etcd.child.try_wait() {
                return None;
            }
            assert!(Instant::now() < deadline, "etcd did not answer on {client}");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
}

impl Drop for Etcd {
    fn drop(&mut self) {
        stop(&mut self.child, false, Duration::from_secs(10));
    }
}
