//! One machine as Incus is asked to create it, and as drover reads it
//! back: pure translations between drover's request and Incus's JSON.

use crate::properties::{ENGINE_DEVICE, Properties};
use drover_core::model::Instance;
use drover_spi::Secret;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::net::Ipv4Addr;
use std::path::Path;

/// Where a machine's secret boot environment is pushed before it starts,
/// on its own disk, readable by root only; the boot script reads it and
/// deletes it. Never the instance's configuration: user data stays
/// readable for the machine's life (`incus config show`).
pub const BOOT_ENV: &str = "/var/lib/drover/boot.env";
/// The docker socket inside the machine.
const ENGINE_SOCKET: &str = "/run/docker.sock";
/// Where a manager's controller finds the Incus API inside its machine
/// (a proxy device to the host's socket; under `/var/lib`, not `/run`,
/// which systemd mounts over after the device is set up).
pub const API_SOCKET: &str = "/var/lib/drover/incus.socket";
/// The proxy device that exposes the Incus API to a manager's controller,
/// and the disk device that shows it every machine's engine socket at
/// [`ENGINES_PATH`]: names drover-core's property rule reserves.
pub use drover_core::spec::incus::{API_DEVICE, ENGINES_DEVICE};
/// Where a manager's controller sees the engines' directory: under its
/// systemd unit's state directory, the one path its sandbox lets it write
/// (the unit's `PrivateTmp` and `ProtectSystem=strict` hide or freeze the
/// host's path, e.g. under `/tmp`).
pub const ENGINES_PATH: &str = "/var/lib/drover/engines";

/// The host-side sockets a machine's proxy devices use.
#[derive(Debug, Clone, Copy)]
pub struct Sockets<'a> {
    /// Where the machine's engine socket appears on the Incus host.
    pub engine_dir: &'a Path,
    /// For a manager: the Incus API socket on the host, exposed inside
    /// the machine at [`API_SOCKET`] for its controller.
    pub api: Option<&'a Path>,
}
/// Tags become configuration keys under this prefix (`user.drover.group`).
const TAG_PREFIX: &str = "user.";
/// Set once drover saw the machine's first start finish: until then a
/// `Stopped` machine is one being provisioned, not a dead one (Incus
/// reports `Stopped` while a start is still running).
pub const STARTED: &str = "user.drover-started";
/// Keys under `user.` that are not tags: older cloud-init keys Incus also
/// keeps there, and drover's own mark.
const NOT_TAGS: [&str; 5] = [
    "user.user-data",
    "user.meta-data",
    "user.vendor-data",
    "user.network-config",
    STARTED,
];

/// `POST /1.0/instances`.
#[derive(Debug, Serialize, PartialEq)]
pub struct Create {
    /// The machine's name (its provider id).
    pub name: String,
    #[serde(rename = "type")]
    kind: &'static str,
    source: Source,
    profiles: Vec<String>,
    config: BTreeMap<String, String>,
    devices: BTreeMap<String, BTreeMap<String, String>>,
    /// Started by drover once its boot environment is in place.
    start: bool,
}

#[derive(Debug, Serialize, PartialEq)]
struct Source {
    #[serde(rename = "type")]
    kind: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    alias: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    fingerprint: Option<String>,
}

/// Why a request cannot become a machine.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Unfit {
    /// A pet's logical id must be an IPv4 address on the group's bridge.
    #[error(
        "logical id {0:?} is not an IPv4 address: an incus pet's logical id is its fixed address on `network`"
    )]
    LogicalId(String),
    /// Logical ids need a bridge to hold the address.
    #[error("logical id {0} needs instance.properties.network (the bridge the address is on)")]
    NoNetwork(String),
}

/// A new machine's name: `drover-` and 8 hex digits (Incus names are at
/// most 63 characters of letters, digits and hyphens).
pub fn new_name() -> String {
    format!("drover-{}", &uuid::Uuid::new_v4().simple().to_string()[..8])
}

/// The address a machine's boot script advertises: its logical id, or
/// empty for cattle (the script reads its DHCP address).
pub fn address(logical_id: Option<&str>) -> Result<String, Unfit> {
    match logical_id {
        None => Ok(String::new()),
        Some(id) => id
            .parse::<Ipv4Addr>()
            .map(|a| a.to_string())
            .map_err(|_| Unfit::LogicalId(id.to_string())),
    }
}

