//! Explicit wiring of concrete backends: the only place that names them.

use crate::bootstrap::ProviderSwarm;
use crate::cli::{LocalArgs, StoreArgs};
use crate::error::MainError;
use drover_controller::Providers;
use drover_local::LocalProvider;
use drover_spi::{InstanceProvider, Store};
use std::sync::Arc;

/// Opens the store named by `--store`.
pub async fn store(args: &StoreArgs) -> Result<Arc<dyn Store>, MainError> {
    drover_store::open(&args.url)
        .await
        .map(Arc::from)
        .map_err(|e| match e {
            drover_spi::StoreError::BadAddress(m) => MainError::BadInput(m),
            other => MainError::Failed(anyhow::anyhow!(
                "cannot open the store {}: {other}",
                args.url
            )),
        })
}

/// The local provider, when `--local-dir` is given.
pub fn local(args: &LocalArgs) -> Result<Option<Arc<LocalProvider>>, MainError> {
    let Some(dir) = &args.local_dir else {
        return Ok(None);
    };
    let mut pool = Vec::new();
    for entry in args.local_pool.split(',').filter(|e| !e.trim().is_empty()) {
        pool.extend(
            drover_local::parse_pool(entry)
                .map_err(|e| MainError::BadInput(format!("--local-pool: {e}")))?,
        );
    }
    // Boot scripts call `drover`: put this very binary first on their PATH.
    let bin_dir = std::env::current_exe()
        .ok()
        .and_then(|p| p.parent().map(std::path::Path::to_path_buf));
    let provider = LocalProvider::new(dir, pool)
        .map_err(|e| MainError::BadInput(format!("--local-dir: {e}")))?
        .with_bin_dir(bin_dir);
    Ok(Some(Arc::new(provider)))
}

/// Providers by name, as groups refer to them.
pub fn providers(local: &Option<Arc<LocalProvider>>) -> Providers {
    let mut out = Providers::new();
    if let Some(l) = local {
        out.insert(
            drover_core::spec::LOCAL_PROVIDER.into(),
            l.clone() as Arc<dyn InstanceProvider>,
        );
    }
    out
}

/// The swarm as seen from off the cluster (the CLI): through any manager
/// machine of the local provider that answers.
pub fn off_cluster_swarm(local: &Option<Arc<LocalProvider>>) -> Arc<ProviderSwarm> {
    Arc::new(ProviderSwarm::new(local.clone()))
}

/// A context for one off-cluster observation (`plan --store`, `gc`): it
/// observes and plans, and never acts (it holds no epoch).
pub async fn observer(
    store: &StoreArgs,
    local: &LocalArgs,
    identity: &str,
) -> Result<drover_controller::Context, MainError> {
    observer_on(self::store(store).await?, local, identity)
}

/// [`observer`] over a store already open (a file store opens once per process).
pub fn observer_on(
    store: Arc<dyn Store>,
    local: &LocalArgs,
    identity: &str,
) -> Result<drover_controller::Context, MainError> {
    let local = self::local(local)?;
    Ok(drover_controller::Context {
        providers: providers(&local),
        cluster: off_cluster_swarm(&local),
        store,
        self_link: None,
        identity: identity.into(),
        store_url: None,
        resync: std::time::Duration::from_secs(1),
    })
}
