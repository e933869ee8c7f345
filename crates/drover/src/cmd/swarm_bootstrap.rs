//! `apply --store swarm…` when no swarm exists yet: the store lives in the
//! swarm's raft, so there is nowhere to commit to before the first manager
//! exists. drover then creates that manager first
//! ([`procedure::bootstrap::first_manager`]) and commits to the swarm store
//! on its engine. The manager's boot script starts its controller with
//! `DROVER_STORE=swarm` (its own engine), which takes over once `apply`
//! commits the full spec there.

use crate::cli::StoreArgs;
use crate::cmd::progress::Progress;
use crate::error::MainError;
use crate::wiring::{self, Machines};
use drover_controller::procedure::bootstrap::{BOUND, BootstrapError};
use drover_controller::procedure::follow::follow;
use drover_controller::procedure::{self, acting};
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
    // provider given for every group: a store that does not exist yet has
    // no controller to serve the others): a refused apply leaves no empty
    // store behind.
    let here = wiring::provider_keys(local);
    let nobody = acting::Store {
        status: None,
        converged_once: false,
    };
    let unserved = acting::unserved(None, spec, &here, nobody, 0);
    let open = if !dry_run && local.any() && unserved.is_empty() {
        wiring::Open::OrCreate
    } else {
        wiring::Open::OrEmpty
    };
    let e = match wiring::store_seen_from(args, open, local).await {
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
    // No controller can exist yet to make the other groups' machines.
    if let Some(why) = crate::cmd::apply::refusal(&unserved) {
        return Err(MainError::BadInput(why));
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
    let scratch = wiring::scratch_store();
    let ctx = wiring::off_cluster(scratch.clone(), local, format!("bootstrap:{who}"), "swarm");
    let stores = wiring::swarm_stores(local).ok_or_else(|| {
        MainError::BadInput(
            "the first manager is created through a provider: give --local-dir or --incus-engines"
                .into(),
        )
    })?;
    println!(
        "no swarm yet for the swarm store: creating the first manager (at most {} to boot, then {} for its store to answer)",
        humantime::format_duration(BOUND),
        humantime::format_duration(BOUND)
    );
    // The status the bootstrap controller publishes in the scratch store
    // (its revision 1: the first slot) is shown until the manager is made.
    let providers = spec
        .groups
        .iter()
        .map(|g| g.instance.provider_key())
        .collect();
    let mut progress = Progress::new(1, &providers);
    let shown = async {
        let _ = follow(scratch.as_ref(), 1, BOUND * 2, |d| progress.update(d)).await;
        std::future::pending::<()>().await
    };
    let made = tokio::select! {
        made = procedure::bootstrap::first_manager(ctx, spec, cluster_id, who, stores.as_ref()) => made,
        () = shown => unreachable!("the progress is shown until the manager is made"),
    };
    made.map_err(|e| match e {
        BootstrapError::NoManagerGroup => MainError::BadInput(e.to_string()),
        e => MainError::Failed(e.into()),
    })
}
