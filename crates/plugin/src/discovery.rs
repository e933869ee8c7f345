//! Where plugins are found: InfraKit's local discovery. A plugin is a unix
//! socket in the plugins directory, named for the plugin
//! (`INFRAKIT_PLUGINS_DIR`, else `$INFRAKIT_HOME/plugins`, else
//! `~/.infrakit/plugins`).

use drover_core::spec::PluginAddress;
use std::path::{Path, PathBuf};

/// The plugins directory an explicit directory overrides.
pub const PLUGINS_DIR_ENV: &str = "INFRAKIT_PLUGINS_DIR";
/// InfraKit's home, whose `plugins/` is the directory otherwise.
pub const HOME_ENV: &str = "INFRAKIT_HOME";

/// The plugins directory from the environment `var` reads (the process's
/// in production; a map in tests): `None` when not even `HOME` is set.
pub fn plugins_dir(var: impl Fn(&str) -> Option<String>) -> Option<PathBuf> {
    let set = |k: &str| var(k).filter(|v| !v.is_empty());
    if let Some(dir) = set(PLUGINS_DIR_ENV) {
        return Some(dir.into());
    }
    if let Some(home) = set(HOME_ENV) {
        return Some(Path::new(&home).join("plugins"));
    }
    set("HOME").map(|h| Path::new(&h).join(".infrakit").join("plugins"))
}

/// The socket of the plugin `address` names, in `dir` (its type is not
/// part of the path: one socket serves every typed object).
pub fn socket(dir: &Path, address: &PluginAddress) -> PathBuf {
    dir.join(&address.name)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    fn env(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let m: BTreeMap<String, String> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        move |k| m.get(k).cloned()
    }

    #[test]
    fn the_plugins_dir_follows_infrakit_s_order() {
        let all = [
            (PLUGINS_DIR_ENV, "/run/p"),
            (HOME_ENV, "/ik"),
            ("HOME", "/home/op"),
        ];
        assert_eq!(plugins_dir(env(&all)), Some("/run/p".into()));
        assert_eq!(plugins_dir(env(&all[1..])), Some("/ik/plugins".into()));
        assert_eq!(
            plugins_dir(env(&all[2..])),
            Some("/home/op/.infrakit/plugins".into())
        );
        assert_eq!(plugins_dir(env(&[(PLUGINS_DIR_ENV, "")])), None);
    }

    #[test]
    fn a_typed_object_shares_its_plugin_s_socket() {
        let a = PluginAddress::parse("tf/large").unwrap();
        assert_eq!(socket(Path::new("/run/p"), &a), Path::new("/run/p/tf"));
    }
}
