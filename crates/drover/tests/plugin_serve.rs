//! `drover plugin serve`: the binary serves a provider as an InfraKit
//! instance plugin that drover's own client drives, exits on SIGTERM and
//! removes its socket; bad input is exit 2 with nothing left behind.

use drover_core::model::tags;
use drover_core::spec::PluginAddress;
use drover_plugin::{PluginProvider, Timeouts};
use drover_spi::{InstanceProvider, Unfenced};
use std::collections::BTreeMap;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The server process, stopped by its PID when dropped.
struct Served(Child);

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn drover(args: &[&str]) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_drover"));
    c.args(args)
        .env_remove("DROVER_LOCAL_DIR")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    c
}

fn wait_for(socket: &Path) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while !socket.exists() {
        assert!(
            Instant::now() < deadline,
            "no socket at {}",
            socket.display()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_simulator_served_as_a_plugin_round_trips_and_the_socket_goes_on_sigterm() {
    let dir = tempfile::Builder::new()
        .prefix("dps")
        .tempdir_in("/tmp")
        .unwrap();
    let socket = dir.path().join("sim");
    let served = Served(
        drover(&[
            "plugin",
            "serve",
            "sim",
            "--socket",
            socket.to_str().unwrap(),
        ])
        .spawn()
        .unwrap(),
    );
    wait_for(&socket);

    let client = PluginProvider::new(
        PluginAddress::parse("sim").unwrap(),
        &socket,
        Timeouts::default(),
    );
    let mut req = drover_spi::ProvisionRequest {
        tags: BTreeMap::from([
            (tags::CLUSTER.to_string(), "c-cli".to_string()),
            (tags::GROUP.to_string(), "g".to_string()),
            (tags::LINK.to_string(), "op-1".to_string()),
        ]),
        logical_id: None,
        properties: serde_json::json!({}),
        engine_labels: BTreeMap::new(),
        boot_template: "true".into(),
        boot_context: drover_core::template::BootContext::example(drover_core::spec::Role::Worker),
        boot_env: Vec::new(),
    };
    req.engine_labels = req.tags.clone();
    let id = client.provision(req.clone(), &Unfenced).await.unwrap();
    assert_eq!(client.provision(req, &Unfenced).await.unwrap(), id);
    let ours = BTreeMap::from([(tags::CLUSTER.to_string(), "c-cli".to_string())]);
    assert_eq!(client.describe(&ours).await.unwrap().len(), 1);
    client.destroy(&id).await.unwrap();
    assert!(client.describe(&ours).await.unwrap().is_empty());

    // In use: refused, exit 2, the running server's socket untouched.
    let again = drover(&[
        "plugin",
        "serve",
        "sim",
        "--socket",
        socket.to_str().unwrap(),
    ])
    .output()
    .unwrap();
    assert_eq!(
        again.status.code(),
        Some(2),
        "{}",
        String::from_utf8_lossy(&again.stderr)
    );
    assert!(String::from_utf8_lossy(&again.stderr).contains("in use"));
    assert!(socket.exists());

    let mut served = served;
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(served.0.id() as i32),
        nix::sys::signal::Signal::SIGTERM,
    )
    .unwrap();
    let status = served.0.wait().unwrap();
    assert!(status.success(), "{status:?}");
    assert!(!socket.exists(), "the socket is removed on exit");
}

#[test]
fn bad_input_is_exit_2_and_creates_no_socket() {
    let dir = tempfile::Builder::new()
        .prefix("dps")
        .tempdir_in("/tmp")
        .unwrap();
    let socket = dir.path().join("p");
    for (args, says) in [
        (vec!["aws"], "not a provider drover can serve"),
        (vec!["local"], "needs --local-dir"),
    ] {
        let mut all = vec!["plugin", "serve"];
        all.extend(args);
        all.extend(["--socket", socket.to_str().unwrap()]);
        let out = drover(&all).output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{err}");
        assert!(err.contains(says), "{err}");
        assert!(!socket.exists());
    }
}

#[test]
fn a_socket_path_that_holds_a_file_is_exit_2_and_the_file_is_kept() {
    let dir = tempfile::Builder::new()
        .prefix("dps")
        .tempdir_in("/tmp")
        .unwrap();
    let file = dir.path().join("notes");
    std::fs::write(&file, "keep me").unwrap();
    let out = drover(&["plugin", "serve", "sim", "--socket", file.to_str().unwrap()])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("exists and is not a socket"), "{err}");
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "keep me");
}
