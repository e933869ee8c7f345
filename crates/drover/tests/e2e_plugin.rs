//! The leader-last roll on real engines with every machine made through
//! the InfraKit plugin protocol (issue 20): the groups say `provider:
//! plugin`, the CLI and every controller reach their machines through
//! drover's plugin client, and the plugin is `drover plugin serve local`,
//! a separate process starting real `dockerd`s on 127.0.160.x. A swarm of
//! 3 managers and 2 workers is bootstrapped from nothing by one `drover
//! apply --wait` run as from an operator's laptop: given the etcd store and
//! the plugin, and no engine endpoint or socket at all (issue 38, item 3:
//! it makes the first manager, whose own controller takes over through the
//! store). Then a new configuration is rolled through it, leader last,
//! while a watcher checks the quorum every 200 ms.
//!
//! A second test runs the provider contract through drover's client
//! against `drover plugin serve local` making plain machines (real
//! engines on 127.0.161.x).
//!
//! Everything started is stopped by PID (the plugin server here, the
//! engines and their controllers by the lab's StateGuard, etcd on drop),
//! also on failure. Wall times are printed, never asserted.

mod support;

use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use support::{Lab, Watch, assert_converged_shape, bounded, leader, watch};

const NET: u8 = 160;
/// The contract's range.
const CONTRACT_NET: u8 = 161;
const PLUGIN: &str = "drover-local";

