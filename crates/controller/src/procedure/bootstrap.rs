//! Creating a swarm's first manager from outside the swarm (`apply` and
//! `bootstrap` when no swarm exists yet). An off-cluster controller plans
//! and journals the first manager like any other member, until the
//! manager's own controller (started by its boot script) takes over.
//!
//! With a store kept in the swarm's raft there is nowhere to commit to
//! before that manager exists: [`first_manager`] then plans it over a
//! scratch store holding a spec of the manager group's first slot only (the
//! member's config is the group's, so the cluster's own controllers count
//! it as current) and hands back the swarm store on its engine, holding the
//! same cluster id.

mod unseen;

use crate::context::Context;
use crate::procedure::commit::provenance;
use crate::run::{Controller, StepReport};
use drover_core::model::{SwarmView, tags};
use drover_core::spec::{Allocation, ClusterSpec, Role};
use drover_spi::{Store, StoreError, SwarmStores};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::mpsc;
use tokio::time::Instant;

/// How long the first manager may take to boot, and how long an
/// off-cluster controller acts before it leaves the rest to the cluster's
/// own controllers.
pub const BOUND: Duration = Duration::from_secs(300);

/// Why no first manager was made.
#[derive(Debug, thiserror::Error)]
pub enum BootstrapError {
    /// The spec declares no manager group with members.
    #[error(
        "a swarm store needs a swarm: declare a manager group so drover can create its first manager"
    )]
    NoManagerGroup,
    /// The scratch store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The provision failed, stopped or did not finish in time.
    #[error("the first manager could not be created: {0}")]
    NotCreated(String),
    /// The manager booted, but no swarm store answered on it in time.
    #[error("the first manager booted but no swarm store answers on it")]
    NoStore,
}

/// How an off-cluster controller's bootstrap ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HandedOver {
    /// The first manager's controller took the store's epoch.
    TakenOver,
    /// The bound passed; the cluster's own controllers go on.
    Bound,
}

/// Acts as the off-cluster controller over `ctx` until a manager's own
/// controller takes over (fencing this one) or [`BOUND`] passes.
pub async fn until_taken_over(ctx: Context) -> HandedOver {
    handed_over(Controller::new(ctx).run(std::future::pending())).await
}

/// How `acting` (a bootstrap controller, ending when deposed) ended.
async fn handed_over(acting: impl std::future::Future<Output = ()>) -> HandedOver {
    match tokio::time::timeout(BOUND, acting).await {
        Ok(()) => HandedOver::TakenOver,
        Err(_) => HandedOver::Bound,
    }
}

/// [`until_taken_over`] for a process that reaches none of the cluster's
/// engines: `ctx`'s swarm is replaced by one seen only through the store
/// (none until an operation on a manager is journaled, then one this
/// process cannot ask), so it makes the first manager, with the boot script
/// that initialises the swarm, and nothing else; that manager's own
/// controller takes the term over through the store.
pub async fn through_the_store(mut ctx: Context) -> HandedOver {
    ctx.cluster = Arc::new(unseen::Unseen::new(ctx.store.clone()));
    handed_over(Controller::new(ctx).run(std::future::pending())).await
}

/// Why [`unbegun`] could not tell.
#[derive(Debug, thiserror::Error)]
pub enum BegunError {
    /// The store could not be read.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// A manager group's machines could not be listed: no proof of absence.
    #[error("cannot list group {group}'s machines to tell whether its swarm began: {error}")]
    Listing {
        /// The manager group.
        group: String,
        /// What its provider said.
        error: drover_spi::ProviderError,
    },
}

