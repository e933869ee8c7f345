//! The default manager boot script, run by `sh` against a stub `drover`
//! (no engine, no root): every machine whose engine may become a swarm
//! manager runs a controller, whatever becomes of the script's join.
//!
//! A join can go through after the script stopped waiting for it: the
//! engine answers HTTP 503 "Timeout was reached before node joined. The
//! attempt to join the swarm will continue in the background" when the
//! leader it asked dies mid-join, and the script itself is killed when the
//! provision running it is cancelled (its controller stood down), while the
//! join it started goes on. Either way the engine may join — and later
//! lead — after the script ended. A manager without a controller that
//! becomes the leader leaves a swarm in which nothing acts (`e2e_chaos`,
//! pets round 16 of seed 20261204: the replacement provisioned while the
//! leader's engine was killed joined in the background, without a
//! controller; the next hand-over made it the leader and the roll stopped).
//!
//! Every process a script starts runs in the script's own process group,
//! which the guard SIGKILLs when the test ends, also on failure.

use drover_core::spec::Role;
use drover_core::template::{BootContext, default_boot_script, render};
use nix::sys::signal::{Signal, kill, killpg};
use nix::unistd::Pid;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// `drover` as the boot script calls it: `engine join` notes that it ran,
/// hangs when `join-hangs` exists, then fails as the engine's 503 does;
/// `controller` notes its arguments and whether it saw the join token.
const STUB: &str = r#"#!/bin/sh
case "$1" in
  engine)
    echo "$*" > "$STUB_DIR/join-started"
    if [ -e "$STUB_DIR/join-hangs" ]; then sleep 60; fi
    echo "drover: joining as manager: engine error: HTTP 503: Timeout was reached before node joined. The attempt to join the swarm will continue in the background." >&2
    exit 1 ;;
  controller)
    echo "$* token=${DROVER_JOIN_TOKEN:-none}" >> "$STUB_DIR/controller"
    exec sleep 60 ;;
esac
exit 64
"#;

/// A rendered manager boot script in a directory of its own, with the stub.
struct Machine {
    dir: tempfile::TempDir,
    /// The running script (the leader of its process group), if started.
    script: Option<Child>,
}

impl Machine {
    fn new() -> Machine {
        let dir = tempfile::tempdir().expect("tempdir");
        let bin = dir.path().join("bin");
        std::fs::create_dir(&bin).expect("bin dir");
        write_executable(&bin.join("drover"), STUB);
        let script = render(
            default_boot_script(drover_core::spec::LOCAL_PROVIDER, Role::Manager),
            &BootContext::example(Role::Manager),
        )
        .expect("the default manager template renders");
        write_executable(&dir.path().join("boot.sh"), &script);
        Machine { dir, script: None }
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    /// Starts the script as the local provider does: `sh boot.sh` in the
    /// machine's directory, in a process group of its own.
    fn start(&mut self) {
        let child = Command::new("/bin/sh")
            .arg(self.path("boot.sh"))
            .current_dir(self.dir.path())
            .env_clear()
            .env(
                "PATH",
                format!(
                    "{}:/usr/sbin:/usr/bin:/sbin:/bin",
                    self.path("bin").display()
                ),
            )
            .env("STUB_DIR", self.dir.path())
            .env("DOCKER_HOST", "unix:///nonexistent/engine.sock")
            .env("DROVER_STORE", "etcd://127.0.0.1:9")
            .env("DROVER_JOIN_TOKEN", "SWMTKN-1-test")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .process_group(0)
            .spawn()
            .expect("start the boot script");
        self.script = Some(child);
    }

    fn pid(&self) -> Pid {
        Pid::from_raw(self.script.as_ref().expect("started").id() as i32)
    }

    /// Waits (at most 10 s) until `name` exists in the machine's directory.
    fn appears(&self, name: &str) -> bool {
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if self.path(name).exists() {
                return true;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        false
    }

    /// The controller started on this machine, as the stub noted it (the
    /// note's file exists before the stub has written it: read again
    /// until it holds a line, up to 10 s).
    fn controller(&self) -> String {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let note = std::fs::read_to_string(self.path("controller")).unwrap_or_default();
            if note.ends_with('\n') {
                return note;
            }
            assert!(
                Instant::now() < deadline,
                "no controller was started on the machine (its note: {note:?})"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Machine {
    /// Ends everything the script started: its process group, by the PID
    /// of its leader.
    fn drop(&mut self) {
        if let Some(mut child) = self.script.take() {
            let _ = killpg(Pid::from_raw(child.id() as i32), Signal::SIGKILL);
            let _ = child.wait();
        }
    }
}

fn write_executable(path: &Path, text: &str) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::write(path, text).expect("write");
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).expect("chmod");
}

/// The join reports a failure the engine may still turn into membership:
/// the script fails (the provision says so), and the machine runs its
/// controller all the same.
#[test]
fn a_manager_whose_join_gave_up_still_runs_its_controller() {
    let mut m = Machine::new();
    m.start();
    let status = m.script.as_mut().expect("started").wait().expect("wait");
    assert!(!status.success(), "the failed join must fail the script");
    let controller = m.controller();
    assert!(
        controller.starts_with("controller --engine unix:///nonexistent/engine.sock"),
        "{controller}"
    );
    assert!(
        controller.contains("token=none"),
        "the controller saw the join token: {controller}"
    );
    // The join is given every manager the machine was told of, to try in
    // turn (drover issue 36: one manager cut off mid-join left the engine
    // in swarm state `error` for good).
    let join = std::fs::read_to_string(m.path("join-started")).expect("the join ran");
    assert!(
        join.contains("--remote 127.0.0.11:2377,127.0.0.12:2377"),
        "{join}"
    );
}

/// The script killed while its join runs (the provision that ran it was
/// cancelled: the local provider's boot script is killed when its future
/// is dropped, the join it started is not): the machine runs its controller.
#[test]
fn a_manager_whose_boot_script_is_killed_mid_join_still_runs_its_controller() {
    let mut m = Machine::new();
    std::fs::write(m.path("join-hangs"), "").expect("write");
    m.start();
    assert!(m.appears("join-started"), "the join never started");
    kill(m.pid(), Signal::SIGKILL).expect("kill the script");
    let controller = m.controller();
    assert!(
        controller.starts_with("controller --engine unix:///nonexistent/engine.sock"),
        "{controller}"
    );
}
