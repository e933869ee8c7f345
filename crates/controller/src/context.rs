//! What a controller is wired to.

use drover_spi::{Cluster, InstanceProvider, Store};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

/// Providers by the name groups use in `instance.provider`.
pub type Providers = BTreeMap<String, Arc<dyn InstanceProvider>>;

/// The controller's dependencies and settings.
#[derive(Clone)]
pub struct Context {
    /// Machine providers by name.
    pub providers: Providers,
    /// The swarm through this controller's own engine.
    pub cluster: Arc<dyn Cluster>,
    /// The store.
    pub store: Arc<dyn Store>,
    /// Link of the instance this controller runs on (from its engine's
    /// `drover.link` label), or `None` off-cluster (CLI, bootstrap).
    pub self_link: Option<String>,
    /// Name recorded in events and as the epoch holder.
    pub identity: String,
    /// Store URL handed to new managers' boot scripts (so their controllers
    /// use the same store).
    pub store_url: Option<String>,
    /// Resync interval: "no event" never means "no change".
    pub resync: Duration,
}
