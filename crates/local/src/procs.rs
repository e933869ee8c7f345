//! Process and mount housekeeping: identify processes by their command
//! line (never trust a possibly recycled PID), signal them, unmount what
//! an engine left behind.

use drover_spi::{Fence, LeaseExpired, Unfenced};
use nix::mount::{MntFlags, umount2};
use nix::sys::signal::{Signal, kill, killpg};
use nix::unistd::Pid;
use std::path::Path;
use std::time::{Duration, Instant};

/// `/proc/<pid>/cmdline` with NULs as spaces; `None` when the process is
/// gone or a zombie (empty cmdline).
pub fn cmdline(pid: i32) -> Option<String> {
    let raw = std::fs::read(format!("/proc/{pid}/cmdline")).ok()?;
    if raw.is_empty() {
        return None;
    }
    Some(
        raw.split(|b| *b == 0)
            .map(|s| String::from_utf8_lossy(s).into_owned())
            .collect::<Vec<_>>()
            .join(" "),
    )
}

/// True when `pid` is alive and its command line contains `needle`.
pub fn is_ours(pid: i32, needle: &str) -> bool {
    pid > 1 && cmdline(pid).is_some_and(|c| c.contains(needle))
}

/// Set (to the machine's directory) in the environment of everything the
/// provider starts for a machine, and so inherited by all it starts in
/// turn: what tells the machine's processes from a bystander whose command
/// line merely names the machine (an operator's `drover --store
/// swarm:unix:///…/sock` must survive that machine's destruction).
pub const MACHINE_ENV: &str = "DROVER_LOCAL_MACHINE";

/// True when `pid`'s environment has `MACHINE_ENV=value`.
fn started_for(pid: i32, value: &str) -> bool {
    let wanted = format!("{MACHINE_ENV}={value}");
    std::fs::read(format!("/proc/{pid}/environ"))
        .is_ok_and(|env| env.split(|b| *b == 0).any(|v| v == wanted.as_bytes()))
}

/// Which processes naming `needle` in their command line a [`Tree`] holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Owned {
    /// Only those also marked with it in [`MACHINE_ENV`]: everything the
    /// provider started for one of its machines (and what that started).
    Marked,
    /// All of them: a directory whose every process is ours although we
    /// did not start it marked (an adopted engine, the demo's directory).
    Named,
}

/// The live processes naming `needle` that `owned` selects.
fn owned_pids(needle: &str, owned: Owned) -> Vec<i32> {
    pids_matching(needle)
        .into_iter()
        .filter(|p| owned == Owned::Named || started_for(*p, needle))
        .collect()
}

/// Every live process whose command line contains `needle`.
pub fn pids_matching(needle: &str) -> Vec<i32> {
    let Ok(rd) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    rd.filter_map(|e| e.ok()?.file_name().to_str()?.parse::<i32>().ok())
        .filter(|p| *p != std::process::id() as i32 && is_ours(*p, needle))
        .collect()
}

/// True when `pid` exists and is not a zombie (whatever it runs).
pub fn is_alive(pid: i32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|s| {
            let rest = s.get(s.rfind(')')? + 2..)?.to_string();
            rest.split(' ').next().map(|st| st != "Z" && st != "X")
        })
        .unwrap_or(false)
}

/// The process group of `pid`, from `/proc/<pid>/stat`.
pub fn pgid_of(pid: i32) -> Option<i32> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // comm may contain spaces: fields after the last ')'.
    let rest = &stat[stat.rfind(')')? + 2..];
    rest.split(' ').nth(2)?.parse().ok()
}

/// One machine's processes, found (by reading `/proc`) before any is
/// signalled, so that a caller's last [`Fence`] check sits right before
/// the first `kill(2)` with no scan in between: the process group of `pid`
/// (only when the group leader is verified by `needle` in its command line)
/// and every process whose command line names `needle` and that `owned`
/// selects (containerd, shims, the boot script, the controller and its
/// restart loop).
#[derive(Debug)]
pub struct Tree {
    verified_group: Option<i32>,
    found: Vec<i32>,
    needle: String,
    owned: Owned,
}

