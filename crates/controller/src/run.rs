//! The reconcile loop: observe → plan → journal → act, event-driven.

use crate::context::Context;
use crate::execute;
use crate::observe::{self, Stored};
use crate::status::{StatusDoc, wall_ms};
use drover_core::model::SwarmView;
use drover_core::plan::{self, Action, Memory, Phase, Plan, PlanInput};
use drover_spi::{Epoch, Event, Provenance, StoreError};
use std::collections::HashSet;
use std::collections::hash_map::RandomState;
use std::hash::BuildHasher;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::mpsc;
use tokio::time::Instant;

/// Consecutive passes allowed without sleeping.
const MAX_IMMEDIATE_PASSES: u32 = 20;

/// A finished side effect, reported back to the loop.
struct Finished {
    op: String,
    group: Option<String>,
    what: String,
    result: Result<(), String>,
}

/// What one pass did.
#[derive(Debug, Clone)]
pub struct PassReport {
    /// This controller was the one acting.
    pub acting: bool,
    /// The store refused its epoch: another controller took over.
    pub fenced: bool,
    /// The plan, when one was made.
    pub plan: Option<Plan>,
    /// The pass wrote the journal or started a step.
    pub progressed: bool,
}

/// A controller. One per manager; only the leader's acts.
pub struct Controller {
    ctx: Arc<Context>,
    started: Instant,
    memory: Memory,
    epoch: Option<Epoch>,
    running: HashSet<String>,
    done_tx: mpsc::UnboundedSender<Finished>,
    done_rx: mpsc::UnboundedReceiver<Finished>,
    last_publish: Option<Instant>,
    passes: u64,
    /// Consecutive passes run without sleeping.
    immediate: u32,
    /// Nudges from outside (engine events): look again now.
    triggers: Option<mpsc::UnboundedReceiver<()>>,
    /// Set once a write was fenced: an off-cluster controller then stops for
    /// good (a manager's controller campaigns again only as swarm leader).
    fenced: bool,
    /// Extra time every pass spends: see [`Controller::with_pass_delay`].
    pass_delay: Duration,
}

impl Controller {
    /// A controller wired to `ctx`; its providers' calls are rate-limited
    /// and retried (see `paced`).
    pub fn new(mut ctx: Context) -> Self {
        ctx.providers = crate::paced::wrap(ctx.providers);
        let (done_tx, done_rx) = mpsc::unbounded_channel();
        Controller {
            ctx: Arc::new(ctx),
            started: Instant::now(),
            memory: Memory::default(),
            epoch: None,
            running: HashSet::new(),
            done_tx,
            done_rx,
            last_publish: None,
            passes: 0,
            immediate: 0,
            triggers: None,
            fenced: false,
            pass_delay: Duration::ZERO,
        }
    }

    /// Makes every pass `delay` slower, blocking like that much computation
    /// would (a virtual clock never sees it, a real one does). A benchmark
    /// knob only: drover-bench injects 50 ms to prove its clock charges the
    /// controller's own time. Nothing in drover sets it.
    pub fn with_pass_delay(mut self, delay: Duration) -> Self {
        self.pass_delay = delay;
        self
    }

    /// Also wakes on every message of `triggers` (e.g. the engine's node
    /// events), so a leadership change is noticed at once, not at the resync.
    pub fn with_triggers(mut self, triggers: mpsc::UnboundedReceiver<()>) -> Self {
        self.triggers = Some(triggers);
        self
    }

    /// Passes made so far.
    pub fn passes(&self) -> u64 {
        self.passes
    }

