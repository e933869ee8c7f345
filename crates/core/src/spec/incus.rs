//! A group's `instance.properties` for the incus provider (docs/incus.md):
//! what image its machines boot, on which bridge and storage pool, with
//! which limits. One rule for both places that read them: `drover
//! validate` (the decoder) and the provider before every create, so a
//! typo'd `image` or a device drover reserves is refused before anything
//! is made, and never accepted by one and refused by the other.

use super::props::{BadProperty, Reader};
use std::collections::BTreeMap;

/// The incus provider's instance properties.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct IncusProperties {
    /// The image to boot: an alias, or a 64-hex fingerprint.
    pub image: String,
    /// The managed bridge the machine's `eth0` is on. Required for logical
    /// ids (a pet's id is its fixed IPv4 address on this bridge); without
    /// it the profiles must give the machine its network.
    pub network: Option<String>,
    /// The storage pool of the machine's root disk (else the profiles').
    pub storage_pool: Option<String>,
    /// Profiles applied before drover's own settings, in order.
    pub profiles: Vec<String>,
    /// `limits.cpu`: how many CPUs the machine may use.
    pub cpu: Option<u32>,
    /// `limits.memory`, as Incus reads it (`512MiB`, `2GiB`, `50%`).
    pub memory: Option<String>,
    /// More Incus devices, passed through as given (e.g. a disk device
    /// holding the drover binary). Names drover uses are refused.
    pub devices: BTreeMap<String, BTreeMap<String, String>>,
    /// More instance configuration keys, passed through (they override
    /// drover's `security.*` defaults). Keys drover writes are refused.
    pub config: BTreeMap<String, String>,
}

/// The fields of [`IncusProperties`], as written.
const FIELDS: &[&str] = &[
    "image",
    "network",
    "storage_pool",
    "profiles",
    "cpu",
    "memory",
    "devices",
    "config",
];
/// Where the properties are documented.
const DOC: &str = "docs/incus.md";

/// The proxy device that exposes a machine's docker socket on the host.
pub const ENGINE_DEVICE: &str = "drover-engine";
/// The proxy device that exposes the Incus API to a manager's controller.
pub const API_DEVICE: &str = "drover-api";
/// The disk device that shows a manager's controller every machine's
/// engine socket.
pub const ENGINES_DEVICE: &str = "drover-engines";
/// Device names drover sets itself (`root` from `storage_pool`, `eth0`
/// from `network`).
pub const OWN_DEVICES: [&str; 5] = ["root", "eth0", ENGINE_DEVICE, API_DEVICE, ENGINES_DEVICE];

/// Configuration keys drover writes: its tags (`user.drover.*`, and its
/// own mark `user.drover-started`), the boot script, and the limits it
/// takes from `cpu`/`memory`.
pub fn drover_sets(key: &str) -> bool {
    key.starts_with("user.drover")
        || key == "cloud-init.user-data"
        || key == "limits.cpu"
        || key == "limits.memory"
}

impl IncusProperties {
    /// Reads `value` (the group's opaque properties) and checks everything
    /// that needs no Incus call; `pets` when the group's slots have logical
    /// ids (they need `network`). Every problem is returned, not the first.
    /// Whether the image, bridge or pool exist only Incus knows: the
    /// provider reports that at provision.
    pub fn parse(
        value: &serde_json::Value,
        pets: bool,
    ) -> Result<IncusProperties, Vec<BadProperty>> {
        let mut r = Reader::open(value, "", FIELDS, DOC);
        let image: Option<String> = r.required(
            "image",
            "the image the machines boot: an alias or a 64-hex fingerprint",
        );
        let props = IncusProperties {
            image: image.unwrap_or_default(),
            network: r.get("network"),
            storage_pool: r.get("storage_pool"),
            profiles: r.get("profiles").unwrap_or_default(),
            cpu: r.get("cpu"),
            memory: r.get("memory"),
            devices: r.get("devices").unwrap_or_default(),
            config: r.get("config").unwrap_or_default(),
        };
        props.names(&mut r);
        props.reserved(&mut r);
        props.limits(&mut r, pets);
        r.finish(props)
    }

    /// Names that must not be blank: the image (when given as text: a
    /// missing or mistyped one is reported already), bridge, pool and
    /// profiles.
    fn names(&self, r: &mut Reader<'_>) {
        if r.raw("image").is_some_and(serde_json::Value::is_string) && self.image.trim().is_empty()
        {
            r.bad(
                ".image",
                "is empty: name an image alias or fingerprint".into(),
            );
        }
        for (key, v) in [
            ("network", &self.network),
            ("storage_pool", &self.storage_pool),
        ] {
            if v.as_deref().is_some_and(|v| v.trim().is_empty()) {
                r.bad(
                    &format!(".{key}"),
                    "is empty: name one or leave it out".into(),
                );
            }
        }
        for (i, p) in self.profiles.iter().enumerate() {
            if p.trim().is_empty() {
                r.bad(
                    &format!(".profiles[{i}]"),
                    "is empty: name a profile".into(),
                );
            }
        }
    }

