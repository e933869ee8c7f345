//! The data plane of the end-to-end EC2 test. moto holds the control
//! plane (instances, their states, their user data); this plays what EC2's
//! hypervisor and cloud-init would do with them, on loopback.
//!
//! For each instance moto reports `running`, it makes a machine in a
//! directory `D` of its own:
//! - its address: the instance's private IP mapped to 127.0.170.N (N its
//!   last octet; 127.0.171.N when that is taken): nothing but loopback;
//! - its user data, fetched with `DescribeInstanceAttribute` and run once
//!   with `sh`, as root, in a process group of its own, adapted so that it
//!   configures this machine and not the host: `/etc/` becomes `D/etc/`;
//!   a pet's `address="PRIVATE-IP"` becomes the loopback address; `PATH`
//!   starts with `D/bin`, which holds `systemctl` (plays systemd: `restart
//!   docker.service` starts `dockerd` for `D`, in its own process group,
//!   with `D/etc/docker/daemon.json` as its configuration file, which
//!   carries drover's labels; `enable --now drover-controller.service`
//!   runs the unit's `drover controller` in a restart loop with the unit's
//!   environment file `D/etc/drover/controller.env`), `curl` (plays the
//!   metadata service: a token, and `local-ipv4` = the loopback address)
//!   and `drover` (the binary under test); the environment holds
//!   `DOCKER_HOST` (this machine's engine) and moto's test key (plays the
//!   instance profile), and `DROVER_LOCAL_MACHINE=D`, the mark by which
//!   its processes are told apart from every other;
//! - when moto says `shutting-down` or `terminated`: its controller loop,
//!   engine and boot script are stopped by their recorded PIDs and process
//!   groups (SIGTERM, then SIGKILL), checked by that mark, and `D` is
//!   unmounted and removed. Dropping the data plane does the same for
//!   every machine, also when the test fails.

use drover_ec2::testkit::Moto;
use drover_local::procs::{self, MACHINE_ENV, Owned};
use std::collections::BTreeMap;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// How long SIGTERM gets before SIGKILL (dockerd takes 3-4 s to exit).
const GRACE: Duration = Duration::from_secs(10);

/// `systemctl`: the two units the ec2 boot scripts use.
const SYSTEMCTL: &str = r#"#!/bin/sh
# The e2e data plane's systemd (crates/drover/tests/e2e_ec2/dataplane.rs).
d="$HARNESS_DIR"
case "$*" in
  *"restart docker.service"*)
    if [ -f "$d/pid" ] && kill -0 "$(cat "$d/pid")" 2>/dev/null; then
      old=$(cat "$d/pid"); kill "$old"
      while kill -0 "$old" 2>/dev/null; do sleep 0.1; done
    fi
    setsid dockerd --config-file "$d/etc/docker/daemon.json" --data-root "$d/root" \
      --exec-root "$d/exec" --pidfile "$d/pid" -H "unix://$d/sock" --bridge=none \
      --iptables=false --ip6tables=false --ip-masq=false --storage-driver=vfs \
      >>"$d/dockerd.log" 2>&1 </dev/null &
    ;;
  *"enable --now drover-controller.service"*)
    set -a; . "$d/etc/drover/controller.env"; set +a
    DROVER_METRICS_ADDR="$HARNESS_ADDR:9464"; DROVER_LOG=info
    export DROVER_METRICS_ADDR DROVER_LOG
    setsid sh -c 'while :; do drover controller --engine "unix://$0/sock"; sleep 1; done' "$d" \
      >>"$d/controller.log" 2>&1 </dev/null &
    echo $! >"$d/controller.pid"
    ;;
esac
"#;

/// `curl`: the instance metadata service (IMDSv2).
const CURL: &str = r#"#!/bin/sh
# The e2e data plane's metadata service: a token, and this instance's address.
case "$*" in *local-ipv4*) echo "$HARNESS_ADDR" ;; *) echo harness-token ;; esac
"#;