/// Whether the swarm of `spec` has not begun, as a process that reaches
/// none of its engines can tell: the store holds no desired state yet
/// (`first`) or an operation on a manager is journaled (a bootstrap cut
/// short resumes it: its machine, made by its link, is made once); no
/// manager's controller ever reported in the store; and no machine of a
/// manager group is listed by `providers` unless a journaled operation is
/// making it. A listing that fails is no proof of absence.
pub async fn unbegun(
    store: &dyn Store,
    first: bool,
    spec: &ClusterSpec,
    providers: &crate::Providers,
) -> Result<bool, BegunError> {
    let beats = store.heartbeats().await?;
    let managers_report = beats
        .iter()
        .any(|b| b.seat == Some(drover_spi::Seat::Manager) || b.engine.is_some());
    if managers_report {
        return Ok(false);
    }
    if store
        .journal()
        .await?
        .iter()
        .any(|op| op.role == Role::Manager)
    {
        return Ok(true);
    }
    if !first {
        return Ok(false);
    }
    let Some(cluster) = store.cluster_id().await? else {
        return Ok(true);
    };
    for group in spec.groups.iter().filter(|g| g.role == Role::Manager) {
        let Some(provider) = providers.get(&group.instance.provider_key()) else {
            continue;
        };
        let tags = std::collections::BTreeMap::from([
            (tags::CLUSTER.to_string(), cluster.clone()),
            (tags::GROUP.to_string(), group.name.clone()),
        ]);
        let listed = provider
            .describe(&tags)
            .await
            .map_err(|error| BegunError::Listing {
                group: group.name.clone(),
                error,
            })?;
        if !listed.is_empty() {
            return Ok(false);
        }
    }
    Ok(true)
}

/// Creates the first manager of `spec` through `ctx` (whose store is an
/// empty scratch store) and returns the swarm store on its engine, found
/// through `stores`, with `cluster_id` recorded in it.
pub async fn first_manager(
    ctx: Context,
    spec: &ClusterSpec,
    cluster_id: &str,
    who: &str,
    stores: &dyn SwarmStores,
) -> Result<Arc<dyn Store>, BootstrapError> {
    // Not a desired state of the cluster, only the plan's input in a
    // scratch store: one slot of a group `apply` validated whole (a lone
    // manager slot would not pass as a group of its own).
    let seed = first_slot(spec)?;
    let (scratch, cluster) = (ctx.store.clone(), ctx.cluster.clone());
    scratch.init_cluster(cluster_id).await?;
    let made = provenance(who, "bootstrap of the first manager");
    scratch.commit(0, &seed, made, false).await?;
    let (tx, mut reports) = mpsc::unbounded_channel();
    let controller = Controller::new(ctx).with_step_reports(tx);
    // Until the provision (boot script included) has finished.
    let provisioned = async {
        while let Some(StepReport { kind, failure, .. }) = reports.recv().await {
            if kind == "provision" {
                return failure.map(|(_, why)| why);
            }
        }
        Some("the controller stopped".to_string())
    };
    let failed = tokio::select! {
        () = controller.run(std::future::pending()) => Some("the controller stopped".to_string()),
        f = provisioned => f,
        () = tokio::time::sleep(BOUND) => Some(format!("not booted within {}s", BOUND.as_secs())),
    };
    if let Some(why) = failed {
        return Err(BootstrapError::NotCreated(why));
    }
    let started = Instant::now();
    loop {
        if matches!(cluster.observe().await, SwarmView::Ok(_))
            && let Some(store) = stores.on_a_manager(None).await
        {
            store.init_cluster(cluster_id).await?;
            return Ok(store);
        }
        if started.elapsed() > BOUND {
            return Err(BootstrapError::NoStore);
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// `spec` with only its manager group, at its first slot.
fn first_slot(spec: &ClusterSpec) -> Result<ClusterSpec, BootstrapError> {
    let mut first = spec
        .groups
        .iter()
        .find(|g| g.role == Role::Manager && g.allocation.size() > 0)
        .cloned()
        .ok_or(BootstrapError::NoManagerGroup)?;
    first.allocation = match &first.allocation {
        Allocation::Size { zones, .. } => Allocation::Size {
            size: 1,
            zones: zones.iter().take(1).cloned().collect(),
        },
        Allocation::LogicalIds(slots) => Allocation::LogicalIds(slots[..1].to_vec()),
    };
    Ok(ClusterSpec {
        groups: vec![first],
        ..spec.clone()
    })
}
