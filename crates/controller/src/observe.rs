//! One observation: the store, the swarm and every group's provider,
//! read concurrently.

use crate::context::Context;
use drover_core::hash::config_hash;
use drover_core::journal::Operation;
use drover_core::model::{Described, Observed, tags};
use drover_core::plan::{Desired, DesiredGroup};
use drover_core::spec::ClusterSpec;
use drover_spi::{Controls, Revision, StoreError};
use futures_util::future::join_all;
use std::collections::BTreeMap;

/// What the store holds for planning.
pub(crate) struct Stored {
    pub(crate) revision: Revision,
    pub(crate) desired: Desired,
    pub(crate) journal: Vec<Operation>,
}

/// The planner's view of a spec: each group with its hash and pause flag.
fn desired(
    cluster_id: String,
    spec: &ClusterSpec,
    controls: &Controls,
    is_rollback: bool,
) -> Desired {
    let groups = spec
        .groups
        .iter()
        .map(|g| DesiredGroup {
            spec: g.clone(),
            hash: config_hash(g),
            paused: controls.paused.contains(&g.name),
            is_rollback,
        })
        .collect();
    Desired {
        cluster_id,
        groups,
        orphan_grace: spec.gc.orphan_grace,
        held: controls.held.clone(),
        replace: controls.replace.clone(),
        skip_drain: controls.skip_drain.clone(),
    }
}

/// Reads the store. `None` when nothing was committed yet.
pub(crate) async fn stored(ctx: &Context) -> Result<Option<Stored>, StoreError> {
    let (id, rev, controls, journal) = futures_util::try_join!(
        ctx.store.cluster_id(),
        ctx.store.desired(),
        ctx.store.controls(),
        ctx.store.journal()
    )?;
    let (Some(cluster_id), Some(revision)) = (id, rev) else {
        return Ok(None);
    };
    let desired = desired(cluster_id, &revision.spec, &controls, revision.is_rollback);
    Ok(Some(Stored {
        revision,
        desired,
        journal,
    }))
}

/// Observes the swarm and describes every group by its ownership tags.
/// A provider failure is recorded as [`Described::Failed`], never as "none".
pub(crate) async fn world(ctx: &Context, desired: &Desired, journal: &[Operation]) -> Observed {
    let describes = desired.groups.iter().map(|g| async move {
        let name = g.spec.name.clone();
        let Some(provider) = ctx.providers.get(&g.spec.instance.provider) else {
            let known: Vec<&String> = ctx.providers.keys().collect();
            return (
                name,
                Described::Failed(format!(
                    "no provider `{}` is configured here (known: {known:?})",
                    g.spec.instance.provider
                )),
            );
        };
        let filter = BTreeMap::from([
            (tags::CLUSTER.to_string(), desired.cluster_id.clone()),
            (tags::GROUP.to_string(), name.clone()),
        ]);
        let described = match provider.describe(&filter).await {
            Ok(list) => Described::Ok(list),
            Err(e) => Described::Failed(e.to_string()),
        };
        (name, described)
    });
    let (swarm, described, orphans) = tokio::join!(
        ctx.cluster.observe(),
        join_all(describes),
        undeclared(ctx, desired, journal)
    );
    let mut instances: BTreeMap<String, Described> = described.into_iter().collect();
    for (group, d) in orphans {
        instances.entry(group).or_insert(d);
    }
    Observed {
        instances,
        swarm,
        self_link: ctx.self_link.clone(),
    }
}

/// Machines carrying this cluster's id for groups that are not declared
/// (orphans), from one describe by cluster id per provider. Groups named by
/// journaled operations are always listed, so a destroyed orphan reads as
/// gone; if any provider's describe fails, every such group is `Failed`:
/// the missing provider might hold the very machine.
async fn undeclared(
    ctx: &Context,
    desired: &Desired,
    journal: &[Operation],
) -> BTreeMap<String, Described> {
    let filter = BTreeMap::from([(tags::CLUSTER.to_string(), desired.cluster_id.clone())]);
    let declared = |g: &str| desired.groups.iter().any(|d| d.spec.name == g);
    let results = join_all(ctx.providers.values().map(|p| p.describe(&filter))).await;
    let mut found: BTreeMap<String, Vec<_>> = journal
        .iter()
        .filter(|o| !declared(&o.group))
        .map(|o| (o.group.clone(), Vec::new()))
        .collect();
    let mut failure = None;
    for r in results {
        match r {
            Ok(list) => {
                for i in list {
                    if let Some(g) = i.tag(tags::GROUP).filter(|g| !declared(g)) {
                        found.entry(g.to_string()).or_default().push(i);
                    }
                }
            }
            Err(e) => failure = Some(e.to_string()),
        }
    }
    found
        .into_iter()
        .map(|(g, list)| {
            let d = match &failure {
                Some(e) => Described::Failed(e.clone()),
                None => Described::Ok(list),
            };
            (g, d)
        })
        .collect()
}

/// One observation against `spec`, as the planner would see it: the desired
/// state (with the store's controls), the world, and the journal. Nothing is
/// written (off-cluster checks: `drover plan --store`, `drover destroy`).
pub async fn snapshot(
    ctx: &Context,
    spec: &ClusterSpec,
) -> Result<(Desired, Observed, Vec<Operation>), StoreError> {
    let (id, controls, journal) = futures_util::try_join!(
        ctx.store.cluster_id(),
        ctx.store.controls(),
        ctx.store.journal()
    )?;
    let cluster_id = id.unwrap_or_else(|| "(new cluster)".into());
    let desired = desired(cluster_id, spec, &controls, false);
    let observed = world(ctx, &desired, &journal).await;
    Ok((desired, observed, journal))
}

/// What the planner would do now if `spec` were committed: one observation,
/// one planning pass, nothing written or acted on (`drover plan --store`).
pub async fn preview(
    ctx: &Context,
    spec: &ClusterSpec,
) -> Result<drover_core::plan::Plan, StoreError> {
    let (desired, observed, journal) = snapshot(ctx, spec).await?;
    let memory = drover_core::plan::Memory::default();
    Ok(drover_core::plan::plan(drover_core::plan::PlanInput {
        desired: &desired,
        observed: &observed,
        journal: &journal,
        memory: &memory,
        now: 0,
        nonce: 0,
    }))
}