    /// Devices and keys drover sets itself, and devices Incus cannot make.
    fn reserved(&self, r: &mut Reader<'_>) {
        for (name, device) in &self.devices {
            if OWN_DEVICES.contains(&name.as_str()) {
                r.bad(
                    &format!(".devices.{name}"),
                    format!("drover sets the `{name}` device itself: use another name"),
                );
            } else if !device.contains_key("type") {
                r.bad(
                    &format!(".devices.{name}"),
                    "has no `type`: Incus makes no device without one (disk, proxy, nic, ...)"
                        .into(),
                );
            }
        }
        for key in self.config.keys().filter(|k| drover_sets(k)) {
            r.bad(
                &format!(".config.{key}"),
                "drover writes this key itself (tags, limits, the boot script): remove it; cpu and memory set the limits".into(),
            );
        }
    }

    /// `cpu`, `memory`, and the bridge pets need.
    fn limits(&self, r: &mut Reader<'_>, pets: bool) {
        if self.cpu == Some(0) {
            r.bad(".cpu", "must be at least 1".into());
        }
        if let Some(m) = &self.memory
            && !is_memory(m)
        {
            r.bad(
                ".memory",
                format!("`{m}` is not a memory limit Incus reads: a size such as 512MiB or 2GiB, or a share such as 50%"),
            );
        }
        if pets && self.network.is_none() && r.raw("network").is_none() {
            r.bad(
                ".network",
                "missing: logical ids are fixed addresses on a bridge; name the managed bridge (e.g. network: incusbr0)".into(),
            );
        }
    }
}

/// `limits.memory` as Incus takes it: a whole or decimal number with an
/// optional byte unit, or a percentage of the host's memory.
fn is_memory(s: &str) -> bool {
    const UNITS: [&str; 15] = [
        "", "B", "kB", "MB", "GB", "TB", "PB", "EB", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB", "%",
    ];
    let split = s
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(s.len());
    let (number, unit) = s.split_at(split);
    let mut parts = number.split('.');
    let whole = parts.next().is_some_and(|w| !w.is_empty());
    let fraction = parts.next().is_none_or(|f| !f.is_empty()) && parts.next().is_none();
    whole && fraction && UNITS.contains(&unit)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn fields(v: serde_json::Value, pets: bool) -> Vec<String> {
        match IncusProperties::parse(&v, pets) {
            Ok(_) => Vec::new(),
            Err(problems) => problems.into_iter().map(|p| p.field).collect(),
        }
    }

    #[test]
    fn a_complete_group_passes() {
        let ok = json!({"image": "debian", "network": "br0", "storage_pool": "p", "profiles": ["default"],
            "cpu": 2, "memory": "1GiB", "devices": {"bin": {"type": "disk", "source": "/x", "path": "/x"}},
            "config": {"security.nesting": "true"}});
        assert_eq!(fields(ok, true), Vec::<String>::new());
        for m in ["512MiB", "1.5GiB", "2048", "50%", "1GB"] {
            assert_eq!(
                fields(json!({"image": "x", "memory": m}), false),
                Vec::<String>::new(),
                "{m}"
            );
        }
    }

    #[test]
    fn the_image_is_required_and_named() {
        assert_eq!(fields(json!({"network": "br0"}), false), [".image"]);
        assert_eq!(
            fields(json!({"imgae": "debian"}), false),
            [".imgae", ".image"]
        );
        assert_eq!(fields(json!({"image": " "}), false), [".image"]);
        assert_eq!(
            fields(json!({"image": 12}), false),
            [".image"],
            "once, for its type"
        );
    }

    #[test]
    fn every_problem_is_named_at_once() {
        let bad = json!({"image": "x", "memroy": "1GiB", "cpu": 0, "memory": "lots",
            "devices": {"eth0": {"type": "nic"}, "root": {"type": "disk"}, "extra": {"path": "/x"}},
            "config": {"user.drover.group": "g", "user.drover-started": "1", "cloud-init.user-data": "x",
                "limits.cpu": "2", "limits.memory": "1GiB", "security.privileged": "false"},
            "profiles": [""], "network": ""});
        assert_eq!(
            fields(bad, true),
            [
                ".memroy",
                ".network",
                ".profiles[0]",
                ".devices.eth0",
                ".devices.extra",
                ".devices.root",
                ".config.cloud-init.user-data",
                ".config.limits.cpu",
                ".config.limits.memory",
                ".config.user.drover-started",
                ".config.user.drover.group",
                ".cpu",
                ".memory"
            ]
        );
    }

    #[test]
    fn pets_need_a_bridge() {
        assert_eq!(fields(json!({"image": "x"}), true), [".network"]);
        assert_eq!(fields(json!({"image": "x"}), false), Vec::<String>::new());
    }

    #[test]
    fn not_a_mapping() {
        assert_eq!(fields(json!([]), false), [""]);
    }
}
