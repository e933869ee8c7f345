//! The shell scripts drover runs on a host, one per verb: pure text, so
//! what runs there is read and tested here. Each is run as root (through
//! `sudo -n` for another user: [`as_root`]) with `sh -c`, its values
//! single-quoted; what must stay secret (the boot environment) and what is
//! long (a record, a boot script) reaches it on standard input, never in
//! the command itself, which the host's process table shows to anyone.

use crate::record::RECORD;
use drover_core::spec::ssh::Cleanup;
use std::time::Duration;

/// The boot script's file, its output and its process group's id, in the
/// host's state directory. Nothing secret: the rendered script holds no
/// secret, and the boot environment lives in its processes only.
pub const BOOT_SCRIPT: &str = "boot.sh";
/// See [`BOOT_SCRIPT`].
pub const BOOT_LOG: &str = "boot.log";
/// See [`BOOT_SCRIPT`].
pub const BOOT_PID: &str = "boot.pid";
/// How much of the boot log's end is read ([`BootLog::tail`] keeps far less).
///
/// [`BootLog::tail`]: drover_core::boot::BootLog::tail
pub const BOOT_LOG_BYTES: usize = 64 * 1024;
/// The exit status a script uses for "not there" (no record, not this
/// enrollment's, no boot log): an answer, not a failure.
pub const ABSENT: i32 = 3;

/// The line every standard input drover sends a host ends with
/// ([`framed`]). A host script keeps what it read only when that line is
/// there ([`receive`]): a connection cut while the input is in transit is
/// an early end of input to the host's shell, which goes on (no terminal,
/// no hang-up), and a truncated record, boot script, environment or
/// update must never be kept, let alone run.
pub const END_OF_INPUT: &str = "# drover: end of input";

/// The exit status of a host script whose input was cut short: nothing
/// was kept, and the caller's retry sends it again.
pub const CUT_SHORT: i32 = 75;

/// `payload` as a host script's standard input: its lines, then
/// [`END_OF_INPUT`] on a line of its own.
pub fn framed(payload: &[u8]) -> Vec<u8> {
    let mut out = payload.to_vec();
    if !out.is_empty() && !out.ends_with(b"\n") {
        out.push(b'\n');
    }
    out.extend_from_slice(END_OF_INPUT.as_bytes());
    out.push(b'\n');
    out
}

/// Shell: standard input into file `target` (a shell word), kept only when
/// it ends with [`END_OF_INPUT`], which is dropped; else the file goes and
/// the script exits [`CUT_SHORT`].
fn receive(target: &str) -> String {
    format!(
        "cat >{target}\n\
         if [ \"$(tail -n 1 {target})\" != '{END_OF_INPUT}' ]; then rm -f {target}; {CUT}; fi\n\
         sed -i '$d' {target}\n",
        CUT = cut_short()
    )
}

/// Shell: say the input was cut short, and exit [`CUT_SHORT`].
fn cut_short() -> String {
    format!("echo 'drover: the input was cut short' >&2; exit {CUT_SHORT}")
}
/// What the record reader prints for a host without a record.
pub const FREE: &str = "free";

/// `s` as one `sh` word: single-quoted, its own quotes escaped.
pub fn sh_quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', r"'\''"))
}

/// The command that runs `script` as root on a host logged in to as
/// `user`: directly for root, else through `sudo -n` (which fails rather
/// than asking for a password). `exec sh -c`: whatever the user's login
/// shell, the script is read by `sh`.
pub fn as_root(user: &str, script: &str) -> String {
    let sudo = if user == "root" { "" } else { "sudo -n " };
    format!("exec {sudo}sh -c {}", sh_quote(script))
}

fn state(dir: &str) -> String {
    format!("d={}\nf=\"$d/{RECORD}\"\n", sh_quote(dir))
}

/// Prints the host's record, or [`FREE`] when it has none.
pub fn read_record(dir: &str) -> String {
    format!(
        "{}if [ -e \"$f\" ]; then exec cat \"$f\"; else echo {FREE}; fi\n",
        state(dir)
    )
}

/// What [`claim`] prints, then the engine's swarm state, for a free host
/// whose engine is part of a swarm already.
pub const IN_SWARM: &str = "in-swarm";

/// The swarm states ([`IN_SWARM`]) in which an engine belongs to a swarm:
/// a host whose engine is in one is not free, whatever its record says.
const SWARM_STATES: &str = "active|pending|error|locked";

