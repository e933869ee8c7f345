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
/// the host stops it at its timeout (`timeout`, KILL 10 s after TERM),
/// and says so.
const UPDATE_GRACE: Duration = Duration::from_secs(30);
/// How often the host is asked how a running update stands.
const UPDATE_ASK_EVERY: Duration = Duration::from_secs(1);
/// How many asks in a row may fail (the connection dropped, and is being
/// opened again) before the wait gives up; the update runs on, and the
/// next call finds it.
const UPDATE_ASK_FAILURES: u32 = 5;

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
    /// restarted it ([`systemd_script`]). The run is detached on the host
    /// ([`script::update_start`]: a session of its own, its output and exit
    /// status in files there), so a dropped connection or a controller
    /// that dies does not end it half-way; it is waited for here, the
    /// host asked how it stands, within the update's timeout and a grace.
    /// A call that finds the update running or ended (a retry after a
    /// dropped connection, another controller's) waits for it or reports
    /// it: one run per update. A run past its timeout is stopped on the
    /// host, its whole process group, and reported with no status.
    pub(crate) async fn update(
        &self,
        id: &str,
        run: &UpdateRun,
        fence: &dyn Fence,
    ) -> Result<UpdateOutcome, ProviderError> {
        let (t, _) = self.enrollment(id).await?;
        let dir = &t.login.host.state_dir;
        let what = format!("updating host {}", t.name());
        let until = tokio::time::Instant::now() + run.timeout + UPDATE_GRACE;
        let start = script::update_start(dir, &run.mark, run.timeout);
        // The guard and the update's own `docker` ask the engine the group
        // declares, not the default socket.
        let text = format!(
            "export DOCKER_HOST={}\n{}",
            script::sh_quote(&format!("unix://{}", t.docker_socket)),
            systemd_script(run, dir)
        );
        fence.check()?;
        tracing::info!(host = %t.name(), instance = %id, "running the update");
        // Not started, or not known to be: the step is tried again.
        let mut state = Ok(self.update_state(&t, &start, text.as_bytes()).await??);
        let mut failures = 0;
        loop {
            match state {
                Ok(script::UpdateState::Finished { status, log }) => {
                    let status = (!script::timed_out(Some(status), &log)).then_some(status);
                    let output = script::without_timeout_lines(&log);
                    return Ok(UpdateOutcome::new(status, &output));
                }
                Ok(script::UpdateState::Absent) => {
                    return Err(ProviderError::Transient(format!(
                        "{what}: the update ended on the host without an exit status (did the host restart?): it is started again at the next try"
                    )));
                }
                Ok(script::UpdateState::Running) => failures = 0,
                Err(e) if failures < UPDATE_ASK_FAILURES => {
                    tracing::info!(host = %t.name(), error = %e, "asking how the update stands failed: asking again");
                    failures += 1;
                }
                Err(e) => return Err(e),
            }
            if tokio::time::Instant::now() >= until {
                return Err(ProviderError::Transient(format!(
                    "{what}: the update still runs on the host {}s after it was asked for (its timeout is {}s)",
                    (run.timeout + UPDATE_GRACE).as_secs(),
                    run.timeout.as_secs()
                )));
            }
            tokio::time::sleep(UPDATE_ASK_EVERY).await;
            let ask = script::update_state(dir, &run.mark);
            state = self.update_state(&t, &ask, b"").await?;
        }
    }

    /// Runs an update script (`stdin` to it) on `t` and reads how the
    /// update stands from what it printed. The outer error: the host
    /// answered, and what it said is not an update's state (the script
    /// failed there); the inner one: the host could not be asked.
    async fn update_state(
        &self,
        t: &crate::inventory::Target,
        script: &str,
        stdin: &[u8],
    ) -> Result<Result<script::UpdateState, ProviderError>, ProviderError> {
        let what = format!("updating host {}", t.name());
        let ran = match self.links.run(t, script, stdin, SHORT_WITHIN).await {
            Ok(ran) => ran,
            Err(e) => return Ok(Err(run_error(&what, e))),
        };
        match script::UpdateState::parse(&ran.stdout) {
            Some(state) if ran.ok() => Ok(Ok(state)),
            _ => Err(failed(&what, &ran)),
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
