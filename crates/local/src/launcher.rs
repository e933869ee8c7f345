//! Starting one `dockerd` in its own directory and process group.

use crate::procs;
use drover_engine::Engine;
use std::collections::BTreeMap;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Unix socket paths are limited to 108 bytes (including the NUL).
pub const MAX_SOCKET_PATH: usize = 107;

/// How long to wait for a fresh engine to answer (measured: 0.2–0.5 s).
pub const READY_TIMEOUT: Duration = Duration::from_secs(20);

/// How long SIGTERM gets before SIGKILL (measured: exit takes 3–4 s).
pub const STOP_GRACE: Duration = Duration::from_secs(10);

/// The files of one engine under its directory `D`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EnginePaths {
    /// `D`.
    pub dir: PathBuf,
    /// `D/root`: `--data-root`.
    pub root: PathBuf,
    /// `D/exec`: `--exec-root`.
    pub exec: PathBuf,
    /// `D/sock`: the API socket.
    pub sock: PathBuf,
    /// `D/pid`: `--pidfile` (also how the process is recognised).
    pub pid: PathBuf,
    /// `D/log`: dockerd's stdout/stderr.
    pub log: PathBuf,
}

impl EnginePaths {
    /// The layout under `dir`.
    pub fn new(dir: &Path) -> Self {
        EnginePaths {
            dir: dir.to_path_buf(),
            root: dir.join("root"),
            exec: dir.join("exec"),
            sock: dir.join("sock"),
            pid: dir.join("pid"),
            log: dir.join("log"),
        }
    }

    /// `unix://D/sock`.
    pub fn endpoint(&self) -> String {
        format!("unix://{}", self.sock.display())
    }

    /// The string that identifies this engine's processes in their command
    /// lines: dockerd carries `--pidfile D/pid`.
    pub fn needle(&self) -> String {
        self.pid.display().to_string()
    }

    /// What identifies every process of this machine: dockerd, containerd
    /// and shims carry a path under `D` in their command line, and every
    /// process started for the machine (those, the boot script and what it
    /// starts) carries it in [`procs::MACHINE_ENV`].
    pub fn dir_needle(&self) -> String {
        format!("{}/", self.dir.display())
    }
}

/// A running `dockerd`. Dropping it stops the engine (by PID and process
/// group, verified by command line) unless [`EngineProcess::detach`] was called.
#[derive(Debug)]
pub struct EngineProcess {
    paths: EnginePaths,
    pid: i32,
    armed: bool,
}

impl EngineProcess {
    /// Starts `dockerd` for directory `dir` with the given engine labels, as
    /// the leader of its own process group, output to `D/log`. Engine labels
    /// are applied at engine start (as cloud-init writes `daemon.json` before
    /// docker starts): they cannot change without a restart.
    pub fn start(dir: &Path, labels: &BTreeMap<String, String>) -> std::io::Result<Self> {
        let paths = EnginePaths::new(dir);
        if paths.sock.as_os_str().len() > MAX_SOCKET_PATH {
            return Err(std::io::Error::other(format!(
                "socket path {} is longer than {MAX_SOCKET_PATH} bytes: use a shorter state dir",
                paths.sock.display()
            )));
        }
        for d in [&paths.root, &paths.exec] {
            std::fs::create_dir_all(d)?;
        }
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&paths.log)?;
        let mut cmd = Command::new("dockerd");
        cmd.arg("--data-root")
            .arg(&paths.root)
            .arg("--exec-root")
            .arg(&paths.exec)
            .arg("--pidfile")
            .arg(&paths.pid)
            .arg("-H")
            .arg(paths.endpoint())
            .args([
                "--bridge=none",
                "--iptables=false",
                "--ip6tables=false",
                "--ip-masq=false",
                "--storage-driver=vfs",
            ]);
        for (k, v) in labels {
            cmd.arg("--label").arg(format!("{k}={v}"));
        }
        cmd.env(procs::MACHINE_ENV, paths.dir_needle())
            .stdin(Stdio::null())
            .stdout(log.try_clone()?)
            .stderr(log)
            .process_group(0);
        let mut child = cmd.spawn()?;
        let pid = child.id() as i32;
        // Reap it whenever it exits so no zombie lingers.
        std::thread::spawn(move || {
            let _ = child.wait();
        });
        Ok(EngineProcess {
            paths,
            pid,
            armed: true,
        })
    }

    /// Waits until the engine answers `info` (bounded), returning a client.
    pub async fn wait_ready(&self, timeout: Duration) -> std::io::Result<Engine> {
        wait_ready(&self.paths, self.pid, timeout).await
    }

    /// The engine's PID (also its process group id).
    pub fn pid(&self) -> i32 {
        self.pid
    }

    /// Its files.
    pub fn paths(&self) -> &EnginePaths {
        &self.paths
    }

    /// `unix://D/sock`.
    pub fn endpoint(&self) -> String {
        self.paths.endpoint()
    }

    /// Keeps the engine running when this value is dropped.
    pub fn detach(mut self) -> (EnginePaths, i32) {
        self.armed = false;
        (self.paths.clone(), self.pid)
    }

    /// Stops the engine now (SIGTERM the group, SIGKILL after the grace).
    pub fn stop(mut self) {
        self.armed = false;
        stop_engine(
            &self.paths,
            Some(self.pid),
            Some(self.pid),
            procs::Owned::Marked,
        );
    }
}

