//! Explicit wiring of concrete backends: the only place that names them.

use crate::bootstrap::ProviderSwarm;
use crate::cli::{LocalArgs, StoreArgs};
use crate::error::MainError;
use drover_controller::Providers;
use drover_local::LocalProvider;
use drover_spi::{InstanceProvider, Store, StoreError};
use std::sync::Arc;

/// Whether a command may create the store it opens.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Open {
    /// The store must exist (every command that reads or changes a
    /// cluster): a missing one is bad input, and none is created.
    Existing,
    /// A missing file store is created (commands that start a cluster).
    OrCreate,
    /// A missing file store reads as an empty one, and none is created
    /// (dry runs, and commands that will refuse before they write).
    OrEmpty,
}

/// Opens the existing store named by `--store`.
pub async fn store(args: &StoreArgs) -> Result<Arc<dyn Store>, MainError> {
    store_with(args, Open::Existing).await
}

/// Opens the store named by `--store`, creating it or not as `open` says.
pub async fn store_with(args: &StoreArgs, open: Open) -> Result<Arc<dyn Store>, MainError> {
    let options = drover_store::OpenOptions {
        create: open == Open::OrCreate,
        timeout: args.store_timeout,
    };
    match drover_store::open_with(&args.url, options).await {
        Ok(store) => Ok(Arc::from(store)),
        Err(StoreError::NotFound(_)) if open == Open::OrEmpty => {
            Ok(Arc::new(drover_store::MemStore::default()))
        }
        Err(e) => Err(opening_failed(&args.url, e)),
    }
}

/// The error of a store that could not be opened, as the user reads it:
/// a wrong or missing address is bad input (exit 2); an unreachable store
/// is one sentence naming it and what to check (exit 1).
fn opening_failed(url: &str, e: StoreError) -> MainError {
    match e {
        StoreError::BadAddress(m) | StoreError::NotFound(m) => MainError::BadInput(m),
        StoreError::Unavailable(m) => MainError::Failed(anyhow::anyhow!(m)),
        other => MainError::Failed(anyhow::anyhow!("cannot open the store {url}: {other}")),
    }
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
