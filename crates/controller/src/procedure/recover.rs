//! `drover recover`: a lost manager quorum recovered on evidence. The
//! evidence is every machine of every provider, its engine asked now
//! through its provider ([`InstanceProvider::ask_engines`]);
//! [`drover_core::recover::decide`] judges it; on a decision to proceed
//! (or to finish a recovery a previous run started) and without a dry run,
//! this procedure carries it out on the survivor's engine and records it in
//! the audit log.
//!
//! # The recovery record
//! Before force-new-cluster (the one irreversible step) a
//! [`Started`](drover_core::recover::Started) record is written to
//! `recovery.json` in the provider's state directory on the engines' host
//! ([`Record`]), and removed once the gone members' node entries are gone
//! and the audit event is written. A run cut short in between leaves it;
//! the next run reads it and finishes that recovery. Why there:
//! - a `swarm` store cannot be written before the recovery (it lives in the
//!   raft that lost its quorum), so the store cannot hold it for every
//!   backend, and one place for all backends is one code path;
//! - every run, the rerun included, reads that directory, whatever the
//!   store, and it is on the host the engines are reached from;
//! - the survivor's engine labels are daemon flags (a restart to change
//!   them), and an instance tag (the provider's `label`) can only be added,
//!   never removed, and every describe (the controllers' observation)
//!   would carry it.
//!
//! The record holds machine ids, node ids, raft addresses, the operator's
//! names and the time: never a token or key (mode 0600 all the same).
//!
//! # Fenced
//! Every write is fenced: force-new-cluster and each node removal check
//! the caller's [`Fence`] right before they are sent, and the audit event
//! is written under an epoch of its own, compare-and-swap in the store.

mod act;
pub mod diagnose;
mod record;
#[cfg(test)]
mod tests;

pub use record::{Record, RecordError};

use crate::context::Providers;
use async_trait::async_trait;
use drover_core::model::{SwarmView, tags};
use drover_core::quorum_probe::EngineAnswer;
use drover_core::recover::{BadInput, Decision, Evidence, Kept, Listed, Machine, decide};
use drover_spi::{Fence, ProviderError, Store, StoreError};
use std::collections::BTreeMap;
use std::sync::Arc;

/// Who the recovery's audit event names.
pub const IDENTITY: &str = "drover recover";

/// An engine call's failure, as the engine's client reported it (its
/// message and its causes kept for the operator).
pub type EngineCallError = Box<dyn std::error::Error + Send + Sync>;

/// The survivor's engine, as a recovery acts on it.
#[async_trait]
pub trait SurvivorEngine: Send + Sync {
    /// Its docker endpoint (a swarm store is read through it).
    fn endpoint(&self) -> &str;
    /// Its view of the swarm.
    async fn observe(&self) -> SwarmView;
    /// `docker swarm init --force-new-cluster`, listening and advertising
    /// on `addr`; `fence` is checked right before it is sent.
    async fn force_new_cluster(&self, addr: &str, fence: &dyn Fence)
    -> Result<(), EngineCallError>;
    /// `docker node rm` (never forced); `fence` is checked right before.
    async fn remove_node(&self, node: &str, fence: &dyn Fence) -> Result<(), EngineCallError>;
}

/// What the recovery reaches beyond the providers: the engines (by
/// endpoint) and the store the audit event goes to.
#[async_trait]
pub trait Reach: Send + Sync {
    /// The engine at `endpoint`, connected within a few seconds.
    async fn connect(&self, endpoint: &str) -> Result<Arc<dyn SurvivorEngine>, EngineCallError>;
    /// The store of the audit event; one kept in the swarm is read through
    /// `survivor` (an engine that knows the leader).
    async fn audit_store(&self, survivor: &str) -> Result<Arc<dyn Store>, StoreError>;
}

/// What the operator asked for.
#[derive(Debug, Clone, Default)]
pub struct Request {
    /// `--gone`.
    pub gone: Vec<String>,
    /// `--from`.
    pub from: Option<String>,
    /// `--dry-run`.
    pub dry_run: bool,
}

/// What a completed recovery did (or the rerun that finished one).
#[derive(Debug, serde::Serialize)]
pub struct Done {
    /// Force-new-cluster's timings (absent when a rerun finished a
    /// recovery started before).
    #[serde(flatten)]
    pub forced: Option<Forced>,
    /// Each gone member's node entry, and whether it was removed (or why not).
    pub removed: Vec<Removed>,
    /// Gone members whose node entries were removed before (absent now).
    pub absent: Vec<String>,
    /// Gone members that are back (Ready or in the raft): entries kept.
    pub kept: Vec<Kept>,
    /// Why the audit event was not written (`None`: it was, now or by the
    /// run that started the recovery).
    pub not_recorded: Option<String>,
    /// The recovery record, when it is kept because the tail is not done
    /// (a rerun finishes it), or could not be removed.
    pub record_left: Option<String>,
}

/// How force-new-cluster went.
#[derive(Debug, serde::Serialize)]
pub struct Forced {
    /// How long force-new-cluster took, ms.
    pub force_new_cluster_ms: u64,
    /// How long until the survivor listed its nodes as the leader, ms.
    pub leads_after_ms: u64,
    /// The error force-new-cluster answered although the new cluster
    /// formed (the recovery went on once the survivor led).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub engine_said: Option<String>,
}

/// One gone member's node entry after the recovery.
#[derive(Debug, serde::Serialize)]
pub struct Removed {
    /// The node id.
    pub node_id: String,
    /// Why it was not removed (`None`: removed, or already absent).
    pub error: Option<String>,
}

