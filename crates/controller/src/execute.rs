//! Turning a planned side effect into provider and swarm calls, each
//! started only once the store has confirmed, just before, that this
//! controller's term is still current.

use crate::context::Context;
use drover_core::model::tags;
use drover_core::plan::{self, Action, Desired};
use drover_core::spec::Role;
use drover_core::template::BootContext;
use drover_spi::{
    ClusterError, Epoch, InstanceProvider, ProviderError, ProvisionRequest, Secret, Store,
    StoreError,
};
use futures_util::future::BoxFuture;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;
use tokio::time::Instant;

/// A confirmation of the term that took longer than this to arrive is
/// asked for again: the process may have been stopped (SIGSTOP, a stalled
/// VM) between the store's answer and reading it, and another controller
/// may have taken over meanwhile. The monotonic clock runs on while a
/// process is stopped (SIGSTOP), so such a pause shows here; a VM whose
/// guest clock stalls with it may not show it (docs/safety.md §5).
pub(crate) const CONFIRMATION_FRESH: Duration = Duration::from_secs(1);

/// Confirmations asked for before a slow store fails the step (it is
/// planned again at the next pass).
const CONFIRMATION_ATTEMPTS: u32 = 3;

/// Why a side effect failed, or was not started.
#[derive(Debug, thiserror::Error)]
pub(crate) enum StepError {
    /// The store did not confirm this controller's term just before the
    /// call (deposed, or the store could not be asked): nothing was started.
    #[error("not started: the store did not confirm this controller's term: {0}")]
    Unconfirmed(#[source] StoreError),
    /// Every confirmation arrived too late to be trusted: nothing was started.
    #[error(
        "not started: the store's confirmation of this controller's term took longer than \
         {} ms {CONFIRMATION_ATTEMPTS} times running",
        CONFIRMATION_FRESH.as_millis()
    )]
    SlowConfirmation,
    /// The provider failed.
    #[error(transparent)]
    Provider(#[from] ProviderError),
    /// The swarm failed or refused.
    #[error(transparent)]
    Cluster(#[from] ClusterError),
    /// Not attempted: something the step needs is not there.
    #[error("{0}")]
    Unable(String),
    /// Cut short: this controller stood down while the step ran.
    #[error("cancelled: this controller stood down")]
    Cancelled,
    /// The step's task panicked.
    #[error("the step's task failed: {0}")]
    Panicked(String),
}

impl StepError {
    /// The step ended for this controller's term, not for anything in the
    /// world: it says nothing about the machine or node it was for.
    pub(crate) fn is_for_the_term(&self) -> bool {
        matches!(
            self,
            StepError::Unconfirmed(_) | StepError::SlowConfirmation | StepError::Cancelled
        )
    }

    /// The store named a newer term: this controller was deposed.
    pub(crate) fn is_deposed(&self) -> bool {
        matches!(self, StepError::Unconfirmed(StoreError::Fenced { .. }))
    }
}

/// The term a side effect runs under.
pub(crate) struct Term {
    pub(crate) store: Arc<dyn Store>,
    pub(crate) epoch: Epoch,
}

impl Term {
    /// The store's word, fresh, that this term is still current.
    async fn confirm(&self) -> Result<(), StepError> {
        for _ in 0..CONFIRMATION_ATTEMPTS {
            let asked = Instant::now();
            self.store
                .check_epoch(self.epoch)
                .await
                .map_err(StepError::Unconfirmed)?;
            if asked.elapsed() <= CONFIRMATION_FRESH {
                return Ok(());
            }
            tracing::warn!(
                epoch = self.epoch,
                "the store's confirmation of this term came late; asking again"
            );
        }
        Err(StepError::SlowConfirmation)
    }
}

/// Runs one side effect to its end (`op_group`: the group of the action's
/// journaled operation) under `term`. What the call needs is gathered
/// first (join material, the orphan's provider); the call itself starts
/// only after [`Term::confirm`], so the store's last word on this term is
/// as close to the call as the controller can put it.
pub(crate) async fn side_effect(
    ctx: &Context,
    term: &Term,
    desired: &Desired,
    op_group: Option<&str>,
    action: &Action,
) -> Result<(), StepError> {
    let group_provider = |group: &str| {
        let g = desired
            .groups
            .iter()
            .find(|g| g.spec.name == group)
            .ok_or_else(|| StepError::Unable(format!("group {group} is not declared")))?;
        ctx.providers
            .get(&g.spec.instance.provider)
            .cloned()
            .ok_or_else(|| {
                StepError::Unable(format!(
                    "no provider `{}` configured",
                    g.spec.instance.provider
                ))
            })
    };
    // Built, not started: a future does nothing until awaited.
    let call: BoxFuture<'_, Result<(), StepError>> = match action {
        Action::Provision { group, .. } => {
            let req = provision_request(ctx, desired, action).await?;
            let provider = group_provider(group)?;
            Box::pin(async move {
                provider
                    .provision(req)
                    .await
                    .map(|_| ())
                    .map_err(Into::into)
            })
        }
        Action::Destroy { instance, .. } => {
            let group = op_group
                .ok_or_else(|| StepError::Unable("the operation is not in the journal".into()))?;
            let provider = match group_provider(group) {
                Ok(p) => p,
                Err(_) => orphan_provider(ctx, desired, group, instance).await?,
            };
            Box::pin(async move { provider.destroy(instance).await.map_err(Into::into) })
        }
        Action::Drain { node, .. } => {
            Box::pin(async move { ctx.cluster.drain(node).await.map_err(Into::into) })
        }
        Action::Demote { node, .. } => {
            Box::pin(async move { ctx.cluster.demote(node).await.map_err(Into::into) })
        }
        // Confirmed before the demotion, its first call; from there the
        // protocol runs to its end (see `Controller::stand_down`).
        Action::DemoteSelfAndLeave { node, .. } => Box::pin(async move {
            ctx.cluster
                .demote_self_and_leave(node)
                .await
                .map_err(Into::into)
        }),
        Action::RemoveNode { node, force, .. } => Box::pin(async move {
            ctx.cluster
                .remove_node(node, *force)
                .await
                .map_err(Into::into)
        }),
        Action::Begin { .. }
        | Action::MarkDone { .. }
        | Action::Complete { .. }
        | Action::Rollback { .. } => return Ok(()),
    };
    term.confirm().await?;
    call.await
}

