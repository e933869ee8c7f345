//! The scripts run by the local `sh`, in a temporary state directory:
//! what they do to files is what they do on a host (the ssh transport is
//! tested against a real sshd in `tests/provider.rs`).

use super::*;
use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};

/// Runs `command` (as [`as_root`] makes it, for root) with `stdin`, framed
/// as the link sends it: its exit status and standard output.
fn run(script: &str, stdin: &str) -> (i32, String) {
    run_raw(script, &framed(stdin.as_bytes()))
}

/// [`run`] with `stdin` as it is: an input cut short in transit.
fn run_raw(script: &str, stdin: &[u8]) -> (i32, String) {
    let mut child = Command::new("sh")
        .arg("-c")
        .arg(as_root("root", script))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("sh runs");
    child.stdin.take().unwrap().write_all(stdin).unwrap();
    let out = child.wait_with_output().unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
    )
}

/// An engine socket where no engine listens: `docker info` fails, the
/// host is in no swarm.
const NO_ENGINE: &str = "/nonexistent/docker.sock";

fn dir() -> (tempfile::TempDir, String) {
    let t = tempfile::tempdir().unwrap();
    let d = t.path().join("state").display().to_string();
    (t, d)
}

#[test]
fn quoting_survives_any_text() {
    for s in ["plain", "it's", "a b", "$(id) `id` \"x\" \\ ;|&", "'", ""] {
        let (code, out) = run(&format!("printf %s {}", sh_quote(s)), "");
        assert_eq!((code, out.as_str()), (0, s));
    }
    assert_eq!(as_root("admin", "true"), "exec sudo -n sh -c 'true'");
}

#[test]
fn a_host_is_claimed_once_and_its_record_read_back() {
    let (_t, d) = dir();
    assert_eq!(run(&read_record(&d), ""), (0, "free\n".into()));
    assert_eq!(
        run(&claim(&d, NO_ENGINE), "{\"id\":\"h-1\"}\n"),
        (0, "claimed\n".into())
    );
    assert_eq!(
        run(&claim(&d, NO_ENGINE), "{\"id\":\"h-2\"}\n"),
        (0, "taken\n".into())
    );
    assert_eq!(run(&read_record(&d), ""), (0, "{\"id\":\"h-1\"}\n".into()));
    let mode = std::fs::metadata(Path::new(&d).join(RECORD)).unwrap();
    assert_eq!(
        std::os::unix::fs::PermissionsExt::mode(&mode.permissions()) & 0o777,
        0o600
    );
    let left: Vec<_> = std::fs::read_dir(&d).unwrap().collect();
    assert_eq!(left.len(), 1, "no temporary file left behind");
}

#[test]
fn only_the_enrollments_own_record_is_rewritten() {
    let (_t, d) = dir();
    run(&claim(&d, NO_ENGINE), "{\"id\":\"h-1\",\"tags\":{}}\n");
    assert_eq!(run(&relabel(&d, "h-2"), "{\"id\":\"h-2\"}\n").0, ABSENT);
    assert_eq!(
        run(
            &relabel(&d, "h-1"),
            "{\"id\":\"h-1\",\"tags\":{\"a\":\"b\"}}\n"
        )
        .0,
        0
    );
    assert_eq!(
        run(&read_record(&d), "").1,
        "{\"id\":\"h-1\",\"tags\":{\"a\":\"b\"}}\n"
    );
}