/// Takes the host for the record on standard input, atomically: the
/// record is written aside and linked into place, which fails when a
/// record is there already (another enrollment got there first). Prints
/// `claimed` or `taken`. A host without a record whose engine (at
/// `docker_socket`) is part of a swarm already is not taken: it prints
/// [`IN_SWARM`] and the engine's state. A free host has no record, so
/// nothing on it says that swarm is this cluster's; making it leave is
/// the operator's word (drover's release would force it out).
pub fn claim(dir: &str, docker_socket: &str) -> String {
    format!(
        "set -eu\numask 077\n{}mkdir -p \"$d\"\n\
         if [ -e \"$f\" ]; then echo taken; exit 0; fi\n\
         export DOCKER_HOST={} DROVER_STATE_DIR=\"$d\"\n\
         if command -v docker >/dev/null 2>&1; then\n  \
         s=$(docker info --format '{{{{.Swarm.LocalNodeState}}}}' 2>/dev/null || true)\n  \
         case \"$s\" in {SWARM_STATES}) echo \"{IN_SWARM} $s\"; exit 0 ;; esac\n\
         fi\n\
         t=\"$d/.{RECORD}.$$\"\n{}\
         if ln \"$t\" \"$f\" 2>/dev/null; then rm -f \"$t\"; echo claimed; else rm -f \"$t\"; echo taken; fi\n",
        state(dir),
        sh_quote(&format!("unix://{docker_socket}")),
        receive("\"$t\"")
    )
}

/// Replaces the record of enrollment `id` with the one on standard input
/// (renamed into place); exits [`ABSENT`] when the host holds no record
/// of `id`.
pub fn relabel(dir: &str, id: &str) -> String {
    format!(
        "set -eu\numask 077\n{}{}t=\"$d/.{RECORD}.$$\"\n{}mv -f \"$t\" \"$f\"\n",
        state(dir),
        only_enrollment(id),
        receive("\"$t\"")
    )
}

/// Exits [`ABSENT`] unless the record is enrollment `id`'s (ids are plain:
/// a host name and hex digits, matched as the record's JSON writes them).
fn only_enrollment(id: &str) -> String {
    let field = format!("\"id\":\"{id}\"");
    format!(
        "[ -e \"$f\" ] || exit {ABSENT}\ngrep -qF {} \"$f\" || exit {ABSENT}\n",
        sh_quote(&field)
    )
}

/// Writes the boot script on standard input to the state directory (a
/// new enrollment's: an earlier log goes).
pub fn upload_boot(dir: &str) -> String {
    format!(
        "set -eu\numask 077\n{}mkdir -p \"$d\"\nrm -f \"$d/{BOOT_LOG}\" \"$d/{BOOT_PID}\"\n{}mv -f \"$d/{BOOT_SCRIPT}.new\" \"$d/{BOOT_SCRIPT}\"\n",
        state(dir),
        receive(&format!("\"$d/{BOOT_SCRIPT}.new\""))
    )
}

/// Starts the boot script in a session of its own, in the background, its
/// output appended to the boot log, and returns at once. Its environment
/// (the join token among it) is the `export` lines on standard input,
/// evaluated by this shell and inherited by the script: on no command
/// line, in no file. The log ends with the script's exit status.
pub fn launch_boot(dir: &str) -> String {
    format!(
        "set -eu\numask 077\n{}e=$(cat)\n\
         if [ \"$(printf '%s\\n' \"$e\" | tail -n 1)\" != '{END_OF_INPUT}' ]; then {}; fi\n\
         eval \"$e\"\ncd \"$d\"\n\
         nohup setsid sh -c 'echo $$ >{BOOT_PID}; sh ./{BOOT_SCRIPT}; s=$?; rm -f {BOOT_PID}; echo \"drover: the boot script exited with status $s\"' \
         >>{BOOT_LOG} 2>&1 </dev/null &\n",
        state(dir),
        cut_short()
    )
}

/// Prints `yes` when the boot script was started (its log exists).
pub fn booted(dir: &str) -> String {
    format!(
        "{}if [ -e \"$d/{BOOT_LOG}\" ]; then echo yes; else echo no; fi\n",
        state(dir)
    )
}

/// The end of the boot log; exits [`ABSENT`] when there is none.
pub fn boot_log(dir: &str) -> String {
    format!(
        "{}[ -e \"$d/{BOOT_LOG}\" ] || exit {ABSENT}\nexec tail -c {BOOT_LOG_BYTES} \"$d/{BOOT_LOG}\"\n",
        state(dir)
    )
}