/// One instance's machine.
struct Machine {
    dir: PathBuf,
    address: String,
    boot: Option<Child>,
}

/// The data plane: machines for moto's running instances, until dropped.
pub struct DataPlane {
    machines: Arc<Mutex<BTreeMap<String, Machine>>>,
    stop: Arc<AtomicBool>,
    task: tokio::task::JoinHandle<()>,
}

impl DataPlane {
    /// Watches `moto` every 200 ms, making machines under `root` that run
    /// `drover` and sign with `aws_key` (access key, secret key).
    pub fn start(
        moto: Arc<Moto>,
        root: PathBuf,
        drover: PathBuf,
        aws_key: (String, String),
    ) -> DataPlane {
        let machines: Arc<Mutex<BTreeMap<String, Machine>>> = Arc::default();
        let stop = Arc::new(AtomicBool::new(false));
        let task = {
            let (machines, stop) = (machines.clone(), stop.clone());
            tokio::spawn(async move {
                while !stop.load(Ordering::SeqCst) {
                    if let Ok(held) = moto.instances().await {
                        for i in held {
                            let known = lock(&machines).contains_key(&i.id);
                            match i.state.as_str() {
                                "running" | "pending" if !known => {
                                    let Ok(text) = moto.user_data(&i.id).await else {
                                        continue;
                                    };
                                    let m = boot(
                                        &root,
                                        &machines,
                                        &i.id,
                                        &i.private_ip,
                                        &text,
                                        &drover,
                                        &aws_key,
                                    );
                                    lock(&machines).insert(i.id.clone(), m);
                                }
                                "shutting-down" | "terminated" if known => {
                                    let m = lock(&machines)
                                        .get_mut(&i.id)
                                        .map(|m| (m.dir.clone(), m.boot.take()));
                                    if let Some((dir, boot)) = m {
                                        tokio::task::spawn_blocking(move || halt(&dir, boot));
                                    }
                                }
                                _ => {}
                            }
                        }
                    }
                    tokio::time::sleep(Duration::from_millis(200)).await;
                }
            })
        };
        DataPlane {
            machines,
            stop,
            task,
        }
    }

    /// The engine of every machine not stopped yet.
    pub fn endpoints(&self) -> Vec<String> {
        (self.engines())()
    }

    /// [`endpoints`](Self::endpoints) as a function of its own, for the
    /// quorum watcher.
    pub fn engines(&self) -> impl Fn() -> Vec<String> + Send + 'static {
        let machines = self.machines.clone();
        move || {
            lock(&machines)
                .values()
                .filter(|m| m.dir.exists())
                .map(|m| format!("unix://{}/sock", m.dir.display()))
                .collect()
        }
    }

    /// Instance id → its loopback address, for every machine made.
    pub fn addresses(&self) -> BTreeMap<String, String> {
        lock(&self.machines)
            .iter()
            .map(|(id, m)| (id.clone(), m.address.clone()))
            .collect()
    }
}

