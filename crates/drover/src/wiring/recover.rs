//! `drover recover`'s shell: the evidence (every machine of the provider,
//! its engine asked directly) and, once [`drover_core::recover::decide`]
//! says so, the recovery itself on the survivor's engine, recorded in the
//! audit log — or the tail of a recovery a previous run started.
//!
//! # The recovery record
//! Before force-new-cluster (the one irreversible step) a [`Started`]
//! record is written to `recovery.json` in the provider's state directory
//! (`--local-dir`), and removed once the gone members' node entries are
//! gone and the audit event is written. A run cut short in between leaves
//! it; the next run reads it and finishes that recovery. Why there:
//! - a `swarm` store cannot be written before the recovery (it lives in the
//!   raft that lost its quorum), so the store cannot hold it for every
//!   backend, and one place for all backends is one code path;
//! - `recover` judges by the provider's machines and requires
//!   `--local-dir`: every run, the rerun included, reads that directory,
//!   whatever the store, and it is on the host the engines run on;
//! - the survivor's engine labels are daemon flags (a restart to change
//!   them), and an instance tag (the provider's `label`) can only be added,
//!   never removed, and every describe (the controllers' observation)
//!   would carry it.
//!
//! The record holds machine ids, node ids, raft addresses, the operator's
//! names and the time: never a token or key (mode 0600 all the same).

use super::Machines;
use crate::cli::{RecoverArgs, StoreArgs};
use crate::error::MainError;
use drover_core::model::{Node, SwarmView};
use drover_core::quorum_probe::EngineAnswer;
use drover_core::recover::{
    Decision, Evidence, Finish, Kept, Listed, Machine, Started, Tail, decide, tail,
};
use drover_engine::{Engine, EngineError};
use drover_local::LocalProvider;
use drover_spi::{Event, EventAction, StoreError, Unfenced};
use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, UNIX_EPOCH};

/// Who the recovery's audit event names.
pub const IDENTITY: &str = "drover recover";

/// The recovery's audit event's action.
const ACTION: EventAction = EventAction::Recover;

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
    /// The recovery record could not be written: nothing was changed.
    #[error("{0}; nothing was changed")]
    Record(#[source] RecordError),
    /// `swarm init --force-new-cluster` failed.
    #[error(
        "docker swarm init --force-new-cluster on {machine} failed: {source}; run drover recover again: it finishes the recovery if the new cluster formed, else it judges afresh"
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
        "the new cluster on {machine} has no leader {}s after force-new-cluster: {said}; once it has one, run drover recover again to finish",
        LEADS_WITHIN.as_secs()
    )]
    NoLeader {
        /// The survivor.
        machine: String,
        /// What its engine said last.
        said: String,
    },
}

/// The recovery record, `recovery.json` in the provider's state directory.
#[derive(Debug, thiserror::Error)]
pub enum RecordError {
    /// It exists and cannot be read.
    #[error("cannot read the recovery record {path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// It is not a record drover wrote.
    #[error(
        "the recovery record {path} cannot be parsed ({source}); check the swarm by hand (docker node ls on a manager) before moving it aside"
    )]
    Corrupt {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: serde_json::Error,
    },
    /// It could not be written or removed.
    #[error("cannot write the recovery record {path}: {source}")]
    Write {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
}

/// Where a recovery is recorded as started: `recovery.json` in the
/// provider's state directory (why there: the module's documentation).
struct Record {
    path: PathBuf,
}

impl Record {
    fn of(local: &LocalProvider) -> Record {
        Record {
            path: local.state_dir().join("recovery.json"),
        }
    }

    /// The recovery a previous run started and did not finish, if any.
    fn read(&self) -> Result<Option<Started>, RecordError> {
        let text = match std::fs::read(&self.path) {
            Ok(text) => text,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(source) => {
                return Err(RecordError::Read {
                    path: self.path.clone(),
                    source,
                });
            }
        };
        serde_json::from_slice(&text)
            .map(Some)
            .map_err(|source| RecordError::Corrupt {
                path: self.path.clone(),
                source,
            })
    }

    /// Writes `started` durably (a whole file or none: written aside,
    /// synced, renamed, the directory synced), replacing any record.
    fn write(&self, started: &Started) -> Result<(), RecordError> {
        let write = || -> std::io::Result<()> {
            let tmp = self.path.with_extension("json.tmp");
            let mut f = std::fs::OpenOptions::new()
                .write(true)
                .create(true)
                .truncate(true)
                .mode(0o600)
                .open(&tmp)?;
            f.write_all(&serde_json::to_vec_pretty(started)?)?;
            f.sync_all()?;
            std::fs::rename(&tmp, &self.path)?;
            sync_dir(&self.path)
        };
        write().map_err(|source| RecordError::Write {
            path: self.path.clone(),
            source,
        })
    }