impl Tree {
    /// Reads `/proc` for the machine's processes; signals nothing.
    pub fn find(pid: Option<i32>, pgid: Option<i32>, needle: &str, owned: Owned) -> Tree {
        let verified_group = match (pid, pgid) {
            (Some(pid), Some(pgid)) if is_ours(pid, needle) && pgid_of(pid) == Some(pgid) => {
                Some(pgid)
            }
            _ => None,
        };
        // One scan: those `owned` selects, and the rest said.
        let (found, unmarked): (Vec<i32>, Vec<i32>) = pids_matching(needle)
            .into_iter()
            .partition(|p| owned == Owned::Named || started_for(*p, needle));
        warn_unmarked(needle, &unmarked);
        Tree {
            verified_group,
            found,
            needle: needle.to_string(),
            owned,
        }
    }

    /// Checks `fence`, then SIGTERMs what [`find`](Self::find) found: only
    /// `kill(2)` calls follow the check. Nothing is signalled when it
    /// refuses.
    pub fn terminate(&self, fence: &dyn Fence) -> Result<(), LeaseExpired> {
        fence.check()?;
        self.signal(&self.found, Signal::SIGTERM);
        Ok(())
    }

    /// After [`terminate`](Self::terminate): waits up to `grace` for the
    /// tree to exit, then SIGKILLs what is left (found again, so a process
    /// started in the meantime goes too). Returns the number of processes
    /// still alive afterwards (0 on success).
    pub fn reap(&self, grace: Duration) -> usize {
        if self.wait_gone(grace) {
            return 0;
        }
        self.signal(&owned_pids(&self.needle, self.owned), Signal::SIGKILL);
        if self.wait_gone(Duration::from_secs(5)) {
            return 0;
        }
        self.alive()
    }

    fn signal(&self, pids: &[i32], sig: Signal) {
        if let Some(g) = self.verified_group {
            let _ = killpg(Pid::from_raw(g), sig);
        }
        for p in pids {
            let _ = kill(Pid::from_raw(*p), sig);
        }
    }

