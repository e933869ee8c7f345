//! A throwaway single-node swarm: one `dockerd` in its own short tempdir and
//! process group, stopped by PID in `Drop`.

use super::{log_file, stop};
use bollard::Docker;
use bollard::models::SwarmInitRequest;
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::time::{Duration, Instant};
use tempfile::TempDir;

/// A throwaway single-node swarm: one `dockerd` in its own process group.
pub struct Dockerd {
    child: Child,
    dir: Option<TempDir>,
    /// `unix:///tmp/dsXXXX/sock`
    pub endpoint: String,
}

impl Dockerd {
    /// Starts dockerd and `swarm init`s it on `addr` (a 127.x address).
    pub async fn start_swarm(addr: &str) -> Dockerd {
        Dockerd::start(addr, &[]).await
    }

    /// Like [`Dockerd::start_swarm`], with engine labels (`KEY=VALUE`),
    /// e.g. the `drover.link` a controller on it needs to act.
    pub async fn start_swarm_labelled(addr: &str, labels: &[&str]) -> Dockerd {
        let args: Vec<String> = labels.iter().map(|l| format!("--label={l}")).collect();
        Dockerd::start(addr, &args).await
    }

    /// Like [`Dockerd::start_swarm`], also listening on
    /// `tcp://{addr}:2376` with `--tlsverify` and `certs`' server half.
    pub async fn start_swarm_tls(addr: &str, certs: &super::TestCerts) -> Dockerd {
        let path = |p: PathBuf| p.display().to_string();
        let args = [
            "-H".to_string(),
            format!("tcp://{addr}:2376"),
            "--tlsverify".into(),
            "--tlscacert".into(),
            path(certs.server.join("ca.pem")),
            "--tlscert".into(),
            path(certs.server.join("cert.pem")),
            "--tlskey".into(),
            path(certs.server.join("key.pem")),
        ];
        Dockerd::start(addr, &args).await
    }

    async fn start(addr: &str, extra: &[String]) -> Dockerd {
        // Short path: unix sockets are limited to 108 bytes.
        let dir = tempfile::Builder::new()
            .prefix("ds")
            .tempdir_in("/tmp")
            .unwrap();
        let d = dir.path();
        let sock = d.join("sock");
        let child = Command::new("dockerd")
            .arg("--data-root")
            .arg(d.join("root"))
            .arg("--exec-root")
            .arg(d.join("exec"))
            .arg("--pidfile")
            .arg(d.join("pid"))
            .arg("-H")
            .arg(format!("unix://{}", sock.display()))
            .args([
                "--bridge=none",
                "--iptables=false",
                "--ip6tables=false",
                "--ip-masq=false",
                "--storage-driver=vfs",
            ])
            .args(extra)
            .process_group(0)
            .stdout(log_file(d, "dockerd.log"))
            .stderr(log_file(d, "dockerd.err"))
            .spawn()
            .expect("spawn dockerd");
        let endpoint = format!("unix://{}", sock.display());
        let me = Dockerd {
            child,
            dir: Some(dir),
            endpoint,
        };
        let deadline = Instant::now() + Duration::from_secs(30);
        let docker = loop {
            if let Ok(d) = Docker::connect_with_unix(&me.endpoint, 30, bollard::API_DEFAULT_VERSION)
                && d.info().await.is_ok()
            {
                break d;
            }
            assert!(Instant::now() < deadline, "dockerd did not answer");
            tokio::time::sleep(Duration::from_millis(100)).await;
        };
        let listen = format!("{addr}:2377");
        docker
            .init_swarm(SwarmInitRequest {
                listen_addr: Some(listen.clone()),
                advertise_addr: Some(listen),
                ..Default::default()
            })
            .await
            .expect("swarm init");
        me
    }

    fn unmount_under(dir: &Path) {
        let Ok(info) = std::fs::read_to_string("/proc/self/mountinfo") else {
            return;
        };
        let mut mounts: Vec<PathBuf> = info
            .lines()
            .filter_map(|l| l.split(' ').nth(4))
            .map(PathBuf::from)
            .filter(|m| m.starts_with(dir))
            .collect();
        // Deepest first.
        mounts.sort_by_key(|m| std::cmp::Reverse(m.components().count()));
        for m in mounts {
            let _ = nix::mount::umount2(&m, nix::mount::MntFlags::MNT_DETACH);
        }
    }
}

impl Drop for Dockerd {
    fn drop(&mut self) {
        stop(&mut self.child, true, Duration::from_secs(10));
        if let Some(dir) = self.dir.take() {
            // containerd is dockerd's child in its own group: after a SIGKILL
            // of dockerd it may be left behind.
            let cpid = dir.path().join("exec/containerd/containerd.pid");
            if let Some(pid) = std::fs::read_to_string(cpid)
                .ok()
                .and_then(|s| s.trim().parse::<i32>().ok())
                && std::fs::read(format!("/proc/{pid}/cmdline")).is_ok_and(|c| {
                    String::from_utf8_lossy(&c).contains(&*dir.path().to_string_lossy())
                })
            {
                let _ = kill(Pid::from_raw(pid), Signal::SIGKILL);
            }
            Dockerd::unmount_under(dir.path());
            let _ = dir.close();
        }
    }
}
