//! The ssh provider against real OpenSSH servers: each lab host is an
//! `sshd` of the test's own on a loopback address of 127.0.180.x (each test
//! its own addresses, port 2222), with its own host key, accepting one
//! test key (`drover_ssh::testkit`). The hosts are this machine: the boot
//! scripts and updates given here only write into the lab's directory, and
//! `docker`/`systemctl` on the hosts' `PATH` are stubs that record calls.
//!
//! Needs root (sshd) and `openssh-server` (scripts/setup.sh installs it).

use drover_core::in_place::UpdateRun;
use drover_core::model::tags;
use drover_spi::{InstanceProvider, ProviderError, ProvisionRequest, Secret, Unfenced};
use drover_ssh::SshProvider;
use drover_ssh::testkit::{CLUSTER, Lab, provider};
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

fn cluster() -> BTreeMap<String, String> {
    BTreeMap::from([(tags::CLUSTER.to_string(), CLUSTER.to_string())])
}

/// A worker's provision for operation `link`, booting `script`, its join
/// token `token`.
fn request(props: &serde_json::Value, link: &str, script: &str, token: &str) -> ProvisionRequest {
    ProvisionRequest {
        boot_template: script.to_string(),
        boot_env: vec![("DROVER_JOIN_TOKEN".into(), Secret::new(token))],
        ..drover_ssh::testkit::request(props, link)
    }
}

/// Waits until enrollment `id`'s boot log says its script ended.
async fn booted(p: &SshProvider, id: &str) -> String {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let log = p.boot_log(id).await.expect("the boot log reads");
        let text = log.map(|l| l.lines().join("\n")).unwrap_or_default();
        if text.contains("the boot script exited") {
            return text;
        }
        assert!(Instant::now() < deadline, "the boot did not end: {text}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Every file under `dir`, as text.
fn files_under(dir: &Path) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let Ok(entries) = std::fs::read_dir(dir) else {
        return out;
    };
    for e in entries.flatten() {
        let path = e.path();
        if path.is_dir() {
            out.extend(files_under(&path));
        } else if let Ok(bytes) = std::fs::read(&path) {
            out.push((
                path.display().to_string(),
                String::from_utf8_lossy(&bytes).into_owned(),
            ));
        }
    }
    out
}

/// Every process's command line.
fn command_lines() -> Vec<String> {
    std::fs::read_dir("/proc")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| std::fs::read(e.path().join("cmdline")).ok())
        .map(|b| String::from_utf8_lossy(&b).replace('\0', " "))
        .collect()
}

fn token() -> String {
    format!("SWMTKN-1-test{}", uuid_like())
}

fn uuid_like() -> String {
    format!(
        "{:x}",
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos()
    )
}

const A1: &str = "127.0.180.1";
const A2: &str = "127.0.180.2";

