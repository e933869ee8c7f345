//! In-place updates (`update.strategy: in_place`): the member's machine
//! stays, its update runs on it.
//!
//! What runs on the machine is the operator's command (`update.in_place`),
//! run by the provider as root through its own channel (Incus's exec API,
//! SSH), then the machine's engine restarted unless the command restarted
//! it. What the controller learns back is an [`UpdateOutcome`]: the exit
//! status and the output's last lines, redacted, which become the group's
//! reason when the update fails.

use crate::boot::BootLog;
use std::time::Duration;

/// One update to run on one machine.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UpdateRun {
    /// The operator's command, rendered for this member: a shell script
    /// (`sh -e`), never holding a secret (its template context has none).
    pub command: String,
    /// The bound on the whole run, the engine's restart included: past it
    /// the run is stopped and reported as [`UpdateOutcome::timed_out`].
    pub timeout: Duration,
}

/// How an update run ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UpdateOutcome {
    /// The script's exit status; `None` when it ran past its timeout and
    /// was stopped.
    pub status: Option<i32>,
    /// Its output's last lines (standard output and error), redacted.
    pub tail: BootLog,
}

impl UpdateOutcome {
    /// An outcome from the script's exit status and its whole output.
    pub fn new(status: Option<i32>, output: &str) -> UpdateOutcome {
        UpdateOutcome {
            status,
            tail: BootLog::tail(output),
        }
    }

    /// True when the update ran to its end and succeeded.
    pub fn succeeded(&self) -> bool {
        self.status == Some(0)
    }

    /// True when the update was stopped at its timeout.
    pub fn timed_out(&self) -> bool {
        self.status.is_none()
    }

    /// One line for a blocked group's reason: how it ended and its last
    /// output lines.
    pub fn summary(&self) -> String {
        let ended = match self.status {
            Some(code) => format!("exited with status {code}"),
            None => "ran past its timeout and was stopped".to_string(),
        };
        match self.tail.last(3) {
            last if last.is_empty() => ended,
            last => format!("{ended}: {last}"),
        }
    }
}

/// The script a provider whose machines run systemd (Incus, SSH) runs as
/// root: the operator's `command` in a subshell under `sh -e`, then
/// `docker.service` restarted unless its main process changed meanwhile
/// (the update restarted it, as a package upgrade does). The script's exit
/// status is the command's, or the restart's.
pub fn systemd_script(command: &str) -> String {
    format!(
        "set -e\n\
         before=$(systemctl show -p MainPID --value docker.service)\n\
         (\n{command}\n)\n\
         after=$(systemctl show -p MainPID --value docker.service)\n\
         if [ \"$before\" = \"$after\" ] || [ \"$after\" = 0 ]; then\n  \
         systemctl restart docker.service\n\
         fi\n"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_summary_names_how_it_ended_and_its_last_lines() {
        let failed =
            UpdateOutcome::new(Some(100), "Reading lists\nE: Unable to locate docker.io\n");
        assert!(!failed.succeeded());
        assert_eq!(
            failed.summary(),
            "exited with status 100: Reading lists | E: Unable to locate docker.io"
        );
        let hung = UpdateOutcome::new(None, "");
        assert!(hung.timed_out());
        assert_eq!(hung.summary(), "ran past its timeout and was stopped");
        assert!(UpdateOutcome::new(Some(0), "ok").succeeded());
    }

    #[test]
    fn the_systemd_script_runs_the_command_then_restarts_an_engine_it_left_running() {
        let s = systemd_script("apt-get install -y docker.io");
        assert!(s.starts_with("set -e\n"));
        let command = s.find("apt-get install -y docker.io").unwrap();
        let restart = s.find("systemctl restart docker.service").unwrap();
        assert!(command < restart);
    }
}
