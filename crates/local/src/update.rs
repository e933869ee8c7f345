//! In-place updates of a local machine. The local provider's machines are
//! this host's `dockerd` processes, so the update runs on this host, as
//! root, with `DOCKER_HOST` naming the member's engine and
//! `DROVER_INSTANCE` the machine, under the same bound as on any machine
//! ([`drover_core::in_place::bounded_argv`]). When it succeeded, a
//! supervised engine is restarted (its `dockerd` stopped; its supervisor
//! starts it again, as systemd would); an unsupervised one is left running,
//! nothing would start it again.

use crate::{LocalProvider, io_err, launcher};
use drover_core::in_place::{UpdateOutcome, UpdateRun, bounded_argv, wait_bound};
use drover_spi::{Fence, ProviderError};
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use std::process::Stdio;
use std::time::Duration;

/// How long a restarted engine may take to answer again.
const RESTART_BOUND: Duration = Duration::from_secs(60);

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
        // This host runs no systemd unit per machine and keeps no mark:
        // the guard alone (no update of an engine that is a manager).
        let script = format!("{}{}", drover_core::in_place::manager_guard(), run.command);
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
        if outcome.succeeded() && r.supervisor.is_some() {
            self.restart_engine(&r).await?;
        }
        Ok(outcome)
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
