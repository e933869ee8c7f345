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
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};
use tempfile::TempDir;

/// Where the lab's etcd serves unless told otherwise.
const LOOPBACK: &str = "127.0.0.1";

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
    /// `etcd://127.0.0.1:P`, or `etcds://127.0.0.1:P` ([`Etcd::start_tls`]).
    pub url: String,
    /// The client's `ca.pem`, `cert.pem`, `key.pem` ([`Etcd::start_tls`]).
    client_certs: Option<PathBuf>,
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
        Etcd::start_as(flags, None, LOOPBACK).await
    }

    /// [`Etcd::start`] serving clients on `host` (an address of this
    /// host: a lab bridge's, for machines that reach it there); its peer
    /// port stays on loopback.
    pub async fn start_on(host: &str) -> Etcd {
        Etcd::start_as(&[], None, host).await
    }

    /// [`Etcd::start`] serving only TLS with `certs.server`'s certificate
    /// and requiring client certificates signed by its CA
    /// (`--client-cert-auth`); [`Etcd::client`] uses `certs.client`'s.
    pub async fn start_tls(certs: &TestCerts) -> Etcd {
        Etcd::start_as(&[], Some(certs), LOOPBACK).await
    }

    async fn start_as(flags: &[&str], tls: Option<&TestCerts>, host: &str) -> Etcd {
        for _ in 0..2 {
            if let Some(etcd) = Etcd::try_start(flags, tls, host).await {
                return etcd;
            }
        }
        Etcd::try_start(flags, tls, host)
            .await
            .expect("etcd exited before it answered, 3 times")
    }

    /// One start: `None` when etcd exited before it answered.
    async fn try_start(flags: &[&str], tls: Option<&TestCerts>, host: &str) -> Option<Etcd> {
        let dir = tempfile::Builder::new()
            .prefix("de")
            .tempdir_in("/tmp")
            .unwrap();
        let (p, q) = (free_port(), free_port());
        let scheme = if tls.is_some() { "https" } else { "http" };
        let client = format!("{scheme}://{host}:{p}");
        let peer = format!("http://{LOOPBACK}:{q}");
        let mut cmd = Command::new("etcd");
        cmd.arg("--data-dir")
            .arg(dir.path().join("data"))
            .args(["--name", "default"])
            .args(["--listen-client-urls", &client])
            .args(["--advertise-client-urls", &client])
            .args(["--listen-peer-urls", &peer])
            .args(["--initial-advertise-peer-urls", &peer])
            .args(["--initial-cluster", &format!("default={peer}")])
            .args(flags);
        if let Some(certs) = tls {
            cmd.arg("--cert-file")
                .arg(certs.server.join("cert.pem"))
                .arg("--key-file")
                .arg(certs.server.join("key.pem"))
                .arg("--trusted-ca-file")
                .arg(certs.server.join("ca.pem"))
                .arg("--client-cert-auth");
        }
        let child = cmd
            .stdout(log_file(dir.path(), "etcd.log"))
            .stderr(log_file(dir.path(), "etcd.err"))
            .spawn()
            .expect("spawn etcd");
        let mut etcd = Etcd {
            child,
            _dir: dir,
            url: format!(
                "{}://{host}:{p}",
                if tls.is_some() { "etcds" } else { "etcd" }
            ),
            client_certs: tls.map(|c| c.client.clone()),
        };
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            if let Ok(mut c) = etcd.client(None).await
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

    /// A raw client, with the client certificate of [`Etcd::start_tls`],
    /// as `user` (name, password) when given.
    pub async fn client(
        &self,
        user: Option<(&str, &str)>,
    ) -> Result<etcd_client::Client, etcd_client::Error> {
        let hostport = self.url.split_once("://").map_or("", |(_, h)| h);
        let mut options = etcd_client::ConnectOptions::new()
            .with_connect_timeout(Duration::from_secs(5))
            .with_timeout(Duration::from_secs(10));
        if let Some((name, password)) = user {
            options = options.with_user(name, password);
        }
        let endpoint = match &self.client_certs {
            Some(dir) => {
                let read = |f: &str| std::fs::read(dir.join(f)).expect("client TLS file");
                let tls = etcd_client::TlsOptions::new()
                    .ca_certificate(etcd_client::Certificate::from_pem(read("ca.pem")))
                    .identity(etcd_client::Identity::from_pem(
                        read("cert.pem"),
                        read("key.pem"),
                    ));
                options = options.with_tls(tls);
                format!("https://{hostport}")
            }
            None => format!("http://{hostport}"),
        };
        etcd_client::Client::connect([endpoint], Some(options)).await
    }

    /// Turns authentication on: a `root` user with `root_password`, and
    /// for each `(name, password, permission)` a user of that name with a
    /// role of that name holding that permission (none when `None`).
    pub async fn enable_auth(
        &self,
        root_password: &str,
        users: &[(&str, &str, Option<etcd_client::Permission>)],
    ) {
        let mut c = self.client(None).await.expect("etcd client");
        for (name, password, permission) in users {
            c.user_add(*name, *password, None).await.expect("user add");
            c.role_add(*name).await.expect("role add");
            if let Some(p) = permission {
                c.role_grant_permission(*name, p.clone())
                    .await
                    .expect("grant");
            }
            c.user_grant_role(*name, *name).await.expect("user grant");
        }
        c.user_add("root", root_password, None)
            .await
            .expect("root user");
        c.role_add("root").await.expect("root role");
        c.user_grant_role("root", "root").await.expect("root grant");
        c.auth_enable().await.expect("auth enable");
    }
}

impl Drop for Etcd {
    fn drop(&mut self) {
        stop(&mut self.child, false, Duration::from_secs(10));
    }
}
