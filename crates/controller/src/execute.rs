//! Turning a planned side effect into provider and swarm calls, each
//! started only once the store has confirmed, just before, that this
//! controller's term is still current, and each acting only while that
//! confirmation — a [`Lease`] — has not run out: the provider or engine
//! checks it immediately before its irreversible operation.

use crate::context::Context;
use crate::hook::{self, HookError};
use drover_core::in_place::UpdateRun;
use drover_core::model::tags;
use drover_core::plan::{self, Action, Desired};
use drover_core::spec::{Hook, HookFacts, Role};
use drover_core::template::BootContext;
use drover_spi::{
    ClusterError, Epoch, Fence, InstanceProvider, LeaseExpired, ProviderError, ProvisionRequest,
    Secret, Store, StoreError,
};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;
use tokio::time::Instant;

/// How long the store's confirmation of the term is good for, from the
/// moment the store was *asked*: the [`Lease`] it makes expires then, and
/// a provider or engine call checks it immediately before it acts. A
/// confirmation that arrives later than this is asked for again. The
/// process may be stopped (SIGSTOP, a stalled VM) anywhere between asking
/// and acting, and another controller may take over meanwhile; the
/// monotonic clock runs on while a process is stopped (SIGSTOP), so such a
/// pause expires the lease; a VM whose guest clock stalls with it may not
/// show it (docs/safety.md §5).
pub(crate) const CONFIRMATION_FRESH: Duration = Duration::from_secs(1);

/// Confirmations asked for before a slow store fails the step (it is
/// planned again at the next pass); also how many times a call refused on
/// an expired lease is started again under a new confirmation.
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
    /// The provider or engine found the lease on the term expired right
    /// before it would have acted, every time it was confirmed anew: it
    /// did nothing.
    #[error("not done: {0}")]
    Expired(#[source] LeaseExpired),
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
    /// A lifecycle hook failed (its own message included).
    #[error(transparent)]
    Hook(#[from] HookError),
    /// An in-place update ran and failed, or ran past its timeout.
    #[error("the update {}", .0.summary())]
    Update(drover_core::in_place::UpdateOutcome),
}

/// What a failed step says about trying it again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Failure {
    /// It ended for this controller's term (deposed, a late confirmation,
    /// an expired lease, stood down), not for anything in the world: it
    /// says nothing about the machine or node it was for.
    Term,
    /// The provider or engine may well do it when asked again (unavailable,
    /// no leader, out of sequence, throttled).
    Transient,
    /// The engine refused on one of its preconditions; its message is kept
    /// in the error.
    Refused,
    /// Anything else: the same call will fail the same way.
    Final,
}

impl Failure {
    /// The metric label.
    pub fn as_str(self) -> &'static str {
        match self {
            Failure::Term => "term",
            Failure::Transient => "transient",
            Failure::Refused => "refused",
            Failure::Final => "final",
        }
    }
}

impl StepError {
    /// What this error says about trying the step again.
    pub(crate) fn failure(&self) -> Failure {
        match self {
            StepError::Unconfirmed(_)
            | StepError::SlowConfirmation
            | StepError::Expired(_)
            | StepError::Cancelled => Failure::Term,
            StepError::Cluster(ClusterError::Refused(_)) => Failure::Refused,
            StepError::Cluster(e) if e.is_transient() => Failure::Transient,
            StepError::Provider(e) if e.is_transient() => Failure::Transient,
            StepError::Provider(_)
            | StepError::Cluster(_)
            | StepError::Unable(_)
            | StepError::Panicked(_)
            | StepError::Hook(_)
            | StepError::Update(_) => Failure::Final,
        }
    }

    /// The provider lacked capacity where the call asked (zone fallback).
    pub(crate) fn is_capacity(&self) -> bool {
        matches!(self, StepError::Provider(e) if e.is_capacity())
    }

    /// The store named a newer term: this controller was deposed.
    pub(crate) fn is_deposed(&self) -> bool {
        matches!(self, StepError::Unconfirmed(StoreError::Fenced { .. }))
    }
}

/// The term a side effect runs under.
pub(crate) struct Tenure {
    pub(crate) store: Arc<dyn Store>,
    pub(crate) epoch: Epoch,
}

