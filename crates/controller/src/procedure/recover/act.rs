//! Carrying a decided recovery out: the record, force-new-cluster, the
//! wait for the new cluster's leader, the gone members' node entries and
//! the audit event — or the tail of a recovery a previous run started.

use super::{Done, EngineCallError, Forced, IDENTITY, Reach, Record, RecordError, Removed};
use super::{Endpoints, SurvivorEngine};
use drover_core::model::{Node, SwarmView};
use drover_core::recover::{Finish, Machine, Recovery, Started, Tail, rfc3339, tail};
use drover_spi::{Event, EventAction, Fence, LeaseExpired, StoreError};
use std::sync::Arc;
use std::time::Duration;
use tokio::time::Instant;

/// The recovery's audit event's action.
const ACTION: EventAction = EventAction::Recover;

/// How long the new cluster may take to list its nodes with a leader
/// (measured: force-new-cluster returns in ~0.6 s and leads at once).
pub const LEADS_WITHIN: Duration = Duration::from_secs(30);

/// How long a survivor whose force-new-cluster answered an error is given
/// to show that it leads anyway (a formed cluster leads within a second).
const FORMED_WITHIN: Duration = Duration::from_secs(10);

/// How often the audit event is tried again after losing its term to the
/// survivor's controller (seen once in a full test run: the controller took
/// the term back between `recover`'s campaign and its write).
const RECORD_TRIES: u32 = 5;

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
        source: EngineCallError,
    },
    /// The recovery record could not be written: nothing was changed.
    #[error("{0}; nothing was changed")]
    Record(#[source] RecordError),
    /// `swarm init --force-new-cluster` failed (or its fence refused).
    #[error(
        "docker swarm init --force-new-cluster on {machine} failed: {source}; run drover recover again: it finishes the recovery if the new cluster formed, else it judges afresh"
    )]
    ForceNewCluster {
        /// The survivor.
        machine: String,
        /// The engine's error.
        #[source]
        source: EngineCallError,
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

/// What carrying a recovery out reaches.
pub(super) struct Act<'a> {
    pub reach: &'a dyn Reach,
    pub record: &'a Record,
    pub endpoints: &'a Endpoints,
    pub machines: &'a [Machine],
    pub fence: &'a dyn Fence,
}

