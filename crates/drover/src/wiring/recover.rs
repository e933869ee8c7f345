//! `drover recover`'s shell: the evidence (every machine of the provider,
//! its engine asked directly) and, once [`drover_core::recover::decide`]
//! says so, the recovery itself on the survivor's engine, recorded in the
//! audit log.

use super::Machines;
use crate::cli::{RecoverArgs, StoreArgs};
use crate::error::MainError;
use drover_core::recover::{Decision, Evidence, Machine, Recovery, decide};
use drover_engine::{Engine, EngineError};
use drover_local::LocalProvider;
use drover_spi::{Event, StoreError, Unfenced};
use std::time::{Duration, Instant};

/// Who the recovery's audit event names.
pub const IDENTITY: &str = "drover recover";

/// How long the new cluster may take to list its nodes with a leader
/// (measured: force-new-cluster returns in ~0.6 s and leads at once).
const LEADS_WITHIN: Duration = Duration::from_secs(30);

/// Why a recovery that was decided did not complete.
#[derive(Debug, thiserror::Error)]
pub enum RecoverError {
    /// The survivor's engine could not be reached any more.
    #[error("cannot reach the engine of {machine}: {source}; nothing was changed")]
    Connect {
        /// The survivor.
        machine: String,
        /// The engine's error.
        #[source]
        source: EngineError,
    },
    /// `swarm init --force-new-cluster` failed.
    #[error(
        "docker swarm init --force-new-cluster on {machine} failed: {source}; run drover recover --dry-run to see where the swarm stands"
    )]
    ForceNewCluster {
        /// The survivor.
        machine: String,
        /// The engine's error.
        #[source]
        source: EngineError,
    },
    /// The new cluster did not come up with a leader in time.
    #[error(
        "the new cluster on {machine} has no leader {}s after force-new-cluster: {said}",
        LEADS_WITHIN.as_secs()
    )]
    NoLeader {
        /// The survivor.
        machine: String,
        /// What its engine said last.
        said: String,
    },
}

