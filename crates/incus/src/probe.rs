//! The incus provider's machines, their engines asked now (the provider
//! seam's [`InstanceProvider::ask_engines`](drover_spi::InstanceProvider::ask_engines)).
//! Incus's own instance state comes first: a stopped machine's engine is
//! certainly down, a frozen (paused) one may resume with its raft state and
//! is silent, never gone; a running one's engine is asked through its
//! proxy socket on the Incus host.

use crate::machine::Listed;
use crate::{IncusProvider, provider_error};
use drover_core::model::tags;
use drover_core::verdict::machine::{Power, engine_answer};
use drover_spi::{EngineReport, ProviderError};
use serde::Deserialize;
use std::collections::BTreeMap;

/// What Incus says of a listed machine itself. `Error` is Incus failing
/// to tell the instance's state (a state query that timed out on a loaded
/// or half-hung host): unknown, so its engine is asked, never "stopped".
pub fn power(listed: &Listed) -> Power {
    match listed.status.as_str() {
        "Stopped" => Power::Stopped,
        "Frozen" | "Freezing" => Power::Paused,
        "Running" | "Starting" | "Stopping" | "Thawed" => Power::Running,
        _ => Power::Unknown,
    }
}

/// `GET /1.0/instances/NAME/state`, the part read here.
#[derive(Debug, Deserialize)]
struct State {
    #[serde(default)]
    network: Option<BTreeMap<String, Nic>>,
}

#[derive(Debug, Deserialize)]
struct Nic {
    #[serde(default)]
    addresses: Vec<Address>,
}

#[derive(Debug, Deserialize)]
struct Address {
    family: String,
    address: String,
    scope: String,
}

impl State {
    /// The machine's global IPv4 address on its first NIC (`eth0`), where
    /// its engine advertises.
    fn address(&self) -> Option<String> {
        let nic = self.network.as_ref()?.get("eth0")?;
        nic.addresses
            .iter()
            .find(|a| a.family == "inet" && a.scope == "global")
            .map(|a| a.address.clone())
    }
}

impl IncusProvider {
    /// The address machine `l`'s engine advertises: a pet's logical id,
    /// else what Incus reports on its NIC (a frozen machine keeps it); empty
    /// when neither says.
    async fn address_of(&self, l: &Listed) -> String {
        if let Some(id) = l.tags().get(tags::LOGICAL_ID) {
            return id.clone();
        }
        let path = format!("/1.0/instances/{}/state", l.name);
        let state: Option<State> = self.api.get(&path, &[]).await.ok();
        state.and_then(|s| s.address()).unwrap_or_default()
    }

    /// Every machine carrying `tags`, its engine asked now (all at once).
    pub(crate) async fn engines_now(
        &self,
        tags: &BTreeMap<String, String>,
    ) -> Result<Vec<EngineReport>, ProviderError> {
        let listed = self
            .list(tags)
            .await
            .map_err(|e| provider_error("listing machines", e))?;
        let asked = listed.iter().map(|l| async move {
            let power = power(l);
            let (asked, raft) = match power {
                Power::Running | Power::Unknown => {
                    let (a, r) = drover_engine::probe::ask(&self.endpoint(&l.name)).await;
                    (Some(a), r)
                }
                Power::Stopped | Power::Paused => (None, None),
            };
            EngineReport {
                instance: l.instance(),
                address: self.address_of(l).await,
                answer: engine_answer(power, asked),
                raft,
            }
        });
        Ok(futures_util::future::join_all(asked).await)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn listed(status: &str) -> Listed {
        serde_json::from_value(serde_json::json!({
            "name": "m1", "status": status, "config": {}, "created_at": "2026-01-01T00:00:00Z"
        }))
        .expect("a listing")
    }

    /// Incus's own state decides before the engine: stopped is down, frozen
    /// is paused (silent, never gone), and Incus's `Error` (it could not
    /// tell) is unknown: the engine is asked.
    #[test]
    fn incus_state_says_stopped_paused_or_running() {
        assert_eq!(power(&listed("Stopped")), Power::Stopped);
        assert_eq!(power(&listed("Error")), Power::Unknown);
        assert_eq!(power(&listed("Frozen")), Power::Paused);
        assert_eq!(power(&listed("Running")), Power::Running);
        assert_eq!(power(&listed("Mystery")), Power::Unknown);
    }

    #[test]
    fn the_address_is_the_global_ipv4_of_eth0() {
        let state: State = serde_json::from_value(serde_json::json!({
            "network": {
                "lo": {"addresses": [{"family": "inet", "address": "127.0.0.1", "scope": "local"}]},
                "eth0": {"addresses": [
                    {"family": "inet6", "address": "fe80::1", "scope": "link"},
                    {"family": "inet", "address": "10.203.0.11", "scope": "global"}
                ]}
            }
        }))
        .expect("a state");
        assert_eq!(state.address().as_deref(), Some("10.203.0.11"));
        let none: State = serde_json::from_value(serde_json::json!({"network": null})).unwrap();
        assert_eq!(none.address(), None);
    }
}
