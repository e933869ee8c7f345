//! The incus provider against a real Incus: machines that boot Debian
//! with systemd, cloud-init and docker.io, on the test's own bridge
//! (10.203.41.0/24, NAT off). Each test's lab deletes its machines and
//! bridge, also when the test fails.

use drover_core::model::tags;
use drover_core::spec::Role;
use drover_core::template::BootContext;
use drover_incus::testkit::{Lab, socket_of};
use drover_spi::{InstanceProvider, ProviderError, ProvisionRequest, Secret, Unfenced};
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

/// A boot script that proves what it got: the secret environment from its
/// file (then deleted), and the engine answering.
const SCRIPT: &str = r#"#!/bin/sh
set -eu
. /var/lib/drover/boot.env
rm -f /var/lib/drover/boot.env
printf '%s' "$DROVER_JOIN_TOKEN" | sha256sum | cut -c1-16 > /root/token.sum
until docker info >/dev/null 2>&1; do sleep 0.2; done
echo "booted {{ address }}" > /root/booted
"#;

fn request(
    cluster: &str,
    link: &str,
    logical_id: Option<&str>,
    lab: &Lab,
    token: &str,
) -> ProvisionRequest {
    let tags = BTreeMap::from([
        (tags::CLUSTER.to_string(), cluster.to_string()),
        (tags::GROUP.to_string(), "g".to_string()),
        (tags::LINK.to_string(), link.to_string()),
    ]);
    ProvisionRequest {
        tags,
        logical_id: logical_id.map(str::to_string),
        properties: lab.properties(),
        engine_labels: BTreeMap::new(),
        boot_template: SCRIPT.into(),
        boot_context: BootContext::example(Role::Worker),
        boot_env: vec![("DROVER_JOIN_TOKEN".into(), Secret::new(token.to_string()))],
    }
}

fn sha16(s: &str) -> String {
    use std::io::Write;
    let mut child = std::process::Command::new("sha256sum")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(s.as_bytes()).unwrap();
    let out = child.wait_with_output().unwrap();
    String::from_utf8_lossy(&out.stdout)[..16].to_string()
}