impl Act<'_> {
    async fn connect(&self, machine: &str) -> Result<Arc<dyn SurvivorEngine>, RecoverError> {
        let endpoint = self.endpoints.get(machine).cloned().unwrap_or_default();
        self.reach
            .connect(&endpoint)
            .await
            .map_err(|source| RecoverError::Connect {
                machine: machine.to_string(),
                source,
            })
    }

    /// Carries recovery `r` out: writes the record, then force-new-cluster
    /// on the survivor's engine, waits until it leads, and does the tail
    /// ([`Act::complete`]). The record is written before the one
    /// irreversible step, so a run cut short anywhere after it is finished
    /// by the next.
    pub async fn carry_out(&self, r: &Recovery) -> Result<Done, RecoverError> {
        let started = Started::new(r.clone(), crate::status::wall_ms());
        let engine = self.connect(&r.survivor).await?;
        self.record.write(&started).map_err(RecoverError::Record)?;
        let t0 = Instant::now();
        let answer = engine.force_new_cluster(&r.addr, self.fence).await;
        let force_new_cluster_ms = t0.elapsed().as_millis() as u64;
        let (nodes, engine_said) = match answer {
            Ok(()) => (
                leads(engine.as_ref(), &r.survivor, LEADS_WITHIN).await?,
                None,
            ),
            Err(source) => formed_anyway(engine.as_ref(), r, source).await?,
        };
        let leads_after_ms = t0.elapsed().as_millis() as u64;
        let tail = tail(&started, &nodes);
        let mut done = self
            .complete(engine.as_ref(), &started, &tail, &r.summary())
            .await;
        done.forced = Some(Forced {
            force_new_cluster_ms,
            leads_after_ms,
            engine_said,
        });
        Ok(done)
    }

    /// Finishes the recovery a previous run recorded and did not complete,
    /// through the engine the decision names (it knows the leader).
    pub async fn finish(&self, f: &Finish) -> Result<Done, RecoverError> {
        let engine = self.connect(&f.through).await?;
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
        Ok(self
            .complete(engine.as_ref(), &f.started, &f.tail, &reason)
            .await)
    }

    /// The tail of a recovery, on an engine that knows the leader: removes
    /// the gone members' node entries the [`Tail`] lists (out of the raft,
    /// never Ready; left there, the meltdown guard would count them as
    /// machines lost and stop the controller from rebuilding the group),
    /// records the recovery in the audit log (once per recovery), and
    /// removes the record when both are done. A store kept in the swarm is
    /// writable only now, and is read through this engine.
    async fn complete(
        &self,
        engine: &dyn SurvivorEngine,
        started: &Started,
        tail: &Tail,
        reason: &str,
    ) -> Done {
        let mut removed = Vec::new();
        for p in &tail.remove {
            let error = engine
                .remove_node(&p.node_id, self.fence)
                .await
                .err()
                .map(|e| e.to_string());
            removed.push(Removed {
                node_id: p.node_id.clone(),
                error,
            });
        }
        let not_recorded = self
            .audit(started, reason, engine.endpoint())
            .await
            .err()
            .map(|e| e.to_string());
        let record_left = if not_recorded.is_some() || removed.iter().any(|r| r.error.is_some()) {
            Some(self.record.path().display().to_string())
        } else {
            self.record
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

    /// The audit event, under an epoch of its own (the survivor's
    /// controller campaigns again as the leader's; its next write finds it
    /// fenced and it takes the term back), once per recovery: its operation
    /// id is the record's, and an event with it already there is not
    /// written again.
    async fn audit(
        &self,
        started: &Started,
        reason: &str,
        survivor: &str,
    ) -> Result<(), StoreError> {
        let r = &started.recovery;
        let store = self.reach.audit_store(survivor).await?;
        let group = self
            .machines
            .iter()
            .find(|m| m.id == r.survivor)
            .map(|m| m.group.clone());
        let op = started.op();
        let written = store.events(started.at_ms).await?;
        if written
            .iter()
            .any(|e| e.action == ACTION && e.op.as_deref() == Some(op.as_str()))
        {
            return Ok(());
        }
        let event = Event {
            at_ms: crate::status::wall_ms(),
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
}

/// A force-new-cluster that answered an error may still have formed the
/// new cluster: swarmkit forms it, then updates the cluster's settings,
/// and that update can fail ("update out of sequence", seen on Incus
/// machines in 2 of 2 recoveries). The survivor is asked for up to
/// [`FORMED_WITHIN`] whether it now leads; if it does, the recovery goes on
/// (what a rerun would finish from the record), and the engine's answer is
/// kept for the operator. A call its fence refused was never sent: that
/// error stands at once.
async fn formed_anyway(
    engine: &dyn SurvivorEngine,
    r: &Recovery,
    source: EngineCallError,
) -> Result<(Vec<Node>, Option<String>), RecoverError> {
    let refused = |source| RecoverError::ForceNewCluster {
        machine: r.survivor.clone(),
        source,
    };
    if source.downcast_ref::<LeaseExpired>().is_some() {
        return Err(refused(source));
    }
    match leads(engine, &r.survivor, FORMED_WITHIN).await {
        // Led by the survivor itself: a swarm led elsewhere (the old
        // majority back) is no new cluster.
        Ok(nodes) if survivor_leads(&nodes, &r.node_id) => Ok((nodes, Some(source.to_string()))),
        _ => Err(refused(source)),
    }
}

/// The survivor's node is the leader in `nodes`.
fn survivor_leads(nodes: &[Node], node_id: &str) -> bool {
    nodes
        .iter()
        .any(|n| n.id == node_id && n.raft.as_ref().is_some_and(|m| m.leader))
}

/// Waits up to `within` until the survivor's engine lists the nodes as the
/// leader; the nodes it lists.
async fn leads(
    engine: &dyn SurvivorEngine,
    machine: &str,
    within: Duration,
) -> Result<Vec<Node>, RecoverError> {
    let deadline = Instant::now() + within;
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
