//! Ending a swarm from outside it (`drover destroy` of the manager group):
//! the leader's controller retires the managers one at a time, the leader
//! last; the last machine cannot remove itself, so this procedure follows
//! the cluster until that machine is the only thing left
//! ([`drover_core::teardown`] decides) and then destroys it through the
//! provider, under the store's epoch, recording it.

use crate::context::Context;
use crate::observe::snapshot;
use crate::status::{StatusDoc, status_json, wall_ms};
use drover_core::journal::Operation;
use drover_core::model::{Instance, Observed};
use drover_core::plan::{Desired, Memory, PlanInput, member_status, plan};
use drover_core::spec::{ClusterSpec, GroupSpec};
use drover_core::teardown::{LastManager, last_manager, others_remaining};
use drover_spi::{Epoch, Event, EventAction, ProviderError, Store, StoreError, SwarmStores};
use std::sync::Arc;
use std::time::Duration;
use tokio::time::Instant;

/// How often the cluster is looked at again.
const POLL: Duration = Duration::from_secs(2);

/// Who the final step's events and status name.
pub const IDENTITY: &str = "drover destroy";

/// How a wait ended, when it did not fail.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Waited<T> {
    /// Done waiting, with this.
    Done(T),
    /// The acting controller published a group as blocked.
    Blocked {
        /// The group.
        group: String,
        /// The controller's reason.
        reason: String,
    },
    /// The bound passed; the reason waited on last.
    TimedOut(String),
}

/// Why the teardown stopped without finishing.
#[derive(Debug, thiserror::Error)]
pub enum TeardownError {
    /// Someone committed another revision: what was checked is no longer
    /// what the controller carries out.
    #[error(
        "the desired state changed meanwhile (revision {now} now, {expected} expected): nothing more is done here; see drover history, then run drover destroy again if you still mean it"
    )]
    Changed {
        /// The store's revision now (0: none).
        now: u64,
        /// The revision the teardown follows.
        expected: u64,
    },
    /// The cluster changed between the last look and the last step:
    /// nothing was destroyed.
    #[error(
        "the cluster changed just before the last step: nothing was destroyed; run drover destroy {group} again"
    )]
    LastChanged {
        /// The manager group.
        group: String,
    },
    /// The provider failed to destroy the last manager.
    #[error(
        "could not destroy {instance}, the last manager: {error}; run drover destroy {group} again"
    )]
    Destroy {
        /// The machine.
        instance: String,
        /// The manager group.
        group: String,
        /// The provider's error (in the message, so not also a source).
        error: ProviderError,
    },
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// One teardown of `group`, followed from outside the cluster.
pub struct Teardown<'a> {
    ctx: &'a mut Context,
    /// With a swarm store: where to find it again when the manager it is
    /// read through is retired.
    stores: Option<Arc<dyn SwarmStores>>,
    /// The cluster id: a store found again must be this cluster's.
    cluster: String,
    group: &'a str,
    timeout: Duration,
    start: Instant,
    said: String,
}

impl<'a> Teardown<'a> {
    /// Follows `group` of `cluster` through `ctx` for up to `timeout`.
    pub fn new(
        ctx: &'a mut Context,
        stores: Option<Arc<dyn SwarmStores>>,
        cluster: &str,
        group: &'a str,
        timeout: Duration,
    ) -> Self {
        Teardown {
            ctx,
            stores,
            cluster: cluster.to_string(),
            group,
            timeout,
            start: Instant::now(),
            said: String::new(),
        }
    }

    /// Time since the teardown began.
    pub fn elapsed(&self) -> Duration {
        self.start.elapsed()
    }

    /// Waits until every other group's machines are gone (manager groups
    /// are retired last, not while the others still drain).
    pub async fn others_gone(
        &mut self,
        spec: &ClusterSpec,
        rev: u64,
        waiting: impl FnMut(Duration, &str),
    ) -> Result<Waited<()>, TeardownError> {
        let group = self.group;
        self.until(
            spec,
            rev,
            waiting,
            |_, observed, _| match others_remaining(observed, group) {
                None => Ok(()),
                Some(why) => Err(why),
            },
        )
        .await
    }

    /// Waits until the group's last manager is the only thing left
    /// (`Some`), or nothing is (`None`).
    pub async fn last_one(
        &mut self,
        spec: &ClusterSpec,
        rev: u64,
        waiting: impl FnMut(Duration, &str),
    ) -> Result<Waited<Option<Instance>>, TeardownError> {
        let group = self.group;
        self.until(
            spec,
            rev,
            waiting,
            |desired, observed, journal| match last_manager(desired, observed, journal, group) {
                LastManager::Gone => Ok(None),
                LastManager::Ready(inst) => Ok(Some(inst.clone())),
                LastManager::Wait(why) => Err(why),
            },
        )
        .await
    }