/// The machine `name` as Incus is asked to create it: drover's tags as
/// `user.*` keys, the rendered boot script as cloud-init user data, the
/// pet's fixed address on its NIC, the engine's socket exposed on the
/// host at `engine_dir/NAME.sock` (root only), and for a manager the
/// Incus API and `engine_dir` inside the machine for its controller.
pub fn create(
    name: &str,
    props: &Properties,
    tags: &BTreeMap<String, String>,
    logical_id: Option<&str>,
    user_data: &str,
    sockets: &Sockets<'_>,
) -> Result<Create, Unfit> {
    let mut config = BTreeMap::from([
        // dockerd inside a system container needs both (measured:
        // unprivileged, its overlay and iptables setup fail).
        ("security.privileged".to_string(), "true".to_string()),
        ("security.nesting".to_string(), "true".to_string()),
    ]);
    config.extend(props.config.clone());
    config.extend(
        tags.iter()
            .map(|(k, v)| (format!("{TAG_PREFIX}{k}"), v.clone())),
    );
    config.insert("cloud-init.user-data".into(), user_data.to_string());
    if let Some(cpu) = props.cpu {
        config.insert("limits.cpu".into(), cpu.to_string());
    }
    if let Some(memory) = &props.memory {
        config.insert("limits.memory".into(), memory.clone());
    }
    let mut devices = props.devices.clone();
    if let Some(pool) = &props.storage_pool {
        devices.insert(
            "root".into(),
            device(&[("type", "disk"), ("path", "/"), ("pool", pool)]),
        );
    }
    match (&props.network, logical_id) {
        (Some(net), _) => {
            let mut nic = device(&[("type", "nic"), ("network", net), ("name", "eth0")]);
            if let Some(id) = logical_id {
                nic.insert("ipv4.address".into(), address(Some(id))?);
            }
            devices.insert("eth0".into(), nic);
        }
        (None, Some(id)) => return Err(Unfit::NoNetwork(id.to_string())),
        (None, None) => {}
    }
    if let Some(api) = sockets.api {
        devices.insert(
            API_DEVICE.into(),
            device(&[
                ("type", "proxy"),
                ("bind", "instance"),
                ("listen", &format!("unix:{API_SOCKET}")),
                ("connect", &format!("unix:{}", api.display())),
                ("mode", "0600"),
            ]),
        );
        // The engines' directory: the controller asks another machine's
        // engine as a controller on the host would (a former leader's
        // engine, whether it left the swarm: without it the next leader
        // waits until the swarm reads that node down, ~15 s a hand-over
        // here), and removes a destroyed machine's socket file.
        let dir = sockets.engine_dir.display().to_string();
        devices.insert(
            ENGINES_DEVICE.into(),
            device(&[("type", "disk"), ("source", &dir), ("path", ENGINES_PATH)]),
        );
    }
    let listen = format!("unix:{}", engine_socket(sockets.engine_dir, name).display());
    devices.insert(
        ENGINE_DEVICE.into(),
        device(&[
            ("type", "proxy"),
            ("bind", "host"),
            ("listen", &listen),
            ("connect", &format!("unix:{ENGINE_SOCKET}")),
            ("mode", "0600"),
        ]),
    );
    let is_fingerprint = is_fingerprint(&props.image);
    Ok(Create {
        name: name.to_string(),
        kind: "container",
        source: Source {
            kind: "image",
            alias: (!is_fingerprint).then(|| props.image.clone()),
            fingerprint: is_fingerprint.then(|| props.image.clone()),
        },
        profiles: props.profiles.clone(),
        config,
        devices,
        start: false,
    })
}

/// True when `image` names an image by its fingerprint, not an alias.
pub fn is_fingerprint(image: &str) -> bool {
    image.len() == 64 && image.bytes().all(|b| b.is_ascii_hexdigit())
}

