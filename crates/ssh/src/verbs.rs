//! Destroy (the host returned to the pool), label, the in-place update
//! and the boot log: each on the host holding the enrollment.

use crate::SshProvider;
use crate::enroll::failed;
use crate::listing::run_error;
use crate::record::{Answer, host_of};
use crate::script;
use drover_core::boot::BootLog;
use drover_core::in_place::{UpdateOutcome, UpdateRun, systemd_script};
use drover_spi::{Fence, ProviderError};
use std::collections::BTreeMap;
use std::time::Duration;

/// How long a release (the swarm's leave, the operator's cleanup) may take.
const RELEASE_WITHIN: Duration = Duration::from_secs(600);
/// How long a record's rewrite or the boot log's read may take.
const SHORT_WITHIN: Duration = Duration::from_secs(30);
/// How much longer than an update's own timeout its run is waited for:
/// the host stops it at its timeout (`timeout`), and says so.
const UPDATE_GRACE: Duration = Duration::from_secs(30);

impl SshProvider {
    /// Returns the host of enrollment `id` to the pool (the release script
    /// checks on the host that the record is still `id`'s).
    pub(crate) async fn release(&self, id: &str, fence: &dyn Fence) -> Result<(), ProviderError> {
        if host_of(id).is_none() {
            return Ok(());
        }
        let t = self.target_of(id).await?;
        let release = script::release(&t.login.host.state_dir, id, &t.docker_socket, &t.cleanup);
        fence.check()?;
        let what = format!("returning host {} to the pool", t.name());
        let ran = self
            .links
            .run(&t, &release, b"", RELEASE_WITHIN)
            .await
            .map_err(|e| run_error(&what, e))?;
        if !ran.ok() {
            return Err(failed(&what, &ran));
        }
        // Free now, unless the record was another enrollment's (then the
        // next look says what the host holds).
        let last = self
            .seen
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .get(&t.name())
            .cloned();
        if matches!(last, Some(crate::listing::Seen::Record(r)) if r.id == id) {
            self.remember(&t.name(), &Answer::Free);
        }
        tracing::info!(host = %t.name(), instance = %id, "host returned to the pool");
        Ok(())
    }

    /// Adds or changes tags of enrollment `id`: its record rewritten.
    pub(crate) async fn relabel(
        &self,
        id: &str,
        labels: &BTreeMap<String, String>,
        fence: &dyn Fence,
    ) -> Result<(), ProviderError> {
        let (t, mut record) = self.enrollment(id).await?;
        record.tags.extend(labels.clone());
        fence.check()?;
        let what = format!("labelling host {}", t.name());
        let relabel = script::relabel(&t.login.host.state_dir, id);
        let ran = self
            .links
            .run(&t, &relabel, record.to_text().as_bytes(), SHORT_WITHIN)
            .await
            .map_err(|e| run_error(&what, e))?;
        match ran.status {
            Some(0) => {
                self.remember(&t.name(), &Answer::Enrolled(record));
                Ok(())
            }
            Some(script::ABSENT) => Err(ProviderError::NotFound(format!(
                "host {} holds no enrollment {id}",
                t.name()
            ))),
            _ => Err(failed(&what, &ran)),
        }
    }

    /// Runs `run` on the host of enrollment `id` as root, within its
    /// timeout: its command, then the engine restarted unless the command
    /// restarted it ([`systemd_script`]). A run past its timeout is
    /// stopped on the host, its whole process group, and reported with no
    /// status.
    pub(crate) async fn update(
        &self,
        id: &str,
        run: &UpdateRun,
        fence: &dyn Fence,
    ) -> Result<UpdateOutcome, ProviderError> {
        let (t, _) = self.enrollment(id).await?;
        let update = script::update(&systemd_script(run, &t.login.host.state_dir), run.timeout);
        fence.check()?;
        tracing::info!(host = %t.name(), instance = %id, "running the update");
        match self
            .links
            .run(&t, &update, b"", run.timeout + UPDATE_GRACE)
            .await
        {
            Ok(ran) => {
                let status = match script::timed_out(ran.status, &ran.stdout) {
                    true => None,
                    false => ran.status,
                };
                let output = script::without_timeout_lines(&ran.stdout);
                Ok(UpdateOutcome::new(status, &output))
            }
            Err(crate::link::RunError::TimedOut { .. }) => Ok(UpdateOutcome::new(None, "")),
            Err(e) => Err(run_error(&format!("updating host {}", t.name()), e)),
        }
    }

    /// The end of enrollment `id`'s boot log, redacted.
    pub(crate) async fn boot_log_of(&self, id: &str) -> Result<Option<BootLog>, ProviderError> {
        let t = self.target_of(id).await?;
        let read = script::boot_log(&t.login.host.state_dir);
        let ran = self
            .links
            .run(&t, &read, b"", SHORT_WITHIN)
            .await
            .map_err(|e| run_error(&format!("reading host {}'s boot log", t.name()), e))?;
        match ran.status {
            Some(0) => Ok(Some(BootLog::tail(&ran.stdout))),
            Some(script::ABSENT) => Ok(None),
            _ => Err(failed(
                &format!("reading host {}'s boot log", t.name()),
                &ran,
            )),
        }
    }
}
