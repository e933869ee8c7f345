//! In-place updates of a local machine. The local provider's machines are
//! this host's `dockerd` processes, so the update runs on this host, as
//! root, with `DOCKER_HOST` naming the member's engine and
//! `DROVER_INSTANCE` the machine, under the same bound as on any machine
//! ([`drover_core::in_place::bounded_argv`]), its lock and mark in the
//! machine's directory ([`drover_core::in_place::marked_script`]): the
//! update a controller killed mid-run left running is waited for by its
//! successor's run, which then finds its mark and does not run the command
//! again. When it succeeded, a supervised engine is restarted (its
//! `dockerd` stopped; its supervisor starts it again, as systemd would)
//! unless it started after the mark was made (a late run's); an
//! unsupervised one is left running, nothing would start it again.

use crate::{LocalProvider, io_err, launcher};
use drover_core::in_place::{
    UpdateOutcome, UpdateRun, bounded_argv, mark_file, marked_script, wait_bound,
};
use drover_spi::{Fence, ProviderError};
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

/// How long a restarted engine may take to answer again.
const RESTART_BOUND: Duration = Duration::from_secs(60);

/// The directory, in a machine's own, where its updates' lock and mark live.
pub const UPDATE_DIR: &str = "update";

impl LocalProvider {
    /// [`drover_spi::InstanceProvider::run_update`] for machine `instance`.
    pub(crate) async fn update(
        &self,
        instance: &str,
        run: &UpdateRun,
        fence: &dyn Fence,
    ) -> Result<UpdateOutcome, ProviderError> {
        let r = self
            .record(instance)
            .map_err(|e| io_err("reading instance record", e))?
            .ok_or_else(|| ProviderError::NotFound(instance.to_string()))?;
        // This host runs no systemd unit per machine: the provider
        // restarts the engine after the script (lock, mark, guard, command).
        let state = self.update_dir(&r.id);
        let script = marked_script(run, &sh_word(&state), "", "");
        let argv = bounded_argv(run.timeout, &script);
        let mut cmd = tokio::process::Command::new(&argv[0]);
        cmd.args(&argv[1..])
            .env("DOCKER_HOST", r.endpoint())
            .env("DROVER_INSTANCE", &r.id)
            .stdin(Stdio::null())
            .kill_on_drop(true);
        fence.check()?;
        let out = tokio::time::timeout(wait_bound(run), cmd.output())
            .await
            .map_err(|_| ProviderError::Transient(format!("the update of {instance} did not end")))?
            .map_err(|e| io_err("starting the update", e))?;
        let mut text = String::from_utf8_lossy(&out.stdout).into_owned();
        text.push_str(&String::from_utf8_lossy(&out.stderr));
        let outcome = UpdateOutcome::of_exit(out.status.code().unwrap_or(137), &text);
        if outcome.succeeded()
            && r.supervisor.is_some()
            && started_before(&self.engine_paths(&r).pid, &state.join(mark_file(run)))
        {
            self.restart_engine(&r).await?;
        }
        Ok(outcome)
    }

    /// Where machine `id`'s updates keep their lock and their mark
    /// (`updated-MARK`, [`mark_file`]: the last update that succeeded on it).
    pub fn update_dir(&self, id: &str) -> PathBuf {
        self.dir_of(id).join(UPDATE_DIR)
    }

    /// Stops the running `dockerd` of supervised machine `r` and waits
    /// until its supervisor's new one answers.
    async fn restart_engine(&self, r: &crate::InstanceRecord) -> Result<(), ProviderError> {
        let paths = self.engine_paths(r);
        let old = launcher::running_engine_pid(&paths, r.pid);
        if let Some(pid) = old {
            let _ = kill(Pid::from_raw(pid), Signal::SIGTERM);
        }
        let deadline = tokio::time::Instant::now() + RESTART_BOUND;
        while tokio::time::Instant::now() < deadline {
            if let Some(new) =
                launcher::running_engine_pid(&paths, None).filter(|p| Some(*p) != old)
                && launcher::wait_ready(&paths, new, Duration::from_secs(5))
                    .await
                    .is_ok()
            {
                return Ok(());
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        Err(ProviderError::Transient(format!(
            "the engine of {} did not come back within {RESTART_BOUND:?} after its update",
            r.id
        )))
    }
}

/// The engine whose pidfile is `pidfile` started before `mark` was made
/// (or either cannot be read): it has not run since the update, and is
/// restarted. An engine started after the mark was restarted after the
/// update already (a late run, or a successor's after a killed
/// controller's run): restarting it again would disrupt a member that may
/// be back in service.
fn started_before(pidfile: &Path, mark: &Path) -> bool {
    let modified = |p: &Path| std::fs::metadata(p).and_then(|m| m.modified()).ok();
    match (modified(pidfile), modified(mark)) {
        (Some(engine), Some(mark)) => engine < mark,
        _ => true,
    }
}

/// `path` as one `sh` word.
fn sh_word(path: &Path) -> String {
    format!("'{}'", path.display().to_string().replace('\'', r"'\''"))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The engine is restarted after an update unless it started after
    /// the update's mark was made (a late run's, or a successor's after the
    /// engine's restart: a member maybe back in service).
    #[test]
    fn an_engine_started_after_the_mark_is_not_restarted_again() {
        let d = tempfile::tempdir().unwrap();
        let (pid, mark) = (d.path().join("pid"), d.path().join("updated-x"));
        assert!(started_before(&pid, &mark), "nothing to tell: restart");
        std::fs::write(&pid, "1").unwrap();
        std::thread::sleep(Duration::from_millis(20));
        std::fs::write(&mark, "").unwrap();
        assert!(
            started_before(&pid, &mark),
            "the engine predates the update"
        );
        std::thread::sleep(Duration::from_millis(20));
        std::fs::write(&pid, "2").unwrap();
        assert!(!started_before(&pid, &mark), "restarted since");
    }

    #[test]
    fn a_path_is_one_shell_word() {
        assert_eq!(sh_word(Path::new("/tmp/a b")), "'/tmp/a b'");
        assert_eq!(sh_word(Path::new("/tmp/it's")), r"'/tmp/it'\''s'");
    }
}