#[tokio::test(flavor = "multi_thread")]
async fn a_host_is_enrolled_listed_labelled_and_returned_to_the_pool() {
    let lab = Lab::new(&[A1, A2]);
    let volumes = lab.dir.path().join("volumes");
    let keep = lab.dir.path().join("keep");
    std::fs::create_dir_all(volumes.join("v1")).unwrap();
    std::fs::create_dir_all(&keep).unwrap();
    let mut props = lab.properties(&[A1, A2]);
    props["cleanup"] = serde_json::json!({"command": format!("echo cleaned >{}/cleaned", lab.dir.path().display()), "paths": [volumes]});
    let p = provider(&lab.dir.path().join("ssh"), &props);
    let token = token();
    let ran = lab.dir.path().join("ran");
    let script = format!(
        "#!/bin/sh\nset -eu\necho \"joining {{{{ group }}}} at {{{{ address }}}}\"\nprintf %s \"$DROVER_JOIN_TOKEN\" | sha256sum >{}\n",
        ran.display()
    );

    let id = p
        .provision(request(&props, "op-1", &script, &token), &Unfenced)
        .await
        .unwrap();
    assert!(id.starts_with("127.0.180.1:2222-"), "{id}");
    let log = booted(&p, &id).await;
    assert!(log.contains("joining example at 127.0.180.1"), "{log}");
    let sum = std::process::Command::new("sh")
        .arg("-c")
        .arg(format!("printf %s '{token}' | sha256sum"))
        .output()
        .unwrap();
    assert_eq!(
        std::fs::read(&ran).unwrap(),
        sum.stdout,
        "the script read its token from its environment"
    );

    let listed = p.describe(&cluster()).await.unwrap();
    assert_eq!(listed.len(), 1);
    assert_eq!(
        (listed[0].id.as_str(), listed[0].link()),
        (id.as_str(), Some("op-1"))
    );
    assert!(listed[0].running && listed[0].created_ms > 0);
    let other = BTreeMap::from([(tags::GROUP.to_string(), "managers".to_string())]);
    assert!(p.describe(&other).await.unwrap().is_empty());
    // A retry of the same operation finds the host it enrolled.
    let again = p
        .provision(request(&props, "op-1", &script, &token), &Unfenced)
        .await
        .unwrap();
    assert_eq!(again, id);

    let labels = BTreeMap::from([("drover.attempt".to_string(), "2".to_string())]);
    p.label(&id, &labels, &Unfenced).await.unwrap();
    let listed = p.describe_fresh(&cluster()).await.unwrap();
    assert_eq!(listed[0].tag("drover.attempt"), Some("2"));
    assert_eq!(
        listed[0].tag(tags::CONFIG),
        Some("hash-1"),
        "the other tags kept"
    );

    for (path, text) in files_under(lab.dir.path()) {
        assert!(!text.contains(&token), "the join token is in {path}");
    }
    p.destroy(&id).await.unwrap();
    assert!(
        !lab.state_dir(A1).join("instance.json").exists(),
        "the record is gone"
    );
    assert!(
        !volumes.exists() && keep.exists(),
        "only the declared path is removed"
    );
    assert!(
        lab.dir.path().join("cleaned").exists(),
        "the declared command ran"
    );
    assert!(
        lab.calls().contains("docker swarm leave --force"),
        "{}",
        lab.calls()
    );
    assert!(p.describe(&cluster()).await.unwrap().is_empty());
    assert!(matches!(
        p.label(&id, &labels, &Unfenced).await,
        Err(ProviderError::NotFound(_))
    ));
    p.destroy(&id)
        .await
        .expect("destroying it again is success");

    // The host is free again: the next enrollment takes it, as another.
    let next = p
        .provision(request(&props, "op-2", &script, &token), &Unfenced)
        .await
        .unwrap();
    assert!(
        next.starts_with("127.0.180.1:2222-") && next != id,
        "{next}"
    );
    booted(&p, &next).await;
    p.destroy(&next).await.unwrap();
}

const B1: &str = "127.0.180.11";
const B2: &str = "127.0.180.12";

#[tokio::test(flavor = "multi_thread")]
async fn each_enrollment_takes_another_host_until_the_inventory_is_exhausted() {
    let lab = Lab::new(&[B1, B2]);
    let props = lab.properties(&[B1, B2]);
    let p = provider(&lab.dir.path().join("ssh"), &props);
    let script = "#!/bin/sh\necho ok\n";
    let first = p
        .provision(request(&props, "op-1", script, &token()), &Unfenced)
        .await
        .unwrap();
    let second = p
        .provision(request(&props, "op-2", script, &token()), &Unfenced)
        .await
        .unwrap();
    assert!(first.starts_with("127.0.180.11:2222-") && second.starts_with("127.0.180.12:2222-"));
    match p
        .provision(request(&props, "op-3", script, &token()), &Unfenced)
        .await
    {
        Err(ProviderError::Capacity(m)) => {
            assert!(m.starts_with("no free host in the inventory; enrolled: 127.0.180.11:2222 (group workers), 127.0.180.12:2222 (group workers)"), "{m}");
            assert!(m.contains("add hosts to instance.properties.hosts"), "{m}");
        }
        other => panic!("an exhausted inventory: {other:?}"),
    }
    assert_eq!(p.describe(&cluster()).await.unwrap().len(), 2);
}

const C1: &str = "127.0.180.21";
const C_SILENT: &str = "127.0.180.29";

