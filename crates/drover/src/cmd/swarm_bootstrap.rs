//! `apply --store swarm…` when no swarm exists yet: the store lives in the
//! swarm's raft, so there is nowhere to commit to before the first manager
//! exists. drover then creates that manager first
//! ([`procedure::bootstrap::first_manager`]) and commits to the swarm store
//! on its engine. The manager's boot script starts its controller with
//! `DROVER_STORE=swarm` (its own engine), which takes over once `apply`
//! commits the full spec there.

use crate::cli::StoreArgs;
use crate::error::MainError;
use crate::wiring::{self, Machines};
use drover_controller::procedure::{self, bootstrap::BootstrapError};
use drover_core::spec::ClusterSpec;
use drover_spi::{Cluster, Store};
use std::sync::Arc;

/// Opens the store `apply` commits to. With a swarm store and no swarm
/// yet, creates the first manager first (`.1` is then true); `None` for a
/// dry run that would have had to (nothing is created).
pub async fn open_store(
    args: &StoreArgs,
    local: &Machines,
    spec: &ClusterSpec,
    dry_run: bool,
    who: &str,
) -> Result<Option<(Arc<dyn Store>, bool)>, MainError> {
    // Created only when this apply can go on to commit (not a dry run, a
    // provider given): a refused apply leaves no empty store behind.
    let open = if !dry_run && local.any() {
        wiring::Open::OrCreate
    } else {
        wiring::Open::OrEmpty
    };
    let e = match wiring::store_with(args, open).await {
        Ok(store) => return Ok(Some((store, false))),
        Err(e) if args.url.starts_with("swarm") => e,
        Err(e) => return Err(e),
    };
    let absent = matches!(
        wiring::off_cluster_swarm(local).observe().await,
        drover_core::model::SwarmView::Absent
    );
    if !absent || !local.any() {
        return Err(e);
    }
    if dry_run {
        println!(
            "(dry run: nothing created or committed; no swarm exists yet for the swarm store: \
             apply would create its first manager, then commit the file there)"
        );
        return Ok(None);
    }
    let id = crate::cmd::commit::new_cluster_id();
    println!("new cluster {id}");
    Ok(Some((first_manager(spec, local, &id, who).await?, true)))
}

/// Creates the first manager of `spec` with `local` and returns the swarm
/// store on its engine with `cluster_id` recorded
/// ([`procedure::bootstrap::first_manager`]).
async fn first_manager(
    spec: &ClusterSpec,
    local: &Machines,
    cluster_id: &str,
    who: &str,
) -> Result<Arc<dyn Store>, MainError> {
    // The manager's controller uses the store on its own engine.
    let ctx = wiring::off_cluster(
        wiring::scratch_store(),
        local,
        format!("bootstrap:{who}"),
        "swarm",
    );
    let stores = wiring::swarm_stores(local).ok_or_else(|| {
        MainError::BadInput(
            "the first manager is created through a provider: give --local-dir or --incus-engines"
                .into(),
        )
    })?;
    println!("no swarm yet for the swarm store: creating the first manager");
    procedure::bootstrap::first_manager(ctx, spec, cluster_id, who, stores.as_ref())
        .await
        .map_err(|e| match e {
            BootstrapError::NoManagerGroup => MainError::BadInput(e.to_string()),
            e => MainError::Failed(e.into()),
        })
}