/// The provider holding `instance` of undeclared `group` (an orphan): the
/// one whose describe by this cluster's id and that group lists it, asked
/// again now, so ownership is checked once more right before the destroy.
async fn orphan_provider(
    ctx: &Context,
    desired: &Desired,
    group: &str,
    instance: &str,
) -> Result<Arc<dyn InstanceProvider>, StepError> {
    let filter = BTreeMap::from([
        (tags::CLUSTER.to_string(), desired.cluster_id.clone()),
        (tags::GROUP.to_string(), group.to_string()),
    ]);
    for provider in ctx.providers.values() {
        let list = provider.describe(&filter).await?;
        if list.iter().any(|i| i.id == instance) {
            return Ok(provider.clone());
        }
    }
    Err(StepError::Unable(format!(
        "no provider lists {instance} with this cluster's id and group {group}"
    )))
}

/// Everything the provider needs for one new machine. Join material is
/// fetched now, per attempt, so a token rotation mid-rollout cannot break it.
async fn provision_request(
    ctx: &Context,
    desired: &Desired,
    action: &Action,
) -> Result<ProvisionRequest, StepError> {
    let Action::Provision {
        op,
        group,
        role,
        logical_id,
        ..
    } = action
    else {
        return Err(StepError::Unable("not a provision".into()));
    };
    let g = desired
        .groups
        .iter()
        .find(|g| g.spec.name == *group)
        .ok_or_else(|| StepError::Unable(format!("group {group} is not declared")))?;
    let mut boot_env: Vec<(String, Secret)> = Vec::new();
    let (init, join_addr) = if *role == Role::Plain {
        (false, String::new())
    } else {
        match ctx.cluster.join_material(*role).await? {
            Some(m) => {
                boot_env.push(("DROVER_JOIN_TOKEN".into(), m.token));
                (false, m.addr)
            }
            None if *role == Role::Manager => (true, String::new()),
            None => {
                return Err(StepError::Unable(
                    "no swarm exists yet for a worker to join".into(),
                ));
            }
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