#[tokio::test(flavor = "multi_thread")]
async fn a_host_that_does_not_answer_is_unknown_never_gone() {
    let mut lab = Lab::new(&[C1]);
    let props = lab.properties(&[C1]);
    let p = provider(&lab.dir.path().join("ssh"), &props);
    let id = p
        .provision(request(&props, "op-1", "#!/bin/sh\n", &token()), &Unfenced)
        .await
        .unwrap();
    lab.host(C1).stop();

    // Listed from the record last read, running: never gone.
    for listed in [
        p.describe(&cluster()).await.unwrap(),
        p.describe_fresh(&cluster()).await.unwrap(),
    ] {
        assert_eq!(listed.len(), 1);
        assert!(listed[0].id == id && listed[0].running);
    }
    let engines = p.ask_engines(&cluster()).await.unwrap();
    assert_eq!(engines.len(), 1);
    assert_eq!(engines[0].address, C1);
    assert_eq!(
        engines[0],
        drover_spi::EngineReport {
            address: C1.into(),
            ..drover_spi::EngineReport::unreachable(engines[0].instance.clone())
        }
    );
    // Destroying it fails (and is tried again later): nothing is returned
    // to the pool, nor forgotten, on silence.
    match p.destroy(&id).await {
        Err(e) => assert!(
            e.is_transient()
                && e.to_string()
                    .contains("127.0.180.21:2222 cannot be reached"),
            "{e}"
        ),
        Ok(()) => panic!("a silent host was destroyed"),
    }
    assert_eq!(p.describe(&cluster()).await.unwrap().len(), 1);

    // A controller that never read it: the listing fails, never empty.
    let fresh = provider(&lab.dir.path().join("ssh2"), &props);
    let e = fresh.describe(&cluster()).await.unwrap_err();
    assert!(
        e.is_transient()
            && e.to_string()
                .contains("127.0.180.21:2222 cannot be reached"),
        "{e}"
    );
    // A host where nothing ever listened, likewise.
    let silent = provider(&lab.dir.path().join("ssh3"), &lab.properties(&[C_SILENT]));
    let e = silent.describe(&cluster()).await.unwrap_err();
    assert!(
        e.to_string()
            .contains("127.0.180.29:2222 cannot be reached"),
        "{e}"
    );
    assert!(e.to_string().contains("listing is partial"), "{e}");
}

const D1: &str = "127.0.180.31";

#[tokio::test(flavor = "multi_thread")]
async fn a_changed_host_key_is_refused_naming_the_host() {
    let mut lab = Lab::new(&[D1]);
    let props = lab.properties(&[D1]);
    lab.rekey(D1);
    let p = provider(&lab.dir.path().join("ssh"), &props);
    match p
        .provision(request(&props, "op-1", "#!/bin/sh\n", &token()), &Unfenced)
        .await
    {
        Err(ProviderError::Permanent(m)) => {
            assert!(m.contains("not answering: 127.0.180.31:2222 (host 127.0.180.31:2222 refused: its host key differs from the one for it in"), "{m}");
        }
        other => panic!("a changed host key: {other:?}"),
    }
    let e = p.describe(&cluster()).await.unwrap_err();
    assert!(
        e.to_string()
            .contains("REMOTE HOST IDENTIFICATION HAS CHANGED"),
        "{e}"
    );
    let known = std::fs::read_to_string(&lab.known_hosts).unwrap();
    assert_eq!(
        known.lines().count(),
        1,
        "the new key was not accepted: {known}"
    );
    assert!(!lab.state_dir(D1).exists(), "nothing ran on the host");
}

const E1: &str = "127.0.180.41";

#[tokio::test(flavor = "multi_thread")]
async fn a_missing_key_file_is_bad_input_named() {
    let lab = Lab::new(&[E1]);
    let mut props = lab.properties(&[E1]);
    props["identity_file"] = serde_json::json!(lab.dir.path().join("no-such-key"));
    let p = provider(&lab.dir.path().join("ssh"), &props);
    match p
        .provision(request(&props, "op-1", "#!/bin/sh\n", &token()), &Unfenced)
        .await
    {
        Err(ProviderError::Permanent(m)) => assert!(
            m.contains("instance.properties.identity_file: ")
                && m.contains("no-such-key cannot be read on this controller's host"),
            "{m}"
        ),
        other => panic!("a missing key: {other:?}"),
    }
    let e = p.describe(&cluster()).await.unwrap_err();
    assert!(
        e.to_string().contains("instance.properties.identity_file"),
        "{e}"
    );
}