/// The store's word that a term is current, good until a monotonic
/// deadline: [`CONFIRMATION_FRESH`] after the store was asked. Handed to
/// the provider or engine call as its [`Fence`]; the call checks it
/// immediately before its irreversible operation and does nothing once it
/// has run out. It is never extended: a new one is had only by asking the
/// store again ([`Tenure::confirm`]).
///
/// The deadline is a `tokio::time::Instant`: `std::time::Instant`
/// (`CLOCK_MONOTONIC`, which runs on while the process is stopped) except
/// under a test's paused clock.
#[derive(Debug)]
pub(crate) struct Lease {
    op: String,
    epoch: Epoch,
    valid_until: Instant,
    /// When the store was asked, ms since the Unix epoch: logged with each
    /// check, so a check whose line is written only after the process was
    /// stopped and resumed still shows it passed on a lease asked before.
    asked_ms: u64,
}

impl Lease {
    /// A lease on `epoch` for `op`, asked at wall time `asked_ms`, valid
    /// until `valid_until`.
    pub(crate) fn new(op: &str, epoch: Epoch, asked_ms: u64, valid_until: Instant) -> Self {
        Lease {
            op: op.to_string(),
            epoch,
            valid_until,
            asked_ms,
        }
    }
}

impl Fence for Lease {
    fn check(&self) -> Result<(), LeaseExpired> {
        let now = Instant::now();
        if now <= self.valid_until {
            tracing::info!(
                op = %self.op,
                epoch = self.epoch,
                left_ms = (self.valid_until - now).as_millis() as u64,
                asked_ms = self.asked_ms,
                "term confirmed"
            );
            return Ok(());
        }
        let late = now - self.valid_until;
        tracing::warn!(
            op = %self.op,
            epoch = self.epoch,
            late_ms = late.as_millis() as u64,
            "the lease on this term expired; not acting"
        );
        Err(LeaseExpired(format!(
            "term {} (operation {}) was confirmed more than {} ms ago ({} ms over)",
            self.epoch,
            self.op,
            CONFIRMATION_FRESH.as_millis(),
            late.as_millis()
        )))
    }
}

impl Tenure {
    /// The store's word, fresh, that this term is still current, as a
    /// lease for `op` valid [`CONFIRMATION_FRESH`] from the asking.
    pub(crate) async fn confirm(&self, op: &str) -> Result<Lease, StepError> {
        for _ in 0..CONFIRMATION_ATTEMPTS {
            let asked_ms = crate::status::wall_ms();
            let asked = Instant::now();
            self.store
                .check_epoch(self.epoch)
                .await
                .map_err(StepError::Unconfirmed)?;
            if asked.elapsed() <= CONFIRMATION_FRESH {
                return Ok(Lease::new(
                    op,
                    self.epoch,
                    asked_ms,
                    asked + CONFIRMATION_FRESH,
                ));
            }
            tracing::warn!(
                epoch = self.epoch,
                "the store's confirmation of this term came late; asking again"
            );
        }
        Err(StepError::SlowConfirmation)
    }
}