/// `drover plugin serve local`, stopped by its PID when dropped.
struct Server(Child);

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The plugin environment every drover process of the test gets: which
/// plugin to wire, and where its socket is.
fn plugin_env(plugins: &Path) -> [(&'static str, String); 2] {
    [
        ("DROVER_PLUGINS", PLUGIN.to_string()),
        ("INFRAKIT_PLUGINS_DIR", plugins.display().to_string()),
    ]
}

/// The lab's spec with every group's machines from the plugin.
fn plugin_spec(lab: &Lab, label: &str) -> PathBuf {
    let path = lab.spec(label);
    let text = std::fs::read_to_string(&path).unwrap().replace(
        "instance: {provider: local}",
        &format!("instance: {{provider: plugin, plugin: {PLUGIN}}}"),
    );
    assert!(text.contains("provider: plugin"));
    std::fs::write(&path, text).unwrap();
    path
}

/// `drover plugin serve local` keeping its machines in `dir`, on `net`.
fn serve(dir: &Path, net: u8, plugins: &Path) -> Server {
    let socket = plugins.join(PLUGIN);
    let child = Command::new(env!("CARGO_BIN_EXE_drover"))
        .args(["plugin", "serve", "local", "--socket"])
        .arg(&socket)
        .env("DROVER_LOCAL_DIR", dir)
        .env(
            "DROVER_LOCAL_POOL",
            format!("127.0.{net}.20-127.0.{net}.60"),
        )
        .env("DROVER_LOG", "warn")
        .envs(plugin_env(plugins))
        .spawn()
        .expect("drover plugin serve");
    let server = Server(child);
    let deadline = Instant::now() + Duration::from_secs(30);
    while !socket.exists() {
        assert!(
            Instant::now() < deadline,
            "the plugin's socket never appeared"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    server
}

/// `drover ARGS` as an operator's laptop runs it: the store and the
/// plugin, and no engine endpoint or socket at all (no local provider, no
/// DOCKER_HOST): every machine and engine is the plugin's.
fn drover(lab: &Lab, plugins: &Path, args: &[&str]) -> std::process::Output {
    let mut cmd = lab.drover_command(args);
    cmd.envs(plugin_env(plugins))
        .env_remove("DROVER_LOCAL_DIR")
        .env_remove("DROVER_LOCAL_POOL")
        .env_remove("DOCKER_HOST");
    support::run_printed(cmd, args)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rolls_a_swarm_made_through_the_plugin_protocol_leader_last_without_losing_quorum() {
    bounded(900, leader_last_through_a_plugin()).await;
}

async fn leader_last_through_a_plugin() {
    let lab = Lab::new(NET).await;
    let plugins = lab.dir.join("plugins");
    std::fs::create_dir_all(&plugins).unwrap();
    let server = serve(&lab.dir, NET, &plugins);

    let t0 = Instant::now();
    let one = plugin_spec(&lab, "one");
    let out = drover(
        &lab,
        &plugins,
        &[
            "apply",
            "-f",
            one.to_str().unwrap(),
            "--wait",
            "--timeout",
            "8m",
        ],
    );
    assert_eq!(out.status.code(), Some(0), "the bootstrap by apply failed");
    let up = t0.elapsed();
    let before = assert_converged_shape(&lab).await;
    let old_leader = leader(&before).id.clone();

    let stop = Arc::new(AtomicBool::new(false));
    let seen = Arc::new(Mutex::new(Watch::default()));
    let watcher = watch(lab.dir.clone(), stop.clone(), seen.clone());
    let t1 = Instant::now();
    let two = plugin_spec(&lab, "two");
    let out = drover(
        &lab,
        &plugins,
        &[
            "apply",
            "-f",
            two.to_str().unwrap(),
            "--timeout",
            "8m",
            "--wait",
        ],
    );
    assert_eq!(out.status.code(), Some(0), "apply failed");
    let rolled = t1.elapsed();
    stop.store(true, Ordering::SeqCst);
    watcher.await.unwrap();

    let after = assert_converged_shape(&lab).await;
    assert_ne!(leader(&after).id, old_leader, "the leader was not replaced");
    let w = std::mem::take(&mut *seen.lock().unwrap());
    eprintln!(
        "PHASES (through the plugin): bring-up {:.1}s, rollout {:.1}s; {}",
        up.as_secs_f64(),
        rolled.as_secs_f64(),
        w.summary()
    );
    w.assert_quorum_kept();

    // The machines are the plugin's: its client lists all five.
    let client = drover_plugin::PluginProvider::new(
        drover_core::spec::PluginAddress::parse(PLUGIN).unwrap(),
        &plugins.join(PLUGIN),
        drover_plugin::Timeouts::default(),
    );
    use drover_spi::InstanceProvider;
    let listed = client
        .describe(&Default::default())
        .await
        .expect("describe through the plugin");
    assert_eq!(listed.len(), 5, "{listed:?}");
    let out = drover(&lab, &plugins, &["events", "--output", "json"]);
    let events = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        events.contains("demote self") && !events.contains("SWMTKN"),
        "{events}"
    );
    drop(server);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_provider_contract_holds_through_drover_plugin_serve_local() {
    bounded(300, contract_on_real_engines()).await;
}

async fn contract_on_real_engines() {
    let dir = drover_local::testkit::short_tempdir("dpc").expect("tempdir");
    let _engines = drover_local::testkit::StateGuard {
        state_dir: dir.clone(),
    };
    let plugins = dir.join("plugins");
    std::fs::create_dir_all(&plugins).unwrap();
    let _server = serve(&dir, CONTRACT_NET, &plugins);
    let client = drover_plugin::PluginProvider::new(
        drover_core::spec::PluginAddress::parse(PLUGIN).unwrap(),
        &plugins.join(PLUGIN),
        drover_plugin::Timeouts::default(),
    );
    let t0 = Instant::now();
    drover_plugin::testkit::contract(&client, "c-161", |link| {
        drover_plugin::testkit::plain("c-161", link, "#!/bin/sh\nset -eu\ndocker -H \"$DOCKER_HOST\" info >/dev/null\necho up at {{ address }}\n")
    })
    .await;
    eprintln!(
        "the contract through drover plugin serve local took {:?}",
        t0.elapsed()
    );
    // The machines were real engines, and nothing of them is left.
    use drover_spi::InstanceProvider;
    let req = drover_plugin::testkit::plain("c-161", "link-real", "true");
    let id = client.provision(req, &drover_spi::Unfenced).await.unwrap();
    let provider = drover_local::LocalProvider::new(&dir, []).unwrap();
    let record = provider
        .record(&id)
        .unwrap()
        .expect("the served provider's record");
    let pid = record.pid.expect("an engine pid");
    assert!(
        drover_local::procs::is_alive(pid),
        "engine {pid} of {id} is not running"
    );
    client.destroy(&id).await.unwrap();
    assert!(
        drover_local::procs::pids_matching(&format!("{}/", dir.join("instances").display()))
            .is_empty()
    );
}

/// The Python plugin (`crates/plugin/tests/plugin.py`) with real engines;
/// dropping it kills the plugin, then every process naming its machines.
struct PythonEngines {
    plugin: Child,
    socket: PathBuf,
    state: PathBuf,
    dir: PathBuf,
}

impl PythonEngines {
    fn start() -> PythonEngines {
        let dir = drover_local::testkit::short_tempdir("dpy").expect("tempdir");
        let (socket, state) = (dir.join("py"), dir.join("state"));
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../plugin/tests/plugin.py");
        let plugin = Command::new("python3")
            .arg(script)
            .arg("--socket")
            .arg(&socket)
            .arg("--state")
            .arg(&state)
            .arg("--dockerd")
            .spawn()
            .expect("python3");
        let py = PythonEngines {
            plugin,
            socket,
            state,
            dir,
        };
        let deadline = Instant::now() + Duration::from_secs(10);
        while !py.socket.exists() {
            assert!(Instant::now() < deadline, "no socket from plugin.py");
            std::thread::sleep(Duration::from_millis(20));
        }
        py
    }

    /// Processes of its machines (engines, their containerd).
    fn machine_pids(&self) -> Vec<i32> {
        drover_local::procs::pids_matching(&format!("{}/py-", self.state.display()))
    }
}

impl Drop for PythonEngines {
    fn drop(&mut self) {
        let _ = self.plugin.kill();
        let _ = self.plugin.wait();
        for pid in self.machine_pids() {
            let _ = nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(pid),
                nix::sys::signal::Signal::SIGKILL,
            );
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_python_plugin_making_real_engines_keeps_the_contract() {
    bounded(300, python_contract_on_real_engines()).await;
}

async fn python_contract_on_real_engines() {
    let py = PythonEngines::start();
    let client = drover_plugin::PluginProvider::new(
        drover_core::spec::PluginAddress::parse("py").unwrap(),
        &py.socket,
        drover_plugin::Timeouts::default(),
    );
    let t0 = Instant::now();
    drover_plugin::testkit::contract(&client, "c-py", |link| {
        drover_plugin::testkit::plain(
            "c-py",
            link,
            // The engine answers and carries drover's labels.
            "#!/bin/sh\nset -eu\ndocker -H \"$DOCKER_HOST\" info --format '{{ '{{' }}json .Labels{{ '}}' }}' | grep -q 'drover.link={{ link }}'\n",
        )
    })
    .await;
    eprintln!(
        "the contract through the Python plugin's real engines took {:?}",
        t0.elapsed()
    );
    assert!(
        py.machine_pids().is_empty(),
        "engines left: {:?}",
        py.machine_pids()
    );
}