/// What a completed recovery did.
#[derive(Debug, serde::Serialize)]
pub struct Done {
    /// How long force-new-cluster took, ms.
    pub force_new_cluster_ms: u64,
    /// How long until the survivor listed its nodes as the leader, ms.
    pub leads_after_ms: u64,
    /// Each gone member's node entry, and whether it was removed (or why not).
    pub removed: Vec<Removed>,
    /// Why the audit event was not written (`None`: it was).
    pub not_recorded: Option<String>,
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
pub struct Outcome {
    /// What it judged by.
    pub evidence: Evidence,
    /// What [`decide`] concluded.
    pub decision: Decision,
    /// What the recovery did (`None`: a dry run, or a refusal).
    pub done: Option<Done>,
}

/// `drover recover`: the evidence, the decision and — when it says proceed
/// and this is no dry run — the recovery. Bad `--gone`/`--from` names are
/// bad input; a recovery that fails midway is a failure (exit 1).
pub async fn recover(args: &RecoverArgs) -> Result<Outcome, MainError> {
    let local = super::machines(&args.live.local)?;
    let evidence = evidence(&local, &args.gone, args.from.as_deref()).await?;
    let decision = decide(&evidence).map_err(|e| MainError::BadInput(e.to_string()))?;
    let done = match &decision {
        Decision::Proceed(r) if !args.dry_run => Some(
            carry_out(provider(&local)?, r, &r.summary(), &args.live.store)
                .await
                .map_err(anyhow::Error::from)?,
        ),
        _ => None,
    };
    Ok(Outcome {
        evidence,
        decision,
        done,
    })
}

/// The evidence: every machine the provider lists, its engine asked
/// directly (3 s each, all at once), with the operator's `--gone` and
/// `--from`. A failed listing is an error, never "no machine".
async fn evidence(
    local: &Machines,
    gone: &[String],
    from: Option<&str>,
) -> Result<Evidence, MainError> {
    let local = provider(local)?;
    let records = local.records().map_err(|e| {
        MainError::Failed(anyhow::anyhow!(
            "cannot list the machines in {}: {e}; nothing was changed",
            local.state_dir().display()
        ))
    })?;
    let asked = records.iter().map(|r| async move {
        let (answer, raft) = super::ask_engine(local, r).await;
        Machine {
            id: r.id.clone(),
            group: super::group_of(r),
            address: r.address.clone(),
            answer,
            raft,
        }
    });
    Ok(Evidence {
        machines: futures_util::future::join_all(asked).await,
        gone: gone.to_vec(),
        from: from.map(str::to_string),
    })
}

/// The provider `recover` needs: the machines are its evidence.
fn provider(local: &Machines) -> Result<&LocalProvider, MainError> {
    local.local.as_deref().ok_or_else(|| {
        MainError::BadInput(
            "recover judges by the provider's machines: give --local-dir (or DROVER_LOCAL_DIR)"
                .into(),
        )
    })
}

/// Carries `r` out: force-new-cluster on the survivor's engine, waits
/// until it leads, removes the gone members' node entries (out of the raft
/// now, never Ready; left there, the meltdown guard would count them as
/// machines lost and stop the controller from rebuilding the group), then
/// records the recovery and its evidence in the audit log. A store kept in
/// the swarm is writable only now, and is read through the survivor.
async fn carry_out(
    local: &LocalProvider,
    r: &Recovery,
    evidence: &str,
    store: &StoreArgs,
) -> Result<Done, RecoverError> {
    let endpoint = local.endpoint(&r.survivor).unwrap_or_default();
    let engine = Engine::connect_with_timeout(&endpoint, Duration::from_secs(5))
        .await
        .map_err(|source| RecoverError::Connect {
            machine: r.survivor.clone(),
            source,
        })?;
    let t0 = Instant::now();
    engine
        .force_new_cluster(&r.addr)
        .await
        .map_err(|source| RecoverError::ForceNewCluster {
            machine: r.survivor.clone(),
            source,
        })?;
    let force_new_cluster_ms = t0.elapsed().as_millis() as u64;
    leads(&engine, &r.survivor).await?;
    let leads_after_ms = t0.elapsed().as_millis() as u64;
    let mut removed = Vec::new();
    for g in &r.gone {
        let error = engine
            .remove_node(&g.member.node_id, false, &Unfenced)
            .await
            .err()
            .map(|e| e.to_string());
        removed.push(Removed {
            node_id: g.member.node_id.clone(),
            error,
        });
    }
    let not_recorded = record(local, r, evidence, store, &endpoint)
        .await
        .err()
        .map(|e| e.to_string());
    Ok(Done {
        force_new_cluster_ms,
        leads_after_ms,
        removed,
        not_recorded,
    })
}

/// Waits until the survivor's engine lists the nodes as the leader.
async fn leads(engine: &Engine, machine: &str) -> Result<(), RecoverError> {
    let deadline = Instant::now() + LEADS_WITHIN;
    loop {
        let said = match engine.observe().await {
            drover_core::model::SwarmView::Ok(_) => return Ok(()),
            other => format!("{other:?}"),
        };
        if Instant::now() > deadline {
            return Err(RecoverError::NoLeader {
                machine: machine.into(),
                said,
            });
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// The audit event, under an epoch of its own (the survivor's controller
/// campaigns again as the leader's; its next write finds it fenced and it
/// takes the term back). A swarm store is opened on the survivor, the
/// only manager now.
async fn record(
    local: &LocalProvider,
    r: &Recovery,
    evidence: &str,
    store: &StoreArgs,
    survivor: &str,
) -> Result<(), StoreError> {
    let args = StoreArgs {
        url: if store.url.starts_with("swarm") {
            format!("swarm:{survivor}")
        } else {
            store.url.clone()
        },
        store_timeout: store.store_timeout,
    };
    let store = super::store(&args)
        .await
        .map_err(|e| StoreError::Unavailable(e.to_string()))?;
    let group = local
        .record(&r.survivor)
        .ok()
        .flatten()
        .map(|rec| super::group_of(&rec));
    let event = Event {
        at_ms: drover_controller::wall_ms(),
        controller: IDENTITY.into(),
        group,
        op: None,
        action: "recover".into(),
        target: Some(r.survivor.clone()),
        outcome: "ok".into(),
        reason: evidence.into(),
    };
    // The survivor's controller campaigns too (it takes its term back
    // right after): a write fenced in between campaigns and tries again.
    let mut tries = 0;
    loop {
        let epoch = store.campaign(IDENTITY).await?;
        match store.append_event(epoch, &event).await {
            Err(StoreError::Fenced { .. }) if tries < RECORD_TRIES => tries += 1,
            done => return done,
        }
    }
}

/// How often the audit event is tried again after losing its term to the
/// survivor's controller (seen once in a full test run: the controller took
/// the term back between `recover`'s campaign and its write).
const RECORD_TRIES: u32 = 5;