impl Drop for EngineProcess {
    fn drop(&mut self) {
        if self.armed {
            stop_engine(
                &self.paths,
                Some(self.pid),
                Some(self.pid),
                procs::Owned::Marked,
            );
        }
    }
}

/// Stops an engine's processes (verified by command line; `owned` says
/// whether they must also carry the machine's mark) and unmounts what it
/// left under its directory, without a fence. Does not remove the
/// directory.
pub fn stop_engine(
    paths: &EnginePaths,
    pid: Option<i32>,
    pgid: Option<i32>,
    owned: procs::Owned,
) -> usize {
    let tree = engine_tree(paths, pid, pgid, owned);
    let _ = tree.terminate(&drover_spi::Unfenced);
    finish_stop(paths, &tree)
}

/// An engine's processes, found and not yet signalled: the group only when
/// its leader is verified by its pidfile path; everything else only when
/// its command line names the directory.
pub fn engine_tree(
    paths: &EnginePaths,
    pid: Option<i32>,
    pgid: Option<i32>,
    owned: procs::Owned,
) -> procs::Tree {
    let verified = pid.filter(|p| procs::is_ours(*p, &paths.needle()));
    procs::Tree::find(verified, verified.and(pgid), &paths.dir_needle(), owned)
}

/// After the tree's SIGTERM: waits for it (SIGKILL after the grace) and
/// unmounts what the engine left. Returns the processes still alive.
pub fn finish_stop(paths: &EnginePaths, tree: &procs::Tree) -> usize {
    let left = tree.reap(STOP_GRACE);
    let _ = procs::unmount_under(&paths.dir);
    left
}

/// Waits until the engine at `paths` answers `info`, failing early if its
/// process died.
pub async fn wait_ready(
    paths: &EnginePaths,
    pid: i32,
    timeout: Duration,
) -> std::io::Result<Engine> {
    let deadline = Instant::now() + timeout;
    let mut last = String::from("not started");
    while Instant::now() < deadline {
        // Right after spawn the child may not have exec'd dockerd yet (its
        // command line is still empty): only a vanished or zombie process
        // counts as dead here.
        if !procs::is_alive(pid) {
            return Err(std::io::Error::other(format!(
                "dockerd exited during start: {}",
                log_tail(&paths.log, 3)
            )));
        }
        if paths.sock.exists() {
            match Engine::connect_with_timeout(&paths.endpoint(), Duration::from_secs(2)).await {
                Ok(e) => match e.info().await {
                    Ok(_) => return Ok(e),
                    Err(err) => last = err.to_string(),
                },
                Err(err) => last = err.to_string(),
            }
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    Err(std::io::Error::new(
        std::io::ErrorKind::TimedOut,
        format!("dockerd did not answer within {timeout:?}: {last}"),
    ))
}

/// The last `n` lines of a log file (for error messages).
pub fn log_tail(path: &Path, n: usize) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(n)..].join(" | ")
}
