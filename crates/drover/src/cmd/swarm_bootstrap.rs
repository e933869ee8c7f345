//! `apply --store swarm…` when no swarm exists yet: the store lives in the
//! swarm's raft, so there is nowhere to commit to before the first manager
//! exists. drover then creates that manager first, planned and journaled in
//! an in-memory store (a spec of the manager group's first slot only; the
//! member's config is the group's, so the cluster's own controllers count
//! it as current), and hands back the swarm store on its engine, holding the
//! same cluster id. The manager's boot script starts its controller with
//! `DROVER_STORE=swarm` (its own engine), which takes over once `apply`
//! commits the full spec there.

use crate::cli::StoreArgs;
use crate::error::MainError;
use crate::wiring;
use drover_controller::{Context, Controller};
use drover_core::spec::{Allocation, ClusterSpec, Role};
use drover_engine::PeerEndpoints;
use drover_local::LocalProvider;
use drover_spi::{Cluster, Provenance, Store};
use drover_store::MemStore;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Opens the store `apply` commits to. With a swarm store and no swarm
/// yet, creates the first manager first (`.1` is then true); `None` for a
/// dry run that would have had to (nothing is created).
pub async fn open_store(
    args: &StoreArgs,
    local: &Option<Arc<LocalProvider>>,
    spec: &ClusterSpec,
    dry_run: bool,
    who: &str,
) -> Result<Option<(Arc<dyn Store>, bool)>, MainError> {
    // Created only when this apply can go on to commit (not a dry run, a
    // provider given): a refused apply leaves no empty store behind.
    let open = if !dry_run && local.is_some() {
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
    let Some(provider) = local.as_ref().filter(|_| absent) else {
        return Err(e);
    };
    if dry_run {
        println!(
            "(dry run: nothing created or committed; no swarm exists yet for the swarm store: \
             apply would create its first manager, then commit the file there)"
        );
        return Ok(None);
    }
    let id = crate::cmd::commit::new_cluster_id();
    println!("new cluster {id}");
    Ok(Some((first_manager(spec, provider, &id, who).await?, true)))
}

/// How long the first manager may take to boot.
const BOUND: Duration = Duration::from_secs(300);

/// Creates the first manager of `spec` with `local`, returns the swarm
/// store on its engine with `cluster_id` recorded.
async fn first_manager(
    spec: &ClusterSpec,
    provider: &Arc<LocalProvider>,
    cluster_id: &str,
    who: &str,
) -> Result<Arc<dyn Store>, MainError> {
    let mut first = spec
        .groups
        .iter()
        .find(|g| g.role == Role::Manager && g.allocation.size() > 0)
        .cloned()
        .ok_or_else(|| {
            MainError::BadInput(
                "a swarm store needs a swarm: declare a manager group so drover can create \
                 its first manager"
                    .into(),
            )
        })?;
    first.allocation = match &first.allocation {
        Allocation::Size { zones, .. } => Allocation::Size {
            size: 1,
            zones: zones.iter().take(1).cloned().collect(),
        },
        Allocation::LogicalIds(slots) => Allocation::LogicalIds(slots[..1].to_vec()),
    };
    let seed = ClusterSpec {
        groups: vec![first],
        ..spec.clone()
    };
    let mem = Arc::new(MemStore::default());
    let failed = |e: drover_spi::StoreError| MainError::Failed(e.into());
    mem.init_cluster(cluster_id).await.map_err(failed)?;
    let provenance = Provenance {
        who: who.into(),
        at_ms: drover_controller::wall_ms(),
        message: "bootstrap of the first manager".into(),
    };
    mem.commit(0, &seed, provenance, false)
        .await
        .map_err(failed)?;
    let local = Some(provider.clone());
    let cluster = wiring::off_cluster_swarm(&local);
    let ctx = Context {
        providers: wiring::providers(&local),
        cluster: cluster.clone(),
        store: mem.clone(),
        self_link: None,
        identity: format!("bootstrap:{who}"),
        // The manager's controller uses the store on its own engine.
        store_url: Some("swarm".into()),
        resync: Duration::from_secs(1),
    };
    println!("no swarm yet for the swarm store: creating the first manager");
    let booted = async {
        // Until the provision (boot script included) has finished.
        loop {
            let events = mem.events(0).await.unwrap_or_default();
            if let Some(e) = events.iter().find(|e| {
                e.action == "step" && e.reason.starts_with("provision") && e.outcome != "started"
            }) {
                return e.outcome.clone();
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    };
    let outcome = tokio::select! {
        () = Controller::new(ctx).run(std::future::pending()) => "controller stopped".to_string(),
        o = booted => o,
        () = tokio::time::sleep(BOUND) => format!("not booted within {}s", BOUND.as_secs()),
    };
    if outcome != "ok" {
        return Err(MainError::Failed(anyhow::anyhow!(
            "the first manager could not be created: {outcome}"
        )));
    }
    let started = Instant::now();
    loop {
        if matches!(
            cluster.observe().await,
            drover_core::model::SwarmView::Ok(_)
        ) && let Some(store) = store_on_a_manager(provider).await
        {
            store.init_cluster(cluster_id).await.map_err(failed)?;
            return Ok(store);
        }
        if started.elapsed() > BOUND {
            return Err(MainError::Failed(anyhow::anyhow!(
                "the first manager booted but no swarm store answers on it"
            )));
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// The swarm store on the first machine whose engine is a manager.
async fn store_on_a_manager(local: &Arc<LocalProvider>) -> Option<Arc<dyn Store>> {
    for endpoint in local.peer_endpoints() {
        if let Ok(s) = drover_store::open(&format!("swarm:{endpoint}")).await {
            return Some(Arc::from(s));
        }
    }
    None
}