    /// Removes the record: the recovery is finished.
    fn clear(&self) -> Result<(), RecordError> {
        let remove = || -> std::io::Result<()> {
            match std::fs::remove_file(&self.path) {
                Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(e),
                _ => {}
            }
            sync_dir(&self.path)
        };
        remove().map_err(|source| RecordError::Write {
            path: self.path.clone(),
            source,
        })
    }
}

/// Syncs the directory holding `path` (a rename or removal is durable then).
fn sync_dir(path: &Path) -> std::io::Result<()> {
    match path.parent() {
        Some(dir) => std::fs::File::open(dir)?.sync_all(),
        None => Ok(()),
    }
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

/// `drover recover`: the evidence (with the record of a recovery a
/// previous run started), the decision and — when it says proceed or
/// finish and this is no dry run — the recovery or its tail. Bad
/// `--gone`/`--from` names are bad input; a recovery that fails midway is
/// a failure (exit 1).
pub async fn recover(args: &RecoverArgs) -> Result<Outcome, MainError> {
    let local = super::machines(&args.live.local)?;
    let local = provider(&local)?;
    let record = Record::of(local);
    let started = record.read().map_err(anyhow::Error::from)?;
    let mut evidence = evidence(local, &args.gone, args.from.as_deref()).await?;
    if let Some(s) = &started {
        evidence.listed = listed(local, &evidence.machines, &s.recovery.survivor).await?;
    }
    evidence.started = started;
    let decision = decide(&evidence).map_err(|e| MainError::BadInput(e.to_string()))?;
    let store = &args.live.store;
    let done = match &decision {
        Decision::Proceed(r) if !args.dry_run => {
            let started = Started::new(r.clone(), drover_controller::wall_ms());
            Some(
                carry_out(local, &record, &started, store)
                    .await
                    .map_err(anyhow::Error::from)?,
            )
        }
        Decision::Finish(f) if !args.dry_run => Some(
            finish(local, &record, f, store)
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
    local: &LocalProvider,
    gone: &[String],
    from: Option<&str>,
) -> Result<Evidence, MainError> {
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
        now_ms: drover_controller::wall_ms(),
        ..Evidence::default()
    })
}

/// The swarm's nodes, read through an engine that knows a leader (the
/// recorded survivor's when it does), for finishing a recorded recovery;
/// `None` when no engine knows one. A failed listing is an error, never
/// "no node".
async fn listed(
    local: &LocalProvider,
    machines: &[Machine],
    survivor: &str,
) -> Result<Option<Listed>, MainError> {
    let mut leading: Vec<&Machine> = machines
        .iter()
        .filter(|m| m.answer == EngineAnswer::Led)
        .collect();
    leading.sort_by_key(|m| m.id != survivor);
    let Some(m) = leading.first() else {
        return Ok(None);
    };
    let endpoint = local.endpoint(&m.id).unwrap_or_default();
    let failed = |why: String| {
        MainError::Failed(anyhow::anyhow!(
            "a recovery is recorded as started ({}) and the engine of {} knows a leader, but its nodes cannot be listed ({why}); nothing was changed: run drover recover again to finish it",
            Record::of(local).path.display(),
            m.id
        ))
    };
    let engine = Engine::connect_with_timeout(&endpoint, Duration::from_secs(5))
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

/// The provider `recover` needs: the machines are its evidence.
fn provider(local: &Machines) -> Result<&LocalProvider, MainError> {
    local.local.as_deref().ok_or_else(|| {
        MainError::BadInput(
            "recover judges by the provider's machines: give --local-dir (or DROVER_LOCAL_DIR)"
                .into(),
        )
    })
}

/// Carries the recovery `started` records out: writes the record, then
/// force-new-cluster on the survivor's engine, waits until it leads, and
/// does the tail ([`complete`]). The record is written before the one
/// irreversible step, so a run cut short anywhere after it is finished by
/// the next.
async fn carry_out(
    local: &LocalProvider,
    record: &Record,
    started: &Started,
    store: &StoreArgs,
) -> Result<Done, RecoverError> {
    let r = &started.recovery;
    let endpoint = local.endpoint(&r.survivor).unwrap_or_default();
    let engine = Engine::connect_with_timeout(&endpoint, Duration::from_secs(5))
        .await
        .map_err(|source| RecoverError::Connect {
            machine: r.survivor.clone(),
            source,
        })?;
    record.write(started).map_err(RecoverError::Record)?;
    let t0 = Instant::now();
    engine
        .force_new_cluster(&r.addr)
        .await
        .map_err(|source| RecoverError::ForceNewCluster {
            machine: r.survivor.clone(),
            source,
        })?;
    let force_new_cluster_ms = t0.elapsed().as_millis() as u64;
    let nodes = leads(&engine, &r.survivor).await?;
    let leads_after_ms = t0.elapsed().as_millis() as u64;
    let tail = tail(started, &nodes);
    let mut done = complete(local, record, &engine, started, &tail, &r.summary(), store).await;
    done.forced = Some(Forced {
        force_new_cluster_ms,
        leads_after_ms,
    });
    Ok(done)
}

/// Finishes the recovery a previous run recorded and did not complete,
/// through the engine [`decide`] names (it knows the leader).
async fn finish(
    local: &LocalProvider,
    record: &Record,
    f: &Finish,
    store: &StoreArgs,
) -> Result<Done, RecoverError> {
    let endpoint = local.endpoint(&f.through).unwrap_or_default();
    let engine = Engine::connect_with_timeout(&endpoint, Duration::from_secs(5))
        .await
        .map_err(|source| RecoverError::Connect {
            machine: f.through.clone(),
            source,
        })?;
    let mut reason = format!(
        "{}; finished by a rerun of drover recover (the run that started it at {} stopped before its end)",
        f.started.recovery.summary(),
        rfc3339(f.started.at_ms)
    );
    for k in &f.tail.kept {
        reason.push_str(&format!(
            "; node {} ({}) kept: {}",
            k.member.node_id, k.member.addr, k.why
        ));
    }
    Ok(complete(local, record, &engine, &f.started, &f.tail, &reason, store).await)
}

/// The tail of a recovery, on an engine that knows the leader: removes the
/// gone members' node entries the [`Tail`] lists (out of the raft, never
/// Ready; left there, the meltdown guard would count them as machines lost
/// and stop the controller from rebuilding the group), records the
/// recovery in the audit log (once per recovery), and removes the record
/// when both are done. A store kept in the swarm is writable only now, and
/// is read through this engine.
async fn complete(
    local: &LocalProvider,
    record: &Record,
    engine: &Engine,
    started: &Started,
    tail: &Tail,
    reason: &str,
    store: &StoreArgs,
) -> Done {
    let mut removed = Vec::new();
    for p in &tail.remove {
        let error = engine
            .remove_node(&p.node_id, false, &Unfenced)
            .await
            .err()
            .map(|e| e.to_string());
        removed.push(Removed {
            node_id: p.node_id.clone(),
            error,
        });
    }
    let not_recorded = audit(local, started, reason, store, engine.endpoint())
        .await
        .err()
        .map(|e| e.to_string());
    let record_left = if not_recorded.is_some() || removed.iter().any(|r| r.error.is_some()) {
        Some(record.path.display().to_string())
    } else {
        record
            .clear()
            .err()
            .map(|e| format!("{e} (the recovery is finished: a rerun only confirms it)"))
    };
    Done {
        forced: None,
        removed,
        absent: tail.absent.iter().map(|p| p.node_id.clone()).collect(),
        kept: tail.kept.clone(),
        not_recorded,
        record_left,
    }
}

/// `ms` since the Unix epoch as an RFC 3339 time (seconds).
pub fn rfc3339(ms: u64) -> String {
    humantime::format_rfc3339_seconds(UNIX_EPOCH + Duration::from_millis(ms)).to_string()
}

/// Waits until the survivor's engine lists the nodes as the leader; the
/// nodes it lists.
async fn leads(engine: &Engine, machine: &str) -> Result<Vec<Node>, RecoverError> {
    let deadline = Instant::now() + LEADS_WITHIN;
    loop {
        let said = match engine.observe().await {
            SwarmView::Ok(nodes) => return Ok(nodes),
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
/// takes the term back), once per recovery: its operation id is the
/// record's, and an event with it already there is not written again. A
/// swarm store is opened on `survivor` (an engine that knows the leader:
/// right after force-new-cluster, the only manager).
async fn audit(
    local: &LocalProvider,
    started: &Started,
    reason: &str,
    store: &StoreArgs,
    survivor: &str,
) -> Result<(), StoreError> {
    let r = &started.recovery;
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
    let op = started.op();
    let written = store.events(started.at_ms).await?;
    if written
        .iter()
        .any(|e| e.action == ACTION && e.op.as_deref() == Some(op.as_str()))
    {
        return Ok(());
    }
    let event = Event {
        at_ms: drover_controller::wall_ms(),
        controller: IDENTITY.into(),
        group,
        op: Some(op),
        action: ACTION,
        target: Some(r.survivor.clone()),
        outcome: "ok".into(),
        reason: reason.into(),
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
