//! A lab for tests on real Incus machines: its own bridge (NAT off, no
//! routing: nothing leaves it), the test image, a directory for the
//! machines' engine sockets, and, when dropped (also when a test fails),
//! every machine on its bridge deleted and the bridge removed. Setting up
//! and tearing down uses the `incus` CLI; the provider itself never does.

use crate::IncusProvider;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// One test's machines and bridge.
pub struct Lab {
    /// The bridge's name (at most 15 characters).
    pub network: String,
    /// The bridge's /24, as its first three octets (`10.203.41`).
    pub subnet: String,
    /// The image alias the machines boot.
    pub image: String,
    engine_dir: tempfile::TempDir,
}

/// Runs `incus ARGS`, panicking with its output when it fails.
pub fn incus(args: &[&str]) -> Output {
    let out = Command::new("incus")
        .args(args)
        .output()
        .expect("incus (scripts/setup.sh installs it)");
    assert!(
        out.status.success(),
        "incus {}: {}",
        args.join(" "),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// Runs `cmd` inside machine `name` (any machine, not only a lab's).
pub fn exec(name: &str, cmd: &str) -> Output {
    Command::new("incus")
        .args(["exec", name, "--", "sh", "-c", cmd])
        .output()
        .expect("incus exec")
}

/// The Debian release a test image is built from (both from the same
/// archive, the mirror of this machine's apt sources).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Suite {
    /// Debian 12: `docker.io` 20.10. The image every lab boots by default.
    Bookworm,
    /// Debian 13: `docker.io` 26.1 (with `docker-cli`, containerd 1.7).
    Trixie,
}

impl Suite {
    /// The suite's name, as scripts/incus-image.sh takes it.
    pub fn name(self) -> &'static str {
        match self {
            Suite::Bookworm => "bookworm",
            Suite::Trixie => "trixie",
        }
    }

    /// How the engine version of this suite's `docker.io` starts
    /// (`docker version`, a node's `Description.Engine.EngineVersion`).
    pub fn engine_series(self) -> &'static str {
        match self {
            Suite::Bookworm => "20.10.",
            Suite::Trixie => "26.1.",
        }
    }
}

/// The Debian 12 test image, built from Debian's packages if Incus lacks
/// it (see scripts/incus-image.sh: cached, keyed by its package lists).
pub fn image() -> String {
    image_of(Suite::Bookworm)
}

/// The test image of `suite` (alias `drover-SUITE-KEY`), built and
/// imported if Incus lacks it. Every image runs systemd, cloud-init,
/// `docker.io` and sshd (no authorized key; host keys made on first boot).
pub fn image_of(suite: Suite) -> String {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/incus-image.sh");
    let out = Command::new(&script)
        .args(["--suite", suite.name()])
        .output()
        .expect("scripts/incus-image.sh");
    assert!(
        out.status.success(),
        "building the {} test image: {}",
        suite.name(),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

impl Lab {
    /// A lab on a new bridge `network` holding `subnet`.1/24 (the host's
    /// address on it); machines get `.2`–`.254` by DHCP or fixed.
    pub fn new(network: &str, subnet: &str) -> Lab {
        // A bridge left by a killed run of the same test goes first.
        let lab = Lab {
            network: network.to_string(),
            subnet: subnet.to_string(),
            image: image(),
            engine_dir: tempfile::Builder::new()
                .prefix("drover-incus-")
                .tempdir()
                .expect("engine socket dir"),
        };
        lab.clear();
        let address = format!("ipv4.address={subnet}.1/24");
        // Dynamic leases only above the pets' fixed addresses (.2–.99): a
        // cattle machine given a pet's address by DHCP while that slot is
        // empty (a spare) would keep the pet from binding it.
        let dynamic = format!("ipv4.dhcp.ranges={subnet}.100-{subnet}.254");
        let create = [
            "network",
            "create",
            network,
            &address,
            &dynamic,
            "ipv4.nat=false",
            "ipv4.routing=false",
            "ipv4.firewall=false",
            "ipv6.address=none",
        ];
        // incusd lists the host's interfaces while creating a bridge and
        // fails when one vanishes meanwhile (another suite's machine being
        // deleted: "Device veth… does not exist", seen once): once more,
        // after clearing what the failed attempt left.
        let first = Command::new("incus").args(create).output().expect("incus");
        if !first.status.success() {
            std::thread::sleep(std::time::Duration::from_secs(2));
            lab.clear();
            incus(&create);
        }
        lab
    }

    /// Where the machines' engine sockets appear.
    pub fn engine_dir(&self) -> &Path {
        self.engine_dir.path()
    }

    /// The provider over this lab's Incus, default project.
    pub fn provider(&self) -> IncusProvider {
        IncusProvider::new(
            Path::new(crate::DEFAULT_SOCKET),
            "default",
            self.engine_dir(),
        )
    }

    /// Instance properties for a group of this lab's machines.
    pub fn properties(&self) -> serde_json::Value {
        serde_json::json!({
            "image": self.image,
            "network": self.network,
            "storage_pool": "drover",
            "memory": "1GiB",
        })
    }

    /// Runs `cmd` inside machine `name`.
    pub fn exec(&self, name: &str, cmd: &str) -> Output {
        exec(name, cmd)
    }

    /// The machines on this lab's bridge.
    pub fn machines(&self) -> Vec<String> {
        let out = incus(&["list", "--format", "json"]);
        let all: Vec<serde_json::Value> = serde_json::from_slice(&out.stdout).unwrap_or_default();
        all.iter()
            .filter(|m| m["expanded_devices"]["eth0"]["network"] == self.network.as_str())
            .filter_map(|m| m["name"].as_str().map(str::to_string))
            .collect()
    }

    /// The machines this lab owns: those on its bridge, and those a test
    /// named `NETWORK-…` (made before their NIC joined the bridge).
    fn owned(&self) -> Vec<String> {
        let mut names = self.machines();
        let out = Command::new("incus")
            .args(["list", "--format", "csv", "--columns", "n"])
            .output();
        let prefix = format!("{}-", self.network);
        if let Ok(out) = out {
            let listed = String::from_utf8_lossy(&out.stdout).into_owned();
            let named = listed.lines().filter(|n| n.starts_with(&prefix));
            names.extend(named.map(str::to_string));
        }
        names.sort();
        names.dedup();
        names
    }

    /// Deletes this lab's machines and bridge, whatever state they are in
    /// (a machine busy with an operation refuses: asked again, up to 2 min).
    fn clear(&self) {
        let t0 = std::time::Instant::now();
        loop {
            let left = self.owned();
            if left.is_empty() || t0.elapsed() > std::time::Duration::from_secs(120) {
                break;
            }
            for name in left {
                let _ = Command::new("incus")
                    .args(["delete", "--force", &name])
                    .output();
            }
            std::thread::sleep(std::time::Duration::from_secs(1));
        }
        let _ = Command::new("incus")
            .args(["network", "delete", &self.network])
            .output();
    }
}

impl Drop for Lab {
    fn drop(&mut self) {
        self.clear();
    }
}

/// A path inside the lab's engine dir (for assertions).
pub fn socket_of(lab: &Lab, name: &str) -> PathBuf {
    crate::machine::engine_socket(lab.engine_dir(), name)
}