/// Returns the host of enrollment `id` to the pool: its boot stopped if
/// it still runs, its engine out of the swarm, what drover's default boot
/// scripts changed undone (their marks in the state directory say what),
/// the operator's `cleanup` run, drover's files removed, the record last
/// (until then the host is still the enrollment's, and a failed release
/// is tried again). Exits 0 at once when the host holds no record of
/// `id`. Nothing else is removed, and nothing is powered off.
pub fn release(dir: &str, id: &str, docker_socket: &str, cleanup: &Cleanup) -> String {
    let mut s = format!("set -eu\n{}", state(dir));
    s.push_str(&only_enrollment(id).replace(&format!("exit {ABSENT}"), "exit 0"));
    s.push_str(&format!(
        "if [ -s \"$d/{BOOT_PID}\" ]; then kill -TERM -- \"-$(cat \"$d/{BOOT_PID}\")\" 2>/dev/null || true; fi\n\
         export DOCKER_HOST={} DROVER_STATE_DIR=\"$d\"\n\
         if command -v docker >/dev/null 2>&1; then\n  \
         case \"$(docker info --format '{{{{.Swarm.LocalNodeState}}}}' 2>/dev/null || true)\" in\n    \
         active|pending|error|locked) docker swarm leave --force >/dev/null ;;\n  esac\nfi\n",
        sh_quote(&format!("unix://{docker_socket}"))
    ));
    s.push_str(UNDO_DEFAULT_BOOT);
    if let Some(command) = &cleanup.command {
        s.push_str(&format!("(\n{command}\n)\n"));
    }
    for path in &cleanup.paths {
        s.push_str(&format!("rm -rf -- {}\n", sh_quote(path)));
    }
    s.push_str(&format!(
        "rm -f \"$d/{BOOT_SCRIPT}\" \"$d/{BOOT_LOG}\" \"$d/{BOOT_PID}\" \"$d\"/{UPDATE_PREFIX}*\nrm -f \"$f\"\n"
    ));
    s
}

/// What the default ssh boot scripts changed, undone by their marks
/// (`templates/ssh/`): the controller's unit removed, the engine's
/// configuration as it was before, read again by the engine.
const UNDO_DEFAULT_BOOT: &str = "\
if [ -e \"$d/controller.unit\" ]; then
  systemctl disable --now drover-controller.service >/dev/null 2>&1 || true
  rm -f /etc/systemd/system/drover-controller.service /etc/drover/controller.env
  systemctl daemon-reload || true
  rm -f \"$d/controller.unit\"
