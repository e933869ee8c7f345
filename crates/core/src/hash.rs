//! The config hash: what a member was built from.
//!
//! Only `instance` and `flavor` (plus `rollout.after`, the operator's way to
//! force a roll without editing anything else, and an in-place group's
//! update command) go in; size and the rest of the update policy never
//! cause a roll. The hash is taken over the *resolved* spec, so a new
//! default boot script shows up as a planned roll, and over canonical JSON
//! (sorted keys), so key order, formatting and YAML-vs-JSON do not matter.

use crate::spec::GroupSpec;
use serde_json::json;
use sha2::{Digest, Sha256};

/// A group's config hash: 16 hex digits of SHA-256 over canonical JSON.
pub fn config_hash(group: &GroupSpec) -> String {
    let mut material = json!({
        "instance": group.instance,
        "flavor": group.flavor,
        "rollout_after": group.rollout_after,
    });
    // An in-place group's members are what its update made them: the
    // command is what they were built from. Added only when declared, so
    // no other group's hash changes.
    if let Some(update) = &group.update.in_place {
        material["in_place_command"] = json!(update.command);
    }
    // serde_json's Map is a BTreeMap (no `preserve_order`), so this is canonical.
    let digest = Sha256::digest(material.to_string().as_bytes());
    hex::encode(&digest[..8])
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spec::parse_str;

    fn hash_of(text: &str) -> String {
        let loaded = parse_str(text);
        let spec = loaded
            .spec
            .unwrap_or_else(|| panic!("{:?}", loaded.diagnostics));
        config_hash(&spec.groups[0])
    }

    const YAML: &str = "groups:\n- name: w\n  role: worker\n  allocation: {size: 2}\n  instance:\n    provider: local\n    properties: {a: 1, b: [x, y]}\n  flavor: {engine_labels: {tier: web}}\n";

    #[test]
    fn stable_across_key_order_formatting_and_json() {
        let reordered = "groups:\n- flavor:\n    engine_labels:\n      tier: web\n  instance:\n    properties:\n      b: [x, y]\n      a: 1\n    provider: local\n  allocation: {size: 2}\n  role: worker\n  name: w\n";
        let json = r#"{"groups":[{"name":"w","role":"worker","allocation":{"size":2},"instance":{"provider":"local","properties":{"b":["x","y"],"a":1}},"flavor":{"engine_labels":{"tier":"web"}}}]}"#;
        assert_eq!(hash_of(YAML), hash_of(reordered));
        assert_eq!(hash_of(YAML), hash_of(json));
    }

    #[test]
    fn size_and_update_policy_do_not_change_it() {
        let other = YAML.replace("size: 2", "size: 5") + "  update: {max_in_flight: 3}\n";
        assert_eq!(hash_of(YAML), hash_of(&other));
    }

    #[test]
    fn an_in_place_groups_update_command_does() {
        let in_place = |command: &str| {
            format!(
                "{YAML}  update:\n    strategy: in_place\n    in_place: {{command: \"{command}\", timeout: 5m}}\n"
            )
        };
        let v1 = hash_of(&in_place("apt-get install -y docker.io=20.10.24"));
        assert_ne!(v1, hash_of(YAML));
        assert_ne!(
            v1,
            hash_of(&in_place("apt-get install -y docker.io=26.1.5"))
        );
        assert_eq!(
            v1,
            hash_of(&in_place("apt-get install -y docker.io=20.10.24").replace("5m", "9m"))
        );
    }

    #[test]
    fn labels_properties_boot_script_and_rollout_after_do() {
        let base = hash_of(YAML);
        assert_ne!(base, hash_of(&YAML.replace("tier: web", "tier: api")));
        assert_ne!(base, hash_of(&YAML.replace("a: 1", "a: 2")));
        let forced = YAML.to_string() + "  rollout: {after: \"2026-12-01T00:00:00Z\"}\n";
        assert_ne!(base, hash_of(&forced));
        let script = YAML.replace(
            "flavor: {",
            "flavor: {boot_script: \"#!/bin/sh\\necho {{ link }}\\n\", ",
        );
        assert_ne!(base, hash_of(&script));
    }
}
