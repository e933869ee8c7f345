//! The swarm's services, as far as a roll's service budgets read them.

use std::collections::BTreeMap;

/// One swarm service.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Service {
    /// Service id.
    pub id: String,
    /// Service name (what messages show).
    pub name: String,
    /// Desired replicas of a replicated service; `None` for a global one
    /// (its tasks go with their node, and come back with its successor).
    pub replicas: Option<u32>,
    /// Its budget labels ([`crate::budget`]), as written.
    pub labels: BTreeMap<String, String>,
    /// Running tasks (desired and actual state running) per node id.
    pub running: BTreeMap<String, u32>,
}

impl Service {
    /// Running tasks in all.
    pub fn running_total(&self) -> u32 {
        self.running.values().sum()
    }

    /// Running tasks on node `id`.
    pub fn running_on(&self, id: &str) -> u32 {
        self.running.get(id).copied().unwrap_or(0)
    }
}

/// The services as seen through a manager.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Services {
    /// Every service and its running tasks.
    Known(Vec<Service>),
    /// Could not ask: no node running tasks may be disrupted voluntarily.
    Unknown(String),
}

impl Default for Services {
    /// A swarm without services.
    fn default() -> Services {
        Services::Known(Vec::new())
    }
}
