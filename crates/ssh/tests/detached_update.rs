//! An in-place update over SSH runs detached on its host: a connection
//! cut while it runs (the controller's control master killed by its PID,
//! as a controller's host losing its network or the controller killed
//! would cut it) does not end it half-way, and the next call, by a
//! controller with connections of its own, finds it and reports how it
//! ended, without running it a second time. Lab hosts are `sshd`s of the
//! test's own on 127.0.182.x, port 2222 (`drover_ssh::testkit::Lab`).
//!
//! Needs root (sshd) and `openssh-server` (scripts/setup.sh installs it).

use drover_core::in_place::UpdateRun;
use drover_spi::{InstanceProvider, Unfenced};
use drover_ssh::testkit::{Lab, kill_control_masters, provider, request};
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Waits (up to `secs`) until `path` holds `text`.
async fn until_file_holds(path: &Path, text: &str, secs: u64) -> String {
    let deadline = Instant::now() + Duration::from_secs(secs);
    loop {
        let now = std::fs::read_to_string(path).unwrap_or_default();
        if now.contains(text) {
            return now;
        }
        assert!(
            Instant::now() < deadline,
            "{} never held {text:?}: {now:?}",
            path.display()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// An update started on a lab host, then its connection cut (the control
/// master killed by its PID) and the call that waited for it dropped.
struct Cut {
    lab: Lab,
    props: serde_json::Value,
    id: String,
    run: UpdateRun,
    /// The file the update's command appends `started`/`finished` to.
    ran: std::path::PathBuf,
}

/// Enrolls the host on `addr`, starts update `mark` whose command is
/// `command(ran)`, and cuts its connection once it has started.
async fn cut_mid_update(addr: &str, mark: &str, command: impl Fn(&Path) -> String) -> Cut {
    let lab = Lab::new(&[addr]);
    let props = lab.properties(&[addr]);
    let first_dir = lab.dir.path().join("ssh");
    let first = Arc::new(provider(&first_dir, &props));
    let id = first
        .provision(request(&props, "op-1"), &Unfenced)
        .await
        .unwrap();
    let ran = lab.dir.path().join("ran");
    let run = UpdateRun {
        command: command(&ran),
        timeout: Duration::from_secs(60),
        mark: mark.into(),
    };
    let waiting = {
        let (first, id, run) = (first.clone(), id.clone(), run.clone());
        tokio::spawn(async move { first.run_update(&id, &run, &Unfenced).await })
    };
    until_file_holds(&ran, "started", 20).await;
    let killed = kill_control_masters(&first_dir);
    assert!(
        !killed.is_empty(),
        "no control master under {}",
        first_dir.display()
    );
    // The controller that asked is gone too (its wait dropped).
    tokio::time::sleep(Duration::from_millis(300)).await;
    waiting.abort();
    let _ = waiting.await;
    Cut {
        lab,
        props,
        id,
        run,
        ran,
    }
}

const U1: &str = "127.0.182.1";

#[tokio::test(flavor = "multi_thread")]
async fn an_update_whose_connection_is_cut_completes_on_the_host_and_is_reported_once() {
    // Output after the cut: a run tied to its channel would end there
    // (its standard output gone), half-way.
    let Cut {
        lab,
        props,
        id,
        run,
        ran,
    } = cut_mid_update(U1, "cut-1-abc", |ran| {
        format!(
            "echo started >>{ran}\necho before the cut\nsleep 4\necho after the cut\necho >&2 on stderr too\necho finished >>{ran}",
            ran = ran.display()
        )
    })
    .await;

    // The update goes on on the host, to its end.
    let done = until_file_holds(&ran, "finished", 30).await;
    assert_eq!(done, "started\nfinished\n");

    // The next call (another controller, its own connections) finds it
    // ended and reports it; it is not run again.
    let next = provider(&lab.dir.path().join("ssh-next"), &props);
    let asked = Instant::now();
    let outcome = next.run_update(&id, &run, &Unfenced).await.unwrap();
    assert!(outcome.succeeded(), "{outcome:?}");
    assert_eq!(
        outcome.summary(),
        "exited with status 0: before the cut | after the cut | on stderr too"
    );
    assert!(
        asked.elapsed() < Duration::from_secs(10),
        "{:?}",
        asked.elapsed()
    );
    assert_eq!(
        std::fs::read_to_string(&ran).unwrap(),
        "started\nfinished\n"
    );
    assert_eq!(
        lab.calls()
            .matches("systemctl restart docker.service")
            .count(),
        1,
        "{}",
        lab.calls()
    );
}

const U2: &str = "127.0.182.2";

#[tokio::test(flavor = "multi_thread")]
async fn a_call_that_finds_the_update_running_waits_for_it_and_does_not_start_another() {
    let Cut {
        lab,
        props,
        id,
        run,
        ran,
    } = cut_mid_update(U2, "running-1-abc", |ran| {
        format!(
            "echo started >>{ran}\nsleep 4\necho failing\necho finished >>{ran}\nexit 5",
            ran = ran.display()
        )
    })
    .await;

    // While it still runs: waited for, reported, one run.
    let next = provider(&lab.dir.path().join("ssh-next"), &props);
    let outcome = next.run_update(&id, &run, &Unfenced).await.unwrap();
    assert_eq!(outcome.status, Some(5), "{outcome:?}");
    assert_eq!(outcome.summary(), "exited with status 5: failing");
    assert_eq!(
        std::fs::read_to_string(&ran).unwrap(),
        "started\nfinished\n"
    );
}