    /// Looks until `check` is done against revision `rev` of `spec`;
    /// `waiting` hears each new reason to wait.
    async fn until<T>(
        &mut self,
        spec: &ClusterSpec,
        rev: u64,
        mut waiting: impl FnMut(Duration, &str),
        check: impl Fn(&Desired, &Observed, &[Operation]) -> Result<T, String>,
    ) -> Result<Waited<T>, TeardownError> {
        loop {
            let looked = async {
                still_at(self.ctx.store.as_ref(), rev).await?;
                Ok::<_, TeardownError>(snapshot(self.ctx, spec).await?)
            };
            let why = match looked.await {
                Ok((desired, observed, journal)) => match check(&desired, &observed, &journal) {
                    Ok(t) => return Ok(Waited::Done(t)),
                    Err(why) => why,
                },
                Err(TeardownError::Store(e)) if e.is_transient() && self.store_found_again().await => {
                    "the engine the store was read through is gone: reading it through another manager"
                        .into()
                }
                Err(e) => return Err(e),
            };
            if why != self.said {
                waiting(self.start.elapsed(), &why);
                self.said = why;
            }
            if let Some(doc) = StatusDoc::read(self.ctx.store.as_ref())
                .await
                .ok()
                .flatten()
                && let Some(g) = doc.blocked()
            {
                return Ok(Waited::Blocked {
                    group: g.name.clone(),
                    reason: g.reason.clone().unwrap_or_default(),
                });
            }
            if self.start.elapsed() >= self.timeout {
                return Ok(Waited::TimedOut(self.said.clone()));
            }
            tokio::time::sleep(POLL).await;
        }
    }

    /// The swarm store lives in the raft, read through one manager's
    /// engine, and a teardown retires managers: when the one it reads
    /// through goes, read it through another manager — only if the store
    /// found there is this cluster's.
    async fn store_found_again(&mut self) -> bool {
        let Some(stores) = &self.stores else {
            return false;
        };
        match stores.on_a_manager(Some(&self.cluster)).await {
            Some(store) => {
                tracing::info!(
                    "the store's engine was retired: reading the swarm store through another manager"
                );
                self.ctx.store = store;
                true
            }
            None => false,
        }
    }

    /// Removes the swarm's last manager `last` of `g` from here, recording it.
    pub async fn remove_last(
        &self,
        spec: &ClusterSpec,
        g: &GroupSpec,
        rev: u64,
        last: &Instance,
    ) -> Result<(), TeardownError> {
        let store = self.ctx.store.as_ref();
        // Taking the store's epoch stops the last controller from writing
        // while its machine goes (it may win it back; it has nothing left
        // to do).
        let epoch = store.campaign(IDENTITY).await?;
        // Look once more, under that epoch: same revision, same last machine.
        still_at(store, rev).await?;
        let (desired, observed, journal) = snapshot(self.ctx, spec).await?;
        if !matches!(last_manager(&desired, &observed, &journal, &g.name),
            LastManager::Ready(i) if i.id == last.id)
        {
            return Err(TeardownError::LastChanged {
                group: g.name.clone(),
            });
        }
        note(store, epoch, g, &last.id, "started").await;
        let provider = &self.ctx.providers[&g.instance.provider_key()];
        provider
            .destroy(&last.id)
            .await
            .map_err(|error| TeardownError::Destroy {
                instance: last.id.clone(),
                group: g.name.clone(),
                error,
            })?;
        // Its controller went with it, but may have taken the epoch back
        // just before: take it again to record the outcome.
        let epoch = store.campaign(IDENTITY).await.unwrap_or(epoch);
        note(store, epoch, g, &last.id, "ok").await;
        settle(self.ctx, spec, rev, epoch).await;
        Ok(())
    }
}

/// Fails when the store's current revision is no longer `rev`.
async fn still_at(store: &dyn Store, rev: u64) -> Result<(), TeardownError> {
    let now = store.desired().await?.map(|r| r.rev);
    match now {
        Some(now) if now == rev => Ok(()),
        now => Err(TeardownError::Changed {
            now: now.unwrap_or(0),
            expected: rev,
        }),
    }
}

/// Records the final step in the audit log. A store kept in the swarm
/// itself is gone with its last manager: nothing can be written then.
async fn note(store: &dyn Store, epoch: Epoch, g: &GroupSpec, instance: &str, outcome: &str) {
    let event = Event {
        at_ms: wall_ms(),
        controller: IDENTITY.into(),
        group: Some(g.name.clone()),
        op: None,
        action: EventAction::DestroyInstance,
        target: Some(instance.into()),
        outcome: outcome.into(),
        reason: "the swarm's last manager, removed from outside the swarm".into(),
    };
    if let Err(e) = store.append_event(epoch, &event).await {
        tracing::info!(error = %e, "the final destroy is not in the event log");
    }
}

/// Marks the revision converged and publishes a status showing the empty
/// cluster, so `drover status` and `drover history` tell the truth after.
async fn settle(ctx: &Context, spec: &ClusterSpec, rev: u64, epoch: Epoch) {
    let Ok((desired, observed, journal)) = snapshot(ctx, spec).await else {
        return;
    };
    let plan = plan(PlanInput {
        desired: &desired,
        observed: &observed,
        journal: &journal,
        memory: &Memory::default(),
        now: 0,
        wall_ms: crate::status::wall_ms(),
        nonce: 0,
    });
    let members = member_status(&desired, &observed);
    let doc = status_json(
        IDENTITY,
        &ctx.providers,
        (epoch, rev),
        desired.control,
        &plan,
        &members,
        journal.len(),
    );
    let written = async {
        ctx.store.mark_converged(epoch, rev).await?;
        ctx.store.publish_status(epoch, doc).await
    };
    if let Err(e) = written.await {
        tracing::info!(error = %e, "no final status written (the store may have gone with the swarm)");
    }
}