/// What `recover` found, decided and did.
#[derive(Debug)]
pub struct Outcome {
    /// What it judged by.
    pub evidence: Evidence,
    /// What [`decide`] concluded.
    pub decision: Decision,
    /// What the recovery did (`None`: a dry run, or a refusal).
    pub done: Option<Done>,
}

/// Why `recover` stopped before an outcome.
#[derive(Debug, thiserror::Error)]
pub enum RecoverFailure {
    /// `--gone` or `--from` names what it cannot (nothing was changed).
    #[error(transparent)]
    BadInput(#[from] BadInput),
    /// A provider's machines could not be listed: "no machine" is never
    /// assumed.
    #[error("cannot list the machines of provider {provider}: {source}; nothing was changed")]
    List {
        /// The provider.
        provider: String,
        /// Its error.
        #[source]
        source: ProviderError,
    },
    /// The recovery record could not be read.
    #[error(transparent)]
    Record(#[from] RecordError),
    /// A recorded recovery cannot be finished: the leader's node list
    /// could not be read.
    #[error(
        "a recovery is recorded as started ({record}) and the engine of {machine} knows a leader, but its nodes cannot be listed ({why}); nothing was changed: run drover recover again to finish it"
    )]
    Unlisted {
        /// The record's file.
        record: String,
        /// The machine whose engine knows the leader.
        machine: String,
        /// Why its nodes could not be listed.
        why: String,
    },
    /// The recovery did not complete.
    #[error(transparent)]
    Act(#[from] act::RecoverError),
}

pub use act::RecoverError;

/// `drover recover`: the evidence (with the record of a recovery a
/// previous run started), the decision and — when it says proceed or
/// finish and this is no dry run — the recovery or its tail, each write
/// checked by `fence` right before it is sent.
pub async fn recover(
    providers: &Providers,
    reach: &dyn Reach,
    record: &Record,
    request: &Request,
    fence: &dyn Fence,
) -> Result<Outcome, RecoverFailure> {
    let started = record.read()?;
    let (mut evidence, endpoints) = evidence(providers, request).await?;
    if let Some(s) = &started {
        evidence.listed = listed(reach, record, &endpoints, &evidence.machines, s).await?;
    }
    evidence.started = started;
    let decision = decide(&evidence)?;
    let act = act::Act {
        reach,
        record,
        endpoints: &endpoints,
        machines: &evidence.machines,
        fence,
    };
    let done = match &decision {
        Decision::Proceed(r) if !request.dry_run => Some(act.carry_out(r).await?),
        Decision::Finish(f) if !request.dry_run => Some(act.finish(f).await?),
        _ => None,
    };
    Ok(Outcome {
        evidence,
        decision,
        done,
    })
}

/// Each machine's engine endpoint, by machine id, as its provider reaches it.
type Endpoints = BTreeMap<String, String>;

/// The evidence: every machine the providers list, its engine asked now
/// (all at once), with the operator's `--gone` and `--from`. A failed
/// listing is an error, never "no machine".
async fn evidence(
    providers: &Providers,
    request: &Request,
) -> Result<(Evidence, Endpoints), RecoverFailure> {
    let asked = providers.iter().map(|(name, p)| async move {
        let reports = p.ask_engines(&BTreeMap::new()).await;
        (name, p, reports)
    });
    let mut machines = Vec::new();
    let mut endpoints = Endpoints::new();
    for (name, p, reports) in futures_util::future::join_all(asked).await {
        let reports = reports.map_err(|source| RecoverFailure::List {
            provider: name.clone(),
            source,
        })?;
        for r in reports {
            let id = r.instance.id.clone();
            if let Some(e) = p.engine_endpoint(&id) {
                endpoints.insert(id.clone(), e);
            }
            machines.push(Machine {
                group: r.instance.tag(tags::GROUP).unwrap_or_default().to_string(),
                id,
                address: r.address,
                answer: r.answer,
                raft: r.raft,
            });
        }
    }
    let evidence = Evidence {
        machines,
        gone: request.gone.clone(),
        from: request.from.clone(),
        now_ms: crate::status::wall_ms(),
        ..Evidence::default()
    };
    Ok((evidence, endpoints))
}

/// The swarm's nodes, read through an engine that knows a leader (the
/// recorded survivor's when it does), for finishing a recorded recovery;
/// `None` when no engine knows one. A failed listing is an error, never
/// "no node".
async fn listed(
    reach: &dyn Reach,
    record: &Record,
    endpoints: &Endpoints,
    machines: &[Machine],
    started: &drover_core::recover::Started,
) -> Result<Option<Listed>, RecoverFailure> {
    let mut leading: Vec<&Machine> = machines
        .iter()
        .filter(|m| m.answer == EngineAnswer::Led)
        .collect();
    leading.sort_by_key(|m| m.id != started.recovery.survivor);
    let Some(m) = leading.first() else {
        return Ok(None);
    };
    let failed = |why: String| RecoverFailure::Unlisted {
        record: record.path().display().to_string(),
        machine: m.id.clone(),
        why,
    };
    let endpoint = endpoints.get(&m.id).cloned().unwrap_or_default();
    let engine = reach
        .connect(&endpoint)
        .await
        .map_err(|e| failed(e.to_string()))?;
    match engine.observe().await {
        SwarmView::Ok(nodes) => Ok(Some(Listed {
            by: m.id.clone(),
            nodes,
        })),
        other => Err(failed(format!("{other:?}"))),
    }
}
