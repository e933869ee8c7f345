//! Turning a planned side effect into provider and swarm calls.

use crate::context::Context;
use drover_core::model::tags;
use drover_core::plan::{self, Action, Desired};
use drover_core::spec::Role;
use drover_core::template::BootContext;
use drover_spi::{ProvisionRequest, Secret};
use std::collections::BTreeMap;

/// Runs one side effect to its end (`op_group`: the group of the action's
/// journaled operation). The error is a sentence for the event log.
pub(crate) async fn side_effect(
    ctx: &Context,
    desired: &Desired,
    op_group: Option<&str>,
    action: &Action,
) -> Result<(), String> {
    let group_provider = |group: &str| {
        let g = desired
            .groups
            .iter()
            .find(|g| g.spec.name == group)
            .ok_or(format!("group {group} is not declared"))?;
        ctx.providers
            .get(&g.spec.instance.provider)
            .cloned()
            .ok_or(format!(
                "no provider `{}` configured",
                g.spec.instance.provider
            ))
    };
    match action {
        Action::Provision { group, .. } => {
            let req = provision_request(ctx, desired, action).await?;
            group_provider(group)?
                .provision(req)
                .await
                .map(|_| ())
                .map_err(|e| e.to_string())
        }
        Action::Destroy { instance, .. } => {
            let group = op_group.ok_or("the operation is not in the journal")?;
            let provider = match group_provider(group) {
                Ok(p) => p,
                Err(_) => orphan_provider(ctx, desired, group, instance).await?,
            };
            provider.destroy(instance).await.map_err(|e| e.to_string())
        }
        Action::Drain { node, .. } => ctx.cluster.drain(node).await.map_err(|e| e.to_string()),
        Action::Demote { node, .. } => ctx.cluster.demote(node).await.map_err(|e| e.to_string()),
        Action::DemoteSelfAndLeave { node, .. } => ctx
            .cluster
            .demote_self_and_leave(node)
            .await
            .map_err(|e| e.to_string()),
        Action::RemoveNode { node, force, .. } => ctx
            .cluster
            .remove_node(node, *force)
            .await
            .map_err(|e| e.to_string()),
        Action::Begin { .. }
        | Action::MarkDone { .. }
        | Action::Complete { .. }
        | Action::Rollback { .. } => Ok(()),
    }
}

/// The provider holding `instance` of undeclared `group` (an orphan): the
/// one whose describe by this cluster's id and that group lists it, asked
/// again now, so ownership is checked once more right before the destroy.
async fn orphan_provider(
    ctx: &Context,
    desired: &Desired,
    group: &str,
    instance: &str,
) -> Result<std::sync::Arc<dyn drover_spi::InstanceProvider>, String> {
    let filter = BTreeMap::from([
        (tags::CLUSTER.to_string(), desired.cluster_id.clone()),
        (tags::GROUP.to_string(), group.to_string()),
    ]);
    for provider in ctx.providers.values() {
        let list = provider
            .describe(&filter)
            .await
            .map_err(|e| e.to_string())?;
        if list.iter().any(|i| i.id == instance) {
            return Ok(provider.clone());
        }
    }
    Err(format!(
        "no provider lists {instance} with this cluster's id and group {group}"
    ))
}

/// Everything the provider needs for one new machine. Join material is
/// fetched now, per attempt, so a token rotation mid-rollout cannot break it.
async fn provision_request(
    ctx: &Context,
    desired: &Desired,
    action: &Action,
) -> Result<ProvisionRequest, String> {
    let Action::Provision {
        op,
        group,
        role,
        logical_id,
        ..
    } = action
    else {
        return Err("not a provision".into());
    };
    let g = desired
        .groups
        .iter()
        .find(|g| g.spec.name == *group)
        .ok_or(format!("group {group} is not declared"))?;
    let mut boot_env: Vec<(String, Secret)> = Vec::new();
    let (init, join_addr) = if *role == Role::Plain {
        (false, String::new())
    } else {
        match ctx
            .cluster
            .join_material(*role)
            .await
            .map_err(|e| e.to_string())?
        {
            Some(m) => {
                boot_env.push(("DROVER_JOIN_TOKEN".into(), m.token));
                (false, m.addr)
            }
            None if *role == Role::Manager => (true, String::new()),
            None => return Err("no swarm exists yet for a worker to join".into()),
        }
    };
    if let Some(url) = &ctx.store_url {
        // May carry credentials: environment only, like the token.
        boot_env.push(("DROVER_STORE".into(), Secret::new(url.clone())));
    }
    let tags = plan::instance_tags(&desired.cluster_id, action);
    let mut engine_labels = g.spec.flavor.engine_labels.clone();
    for key in [tags::LINK, tags::CLUSTER, tags::GROUP] {
        if let Some(v) = tags.get(key) {
            engine_labels.insert(key.to_string(), v.clone());
        }
    }
    let boot_context = BootContext {
        role: role.as_str().into(),
        cluster_id: desired.cluster_id.clone(),
        group: group.clone(),
        link: op.clone(),
        logical_id: logical_id.clone().unwrap_or_default(),
        address: String::new(),
        join_addr,
        init,
        engine_labels: engine_labels.clone(),
    };
    Ok(ProvisionRequest {
        tags: tags.into_iter().collect::<BTreeMap<_, _>>(),
        logical_id: logical_id.clone(),
        properties: g.spec.instance.properties.clone(),
        engine_labels,
        boot_template: g.spec.flavor.boot_script.clone(),
        boot_context,
        boot_env,
    })
}