/// One side effect, with everything its call needs gathered.
enum Call<'a> {
    Provision(Arc<dyn InstanceProvider>, Box<ProvisionRequest>),
    Destroy(Arc<dyn InstanceProvider>, &'a str),
    Drain(&'a str),
    Demote(&'a str),
    HandOver(&'a str),
    RemoveNode(&'a str, bool),
    Hook(&'a Hook, &'a HookFacts),
    HealGhost(&'a str),
    Update(Arc<dyn InstanceProvider>, &'a str, &'a UpdateRun, &'a str),
    Promote(&'a str),
    Activate(&'a str),
}

impl Call<'_> {
    /// Waits until the provider may send the call at once (see
    /// [`InstanceProvider::ready`]); engine calls go at once.
    async fn ready(&self) {
        match self {
            Call::Provision(p, _) => p.ready(drover_spi::ProviderCall::Provision).await,
            Call::Destroy(p, _) => p.ready(drover_spi::ProviderCall::Destroy).await,
            _ => {}
        }
    }

    /// Makes the call under `lease`, which the provider or engine checks
    /// immediately before it acts.
    async fn run(
        &self,
        ctx: &Context,
        lease: &Lease,
        left: &(dyn Fn() + Send + Sync),
    ) -> Result<Option<String>, StepError> {
        if let Call::Hook(hook, facts) = self {
            // Nothing of the world to fence: the term is checked before.
            lease.check().map_err(StepError::Expired)?;
            return Ok(Some(hook::call(hook, facts).await?));
        }
        let result = match self {
            Call::Hook(..) => Ok(()),
            Call::Update(provider, instance, run, _) => {
                update(provider.as_ref(), instance, run, lease).await
            }
            Call::Promote(node) => ctx.cluster.promote(node, lease).await.map_err(Into::into),
            Call::Activate(node) => ctx.cluster.activate(node, lease).await.map_err(Into::into),
            Call::Provision(provider, req) => provider
                .provision((**req).clone(), lease)
                .await
                .map(|_| ())
                .map_err(Into::into),
            Call::Destroy(provider, instance) => provider
                .destroy_fenced(instance, lease)
                .await
                .map_err(Into::into),
            Call::Drain(node) => ctx.cluster.drain(node, lease).await.map_err(Into::into),
            Call::Demote(node) => ctx.cluster.demote(node, lease).await.map_err(Into::into),
            // The lease is checked before the demotion, its first call; from
            // there the protocol runs to its end (see `Controller::stand_down`).
            Call::HandOver(node) => ctx
                .cluster
                .demote_self_and_leave(node, lease, left)
                .await
                .map_err(Into::into),
            Call::RemoveNode(node, force) => ctx
                .cluster
                .remove_node(node, *force, lease)
                .await
                .map_err(Into::into),
            Call::HealGhost(node) => ctx
                .cluster
                .heal_ghost(node, lease)
                .await
                .map_err(Into::into),
        };
        result.map(|()| None).map_err(|e| match e {
            StepError::Provider(ProviderError::Fenced(e))
            | StepError::Cluster(ClusterError::Fenced(e)) => StepError::Expired(e),
            e => e,
        })
    }
}

/// Runs one side effect to its end (`op_group`: the group of the action's
/// journaled operation) under `term`. What the call needs is gathered
/// first (join material, the orphan's provider); the call itself starts
/// only after [`Tenure::confirm`], and acts only while the [`Lease`] that
/// confirmation gives has not run out: the provider or engine checks it
/// immediately before its irreversible operation (and before each of its
/// own retries). A call refused on an expired lease did nothing; it is
/// started again under a new confirmation from the store (at most
/// [`CONFIRMATION_ATTEMPTS`] times), so a deposed controller finds out it
/// was deposed and a slow call is not failed for its slowness alone.
/// `left` is told when a hand-over's engine is seen out of the swarm before
/// its leave call returns (see `Cluster::demote_self_and_leave`).
pub(crate) async fn side_effect(
    ctx: &Context,
    term: &Tenure,
    desired: &Desired,
    op_group: Option<&str>,
    action: &Action,
    left: &(dyn Fn() + Send + Sync),
) -> Result<Option<String>, StepError> {
    let group_provider = |group: &str| {
        let g = desired
            .groups
            .iter()
            .find(|g| g.spec.name == group)
            .ok_or_else(|| StepError::Unable(format!("group {group} is not declared")))?;
        let key = g.spec.instance.provider_key();
        ctx.providers
            .get(&key)
            .cloned()
            .ok_or_else(|| StepError::Unable(format!("no provider `{key}` configured")))
    };
    let call = match action {
        Action::Provision { group, .. } => {
            let req = provision_request(ctx, desired, action).await?;
            Call::Provision(group_provider(group)?, Box::new(req))
        }
        Action::Destroy { instance, .. } => {
            let group = op_group
                .ok_or_else(|| StepError::Unable("the operation is not in the journal".into()))?;
            let provider = match group_provider(group) {
                Ok(p) => p,
                Err(_) => orphan_provider(ctx, desired, group, instance).await?,
            };
            Call::Destroy(provider, instance)
        }
        Action::Drain { node, .. } => Call::Drain(node),
        Action::Demote { node, .. } => Call::Demote(node),
        Action::DemoteSelfAndLeave { node, .. } => Call::HandOver(node),
        // The leader's own demotion goes through its own engine, the
        // leader: leadership moves on (swarm-facts) and it stands down.
        Action::DemoteSelf { node, .. } => Call::Demote(node),
        Action::RemoveNode { node, force, .. } => Call::RemoveNode(node, *force),
        Action::RunHook { hook, facts, .. } => Call::Hook(hook, facts),
        Action::HealGhost { node, .. } => Call::HealGhost(node),
        Action::RunUpdate {
            instance,
            run,
            config,
            ..
        } => {
            let group = op_group
                .ok_or_else(|| StepError::Unable("the operation is not in the journal".into()))?;
            Call::Update(group_provider(group)?, instance, run, config)
        }
        Action::Promote { node, .. } => Call::Promote(node),
        Action::Activate { node, .. } => Call::Activate(node),
        Action::Begin { .. }
        | Action::MarkDone { .. }
        | Action::Complete { .. }
        | Action::Rollback { .. } => return Ok(None),
    };
    let op = action.op_id().unwrap_or_default();
    let mut expired = None;
    for _ in 0..CONFIRMATION_ATTEMPTS {
        // A provider queueing for its API's rate limit does so before the
        // lease starts, not out of it.
        call.ready().await;
        let lease = term.confirm(op).await?;
        let result = call.run(ctx, &lease, left).await;
        if let (Ok(_), Call::Update(provider, instance, _, config)) = (&result, &call) {
            tag_updated(term, op, provider.as_ref(), instance, config).await?;
        }
        match result {
            Err(StepError::Expired(e)) => {
                tracing::warn!(
                    op,
                    epoch = term.epoch,
                    "the call found its lease expired before it acted; asking the store again"
                );
                expired = Some(e);
            }
            result => return result,
        }
    }
    Err(StepError::Expired(expired.unwrap_or_else(|| {
        LeaseExpired("no confirmation was asked for".into())
    })))
}

/// Runs an in-place update on `instance` under `lease` (checked before
/// it starts). A failed or timed-out run is [`StepError::Update`], its
/// outcome kept.
async fn update(
    provider: &dyn InstanceProvider,
    instance: &str,
    run: &UpdateRun,
    lease: &Lease,
) -> Result<(), StepError> {
    let outcome = provider.run_update(instance, run, lease).await?;
    if outcome.succeeded() {
        Ok(())
    } else {
        Err(StepError::Update(outcome))
    }
}

/// Tags `instance` with `config` once its update succeeded: from then on
/// the planner sees the member current (the tag is the world's record of
/// the update). Under a lease asked anew, the run having outlasted the
/// first: a controller deposed meanwhile writes nothing.
async fn tag_updated(
    term: &Tenure,
    op: &str,
    provider: &dyn InstanceProvider,
    instance: &str,
    config: &str,
) -> Result<(), StepError> {
    let lease = term.confirm(op).await?;
    let tags = BTreeMap::from([(tags::CONFIG.to_string(), config.to_string())]);
    let result = provider.label(instance, &tags, &lease).await;
    result.map_err(|e| match e {
        ProviderError::Fenced(e) => StepError::Expired(e),
        e => e.into(),
    })
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
        let list = provider.describe_fresh(&filter).await?;
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
    let (init, join_addr, others) = if *role == Role::Plain {
        (false, String::new(), Vec::new())
    } else {
        match ctx.cluster.join_material(*role).await? {
            Some(m) => {
                boot_env.push(("DROVER_JOIN_TOKEN".into(), m.token));
                (false, m.addr, m.others)
            }
            None if *role == Role::Manager => (true, String::new(), Vec::new()),
            None => {
                return Err(StepError::Unable(
                    "no swarm exists yet for a worker to join".into(),
                ));
            }
        }
    };
    if let Some(url) = ctx.store_url.as_ref().filter(|_| *role == Role::Manager) {
        // For a manager's controller only (workers and plain machines run
        // none): environment only, like the token.
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
        join_addrs: std::iter::once(&join_addr)
            .chain(&others)
            .filter(|a| !a.is_empty())
            .cloned()
            .collect::<Vec<_>>()
            .join(","),
        join_addr,
        init,
        engine_labels: engine_labels.clone(),
        drover_url: String::new(),
        drover_sha256: String::new(),
    }
    .with_release(g.spec.flavor.drover.as_ref());
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

#[cfg(test)]
mod tests {
    use super::*;
    use drover_store::MemStore;

    #[tokio::test(start_paused = true)]
    async fn the_lease_runs_out_a_second_after_the_store_was_asked() {
        let store: Arc<dyn Store> = Arc::new(MemStore::default());
        let epoch = store.campaign("a").await.unwrap();
        let term = Tenure { store, epoch };
        let lease = term.confirm("op-1").await.unwrap();
        assert!(lease.check().is_ok());
        tokio::time::sleep(CONFIRMATION_FRESH - Duration::from_millis(1)).await;
        assert!(lease.check().is_ok(), "expired before its time");
        // A stop (SIGSTOP) between the confirmation and the act.
        tokio::time::sleep(Duration::from_millis(2)).await;
        let e = lease.check().expect_err("acting on an expired lease");
        assert!(e.to_string().contains("op-1"), "{e}");
        // A new lease only from the store: a deposed term gets none.
        term.store.campaign("b").await.unwrap();
        assert!(matches!(
            term.confirm("op-1").await,
            Err(e) if e.is_deposed()
        ));
    }
}
