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
use crate::spec::humantime_serde_compat;
use serde::{Deserialize, Serialize};
use std::time::Duration;

/// A group's `update.in_place`: the command that updates one member's
/// machine, and its bound. The command is part of the group's config hash:
/// changing it is what rolls an in-place group.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct InPlace {
    /// A shell script run as root on the machine (`sh -e`), a template
    /// with the member's facts ([`UpdateContext`]); never a secret.
    pub command: String,
    /// The bound on one run (the engine's restart included).
    #[serde(with = "humantime_serde_compat")]
    pub timeout: Duration,
}

/// How long an update may run when `update.in_place.timeout` is not set.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(15 * 60);

/// What an update command's template may use: the member's facts, no
/// secret (the command is shown by `plan` and kept in the store).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct UpdateContext {
    /// The cluster's id.
    pub cluster_id: String,
    /// The member's group.
    pub group: String,
    /// The member's role (`manager`, `worker`, `plain`).
    pub role: String,
    /// The member's machine (provider instance id).
    pub instance: String,
    /// Its logical id, or empty.
    pub logical_id: String,
}

impl UpdateContext {
    /// Example facts, for validating a template.
    pub fn example() -> UpdateContext {
        UpdateContext {
            cluster_id: "c0ffee".into(),
            group: "workers".into(),
            role: "worker".into(),
            instance: "i-0123".into(),
            logical_id: "10.0.0.11".into(),
        }
    }
}

/// The variables an update command may use (for messages).
pub const TEMPLATE_VARIABLES: &str = "cluster_id, group, role, instance, logical_id";

/// The update run for one member: its command rendered with `ctx`.
pub fn run_for(
    spec: &InPlace,
    ctx: &UpdateContext,
    mark: String,
) -> Result<UpdateRun, crate::template::TemplateError> {
    Ok(UpdateRun {
        command: crate::template::render_value(&spec.command, ctx)?,
        timeout: spec.timeout,
        mark,
    })
}