impl Drop for DataPlane {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        self.task.abort();
        let all: Vec<(PathBuf, Option<Child>)> = lock(&self.machines)
            .values_mut()
            .map(|m| (m.dir.clone(), m.boot.take()))
            .collect();
        for (dir, boot) in all {
            halt(&dir, boot);
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// The loopback address for `private_ip`: 127.0.170.N, N its last octet,
/// else 127.0.171.N.
fn loopback(private_ip: &str, taken: &[String]) -> String {
    let last = private_ip.rsplit('.').next().unwrap_or("1");
    ["170", "171"]
        .iter()
        .map(|net| format!("127.0.{net}.{last}"))
        .find(|a| !taken.contains(a))
        .expect("a free loopback address for the instance")
}

/// Makes instance `id`'s machine and starts its user data `text`.
fn boot(
    root: &Path,
    machines: &Mutex<BTreeMap<String, Machine>>,
    id: &str,
    private_ip: &str,
    text: &str,
    drover: &Path,
    aws_key: &(String, String),
) -> Machine {
    let taken: Vec<String> = lock(machines).values().map(|m| m.address.clone()).collect();
    let address = loopback(private_ip, &taken);
    let dir = root.join(id);
    let bin = dir.join("bin");
    for d in [&bin, &dir.join("etc/systemd/system")] {
        std::fs::create_dir_all(d).expect("the machine's directory");
    }
    for (name, body) in [("systemctl", SYSTEMCTL), ("curl", CURL)] {
        let f = bin.join(name);
        std::fs::write(&f, body).expect("a shim");
        std::fs::set_permissions(&f, std::fs::Permissions::from_mode(0o755)).expect("a shim");
    }
    std::os::unix::fs::symlink(drover, bin.join("drover")).expect("drover on the PATH");
    let etc = format!("{}/etc/", dir.display());
    let script = text.replace("/etc/", &etc).replace(
        &format!("address=\"{private_ip}\""),
        &format!("address=\"{address}\""),
    );
    // Readable by root only: it holds a join token (rotated away soon).
    let file = dir.join("user-data");
    {
        use std::io::Write;
        use std::os::unix::fs::OpenOptionsExt;
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&file)
            .expect("the user data");
        f.write_all(script.as_bytes()).expect("the user data");
    }
    let log = std::fs::File::create(dir.join("boot.log")).expect("the boot log");
    let boot = Command::new("sh")
        .arg(&file)
        .current_dir(&dir)
        .env_clear()
        .env(
            "PATH",
            format!("{}:/usr/sbin:/usr/bin:/sbin:/bin", bin.display()),
        )
        .env("HOME", &dir)
        .env("DOCKER_HOST", format!("unix://{}/sock", dir.display()))
        .env("HARNESS_DIR", &dir)
        .env("HARNESS_ADDR", &address)
        .env("AWS_ACCESS_KEY_ID", &aws_key.0)
        .env("AWS_SECRET_ACCESS_KEY", &aws_key.1)
        .env(MACHINE_ENV, dir.display().to_string())
        .stdin(Stdio::null())
        .stdout(log.try_clone().expect("the boot log"))
        .stderr(log)
        .process_group(0)
        .spawn()
        .expect("running the user data");
    eprintln!(
        "data plane: {id} ({private_ip}) booting at {address} in {}",
        dir.display()
    );
    Machine {
        dir,
        address,
        boot: Some(boot),
    }
}

/// Stops a machine's controller loop, engine and boot script by their
/// recorded PIDs and groups, then removes its directory.
fn halt(dir: &Path, boot: Option<Child>) {
    let needle = dir.display().to_string();
    let recorded = |f: &str| {
        std::fs::read_to_string(dir.join(f))
            .ok()
            .and_then(|s| s.trim().parse::<i32>().ok())
    };
    let boot_pid = boot.as_ref().map(|c| c.id() as i32);
    for pid in [recorded("controller.pid"), recorded("pid"), boot_pid]
        .into_iter()
        .flatten()
    {
        let left = procs::stop_tree(Some(pid), Some(pid), &needle, Owned::Marked, GRACE);
        if left > 0 {
            eprintln!("data plane: {left} processes of {needle} still alive");
        }
    }
    if let Some(mut c) = boot {
        let _ = c.wait();
    }
    // Kept for a look when asked (DROVER_E2E_LOGS=DIR): the boot script's,
    // the engine's and the controller's output.
    if let Some(keep) = std::env::var_os("DROVER_E2E_LOGS") {
        let to = Path::new(&keep).join(dir.file_name().unwrap_or_default());
        let _ = std::fs::create_dir_all(&to);
        // Not the user data: it holds a join token.
        for f in ["boot.log", "dockerd.log", "controller.log"] {
            let _ = std::fs::copy(dir.join(f), to.join(f));
        }
    }
    if let Err(e) = procs::remove_instance_dir(dir) {
        eprintln!("data plane: removing {needle}: {e}");
    }
}