const F1: &str = "127.0.180.51";

#[tokio::test(flavor = "multi_thread")]
async fn an_update_runs_as_root_and_ends_by_its_status_or_its_timeout() {
    let lab = Lab::new(&[F1]);
    let props = lab.properties(&[F1]);
    let p = provider(&lab.dir.path().join("ssh"), &props);
    let id = p
        .provision(request(&props, "op-1", "#!/bin/sh\n", &token()), &Unfenced)
        .await
        .unwrap();
    let updated = lab.dir.path().join("updated");
    let run = |command: String, secs: u64| UpdateRun {
        command,
        timeout: Duration::from_secs(secs),
        mark: format!(
            "test-{}",
            MARKS.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
        ),
    };

    let ok = p
        .run_update(
            &id,
            &run(format!("echo updating\nid -u >{}", updated.display()), 30),
            &Unfenced,
        )
        .await
        .unwrap();
    assert!(ok.succeeded(), "{ok:?}");
    assert_eq!(std::fs::read_to_string(&updated).unwrap(), "0\n", "as root");
    assert!(
        lab.calls().contains("systemctl restart docker.service"),
        "the engine restarted: {}",
        lab.calls()
    );

    let failed = p
        .run_update(
            &id,
            &run("echo first\necho oops >&2\nexit 7".into(), 30),
            &Unfenced,
        )
        .await
        .unwrap();
    assert_eq!(failed.status, Some(7));
    assert_eq!(failed.summary(), "exited with status 7: first | oops");

    let marker = format!("drover-hang-{}", uuid_like());
    let started = Instant::now();
    let hung = p
        .run_update(
            &id,
            &run(format!("echo started\nsh -c 'sleep 300' {marker}"), 2),
            &Unfenced,
        )
        .await
        .unwrap();
    assert!(hung.timed_out(), "{hung:?}");
    assert_eq!(
        hung.summary(),
        "ran past its timeout and was stopped: started"
    );
    assert!(
        started.elapsed() < Duration::from_secs(20),
        "{:?}",
        started.elapsed()
    );
    let deadline = Instant::now() + Duration::from_secs(15);
    while command_lines().iter().any(|c| c.contains(&marker)) {
        assert!(
            Instant::now() < deadline,
            "the hung command still runs on the host"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(matches!(
        p.run_update(
            "127.0.180.51:2222-00000000",
            &run("true".into(), 5),
            &Unfenced
        )
        .await,
        Err(ProviderError::NotFound(_))
    ));
}

const G1: &str = "127.0.180.61";

#[tokio::test(flavor = "multi_thread")]
async fn the_join_token_is_on_no_command_line_and_in_no_file() {
    let lab = Lab::new(&[G1]);
    let props = lab.properties(&[G1]);
    let ssh_dir = lab.dir.path().join("ssh");
    let p = provider(&ssh_dir, &props);
    let token = token();
    // The boot runs on for a while: its processes are looked at meanwhile.
    let script =
        "#!/bin/sh\necho \"token length $(printf %s \"$DROVER_JOIN_TOKEN\" | wc -c)\"\nsleep 3\n";
    let seen = Arc::new(std::sync::Mutex::new(Vec::new()));
    let watching = Arc::new(std::sync::atomic::AtomicBool::new(true));
    let watcher = {
        let (seen, watching, token) = (seen.clone(), watching.clone(), token.clone());
        std::thread::spawn(move || {
            while watching.load(std::sync::atomic::Ordering::Relaxed) {
                seen.lock()
                    .unwrap()
                    .extend(command_lines().into_iter().filter(|c| c.contains(&token)));
                std::thread::sleep(Duration::from_millis(5));
            }
        })
    };
    let id = p
        .provision(request(&props, "op-1", script, &token), &Unfenced)
        .await
        .unwrap();
    let log = booted(&p, &id).await;
    watching.store(false, std::sync::atomic::Ordering::Relaxed);
    watcher.join().unwrap();
    assert!(
        log.contains(&format!("token length {}", token.len())),
        "{log}"
    );
    assert!(
        seen.lock().unwrap().is_empty(),
        "the token was on a command line: {:?}",
        seen.lock().unwrap()
    );
    for (path, text) in files_under(lab.dir.path()) {
        assert!(!text.contains(&token), "the join token is in {path}");
    }
}

const H1: &str = "127.0.180.71";

#[tokio::test(flavor = "multi_thread")]
async fn the_engine_is_reached_through_the_socket_forwarded_over_the_connection() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let lab = Lab::new(&[H1]);
    let props = lab.properties(&[H1]);
    // The "engine": a socket at the host's declared docker socket.
    let engine = tokio::net::UnixListener::bind(lab.docker_socket(H1)).unwrap();
    tokio::spawn(async move {
        while let Ok((mut s, _)) = engine.accept().await {
            let _ = s.write_all(b"engine here").await;
        }
    });
    let p = provider(&lab.dir.path().join("ssh"), &props);
    let id = p
        .provision(request(&props, "op-1", "#!/bin/sh\n", &token()), &Unfenced)
        .await
        .unwrap();
    let endpoint = p.engine_endpoint(&id).expect("an endpoint");
    let path = endpoint.strip_prefix("unix://").unwrap();
    let mode = std::fs::metadata(path).unwrap();
    assert_eq!(
        std::os::unix::fs::PermissionsExt::mode(&mode.permissions()) & 0o777,
        0o600
    );
    let mut s = tokio::net::UnixStream::connect(path).await.unwrap();
    let mut said = String::new();
    s.read_to_string(&mut said).await.unwrap();
    assert_eq!(said, "engine here", "{}", lab.sshd_log(H1));
}

const I1: &str = "127.0.180.81";

#[tokio::test(flavor = "multi_thread")]
async fn a_key_from_an_agent_logs_in_and_only_the_declared_agent() {
    let lab = Lab::new(&[I1]);
    let agent = lab.agent();
    let mut props = lab.properties(&[I1]);
    props.as_object_mut().unwrap().remove("identity_file");
    props["identity_agent"] = serde_json::json!(agent.socket);
    let p = provider(&lab.dir.path().join("ssh"), &props);
    let id = p
        .provision(request(&props, "op-1", "#!/bin/sh\n", &token()), &Unfenced)
        .await
        .unwrap();
    assert!(id.starts_with("127.0.180.81:2222-"), "{id}");
    // Another agent's socket, holding nothing: the login is refused.
    drop(agent);
    props["identity_agent"] = serde_json::json!(lab.dir.path().join("no-agent.sock"));
    let p = provider(&lab.dir.path().join("ssh2"), &props);
    let e = p.describe(&cluster()).await.unwrap_err();
    assert!(
        e.to_string()
            .contains("instance.properties.identity_agent: no agent's socket at"),
        "{e}"
    );
}

const J1: &str = "127.0.180.101";
const J_SWARM: &str = "127.0.180.102";

#[tokio::test(flavor = "multi_thread")]
async fn a_hosts_engine_is_asked_through_its_connection() {
    use drover_core::quorum_probe::EngineAnswer;
    // A real engine, a single-node swarm, as the host's engine.
    let engine = drover_store::testkit::Dockerd::start_swarm(J_SWARM).await;
    let lab = Lab::new(&[J1]);
    let mut props = lab.properties(&[J1]);
    props["docker_socket"] = serde_json::json!(engine.endpoint.strip_prefix("unix://").unwrap());
    let p = provider(&lab.dir.path().join("ssh"), &props);
    let id = p
        .provision(request(&props, "op-1", "#!/bin/sh\n", &token()), &Unfenced)
        .await
        .unwrap();
    let reports = p.ask_engines(&cluster()).await.unwrap();
    assert_eq!(reports.len(), 1);
    assert_eq!(
        (reports[0].instance.id.as_str(), reports[0].address.as_str()),
        (id.as_str(), J1)
    );
    assert_eq!(reports[0].answer, EngineAnswer::Led, "{:?}", reports[0]);
    assert_eq!(p.join_failed(&id).await, None);
}

/// Each test run of an update its own name on the machine.
static MARKS: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
