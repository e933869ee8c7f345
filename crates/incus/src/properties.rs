//! A group's `instance.properties` for the incus provider: what image
//! its machines boot, on which bridge and storage pool, with which limits.

use serde::Deserialize;
use std::collections::BTreeMap;

/// The incus provider's instance properties (unknown fields are errors,
/// so a misspelt `memroy` is not silently ignored).
#[derive(Debug, Clone, Default, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct Properties {
    /// The image to boot: an alias, or a 64-hex fingerprint.
    pub image: String,
    /// The managed bridge the machine's `eth0` is on. Required for logical
    /// ids (a pet's id is its fixed IPv4 address on this bridge); without
    /// it the profiles must give the machine its network.
    #[serde(default)]
    pub network: Option<String>,
    /// The storage pool of the machine's root disk (else the profiles').
    #[serde(default)]
    pub storage_pool: Option<String>,
    /// Profiles applied before drover's own settings, in order.
    #[serde(default)]
    pub profiles: Vec<String>,
    /// `limits.cpu`: how many CPUs the machine may use.
    #[serde(default)]
    pub cpu: Option<u32>,
    /// `limits.memory`, as Incus reads it (`512MiB`, `2GiB`).
    #[serde(default)]
    pub memory: Option<String>,
    /// More Incus devices, passed through as given (e.g. a disk device
    /// holding the drover binary, or a proxy device to the Incus socket
    /// for the managers' controllers). Names drover uses are refused.
    #[serde(default)]
    pub devices: BTreeMap<String, BTreeMap<String, String>>,
    /// More instance configuration keys, passed through (they override
    /// drover's `security.*` defaults). Keys drover writes are refused.
    #[serde(default)]
    pub config: BTreeMap<String, String>,
}

/// Why a group's properties cannot be used, naming the field.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("instance.properties{field}: {problem}")]
pub struct BadProperties {
    /// The field, as `.name` (empty for the whole object).
    pub field: String,
    /// What is wrong and what to do.
    pub problem: String,
}

/// Device names drover sets itself.
pub const OWN_DEVICES: [&str; 5] = [
    "root",
    "eth0",
    ENGINE_DEVICE,
    crate::machine::API_DEVICE,
    crate::machine::ENGINES_DEVICE,
];
/// The proxy device that exposes a machine's docker socket on the host.
pub const ENGINE_DEVICE: &str = "drover-engine";

impl Properties {
    /// Reads `value` (the group's opaque properties) and checks it.
    pub fn parse(value: &serde_json::Value) -> Result<Properties, BadProperties> {
        let props: Properties =
            serde_json::from_value(value.clone()).map_err(|e| BadProperties {
                field: String::new(),
                problem: format!("{e}; see docs/incus.md"),
            })?;
        props.check()?;
        Ok(props)
    }

    fn check(&self) -> Result<(), BadProperties> {
        let bad = |field: &str, problem: String| BadProperties {
            field: format!(".{field}"),
            problem,
        };
        if self.image.trim().is_empty() {
            return Err(bad(
                "image",
                "is empty: name an image alias or fingerprint".into(),
            ));
        }
        if let Some(name) = self
            .devices
            .keys()
            .find(|d| OWN_DEVICES.contains(&d.as_str()))
        {
            return Err(bad(
                &format!("devices.{name}"),
                format!("drover sets the `{name}` device itself: use another name"),
            ));
        }
        if let Some(key) = self.config.keys().find(|k| drover_sets(k)) {
            return Err(bad(
                &format!("config.{key}"),
                "drover writes this key itself (tags, limits, the boot script): remove it".into(),
            ));
        }
        if self.cpu == Some(0) {
            return Err(bad("cpu", "must be at least 1".into()));
        }
        Ok(())
    }
}

/// Configuration keys drover writes: its tags, the limits it takes from
/// `cpu`/`memory`, and the boot script.
fn drover_sets(key: &str) -> bool {
    // `user.drover.*` are its tags; `user.drover-started` its own mark.
    key.starts_with("user.drover")
        || key == "cloud-init.user-data"
        || key == "limits.cpu"
        || key == "limits.memory"
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_misspelt_field_is_named() {
        let e = Properties::parse(&json!({"image": "x", "memroy": "1GiB"})).unwrap_err();
        assert!(e.to_string().contains("unknown field `memroy`"), "{e}");
    }

    #[test]
    fn the_image_is_required() {
        let e = Properties::parse(&json!({"network": "br0"})).unwrap_err();
        assert!(e.to_string().contains("missing field `image`"), "{e}");
        let e = Properties::parse(&json!({"image": " "})).unwrap_err();
        assert_eq!(e.field, ".image");
    }

    #[test]
    fn drovers_own_devices_and_keys_are_refused() {
        let e = Properties::parse(&json!({"image": "x", "devices": {"eth0": {"type": "nic"}}}))
            .unwrap_err();
        assert_eq!(e.field, ".devices.eth0");
        for key in ["user.drover.group", "user.drover-started"] {
            let e = Properties::parse(&json!({"image": "x", "config": {key: "g"}})).unwrap_err();
            assert_eq!(e.field, format!(".config.{key}"));
        }
        let ok = Properties::parse(&json!({"image": "x", "config": {"security.nesting": "true"}}));
        assert!(ok.is_ok());
    }
}