fi
reload=
if [ -e \"$d/daemon.json.orig\" ]; then
  cp -p \"$d/daemon.json.orig\" /etc/docker/daemon.json && rm -f \"$d/daemon.json.orig\" && reload=1
elif [ -e \"$d/daemon.json.none\" ]; then
  rm -f /etc/docker/daemon.json \"$d/daemon.json.none\" && reload=1
fi
if [ -n \"$reload\" ]; then systemctl reload docker.service || systemctl restart docker.service || true; fi
";

/// The files of an update in the state directory, `update-MARK.*`: `sh`
/// (its script), `log` (its output, standard error with it), `status`
/// (its exit status, written once it ended), `lock` (held by the update's
/// processes while it runs: the host itself says whether it still runs,
/// whatever became of the connection that started it).
pub const UPDATE_PREFIX: &str = "update-";
/// How much of an update's log is read back ([`BootLog::tail`] keeps far less).
///
/// [`BootLog::tail`]: drover_core::boot::BootLog::tail
pub const UPDATE_LOG_BYTES: usize = 64 * 1024;

/// What the update scripts print first: the update ended (its status on
/// the same line, its log's end after it), it runs, or the host has no
/// trace of it (never started, or its runner ended without a status:
/// the machine restarted).
pub const UPDATE_FINISHED: &str = "finished";
/// See [`UPDATE_FINISHED`].
pub const UPDATE_RUNNING: &str = "running";
/// See [`UPDATE_FINISHED`].
pub const UPDATE_ABSENT: &str = "absent";

/// The shell lines every update script starts with: where update `mark`'s
/// files are (`$u`), and `said`, which prints how it stands and exits when
/// it ended or runs (a shared lock it cannot take: the update's processes
/// hold it). The status is read again after the lock: an update that ends
/// between the two looks (its status written, then its lock released)
/// reads as ended, never as absent.
fn update_prelude(dir: &str, mark: &str) -> String {
    // A mark is `[a-z0-9-]` (in_place::UpdateRun::mark); anything else is
    // kept out of the file name all the same.
    let mark: String = mark
        .chars()
        .map(|c| match c.is_ascii_alphanumeric() || c == '-' {
            true => c,
            false => '_',
        })
        .collect();
    format!(
        "set -eu\numask 077\n{}u=\"$d/{UPDATE_PREFIX}{mark}\"\n\
         ended() {{\n  \
         if [ -e \"$u.status\" ]; then echo \"{UPDATE_FINISHED} $(cat \"$u.status\")\"; tail -c {UPDATE_LOG_BYTES} \"$u.log\" 2>/dev/null || true; exit 0; fi\n\
         }}\n\
         said() {{\n  \
         ended\n  \
         if [ -e \"$u.lock\" ] && ! flock -n -s \"$u.lock\" true; then echo {UPDATE_RUNNING}; exit 0; fi\n  \
         ended\n\
         }}\n",
        state(dir)
    )
}

/// Starts update `mark` on the host, detached from the connection: the
/// script on standard input (an in-place update: `in_place::systemd_script`)
/// is written to `update-MARK.sh` and run in a session of its own, under
/// `timeout` (at its end the script's whole process group is sent TERM,
/// then KILL 10 s later, and `timeout` says so in the log: [`timed_out`]),
/// its output in `update-MARK.log`, its exit status written to
/// `update-MARK.status` when it ends. An update that ended, or runs, is
/// not started again: the script prints how it stands, as
/// [`update_state`] does (a dropped connection's retry finds it). The
/// ended runs of other updates are forgotten. Returns once the update
/// holds its lock.
pub fn update_start(dir: &str, mark: &str, within: Duration) -> String {
    format!(
        "{}said\nmkdir -p \"$d\"\n\
         for s in \"$d\"/{UPDATE_PREFIX}*.status; do [ -e \"$s\" ] || continue; rm -f \"${{s%.status}}\".*; done\n\
         {}mv -f \"$u.sh.new\" \"$u.sh\"\nrm -f \"$u.log\"\ncd /\n\
         nohup setsid sh -c 'exec 8>\"$1.lock\"; flock -w 10 8 || exit 0; [ ! -e \"$1.status\" ] || exit 0; \
         timeout -v -k 10s {}s sh \"$1.sh\" >\"$1.log\" 2>&1 </dev/null && s=0 || s=$?; \
         echo \"$s\" >\"$1.status.new\"; mv -f \"$1.status.new\" \"$1.status\"' sh \"$u\" >/dev/null 2>&1 </dev/null &\n\
         i=0\n\
         while [ ! -e \"$u.status\" ] && flock -n -s \"$u.lock\" true; do\n  \
         i=$((i+1)); if [ $i -ge 100 ]; then echo 'the update did not start' >&2; exit 1; fi; sleep 0.1\n\
         done\n\
         said\necho {UPDATE_ABSENT}\n",
        update_prelude(dir, mark),
        receive("\"$u.sh.new\""),
        within.as_secs().max(1),
    )
}

/// Prints how update `mark` stands on the host ([`UPDATE_FINISHED`] with
/// its status and log, [`UPDATE_RUNNING`], or [`UPDATE_ABSENT`]).
pub fn update_state(dir: &str, mark: &str) -> String {
    format!("{}said\necho {UPDATE_ABSENT}\n", update_prelude(dir, mark))
}

/// How an update stands, read from [`update_start`]'s or
/// [`update_state`]'s output.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum UpdateState {
    /// It ended: its exit status, and the end of its log.
    Finished {
        /// Its exit status (`timeout`'s, when it was stopped).
        status: i32,
        /// The end of its output.
        log: String,
    },
    /// It runs.
    Running,
    /// No trace of it on the host.
    Absent,
}

impl UpdateState {
    /// The state the script printed, `None` when it printed none.
    pub fn parse(stdout: &str) -> Option<UpdateState> {
        let (first, rest) = stdout.split_once('\n').unwrap_or((stdout, ""));
        match first.trim().split_once(' ') {
            Some((UPDATE_FINISHED, status)) => Some(UpdateState::Finished {
                status: status.trim().parse().ok()?,
                log: rest.to_string(),
            }),
            _ if first.trim() == UPDATE_RUNNING => Some(UpdateState::Running),
            _ if first.trim() == UPDATE_ABSENT => Some(UpdateState::Absent),
            _ => None,
        }
    }
}

/// The line `timeout -v` writes when it stops a command.
const TIMEOUT_SAYS: &str = "timeout: sending signal";

/// True when an update ran past its timeout and was stopped: `timeout`'s
/// status (124; 137 once it had to KILL) and its own line on the output.
pub fn timed_out(status: Option<i32>, output: &str) -> bool {
    matches!(status, Some(124 | 137)) && output.contains(TIMEOUT_SAYS)
}

/// The update's output without `timeout`'s own lines.
pub fn without_timeout_lines(output: &str) -> String {
    output
        .lines()
        .filter(|l| !l.starts_with(TIMEOUT_SAYS))
        .map(|l| format!("{l}\n"))
        .collect()
}

#[cfg(test)]
mod tests;