    fn wait_gone(&self, within: Duration) -> bool {
        let deadline = Instant::now() + within;
        while Instant::now() < deadline {
            if self.alive() == 0 {
                return true;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        false
    }

    fn alive(&self) -> usize {
        let mut n = owned_pids(&self.needle, self.owned).len();
        if let Some(g) = self.verified_group {
            n += group_members(g)
                .into_iter()
                .filter(|p| cmdline(*p).is_some_and(|c| !c.contains(&self.needle)))
                .count();
        }
        n
    }
}

/// Processes naming a machine's directory that were not started for it (an
/// operator's command naming it, or something started with a cleared
/// environment) are left alone, but said, so a leak is never silent.
fn warn_unmarked(needle: &str, unmarked: &[i32]) {
    if !unmarked.is_empty() {
        tracing::warn!(
            ?unmarked,
            dir = needle,
            "processes naming a destroyed machine's directory without its mark are left running"
        );
    }
}

/// Stops a machine's processes without a fence ([`Tree`]: SIGTERM, up to
/// `grace`, SIGKILL): for callers that hold no controller term (cleanup,
/// the demo, tests). Returns the number of processes still alive.
pub fn stop_tree(
    pid: Option<i32>,
    pgid: Option<i32>,
    needle: &str,
    owned: Owned,
    grace: Duration,
) -> usize {
    let tree = Tree::find(pid, pgid, needle, owned);
    let _ = tree.terminate(&Unfenced);
    tree.reap(grace)
}

/// Live (non-zombie) members of process group `pgid`.
pub fn group_members(pgid: i32) -> Vec<i32> {
    let Ok(rd) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    rd.filter_map(|e| e.ok()?.file_name().to_str()?.parse::<i32>().ok())
        .filter(|p| pgid_of(*p) == Some(pgid) && cmdline(*p).is_some())
        .collect()
}

/// Unmounts (lazily, deepest first) every mount point at or under `dir`.
pub fn unmount_under(dir: &Path) -> std::io::Result<()> {
    let dir = dir.canonicalize()?;
    let prefix = dir.to_string_lossy().into_owned();
    let mountinfo = std::fs::read_to_string("/proc/self/mountinfo")?;
    let mut points: Vec<String> = mountinfo
        .lines()
        .filter_map(|l| l.split(' ').nth(4))
        .map(unescape_mount)
        .filter(|p| p == &prefix || p.starts_with(&format!("{prefix}/")))
        .collect();
    points.sort_by_key(|p| std::cmp::Reverse(p.len()));
    points.dedup();
    for p in points {
        if let Err(e) = umount2(p.as_str(), MntFlags::MNT_DETACH)
            && e != nix::errno::Errno::EINVAL
            && e != nix::errno::Errno::ENOENT
        {
            tracing::warn!(mount = %p, error = %e, "unmount failed");
        }
    }
    Ok(())
}

/// mountinfo escapes space, tab, newline and backslash as octal.
fn unescape_mount(s: &str) -> String {
    let mut out = String::new();
    let b = s.as_bytes();
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'\\'
            && i + 4 <= b.len()
            && let Some(Ok(v)) = s.get(i + 1..i + 4).map(|o| u8::from_str_radix(o, 8))
        {
            out.push(v as char);
            i += 4;
            continue;
        }
        out.push(b[i] as char);
        i += 1;
    }
    out
}

/// Removes `dir` after unmounting everything under it. Absent is success.
pub fn remove_instance_dir(dir: &Path) -> std::io::Result<()> {
    if !dir.exists() {
        return Ok(());
    }
    unmount_under(dir)?;
    match std::fs::remove_dir_all(dir) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(_) => {
            // A lazily detached mount can take a moment to go: once more.
            std::thread::sleep(Duration::from_millis(300));
            unmount_under(dir)?;
            std::fs::remove_dir_all(dir)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::process::ExitStatusExt;

    #[test]
    fn own_cmdline_and_pgid() {
        let me = std::process::id() as i32;
        assert!(cmdline(me).is_some());
        assert!(pgid_of(me).is_some());
        assert!(cmdline(i32::MAX - 1).is_none());
    }

    struct Expired;

    impl Fence for Expired {
        fn check(&self) -> Result<(), LeaseExpired> {
            Err(LeaseExpired("expired in the test".into()))
        }
    }

    /// A machine's tree is found first and signalled only after the fence
    /// is checked: under an expired lease nothing is signalled, however
    /// recently the processes were found.
    #[test]
    fn a_found_tree_is_signalled_only_past_the_fence() {
        use std::os::unix::process::CommandExt;
        let needle = format!("/tmp/drover-procs-test-{}", std::process::id());
        let mut child = std::process::Command::new("sh")
            .args(["-c", "sleep 300; :", &needle])
            .process_group(0)
            .spawn()
            .expect("sh");
        let pid = child.id() as i32;
        // Until it has exec'd, the child's command line is the test's own.
        while !is_ours(pid, &needle) {
            std::thread::sleep(Duration::from_millis(5));
        }
        let tree = Tree::find(Some(pid), Some(pid), &needle, Owned::Named);
        // The shell's `sleep` may or may not have been forked yet: the tree
        // holds the shell and nothing outside its process group.
        assert!(tree.found.contains(&pid), "{tree:?}");
        assert!(
            tree.found.iter().all(|p| pgid_of(*p) == Some(pid)),
            "{tree:?}"
        );

        let refused = tree.terminate(&Expired);
        assert!(refused.is_err());
        assert!(
            child.try_wait().unwrap().is_none(),
            "signalled under an expired lease"
        );

        tree.terminate(&Unfenced).unwrap();
        assert_eq!(child.wait().unwrap().signal(), Some(Signal::SIGTERM as i32));
        assert_eq!(tree.reap(Duration::from_secs(5)), 0);
    }

    #[test]
    fn unescapes_mountinfo() {
        assert_eq!(unescape_mount("/a\\040b"), "/a b");
        assert_eq!(unescape_mount("/plain"), "/plain");
    }
}