fn device(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

/// Where machine `name`'s engine socket appears on the Incus host.
pub fn engine_socket(engine_dir: &Path, name: &str) -> std::path::PathBuf {
    engine_dir.join(format!("{name}.sock"))
}

/// The secret boot environment as a file the boot script sources:
/// `export KEY='value'` lines, values quoted for `sh`.
pub fn boot_env(env: &[(String, Secret)]) -> Vec<u8> {
    drover_core::template::sh_exports(env.iter().map(|(k, v)| (k.as_str(), v.expose())))
        .into_bytes()
}

/// A machine as `GET /1.0/instances?recursion=1` lists it.
#[derive(Debug, Clone, Deserialize)]
pub struct Listed {
    /// Its name (drover's instance id).
    pub name: String,
    /// `Running`, `Stopped`, `Frozen`, …
    pub status: String,
    /// Its configuration (drover's tags among it).
    #[serde(default)]
    pub config: BTreeMap<String, String>,
    /// RFC 3339.
    pub created_at: String,
}

impl Listed {
    /// drover's tags: the `user.*` keys, prefix removed.
    pub fn tags(&self) -> BTreeMap<String, String> {
        self.config
            .iter()
            .filter(|(k, _)| !NOT_TAGS.contains(&k.as_str()))
            .filter_map(|(k, v)| Some((k.strip_prefix(TAG_PREFIX)?.to_string(), v.clone())))
            .collect()
    }

    /// True until drover saw its first start finish.
    pub fn provisioning(&self) -> bool {
        !self.config.contains_key(STARTED)
    }

    /// As the planner sees it. A machine still being provisioned (created,
    /// or its first start still running) counts as running, as the local
    /// provider's engine that is still starting does: "stopped" would have
    /// it replaced at once (measured: a describe during the start saw
    /// `Stopped` with the start's time as `last_used_at`). A frozen
    /// (paused) machine still exists and may resume: running; one in
    /// `Error` is dead.
    pub fn instance(&self) -> Instance {
        let dead = matches!(self.status.as_str(), "Stopped" | "Error");
        let running = !dead || self.provisioning();
        Instance {
            id: self.name.clone(),
            tags: self.tags().into(),
            running,
            created_ms: created_ms(&self.created_at),
        }
    }
}

fn created_ms(rfc3339: &str) -> u64 {
    humantime::parse_rfc3339_weak(rfc3339)
        .ok()
        .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
        .map_or(0, |d| d.as_millis() as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn props() -> Properties {
        Properties {
            image: "drover-bookworm".into(),
            network: Some("drvt0".into()),
            storage_pool: Some("drover".into()),
            cpu: Some(1),
            memory: Some("512MiB".into()),
            ..Properties::default()
        }
    }

    #[test]
    fn a_pet_gets_its_address_tags_and_boot_script_but_no_secret() {
        let tags = BTreeMap::from([("drover.group".to_string(), "managers".to_string())]);
        let c = create(
            "drover-1",
            &props(),
            &tags,
            Some("10.203.0.11"),
            "#!/bin/sh\n",
            &Sockets {
                engine_dir: Path::new("/run/e"),
                api: Some(Path::new("/var/lib/incus/unix.socket")),
            },
        )
        .unwrap();
        assert_eq!(c.config["user.drover.group"], "managers");
        assert_eq!(c.config["cloud-init.user-data"], "#!/bin/sh\n");
        assert_eq!(c.config["limits.memory"], "512MiB");
        assert_eq!(c.devices["eth0"]["ipv4.address"], "10.203.0.11");
        assert_eq!(c.devices["root"]["pool"], "drover");
        assert_eq!(
            c.devices[ENGINE_DEVICE]["listen"],
            "unix:/run/e/drover-1.sock"
        );
        assert_eq!(
            c.devices[API_DEVICE]["listen"],
            "unix:/var/lib/drover/incus.socket"
        );
        assert_eq!(c.devices[ENGINES_DEVICE]["source"], "/run/e");
        assert_eq!(c.devices[ENGINES_DEVICE]["path"], "/var/lib/drover/engines");
        assert!(!c.start, "started only once its boot environment is pushed");
        let json = serde_json::to_string(&c).unwrap();
        assert!(json.contains(r#""alias":"drover-bookworm""#), "{json}");
    }

    #[test]
    fn only_a_manager_sees_the_incus_api_and_the_engines() {
        let c = create("w", &props(), &BTreeMap::new(), None, "", &no_api()).unwrap();
        assert!(!c.devices.contains_key(API_DEVICE));
        assert!(!c.devices.contains_key(ENGINES_DEVICE));
        assert_eq!(c.devices[ENGINE_DEVICE]["listen"], "unix:/e/w.sock");
    }

    fn no_api() -> Sockets<'static> {
        Sockets {
            engine_dir: Path::new("/e"),
            api: None,
        }
    }

    #[test]
    fn a_logical_id_must_be_an_address_on_a_bridge() {
        let e = create("n", &props(), &BTreeMap::new(), Some("db-1"), "", &no_api());
        assert_eq!(e.unwrap_err(), Unfit::LogicalId("db-1".into()));
        let no_net = Properties {
            network: None,
            ..props()
        };
        let e = create(
            "n",
            &no_net,
            &BTreeMap::new(),
            Some("10.0.0.1"),
            "",
            &no_api(),
        );
        assert_eq!(e.unwrap_err(), Unfit::NoNetwork("10.0.0.1".into()));
    }

    #[test]
    fn listed_machines_read_back_their_tags_and_state() {
        let listed: Listed = serde_json::from_value(serde_json::json!({
            "name": "drover-1", "status": "Stopped",
            "config": {"user.drover.link": "l1", "user.meta-data": "x", "limits.cpu": "1"},
            "created_at": "2026-12-04T17:52:57.731509716Z"
        }))
        .unwrap();
        let i = listed.instance();
        assert_eq!(i.tag("drover.link"), Some("l1"));
        assert_eq!(i.tags.len(), 1);
        assert!(i.running, "never started: still being created");
        assert_eq!(i.created_ms / 1000, 1_796_406_777);
        // Incus lists a machine whose first start still runs as `Stopped`.
        let starting = listed;
        assert!(starting.instance().running, "its first start still runs");
        let mut stopped = starting;
        stopped.config.insert(STARTED.into(), "true".into());
        assert!(!stopped.instance().running, "a power cut reads as stopped");
        let broken = Listed {
            status: "Error".into(),
            ..stopped.clone()
        };
        assert!(!broken.instance().running, "a machine in error is dead");
        assert_eq!(stopped.instance().tags.len(), 1, "the mark is no tag");
    }

    #[test]
    fn the_boot_environment_is_quoted_for_sh() {
        let env = [("T".to_string(), Secret::new("a'b".to_string()))];
        assert_eq!(boot_env(&env), b"export T='a'\\''b'\n");
    }
}
