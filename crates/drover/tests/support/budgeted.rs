//! A replicated service a roll on Incus machines must keep at its budget:
//! 2 tasks of the lab's busybox image on the workers, at most one a node,
//! labelled `drover.min-available: 1`, and a sampler that counts its
//! running tasks every 200 ms through whichever engine answers. The lab's
//! machines have no registry to pull from: the image is imported on each
//! worker from a rootfs tarball this host makes.

use drover_local::testkit::BUSYBOX_IMAGE;
use std::path::Path;
use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

/// The service's name.
pub const SERVICE: &str = "budgeted";

/// The fewest running tasks its label allows.
pub const FLOOR: usize = 1;

/// The busybox rootfs tarball `docker import` takes, written to `dir`.
pub fn rootfs(dir: &Path) -> std::path::PathBuf {
    let path = dir.join("busybox-rootfs.tar");
    std::fs::write(
        &path,
        drover_local::testkit::busybox_tar().expect("a busybox rootfs"),
    )
    .expect("write the rootfs");
    path
}

/// Imports the image on Incus machine `machine`: false while its engine
/// does not answer yet.
pub fn import(machine: &str, rootfs: &Path) -> bool {
    let target = format!("{machine}/root/busybox.tar");
    let pushed = Command::new("incus")
        .args(["file", "push", rootfs.to_str().unwrap(), &target])
        .output()
        .is_ok_and(|o| o.status.success());
    pushed
        && drover_incus::testkit::exec(
            machine,
            &format!("docker import /root/busybox.tar {BUSYBOX_IMAGE}"),
        )
        .status
        .success()
}

/// Creates the service through the first of `endpoints` that is a
/// manager's engine.
pub fn create(endpoints: &[String]) {
    let mut said = Vec::new();
    for e in endpoints {
        let out = Command::new("docker")
            .args(["-H", e, "service", "create", "--detach"])
            .args(["--name", SERVICE, "--replicas", "2"])
            .args(["--replicas-max-per-node", "1", "--network", "host"])
            .args(["--constraint", "node.role==worker"])
            .args(["--label", &format!("drover.min-available={FLOOR}")])
            .args([BUSYBOX_IMAGE, "sleep", "1000000"])
            .output()
            .expect("docker service create");
        if out.status.success() {
            return;
        }
        said.push(String::from_utf8_lossy(&out.stderr).into_owned());
    }
    panic!("docker service create, through no engine: {said:?}");
}

/// Its running tasks, as the first engine that lists them says.
pub fn running(endpoints: &[String]) -> Option<usize> {
    endpoints.iter().find_map(|e| {
        let out = Command::new("docker")
            .args(["-H", e, "service", "ps", SERVICE])
            .args(["--filter", "desired-state=running"])
            .args(["--format", "{{.CurrentState}}"])
            .output()
            .ok()
            .filter(|o| o.status.success())?;
        let text = String::from_utf8_lossy(&out.stdout);
        Some(text.lines().filter(|l| l.starts_with("Running")).count())
    })
}

/// Counts its running tasks every 200 ms until `stop`; the fewest seen
/// (`None`: no engine ever listed them).
pub fn sample(
    endpoints: impl Fn() -> Vec<String> + Send + 'static,
    stop: Arc<AtomicBool>,
) -> std::thread::JoinHandle<Option<usize>> {
    std::thread::spawn(move || {
        let mut fewest: Option<usize> = None;
        while !stop.load(Ordering::SeqCst) {
            if let Some(n) = running(&endpoints()) {
                fewest = Some(fewest.map_or(n, |f| f.min(n)));
            }
            std::thread::sleep(Duration::from_millis(200));
        }
        fewest
    })
}

/// What an upgrade roll on Incus machines runs under: the 200 ms quorum
/// watcher and the service's sampler, both over the engine sockets in a
/// lab's directory.
pub struct Watched {
    stop: Arc<AtomicBool>,
    seen: Arc<std::sync::Mutex<super::Watch>>,
    watcher: tokio::task::JoinHandle<()>,
    counter: Option<std::thread::JoinHandle<Option<usize>>>,
}

/// A test that fails mid-roll stops both too.
impl Drop for Watched {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
    }
}

impl Watched {
    /// Starts both over the sockets in `engines`.
    pub fn start(engines: &Path) -> Watched {
        let stop = Arc::new(AtomicBool::new(false));
        let seen = Arc::new(std::sync::Mutex::new(super::Watch::default()));
        let dir = engines.to_path_buf();
        let watcher = super::watch_engines(
            move || super::socket_endpoints(&dir),
            stop.clone(),
            seen.clone(),
        );
        let dir = engines.to_path_buf();
        let counter = sample(move || super::socket_endpoints(&dir), stop.clone());
        Watched {
            stop,
            seen,
            watcher,
            counter: Some(counter),
        }
    }

    /// Stops both; the quorum was never lost and the service never fell
    /// below its budget.
    pub async fn assert_kept(mut self) {
        self.stop.store(true, Ordering::SeqCst);
        (&mut self.watcher).await.expect("the quorum watcher");
        let counter = self.counter.take().expect("joined once");
        let fewest = counter.join().expect("the service's sampler");
        let seen = self.seen.lock().unwrap();
        eprintln!("{}", seen.summary());
        seen.assert_quorum_kept();
        eprintln!("fewest running tasks of the budgeted service: {fewest:?}");
        assert!(
            fewest.is_some_and(|f| f >= FLOOR),
            "the service fell below its budget: {fewest:?}"
        );
    }
}
