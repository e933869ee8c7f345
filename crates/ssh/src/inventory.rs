//! Which hosts the provider asks: those the cluster's groups declare.
//!
//! A describe is given tags, not the groups' properties, so the provider
//! is given where the declarations are: the cluster's store
//! ([`StoreInventory`], wired by the binary). It asks the hosts of the
//! desired revision's ssh groups, and those only earlier revisions name: a
//! host taken out of the inventory while it was enrolled is still found,
//! so its member is retired and the host returned to the pool rather than
//! forgotten in the swarm. Such a host that does not answer is not waited
//! for: taking it out of the inventory was the operator's word.

use crate::config::Login;
use async_trait::async_trait;
use drover_core::spec::ClusterSpec;
use drover_core::spec::ssh::{Cleanup, SshProperties};
use drover_spi::Store;
use std::collections::BTreeSet;
use std::sync::Arc;

/// The ssh groups' properties a cluster's revisions declare.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Declared {
    /// The desired revision's.
    pub current: Vec<SshProperties>,
    /// Earlier revisions', newest first.
    pub earlier: Vec<SshProperties>,
}

/// One host to ask, with what its group says of it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    /// How to log in to it.
    pub login: Login,
    /// Its engine's socket.
    pub docker_socket: String,
    /// What its release cleans.
    pub cleanup: Cleanup,
    /// True when the desired revision declares it.
    pub current: bool,
}

impl Target {
    /// The host's name ([`SshHost::name`](drover_core::spec::ssh::SshHost::name)).
    pub fn name(&self) -> String {
        self.login.host.name()
    }

    /// The hosts of `props`, each with its group's settings.
    pub fn of(props: &SshProperties, current: bool) -> Vec<Target> {
        props
            .hosts
            .iter()
            .map(|h| Target {
                login: Login {
                    host: h.clone(),
                    identity: props.identity.clone(),
                    known_hosts: props.known_hosts.clone(),
                },
                docker_socket: props.docker_socket.clone(),
                cleanup: props.cleanup.clone(),
                current,
            })
            .collect()
    }
}

impl Declared {
    /// What `current` (the desired revision) and `earlier` (newest first)
    /// declare for the ssh provider.
    pub fn from_specs<'a>(
        current: Option<&ClusterSpec>,
        earlier: impl IntoIterator<Item = &'a ClusterSpec>,
    ) -> Declared {
        Declared {
            current: current.map(ssh_groups).unwrap_or_default(),
            earlier: earlier.into_iter().flat_map(ssh_groups).collect(),
        }
    }

    /// Every host to ask, once each (by address and port): as the newest
    /// declaration that names it says.
    pub fn targets(&self) -> Vec<Target> {
        let mut seen = BTreeSet::new();
        let current = self.current.iter().map(|p| (p, true));
        let earlier = self.earlier.iter().map(|p| (p, false));
        current
            .chain(earlier)
            .flat_map(|(p, now)| Target::of(p, now))
            .filter(|t| seen.insert((t.login.host.host.clone(), t.login.host.port)))
            .collect()
    }
}

fn ssh_groups(spec: &ClusterSpec) -> Vec<SshProperties> {
    spec.groups
        .iter()
        .filter(|g| g.instance.provider == drover_core::spec::SSH_PROVIDER)
        .filter_map(|g| SshProperties::parse(&g.instance.properties).ok())
        .collect()
}

/// Where the provider learns the declared inventories.
#[async_trait]
pub trait Inventory: Send + Sync {
    /// What the cluster declares now; an error when it cannot be read
    /// (then nothing is listed: an unread inventory is not an empty one).
    async fn declared(&self) -> Result<Declared, String>;
}

/// A fixed declaration (tests, and a process that serves one revision).
#[async_trait]
impl Inventory for Declared {
    async fn declared(&self) -> Result<Declared, String> {
        Ok(self.clone())
    }
}

/// The declarations in a cluster's store: its desired revision and its
/// history, read again only when the desired revision changed.
pub struct StoreInventory {
    store: Arc<dyn Store>,
    read: tokio::sync::Mutex<Option<(u64, Declared)>>,
}

impl StoreInventory {
    /// The declarations of the cluster in `store`.
    pub fn new(store: Arc<dyn Store>) -> StoreInventory {
        StoreInventory {
            store,
            read: tokio::sync::Mutex::new(None),
        }
    }
}

#[async_trait]
impl Inventory for StoreInventory {
    async fn declared(&self) -> Result<Declared, String> {
        let unread = |e: drover_spi::StoreError| {
            format!("the cluster's inventory cannot be read from the store: {e}")
        };
        let Some(desired) = self.store.desired().await.map_err(unread)? else {
            return Ok(Declared::default());
        };
        let mut read = self.read.lock().await;
        if let Some((rev, declared)) = read.as_ref()
            && *rev == desired.rev
        {
            return Ok(declared.clone());
        }
        let history = self.store.history().await.map_err(unread)?;
        let earlier = history.iter().rev().filter(|r| r.rev != desired.rev);
        let declared = Declared::from_specs(Some(&desired.spec), earlier.map(|r| &r.spec));
        *read = Some((desired.rev, declared.clone()));
        Ok(declared)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn props(hosts: serde_json::Value, known: &str) -> SshProperties {
        SshProperties::parse(
            &json!({"hosts": hosts, "identity_agent": "SSH_AUTH_SOCK", "known_hosts": known}),
        )
        .unwrap()
    }

    #[test]
    fn every_host_is_asked_once_as_its_newest_declaration_says() {
        let d = Declared {
            current: vec![props(json!(["10.0.1.11", "10.0.1.12"]), "/new")],
            earlier: vec![
                props(json!(["10.0.1.12", "10.0.1.13"]), "/old"),
                props(json!([{"host": "10.0.1.11", "port": 2222}]), "/older"),
            ],
        };
        let t = d.targets();
        let seen: Vec<(String, bool, &str)> = t
            .iter()
            .map(|t| (t.name(), t.current, t.login.known_hosts.as_str()))
            .collect();
        assert_eq!(
            seen,
            [
                ("10.0.1.11".to_string(), true, "/new"),
                ("10.0.1.12".to_string(), true, "/new"),
                ("10.0.1.13".to_string(), false, "/old"),
                ("10.0.1.11:2222".to_string(), false, "/older"),
            ]
        );
    }
}