    /// Runs until `shutdown` resolves. Wakes on a finished step, the
    /// planner's next timer, or the resync tick.
    pub async fn run(mut self, shutdown: impl std::future::Future<Output = ()>) {
        tokio::pin!(shutdown);
        loop {
            if self.fenced && self.ctx.self_link.is_none() {
                tracing::info!("another controller took over; this one stops");
                return;
            }
            let report = self.pass().await;
            let wake = report
                .as_ref()
                .ok()
                .and_then(|r| r.plan.as_ref())
                .and_then(|p| p.wake_at);
            let changed = report.as_ref().is_ok_and(|r| r.progressed);
            if let Err(e) = &report {
                tracing::warn!(error = %e, "pass failed; retrying at the next resync");
            }
            let mut sleep = self.ctx.resync;
            if let Some(at) = wake {
                sleep = sleep.min(Duration::from_millis(at.saturating_sub(self.now())));
            }
            if changed && self.immediate < MAX_IMMEDIATE_PASSES {
                // The journal changed or a step started: plan again at once
                // (bounded, so a planner that keeps changing its mind cannot
                // spin the loop without letting time pass).
                self.immediate += 1;
                sleep = Duration::ZERO;
            } else {
                self.immediate = 0;
            }
            let nudge = async {
                match self.triggers.as_mut() {
                    Some(rx) => rx.recv().await,
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                _ = &mut shutdown => return,
                Some(done) = self.done_rx.recv() => self.finished(done).await,
                Some(()) = nudge => {}
                _ = tokio::time::sleep(sleep) => {}
            }
            // Drain whatever else finished meanwhile before planning again.
            while let Ok(done) = self.done_rx.try_recv() {
                self.finished(done).await;
            }
        }
    }

    fn now(&self) -> u64 {
        self.started.elapsed().as_millis() as u64
    }

    async fn finished(&mut self, done: Finished) {
        self.running.remove(&done.op);
        let outcome = match &done.result {
            Ok(()) => "ok".to_string(),
            Err(e) => format!("failed: {e}"),
        };
        tracing::info!(op = %done.op, what = %done.what, %outcome, "step finished");
        self.event(done.group, Some(done.op), "step", &done.what, outcome)
            .await;
    }

    async fn event(
        &mut self,
        group: Option<String>,
        op: Option<String>,
        action: &str,
        reason: &str,
        outcome: String,
    ) {
        let Some(epoch) = self.epoch else { return };
        let event = Event {
            at_ms: wall_ms(),
            controller: self.ctx.identity.clone(),
            group,
            op,
            action: action.into(),
            target: None,
            outcome,
            reason: reason.into(),
        };
        if let Err(StoreError::Fenced { .. }) = self.ctx.store.append_event(epoch, &event).await {
            self.stand_down("event write fenced");
            self.fenced = true;
        }
    }

    fn stand_down(&mut self, why: &str) {
        if self.epoch.is_some() {
            tracing::warn!(why, "standing down: another controller leads");
        }
        self.epoch = None;
        self.memory = Memory::default();
    }

    /// Should this controller act on what it sees? On a manager: only while
    /// its engine's node is the swarm leader. Off-cluster (no self link):
    /// the store's leadership (the epoch) decides alone.
    fn leads(&self, swarm: &SwarmView) -> bool {
        if self.ctx.self_link.is_none() {
            return true;
        }
        match swarm {
            SwarmView::Ok(nodes) => {
                let leader = nodes
                    .iter()
                    .find(|n| n.raft.as_ref().is_some_and(|r| r.leader));
                self.ctx.self_link.is_some()
                    && leader.and_then(|n| n.link.as_ref()) == self.ctx.self_link.as_ref()
            }
            SwarmView::Absent | SwarmView::NoQuorum(_) | SwarmView::Unavailable(_) => false,
        }
    }

    /// One observe → plan → journal → act pass.
    pub async fn pass(&mut self) -> Result<PassReport, StoreError> {
        self.passes += 1;
        if !self.pass_delay.is_zero() {
            std::thread::sleep(self.pass_delay);
        }
        let Some(stored) = observe::stored(&self.ctx).await? else {
            return Ok(PassReport {
                acting: false,
                fenced: false,
                plan: None,
                progressed: false,
            });
        };
        let observed = observe::world(&self.ctx, &stored.desired).await;
        if !self.leads(&observed.swarm) {
            self.stand_down("not the swarm leader");
            return Ok(PassReport {
                acting: false,
                fenced: false,
                plan: None,
                progressed: false,
            });
        }
        // A newer term anywhere means this controller was deposed: stop at once,
        // before acting, rather than at its next refused write.
        let term = self.ctx.store.leader().await?;
        if let (Some(mine), Some((current, _))) = (self.epoch, term)
            && current != mine
        {
            self.stand_down("a newer controller term exists");
            self.fenced = true;
            return Ok(PassReport {
                acting: false,
                fenced: true,
                plan: None,
                progressed: false,
            });
        }
        let epoch = match self.epoch {
            Some(e) => e,
            None => {
                let e = self.ctx.store.campaign(&self.ctx.identity).await?;
                tracing::info!(epoch = e, "acting as the leader's controller");
                self.memory = Memory::default();
                self.epoch = Some(e);
                e
            }
        };
        let nonce = RandomState::new().hash_one(self.passes);
        let plan = plan::plan(PlanInput {
            desired: &stored.desired,
            observed: &observed,
            journal: &stored.journal,
            memory: &self.memory,
            now: self.now(),
            nonce,
        });
        self.memory = plan.memory.clone();
        let progressed = match self.act(&stored, &plan, epoch).await {
            Err(StoreError::Fenced { .. }) => {
                self.stand_down("journal write fenced");
                self.fenced = true;
                return Ok(PassReport {
                    acting: true,
                    fenced: true,
                    plan: Some(plan),
                    progressed: false,
                });
            }
            Err(e) => return Err(e),
            Ok(p) => p,
        };
        self.publish(&stored, &plan, epoch).await?;
        Ok(PassReport {
            acting: true,
            fenced: false,
            plan: Some(plan),
            progressed,
        })
    }

    /// Executes the plan in order: journal writes first, side effects as
    /// tasks. True when anything was written or started.
    async fn act(
        &mut self,
        stored: &Stored,
        plan: &Plan,
        epoch: Epoch,
    ) -> Result<bool, StoreError> {
        let mut journal = stored.journal.clone();
        let mut progressed = false;
        for action in &plan.actions {
            if self.epoch != Some(epoch) {
                // Fenced mid-plan (an event write was refused): act no further.
                return Err(StoreError::Fenced {
                    mine: epoch,
                    current: 0,
                });
            }
            progressed |= !action.is_side_effect();
            match action {
                Action::Begin { op } => {
                    self.ctx.store.journal_put(epoch, op).await?;
                    journal.push(op.as_ref().clone());
                    self.event(
                        Some(op.group.clone()),
                        Some(op.id.clone()),
                        "begin",
                        &format!("{:?}", op.kind),
                        "journaled".into(),
                    )
                    .await;
                }
                Action::MarkDone { op, step } => {
                    if let Some(o) = journal.iter_mut().find(|o| o.id == *op) {
                        o.done.insert(*step);
                        self.ctx.store.journal_put(epoch, o).await?;
                    }
                }
                Action::Complete { op } => {
                    self.ctx.store.journal_remove(epoch, op).await?;
                    journal.retain(|o| o.id != *op);
                }
                Action::Rollback { group, reason } => self.rollback(stored, group, reason).await?,
                effect => {
                    if self.spawn(stored, &journal, effect) {
                        progressed = true;
                        // Recorded when started too: a leader's own demotion
                        // can never record its end (it no longer leads then).
                        let group = journal
                            .iter()
                            .find(|o| Some(o.id.as_str()) == effect.op_id())
                            .map(|o| o.group.clone());
                        self.event(
                            group,
                            effect.op_id().map(str::to_string),
                            "step",
                            &effect.describe(),
                            "started".into(),
                        )
                        .await;
                    }
                }
            }
        }
        Ok(progressed)
    }

    /// Starts a side effect unless its operation already has one running.
    fn spawn(
        &mut self,
        stored: &Stored,
        journal: &[drover_core::journal::Operation],
        action: &Action,
    ) -> bool {
        let op = action.op_id().unwrap_or_default().to_string();
        if !self.running.insert(op.clone()) {
            return false;
        }
        let group = journal.iter().find(|o| o.id == op).map(|o| o.group.clone());
        let (ctx, desired, tx, action) = (
            self.ctx.clone(),
            stored.desired.clone(),
            self.done_tx.clone(),
            action.clone(),
        );
        tracing::info!(op = %op, step = %action.describe(), "starting");
        tokio::spawn(async move {
            let result = execute::side_effect(&ctx, &desired, group.as_deref(), &action).await;
            let _ = tx.send(Finished {
                op,
                group,
                what: action.describe(),
                result,
            });
        });
        true
    }

    /// Commits the last converged revision's spec of `group` as a rollback.
    async fn rollback(
        &mut self,
        stored: &Stored,
        group: &str,
        reason: &str,
    ) -> Result<(), StoreError> {
        let history = self.ctx.store.history().await?;
        let target = history
            .iter()
            .rev()
            .find(|r| r.converged && r.rev < stored.revision.rev);
        let Some(old) = target.and_then(|r| r.spec.group(group)) else {
            tracing::warn!(group, "no converged revision to roll back to");
            return Ok(());
        };
        let mut spec = stored.revision.spec.clone();
        if let Some(g) = spec.groups.iter_mut().find(|g| g.name == group) {
            *g = old.clone();
        }
        let provenance = Provenance {
            who: format!("controller {}", self.ctx.identity),
            at_ms: wall_ms(),
            message: format!("automatic rollback of {group}: {reason}"),
        };
        match self
            .ctx
            .store
            .commit(stored.revision.rev, &spec, provenance, true)
            .await
        {
            Ok(rev) => {
                self.event(
                    Some(group.into()),
                    None,
                    "rollback",
                    reason,
                    format!("committed revision {rev}"),
                )
                .await;
                Ok(())
            }
            // Someone committed meanwhile: their spec supersedes the rollback.
            Err(StoreError::Conflict { .. }) => Ok(()),
            Err(e) => Err(e),
        }
    }

    /// Publishes status (on change, and as a heartbeat) and marks convergence.
    async fn publish(
        &mut self,
        stored: &Stored,
        plan: &Plan,
        epoch: Epoch,
    ) -> Result<(), StoreError> {
        let converged = plan.groups.iter().all(|g| g.phase == Phase::Converged)
            && stored.journal.is_empty()
            && plan.actions.is_empty();
        if converged && !stored.revision.converged {
            self.ctx
                .store
                .mark_converged(epoch, stored.revision.rev)
                .await?;
        }
        let due = self
            .last_publish
            .is_none_or(|t| t.elapsed() >= Duration::from_secs(2))
            || !plan.actions.is_empty();
        if due {
            let doc = StatusDoc::new(
                &self.ctx.identity,
                epoch,
                stored.revision.rev,
                &plan.groups,
                &plan.swarm,
                stored.journal.len(),
                &plan.explanation,
            );
            self.ctx
                .store
                .publish_status(epoch, &serde_json::to_value(&doc).unwrap_or_default())
                .await?;
            self.last_publish = Some(Instant::now());
        }
        Ok(())
    }
}
