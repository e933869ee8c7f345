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

/// `argv[0]` of a machine's supervisor (what `ps` shows for it).
pub const SUPERVISOR_NAME: &str = "drover-supervise";

/// Restart delays of a supervised engine, in ms: the first restart waits
/// the first, each further one the next, the last repeating (the cap).
/// Why these: dockerd answers 0.2–0.5 s after its start, so 0.5 s brings a
/// crashed engine back in about a second (docker's own systemd unit waits
/// `RestartSec=2`); doubling keeps an engine that cannot start (it exits
/// within ~0.2 s) from spinning on a shared host; the 4 s cap keeps a
/// restarted engine well inside swarm's Down detection (13–16 s), so a
/// machine that recovers never reads as gone.
pub const RESTART_DELAYS_MS: [u64; 4] = [500, 1000, 2000, 4000];

/// A run at least this long (seconds) resets the delay to the first one:
/// far longer than any start that fails (≤ 0.5 s measured), short enough
/// that an engine crashing every minute always comes back after 0.5 s.
pub const STABLE_RUN_SECS: u64 = 10;

/// How long a supervisor waits, before a restart, for the exited engine's
/// containerd to go (it follows its dockerd ~1.4 s after a `kill -9`,
/// measured); past it, the new dockerd attaches to the one still running,
/// as dockerd does by design.
pub const CONTAINERD_GONE_WITHIN: Duration = Duration::from_secs(10);

/// The longest a supervised engine waits before its restart (containerd
/// aside, see [`CONTAINERD_GONE_WITHIN`]).
pub const MAX_RESTART_DELAY: Duration = Duration::from_millis(RESTART_DELAYS_MS[3]);

/// `ms` as `sleep(1)` takes it (`1.500`).
fn secs(ms: u64) -> String {
    format!("{}.{:03}", ms / 1000, ms % 1000)
}

/// The supervisor, run as `/bin/sh -c SCRIPT drover-supervise
/// D/exec/containerd/containerd.pid dockerd ARGS…` (POSIX sh: dash on
/// Debian, busybox sh too; `date` and `sleep` from coreutils).
///
/// `Restart=always` semantics: every exit of the engine, clean or not, is
/// followed by a start after the current delay ([`RESTART_DELAYS_MS`],
/// reset after [`STABLE_RUN_SECS`]) and once the exited engine's
/// containerd is gone ([`CONTAINERD_GONE_WITHIN`]). Only a signal to the
/// supervisor (TERM, INT, HUP) stops it, and then it stops the engine first
/// and waits for it, so nothing it started outlives it; `sleep` runs in the
/// background and is waited for, so a stop signal never waits out a delay.
/// Every start and exit is a line in the machine's log `D/log`, next to
/// dockerd's own output.
pub fn supervisor_script() -> String {
    let d = RESTART_DELAYS_MS.map(secs);
    let stable = STABLE_RUN_SECS;
    format!(
        r#"say() {{ echo "$(date -u +%Y-%m-%dT%H:%M:%SZ) drover-supervise: $*"; }}
containerd_pid=$1
shift
child= nap= delay={d0}
stop() {{
  say "stopping dockerd${{child:+ (pid $child)}}"
  kill -TERM $child $nap 2>/dev/null
  [ -n "$child" ] && wait "$child"
  exit 0
}}
trap stop TERM INT HUP
while :; do
  started=$(date +%s)
  "$@" &
  child=$!
  say "started dockerd (pid $child)"
  wait "$child"
  status=$?
  ran=$(( $(date +%s) - started ))
  [ "$ran" -ge {stable} ] && delay={d0}
  say "dockerd (pid $child) exited with status $status after ${{ran}}s; restarting in ${{delay}}s"
  child=
  sleep "$delay" &
  nap=$!
  wait "$nap"
  nap=
  case $delay in {d0}) delay={d1} ;; {d1}) delay={d2} ;; *) delay={d3} ;; esac
  # The dead engine's containerd goes down with it, ~1.4 s later: a dockerd
  # started while it lives attaches to it and fails 15 s later. Wait it out.
  c=$(cat "$containerd_pid" 2>/dev/null) tries=0
  while [ -n "$c" ] && kill -0 "$c" 2>/dev/null && [ $tries -lt {containerd_tries} ]; do
    sleep 0.1 & nap=$!; wait $nap; nap= tries=$((tries + 1))
  done
  [ $tries -gt 0 ] && say "waited $((tries / 10)).$((tries % 10))s for containerd (pid $c) of the exited dockerd"