/// One update to run on one machine (shown by `drover plan`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct UpdateRun {
    /// The operator's command, rendered for this member: a shell script
    /// (`sh -e`), never holding a secret (its template context has none).
    pub command: String,
    /// The bound on the whole run, the engine's restart included: past it
    /// the run is stopped and reported as [`UpdateOutcome::timed_out`].
    #[serde(with = "humantime_serde_compat")]
    pub timeout: Duration,
    /// This update's name on the machine (its operation and config,
    /// `[a-z0-9-]`): recorded there once it succeeded, so a late second
    /// run of the same update (a deposed controller's) does nothing.
    pub mark: String,
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

    /// The outcome of [`systemd_argv`]'s run: `timeout`'s own statuses
    /// (124: the bound was reached; 137: killed after it) mean it was
    /// stopped.
    pub fn of_exit(status: i32, output: &str) -> UpdateOutcome {
        let status = (!matches!(status, TIMED_OUT | KILLED)).then_some(status);
        UpdateOutcome::new(status, output)
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
/// root, its lock and mark in drover's `state_dir` on the machine
/// ([`marked_script`]): the operator's `command`, then `docker.service`
/// restarted unless its main process changed meanwhile (the update
/// restarted it, as a package upgrade does), then the mark. The script's
/// exit status is the command's, or the restart's.
pub fn systemd_script(run: &UpdateRun, state_dir: &str) -> String {
    marked_script(
        run,
        state_dir,
        "before=$(systemctl show -p MainPID --value docker.service)\n",
        "after=$(systemctl show -p MainPID --value docker.service)\n\
         if [ \"$before\" = \"$after\" ] || [ \"$after\" = 0 ]; then\n  \
         systemctl restart docker.service\n\
         fi\n",
    )
}

/// The script every provider runs for `run` on a machine (as root, under
/// `sh`), its lock and mark in `state_dir` there (a shell word: a plain
/// path, or one quoted for `sh`): one run at a time on a machine (a
/// controller taking over may start the update again while a deposed or
/// killed one's still runs: the second waits for the first), a run whose
/// update is marked done does nothing, then the guard
/// ([`manager_guard`]), `before`, the operator's `command` in a subshell
/// under `sh -e`, `after` (shell lines: what the provider does around the
/// command on the machine), and the mark, the only one kept (an older
/// update's is removed).
pub fn marked_script(run: &UpdateRun, state_dir: &str, before: &str, after: &str) -> String {
    let (command, mark) = (&run.command, &run.mark);
    let guard = manager_guard();
    format!(
        "set -e\n\
         mkdir -p {state_dir}\n\
         exec 9>{state_dir}/update.lock\n\
         flock 9\n\
         mark={state_dir}/updated-{mark}\n\
         if [ -e \"$mark\" ]; then echo \"already updated ({mark})\"; exit 0; fi\n\
         {guard}\
         {before}\
         (\n{command}\n)\n\
         {after}\
         rm -f {state_dir}/updated-*\n\
         touch \"$mark\"\n"
    )
}

/// The name of the mark [`marked_script`] leaves in its `state_dir` once
/// `run` succeeded there.
pub fn mark_file(run: &UpdateRun) -> String {
    format!("updated-{}", run.mark)
}

/// The exit status of a run refused because the machine's engine is a
/// swarm manager.
pub const REFUSED_MANAGER: i32 = 97;

/// Shell lines that refuse the update (exit [`REFUSED_MANAGER`]) while the
/// engine `docker` talks to is a swarm manager: the planner runs an update
/// only once its node left the raft, so this is a late run (a deposed
/// controller's, its connection slow) on a member back in the raft. A
/// demoted manager's own engine says so up to seconds late: it is asked
/// for 30 s. An engine that cannot be asked (none, no swarm) passes.
pub fn manager_guard() -> String {
    format!(
        "i=0\n\
         while [ \"$(docker info --format '{{{{.Swarm.ControlAvailable}}}}' 2>/dev/null)\" = true ]; do\n  \
         i=$((i+1))\n  \
         if [ $i -ge 30 ]; then echo 'refused: this machine runs a swarm manager (a raft member): not updating it' >&2; exit {REFUSED_MANAGER}; fi\n  \
         sleep 1\n\
         done\n"
    )
}

/// coreutils `timeout`'s status when its command ran past the bound.
const TIMED_OUT: i32 = 124;
/// Its status when the command had to be killed after the grace.
const KILLED: i32 = 137;
/// How long a timed-out update gets between TERM and KILL.
const KILL_GRACE_SECS: u64 = 10;

/// The program and arguments a provider runs as root for `run` on a
/// machine with systemd: [`systemd_script`] under coreutils `timeout`, so
/// the bound holds on the machine itself (the update's processes are
/// stopped there, whatever happens to the connection that started it).
/// Nothing in it is secret.
pub fn systemd_argv(run: &UpdateRun, state_dir: &str) -> Vec<String> {
    bounded_argv(run.timeout, &systemd_script(run, state_dir))
}

/// `script` run by `sh -c` under coreutils `timeout` (`timeout`, then
/// KILL after a grace): the one bound every provider's run has.
pub fn bounded_argv(timeout: Duration, script: &str) -> Vec<String> {
    vec![
        "timeout".into(),
        format!("--kill-after={KILL_GRACE_SECS}s"),
        format!("{}s", timeout.as_secs().max(1)),
        "sh".into(),
        "-c".into(),
        script.to_string(),
    ]
}

/// How long a provider waits for [`systemd_argv`]'s run to end: its
/// timeout, the kill grace, and a margin for the machine's answer.
pub fn wait_bound(run: &UpdateRun) -> Duration {
    wait_bound_of(run.timeout)
}

/// [`wait_bound`] of a run bounded by `timeout`.
pub fn wait_bound_of(timeout: Duration) -> Duration {
    timeout + Duration::from_secs(KILL_GRACE_SECS + 20)
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
        assert!(UpdateOutcome::of_exit(124, "").timed_out());
        assert!(UpdateOutcome::of_exit(137, "").timed_out());
        assert_eq!(UpdateOutcome::of_exit(100, "").status, Some(100));
    }

    #[test]
    fn the_argv_bounds_the_run_on_the_machine() {
        let run = UpdateRun {
            command: "true".into(),
            timeout: Duration::from_secs(90),
            mark: "w-1-abc".into(),
        };
        let argv = systemd_argv(&run, "/var/lib/drover");
        assert_eq!(
            argv[..5],
            ["timeout", "--kill-after=10s", "90s", "sh", "-c"]
        );
        assert_eq!(argv[5], systemd_script(&run, "/var/lib/drover"));
        assert_eq!(wait_bound(&run), Duration::from_secs(120));
    }

    #[test]
    fn a_marked_script_runs_once_under_its_lock_and_keeps_only_its_mark() {
        let run = UpdateRun {
            command: "upgrade".into(),
            timeout: Duration::from_secs(60),
            mark: "op-1-abc".into(),
        };
        let s = marked_script(&run, "'/m d'", "BEFORE\n", "AFTER\n");
        let at = |what: &str| s.find(what).unwrap_or_else(|| panic!("{what} in {s}"));
        let order = [
            "flock 9",
            "mark='/m d'/updated-op-1-abc",
            "already updated (op-1-abc)",
            "ControlAvailable",
            "BEFORE",
            "(\nupgrade\n)",
            "AFTER",
            "rm -f '/m d'/updated-*",
            "touch \"$mark\"",
        ];
        for pair in order.windows(2) {
            assert!(at(pair[0]) < at(pair[1]), "{pair:?} in {s}");
        }
        assert_eq!(mark_file(&run), "updated-op-1-abc");
    }

    #[test]
    fn the_systemd_script_runs_the_command_then_restarts_an_engine_it_left_running() {
        let run = UpdateRun {
            command: "apt-get install -y docker.io".into(),
            timeout: Duration::from_secs(60),
            mark: "w-1-abc".into(),
        };
        let s = systemd_script(&run, "/var/lib/drover");
        assert!(s.starts_with("set -e\n"));
        let at = |what: &str| s.find(what).unwrap_or_else(|| panic!("{what} in {s}"));
        // Once per machine: the mark of a done update ends a late run at once.
        assert!(at("already updated") < at("ControlAvailable"));
        assert!(at("ControlAvailable") < at("apt-get install -y docker.io"));
        assert!(at("apt-get install -y docker.io") < at("systemctl restart docker.service"));
        assert!(at("systemctl restart docker.service") < at("touch \"$mark\""));
    }
}