#[test]
fn the_boot_gets_its_environment_from_standard_input_only() {
    let (t, d) = dir();
    let seen = t.path().join("seen");
    let script = format!(
        "echo \"token=$DROVER_JOIN_TOKEN\" >{}\necho booting\n",
        seen.display()
    );
    assert_eq!(run(&upload_boot(&d), &script).0, 0);
    assert_eq!(run(&booted(&d), ""), (0, "no\n".into()));
    let env = drover_core::template::sh_exports([("DROVER_JOIN_TOKEN", "SWMTKN-1-it's")]);
    assert_eq!(run(&launch_boot(&d), &env).0, 0);
    assert_eq!(run(&booted(&d), ""), (0, "yes\n".into()));
    let log = Path::new(&d).join(BOOT_LOG);
    for _ in 0..100 {
        if std::fs::read_to_string(&log).is_ok_and(|l| l.contains("exited")) {
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(
        std::fs::read_to_string(&seen).unwrap(),
        "token=SWMTKN-1-it's\n"
    );
    assert_eq!(
        run(&boot_log(&d), "").1,
        "booting\ndrover: the boot script exited with status 0\n"
    );
    for entry in std::fs::read_dir(&d).unwrap() {
        let text = std::fs::read_to_string(entry.unwrap().path()).unwrap_or_default();
        assert!(!text.contains("SWMTKN"), "the token stays off disk: {text}");
    }
    assert!(!launch_boot(&d).contains("SWMTKN") && !upload_boot(&d).contains("SWMTKN"));
}

#[test]
fn a_release_removes_what_is_declared_and_the_record_last_and_nothing_else() {
    let (t, d) = dir();
    let keep = t.path().join("keep");
    let volumes = t.path().join("volumes");
    let ran = t.path().join("ran");
    for p in [&keep, &volumes] {
        std::fs::create_dir_all(p.join("inner")).unwrap();
    }
    run(&claim(&d, NO_ENGINE), "{\"id\":\"h-1\"}\n");
    run(&upload_boot(&d), "true\n");
    let cleanup = Cleanup {
        command: Some(format!("echo cleaned >{}", ran.display())),
        paths: vec![volumes.display().to_string()],
    };
    let sock = t.path().join("none.sock").display().to_string();
    // Another enrollment's release touches nothing.
    assert_eq!(run(&release(&d, "h-2", &sock, &cleanup), "").0, 0);
    assert!(volumes.exists() && Path::new(&d).join(RECORD).exists());
    assert_eq!(run(&release(&d, "h-1", &sock, &cleanup), "").0, 0);
    assert!(!volumes.exists() && keep.join("inner").exists());
    assert_eq!(std::fs::read_to_string(&ran).unwrap(), "cleaned\n");
    assert_eq!(run(&read_record(&d), ""), (0, "free\n".into()));
    assert_eq!(run(&boot_log(&d), "").0, ABSENT);
    // A failing cleanup keeps the record: the release is tried again.
    run(&claim(&d, NO_ENGINE), "{\"id\":\"h-3\"}\n");
    let failing = Cleanup {
        command: Some("exit 7".into()),
        paths: Vec::new(),
    };
    assert_eq!(run(&release(&d, "h-3", &sock, &failing), "").0, 7);
    assert!(Path::new(&d).join(RECORD).exists());
}

#[test]
fn an_update_stopped_at_its_timeout_is_told_from_one_that_failed() {
    let hung = "timeout: sending signal TERM to command ‘sh’\n";
    assert!(timed_out(Some(124), &format!("started\n{hung}")));
    assert!(!timed_out(Some(124), "exit 124 by itself\n"));
    assert!(!timed_out(Some(1), hung));
    assert_eq!(without_timeout_lines(&format!("a\n{hung}b\n")), "a\nb\n");
    let (_t, d) = dir();
    assert_eq!(
        wait_for(&d, "m-1", "echo out; echo err >&2; exit 3", 5),
        UpdateState::Finished {
            status: 3,
            log: "out\nerr\n".into()
        }
    );
    let UpdateState::Finished { status, log } = wait_for(&d, "m-2", "echo started; sleep 30", 1)
    else {
        panic!("the hung update ended")
    };
    assert!(timed_out(Some(status), &log), "{status}: {log}");
}

/// Starts update `mark` running `script` within `secs`, and waits for it
/// to end by asking as the provider does.
fn wait_for(d: &str, mark: &str, script: &str, secs: u64) -> UpdateState {
    let started = run(&update_start(d, mark, Duration::from_secs(secs)), script);
    assert_eq!(started.0, 0, "{started:?}");
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    loop {
        let (code, out) = run(&update_state(d, mark), "");
        assert_eq!(code, 0, "{out}");
        match UpdateState::parse(&out).expect("a state") {
            UpdateState::Running => {}
            other => return other,
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the update never ended"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn an_update_runs_detached_once_and_its_outcome_is_read_again() {
    let (t, d) = dir();
    let count = t.path().join("count");
    let script = format!("echo ran >>{}\nsleep 1\necho done", count.display());
    // Started, then asked for again while it runs: one run.
    let (code, out) = run(&update_start(&d, "m-1", Duration::from_secs(30)), &script);
    assert_eq!(
        (code, UpdateState::parse(&out)),
        (0, Some(UpdateState::Running))
    );
    let (_, again) = run(&update_start(&d, "m-1", Duration::from_secs(30)), &script);
    assert_eq!(UpdateState::parse(&again), Some(UpdateState::Running));
    let ended = wait_for(&d, "m-1", &script, 30);
    assert_eq!(
        ended,
        UpdateState::Finished {
            status: 0,
            log: "done\n".into()
        }
    );
    // Ended: asked for again, it is reported, not run again.
    let (_, after) = run(&update_start(&d, "m-1", Duration::from_secs(30)), &script);
    assert_eq!(UpdateState::parse(&after), Some(ended));
    assert_eq!(std::fs::read_to_string(&count).unwrap(), "ran\n");
    // Another update forgets the ended one's files.
    assert_eq!(run(&update_state(&d, "m-2"), "").1, "absent\n");
    wait_for(&d, "m-2", "true", 30);
    assert_eq!(run(&update_state(&d, "m-1"), "").1, "absent\n");
    assert_eq!(UpdateState::parse("what\n"), None);
}

/// The default boot scripts of ssh hosts are read by `sh` (they change
/// the host's engine configuration, so they are only parsed here).
#[test]
fn the_default_boot_scripts_parse() {
    use drover_core::spec::Role;
    use drover_core::template::{BootContext, default_boot_script, render};
    for role in [Role::Manager, Role::Worker, Role::Plain] {
        for init in [false, true] {
            let ctx = BootContext {
                init,
                ..BootContext::example(role)
            };
            let script = render(default_boot_script("ssh", role), &ctx).unwrap();
            let ok = Command::new("sh")
                .arg("-n")
                .arg("-c")
                .arg(&script)
                .status()
                .unwrap();
            assert!(ok.success(), "{role:?} (init {init}):\n{script}");
        }
    }
}

#[test]
fn an_input_cut_short_is_never_kept_nor_run() {
    let (_t, d) = dir();
    let whole = framed(b"{\"id\":\"h-1\"}\n");
    let cut = &whole[..whole.len() - 5];
    assert_eq!(run_raw(&claim(&d, NO_ENGINE), cut).0, CUT_SHORT);
    assert_eq!(run(&read_record(&d), ""), (0, "free\n".into()));
    assert!(
        std::fs::read_dir(&d).unwrap().next().is_none(),
        "no record, no temporary file"
    );
    // The whole record is kept, without the frame.
    assert_eq!(run_raw(&claim(&d, NO_ENGINE), &whole).1, "claimed\n");
    assert_eq!(run(&read_record(&d), ""), (0, "{\"id\":\"h-1\"}\n".into()));
    // A relabel cut short keeps the record as it was.
    let relabelled = framed(b"{\"id\":\"h-1\",\"tags\":{\"a\":\"b\"}}");
    let cut = &relabelled[..relabelled.len() - 3];
    assert_eq!(run_raw(&relabel(&d, "h-1"), cut).0, CUT_SHORT);
    assert_eq!(run(&read_record(&d), ""), (0, "{\"id\":\"h-1\"}\n".into()));
    // A boot script or an update cut short is not written, nor started.
    let boot = framed(b"#!/bin/sh\ntouch \"$DROVER_STATE_DIR/booted\"\n");
    assert_eq!(run_raw(&upload_boot(&d), &boot[..20]).0, CUT_SHORT);
    assert!(!Path::new(&d).join(BOOT_SCRIPT).exists());
    let script = framed(b"echo ran >\"$0.ran\"\n");
    let start = update_start(&d, "m1", Duration::from_secs(5));
    assert_eq!(run_raw(&start, &script[..10]).0, CUT_SHORT);
    let left: Vec<String> = std::fs::read_dir(&d)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with(UPDATE_PREFIX))
        .collect();
    assert!(
        left.iter()
            .all(|n| !n.ends_with(".sh") && !n.ends_with(".status")),
        "{left:?}"
    );
    // An environment cut short starts no boot.
    assert_eq!(run(&upload_boot(&d), "#!/bin/sh\ntrue\n").0, 0);
    assert_eq!(run_raw(&launch_boot(&d), b"export A=1\n").0, CUT_SHORT);
    assert_eq!(run(&booted(&d), "").1, "no\n");
}