done
"#,
        d0 = d[0],
        d1 = d[1],
        d2 = d[2],
        d3 = d[3],
        containerd_tries = CONTAINERD_GONE_WITHIN.as_millis() / 100,
    )
}

/// dockerd's arguments for the engine in `paths` with `labels`.
fn dockerd_args(paths: &EnginePaths, labels: &BTreeMap<String, String>) -> Vec<std::ffi::OsString> {
    let mut args: Vec<std::ffi::OsString> = vec![
        "--data-root".into(),
        paths.root.clone().into(),
        "--exec-root".into(),
        paths.exec.clone().into(),
        "--pidfile".into(),
        paths.pid.clone().into(),
        "-H".into(),
        paths.endpoint().into(),
    ];
    for a in [
        "--bridge=none",
        "--iptables=false",
        "--ip6tables=false",
        "--ip-masq=false",
        "--storage-driver=vfs",
    ] {
        args.push(a.into());
    }
    for (k, v) in labels {
        args.push("--label".into());
        args.push(drover_core::spec::local::label_argument(k, v).into());
    }
    args
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
    /// the leader of its own process group, output to `D/log`, with nothing
    /// to restart it when it exits (see [`start_supervised`](Self::start_supervised)).
    /// Engine labels are applied at engine start (as cloud-init writes
    /// `daemon.json` before docker starts): they cannot change without a
    /// restart.
    pub fn start(dir: &Path, labels: &BTreeMap<String, String>) -> std::io::Result<Self> {
        Self::spawn(dir, labels, false)
    }

    /// Starts `dockerd` for directory `dir` under a supervisor
    /// ([`supervisor_script`], a `/bin/sh` loop) that restarts it with the
    /// same command line whenever it exits, with a backoff, as systemd's
    /// `Restart=always` would, until the supervisor itself is stopped
    /// (SIGTERM stops the engine and ends the loop). The supervisor leads the process group,
    /// carries the engine's whole command line (so the needle and the
    /// machine's mark find it) and writes each restart to `D/log`;
    /// [`pid`](Self::pid) is the supervisor's. The engine's own PID is in
    /// its pidfile `D/pid`.
    pub fn start_supervised(
        dir: &Path,
        labels: &BTreeMap<String, String>,
    ) -> std::io::Result<Self> {
        Self::spawn(dir, labels, true)
    }

    fn spawn(
        dir: &Path,
        labels: &BTreeMap<String, String>,
        supervised: bool,
    ) -> std::io::Result<Self> {
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
        let mut cmd = if supervised {
            let mut sh = Command::new("/bin/sh");
            sh.arg("-c")
                .arg(supervisor_script())
                .arg(SUPERVISOR_NAME)
                .arg(paths.exec.join("containerd/containerd.pid"))
                .arg("dockerd");
            sh
        } else {
            Command::new("dockerd")
        };
        cmd.args(dockerd_args(&paths, labels));
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

    /// The process group leader's PID (also the group id): dockerd's, or
    /// its supervisor's when started with [`start_supervised`](Self::start_supervised).
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
        format!(
            "dockerd did not answer within {timeout:?}: {last}; log: {}",
            log_tail(&paths.log, 3)
        ),
    ))
}

/// True when `pid` is the supervisor of the engine in `paths` (alive, its
/// command line that of [`EngineProcess::start_supervised`] for this
/// pidfile).
pub fn is_supervisor(pid: i32, paths: &EnginePaths) -> bool {
    procs::cmdline(pid)
        .is_some_and(|c| c.contains(&paths.needle()) && c.contains(&format!(" {SUPERVISOR_NAME} ")))
}

/// The running dockerd of the engine in `paths`: the PID in its pidfile
/// (a restarted engine's) or `recorded`, whichever is alive and carries
/// the pidfile path in its command line and is not the supervisor.
pub fn running_engine_pid(paths: &EnginePaths, recorded: Option<i32>) -> Option<i32> {
    let from_pidfile = std::fs::read_to_string(&paths.pid)
        .ok()
        .and_then(|t| t.trim().parse::<i32>().ok());
    [from_pidfile, recorded]
        .into_iter()
        .flatten()
        .find(|p| procs::is_ours(*p, &paths.needle()) && !is_supervisor(*p, paths))
}

/// The last `n` lines of a log file (for error messages).
pub fn log_tail(path: &Path, n: usize) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(n)..].join(" | ")
}