/// Waits until `file` exists in machine `name`, returning its content.
fn wait_file(lab: &Lab, name: &str, file: &str, within: Duration) -> String {
    let t0 = Instant::now();
    loop {
        let out = lab.exec(name, &format!("cat {file}"));
        if out.status.success() {
            return String::from_utf8_lossy(&out.stdout).trim().to_string();
        }
        assert!(t0.elapsed() < within, "{file} never appeared in {name}");
        std::thread::sleep(Duration::from_millis(500));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn provision_describe_label_destroy_and_no_secret_in_the_configuration() {
    let lab = Lab::new("drvp41", "10.203.41");
    let p = lab.provider();
    let cluster = format!("c{}", uuid::Uuid::new_v4().simple());
    let token = format!("SWMTKN-1-secretscan-{}", uuid::Uuid::new_v4().simple());
    let req = request(&cluster, "link-1", Some("10.203.41.11"), &lab, &token);

    let t0 = Instant::now();
    let id = p.provision(req.clone(), &Unfenced).await.unwrap();
    let provisioned = t0.elapsed();
    // Idempotent on the link: the same operation retried is the same machine.
    assert_eq!(p.provision(req, &Unfenced).await.unwrap(), id);

    let filter = BTreeMap::from([(tags::CLUSTER.to_string(), cluster.clone())]);
    let listed = p.describe(&filter).await.unwrap();
    assert_eq!(listed.len(), 1, "{listed:?}");
    assert_eq!(listed[0].id, id);
    assert!(listed[0].running);
    assert_eq!(listed[0].tag(tags::LINK), Some("link-1"));

    // cloud-init ran the rendered script with the pet's address, and the
    // secret reached it through the pushed file only.
    assert_eq!(
        wait_file(&lab, &id, "/root/booted", Duration::from_secs(120)),
        "booted 10.203.41.11"
    );
    let booted = t0.elapsed();
    assert_eq!(
        wait_file(&lab, &id, "/root/token.sum", Duration::from_secs(5)),
        sha16(&token)
    );
    assert!(
        !lab.exec(&id, "test -e /var/lib/drover/boot.env")
            .status
            .success(),
        "the boot env file outlived the boot"
    );
    let shown = drover_incus::testkit::incus(&["config", "show", &id]);
    assert!(
        !String::from_utf8_lossy(&shown.stdout).contains(&token),
        "the token is in the configuration"
    );
    let ip = lab.exec(&id, "ip -4 -o addr show dev eth0");
    assert!(
        String::from_utf8_lossy(&ip.stdout).contains("10.203.41.11/24"),
        "{ip:?}"
    );

    // The engine is reachable from the host through its proxy socket.
    let sock = socket_of(&lab, &id);
    let engine = drover_engine::Engine::connect(&format!("unix://{}", sock.display()))
        .await
        .unwrap();
    let info = engine.info().await.unwrap();
    assert!(!info.node_id.is_empty() || info.state == drover_engine::LocalState::Inactive);

    // Labels are tags.
    let extra = BTreeMap::from([("drover.attempt".to_string(), "2".to_string())]);
    p.label(&id, &extra, &Unfenced).await.unwrap();
    let listed = p.describe(&filter).await.unwrap();
    assert_eq!(listed[0].tag("drover.attempt"), Some("2"));
    // Another cluster's filter lists nothing of this one.
    let other = BTreeMap::from([(tags::CLUSTER.to_string(), "someone-else".to_string())]);
    assert!(p.describe(&other).await.unwrap().is_empty());

    // An update in place, through the exec API: the command ran as root,
    // the engine was restarted after it (its main PID changed), and
    // nothing of the run is left behind; a failure's status and last lines
    // come back; a command past its timeout is stopped on the machine.
    assert!(p.updates_in_place());
    let pid = |lab: &Lab| {
        let out = lab.exec(&id, "systemctl show -p MainPID --value docker.service");
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    };
    let before = pid(&lab);
    let run = |command: &str, secs: u64| drover_core::in_place::UpdateRun {
        command: command.into(),
        timeout: Duration::from_secs(secs),
        mark: format!(
            "test-{}",
            MARKS.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
        ),
    };
    let ok = p
        .run_update(&id, &run("id -u > /root/updated; echo done", 60), &Unfenced)
        .await
        .unwrap();
    assert!(ok.succeeded(), "{ok:?}");
    assert_eq!(
        wait_file(&lab, &id, "/root/updated", Duration::from_secs(5)),
        "0"
    );
    assert_ne!(
        pid(&lab),
        before,
        "the engine was restarted after the update"
    );
    let failed = p
        .run_update(
            &id,
            &run(
                "echo 'E: Unable to locate package docker.io=99' >&2; exit 100",
                60,
            ),
            &Unfenced,
        )
        .await
        .unwrap();
    assert_eq!(failed.status, Some(100));
    assert_eq!(
        failed.tail.last(1),
        "E: Unable to locate package docker.io=99"
    );
    let t1 = Instant::now();
    let hung = p
        .run_update(&id, &run("sleep 600", 2), &Unfenced)
        .await
        .unwrap();
    assert!(hung.timed_out(), "{hung:?}");
    assert!(t1.elapsed() < Duration::from_secs(30), "{:?}", t1.elapsed());
    assert!(
        !lab.exec(&id, "pgrep -x sleep").status.success(),
        "the hung command was stopped on the machine"
    );

    p.destroy(&id).await.unwrap();
    assert!(p.describe(&filter).await.unwrap().is_empty());
    p.destroy(&id)
        .await
        .expect("destroying an absent machine is success");
    assert!(lab.machines().is_empty());
    eprintln!("MEASURED provision {provisioned:?}, booted (cloud-init ran) {booted:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_power_cut_reads_as_stopped_and_bad_input_is_refused() {
    let lab = Lab::new("drvp42", "10.203.42");
    let p = lab.provider();
    let cluster = format!("c{}", uuid::Uuid::new_v4().simple());
    let id = p
        .provision(request(&cluster, "l", None, &lab, "t"), &Unfenced)
        .await
        .unwrap();
    drover_incus::testkit::incus(&["stop", "--force", &id]);
    let filter = BTreeMap::from([(tags::CLUSTER.to_string(), cluster.clone())]);
    let listed = p.describe(&filter).await.unwrap();
    assert!(
        !listed[0].running,
        "a machine whose power was cut is not running"
    );
    p.destroy(&id).await.unwrap();

    // A logical id that is no address, and an unknown image: refused, nothing made.
    let e = p
        .provision(request(&cluster, "x", Some("db-1"), &lab, "t"), &Unfenced)
        .await
        .unwrap_err();
    assert!(
        matches!(e, ProviderError::Permanent(ref m) if m.contains("db-1")),
        "{e}"
    );
    let mut req = request(&cluster, "y", None, &lab, "t");
    req.properties["image"] = "no-such-image".into();
    let e = p.provision(req, &Unfenced).await.unwrap_err();
    assert!(matches!(e, ProviderError::Permanent(_)), "{e}");
    assert!(lab.machines().is_empty(), "{:?}", lab.machines());

    // An unreachable API is an error, never "no machines".
    let gone = drover_incus::IncusProvider::new(
        std::path::Path::new("/nonexistent/incus.socket"),
        "default",
        lab.engine_dir(),
    );
    assert!(gone.describe(&filter).await.is_err());
}

/// Each test run of an update its own name on the machine.
static MARKS: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
