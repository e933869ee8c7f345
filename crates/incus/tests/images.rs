//! The two test images (scripts/incus-image.sh), each booted through the
//! provider on this test's own bridge (10.203.65.0/24, NAT off): Debian 12
//! with `docker.io` 20.10 and Debian 13 with 26.1, both with systemd,
//! cloud-init and sshd listening with no authorized key and host keys of
//! its own. The Debian 13 engine starts a swarm. The lab deletes its
//! machines and bridge, also when the test fails.

use drover_core::model::tags;
use drover_core::spec::Role;
use drover_core::template::BootContext;
use drover_incus::testkit::{Lab, Suite, image_of};
use drover_spi::{InstanceProvider, ProvisionRequest, Unfenced};
use std::collections::BTreeMap;
use std::io::Read;
use std::time::{Duration, Instant};

const SCRIPT: &str = "#!/bin/sh\nset -eu\nuntil docker info >/dev/null 2>&1; do sleep 0.2; done\necho booted > /root/booted\n";

/// Runs `cmd` in machine `name`, returning its trimmed standard output
/// (panicking, with its output, when it fails).
fn sh(lab: &Lab, name: &str, cmd: &str) -> String {
    let out = lab.exec(name, cmd);
    assert!(
        out.status.success(),
        "{name}: {cmd}: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// The first line sshd sends to a client that connects to `ip`:22.
fn ssh_banner(ip: &str) -> String {
    let addr = format!("{ip}:22").parse().unwrap();
    let mut s = std::net::TcpStream::connect_timeout(&addr, Duration::from_secs(5))
        .unwrap_or_else(|e| panic!("sshd on {ip}: {e}"));
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let mut buf = [0u8; 64];
    let n = s.read(&mut buf).unwrap();
    String::from_utf8_lossy(&buf[..n])
        .lines()
        .next()
        .unwrap_or("")
        .to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn both_images_boot_with_their_engine_and_sshd_and_debian_13_starts_a_swarm() {
    let lab = Lab::new("drvt65", "10.203.65");
    let p = lab.provider();
    let cluster = format!("c{}", uuid::Uuid::new_v4().simple());
    let suites = [
        (Suite::Bookworm, "12.", "10.203.65.11"),
        (Suite::Trixie, "13.", "10.203.65.12"),
    ];
    let mut machines = Vec::new();
    for (suite, _, ip) in suites {
        let mut properties = lab.properties();
        properties["image"] = image_of(suite).into();
        let req = ProvisionRequest {
            tags: BTreeMap::from([
                (tags::CLUSTER.to_string(), cluster.clone()),
                (tags::GROUP.to_string(), suite.name().to_string()),
                (tags::LINK.to_string(), format!("link-{}", suite.name())),
            ]),
            logical_id: Some(ip.to_string()),
            properties,
            engine_labels: BTreeMap::new(),
            boot_template: SCRIPT.into(),
            boot_context: BootContext::example(Role::Worker),
            boot_env: Vec::new(),
        };
        machines.push(p.provision(req, &Unfenced).await.unwrap());
    }
    let t0 = Instant::now();
    let mut fingerprints = Vec::new();
    for ((suite, debian, ip), name) in suites.into_iter().zip(&machines) {
        while !lab.exec(name, "test -e /root/booted").status.success() {
            assert!(
                t0.elapsed() < Duration::from_secs(180),
                "{name} ({}) never ran its boot script",
                suite.name()
            );
            std::thread::sleep(Duration::from_millis(500));
        }
        let booted = t0.elapsed();
        assert!(sh(&lab, name, "cat /etc/debian_version").starts_with(debian));
        // `cloud-init status --wait` returns once every stage is done; the
        // system is then up (systemd's own verdict, no failed unit).
        sh(&lab, name, "cloud-init status --wait");
        assert_eq!(
            sh(
                &lab,
                name,
                "systemctl is-system-running --wait || systemctl --failed --no-legend"
            ),
            "running"
        );
        let version = sh(&lab, name, "docker version --format '{{.Server.Version}}'");
        assert!(
            version.starts_with(suite.engine_series()),
            "{}: engine {version}",
            suite.name()
        );
        // sshd answers, with no key that would let anyone in and host keys
        // made on this machine.
        assert_eq!(sh(&lab, name, "systemctl is-active ssh"), "active");
        assert!(
            ssh_banner(ip).starts_with("SSH-2.0-OpenSSH_"),
            "{}",
            ssh_banner(ip)
        );
        assert_eq!(
            sh(
                &lab,
                name,
                "cat /root/.ssh/authorized_keys 2>/dev/null || true"
            ),
            ""
        );
        fingerprints.push(sh(
            &lab,
            name,
            "ssh-keygen -lf /etc/ssh/ssh_host_ed25519_key.pub",
        ));
        eprintln!(
            "MEASURED {} booted (boot script ran) {booted:?}, engine {version}",
            suite.name()
        );
    }
    assert_ne!(
        fingerprints[0].split(' ').nth(1),
        fingerprints[1].split(' ').nth(1),
        "two machines share a host key: {fingerprints:?}"
    );

    // Debian 13's engine makes a swarm and reports its version as a node.
    let trixie = &machines[1];
    sh(
        &lab,
        trixie,
        "docker swarm init --advertise-addr 10.203.65.12 --listen-addr 10.203.65.12:2377",
    );
    let node = sh(
        &lab,
        trixie,
        "docker node inspect self --format '{{.Status.State}} {{.ManagerStatus.Leader}} {{.Description.Engine.EngineVersion}}'",
    );
    assert!(node.starts_with("ready true 26.1."), "{node}");

    for id in &machines {
        p.destroy(id).await.unwrap();
    }
    assert!(lab.machines().is_empty(), "{:?}", lab.machines());
}
