//! The reconcile loop: observe → plan → journal → act, event-driven.

use crate::context::Context;
use crate::execute::{self, Failure, StepError, Term};
use crate::metrics::{MeteredCluster, MeteredProvider, Metrics};
use crate::observe::{self, Stored};
use crate::status::{status_json, wall_ms};
use crate::takeover;
use crate::tokens;
use drover_core::execute::{self as execute_plan, Carry, Execution, JournalWrite};
use drover_core::join_token::Tokens;
use drover_core::journal::{HookFailed, Operation, Step};
use drover_core::model::{Observed, SwarmView};
use drover_core::plan::{self, Action, Memory, Phase, Plan, PlanInput};
use drover_core::quorum_probe::{EngineAnswer, EngineView, Left};
use drover_core::revision::{rollback_target, with_group};
use drover_core::spec::{HookOnFailure, validate_commit};
use drover_spi::{Epoch, Event, FORMAT, Heartbeat, Provenance, Revision, StoreError};
use std::collections::hash_map::RandomState;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::hash::BuildHasher;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::mpsc;
use tokio::task::AbortHandle;
use tokio::time::Instant;

/// Consecutive passes allowed without sleeping.
const MAX_IMMEDIATE_PASSES: u32 = 20;

/// How long the pass that follows a pass at once first waits for the
/// steps that pass started (a finished step wakes it sooner).
const SETTLE: Duration = Duration::from_secs(1);

/// While a pass acts, status is published at most this often, and at once
/// when a group's phase or the swarm's status changes: the document lists
/// every member, and writing it on every pass of a 1000-member rollout was
/// a fifth of the controller's work (issue 7).
const ACTIVE_PUBLISH_EVERY: Duration = Duration::from_millis(250);

/// How often a controller advertises the record format it reads (and
/// re-reads everyone's to pick the format it writes); with a swarm store,
/// also how often it beats at all (see [`drover_spi::Store::outside_raft`]).
const HEARTBEAT_EVERY: Duration = Duration::from_secs(60);

/// A finished side effect, reported back to the loop.
struct Finished {
    op: String,
    group: Option<String>,
    what: String,
    /// The step was a provision call (a failure uses the slot's attempt budget).
    provision: bool,
    /// The zone it provisioned in (a refusal there for lack of capacity
    /// moves the slot's next call to another zone).
    zone: Option<String>,
    /// The step was this engine's own hand-over: the node it demoted.
    handed_over: Option<String>,
    kind: &'static str,
    /// The term it was started under.
    epoch: Epoch,
    result: Result<(), StepError>,
    /// What a hook said (its output's end), when it succeeded.
    output: Option<String>,
    /// The step was a lifecycle hook: its step and failure policy.
    hook: Option<(Step, HookOnFailure)>,
}

/// A side effect that ended, as a subscriber ([`Controller::with_step_reports`])
/// hears it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StepReport {
    /// The step's operation.
    pub op: String,
    /// The action's kind (`provision`, `drain`, ...).
    pub kind: &'static str,
    /// `None` when it succeeded; else what the failure says about trying
    /// again, and the error as the event log records it.
    pub failure: Option<(Failure, String)>,
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
    /// The pass wrote the journal: planning again may find more to do at
    /// once. (A step it started reports its end to the loop itself.)
    pub progressed: bool,
}

impl PassReport {
    /// A pass that planned nothing: `acting` when this controller holds
    /// the term, `fenced` when the store refused it.
    fn empty(acting: bool, fenced: bool) -> Self {
        PassReport {
            acting,
            fenced,
            plan: None,
            progressed: false,
        }
    }
}

/// A controller. One per manager; only the leader's acts.
pub struct Controller {
    ctx: Arc<Context>,
    started: Instant,
    memory: Memory,
    epoch: Option<Epoch>,
    /// Operations with a side effect running, each with the handle that
    /// cancels it when this controller stands down (`None`: never cut short).
    running: HashMap<String, Option<AbortHandle>>,
    done_tx: mpsc::UnboundedSender<Finished>,
    done_rx: mpsc::UnboundedReceiver<Finished>,
    /// From its own hand-over's task: the node its engine was seen to
    /// leave as, before the leave call returned.
    left_tx: mpsc::UnboundedSender<String>,
    left_rx: mpsc::UnboundedReceiver<String>,
    last_publish: Option<Instant>,
    /// The group phases and swarm status last published.
    published: (Vec<Phase>, plan::SwarmStatus),
    passes: u64,
    /// Consecutive passes run without sleeping.
    immediate: u32,
    /// The operations whose step the last pass started.
    fresh: Vec<String>,
    /// Nudges from outside (engine events): look again now.
    triggers: Option<mpsc::UnboundedReceiver<()>>,
    /// Set once a write was fenced: an off-cluster controller then stops for
    /// good (a manager's controller campaigns again only as swarm leader).
    fenced: bool,
    /// Last format negotiation (and, with a swarm store, heartbeat).
    last_beat: Option<Instant>,
    /// What its own engine said at the last look, as the heartbeat
    /// publishes it (a manager's controller only).
    engine: Option<EngineView>,
    /// The unreadable record this controller last refused to act on.
    refused: Option<String>,
    /// Groups reported blocked, with the reason last recorded as an event.
    blocked: BTreeMap<String, String>,
    /// Groups whose automatic rollback this pass refused to commit (the
    /// spec it would commit is not valid: `validate_commit`), with why:
    /// reported blocked for as long as the planner asks for it.
    rollback_refused: BTreeMap<String, String>,
    /// Where passes, steps and API calls are counted, when served.
    metrics: Option<Metrics>,
    /// Whether the store's change watch should look: only while this
    /// controller acts and is not handing its engine's leadership over (a
    /// swarm store is read through that very engine, which must not be
    /// asked while it leaves: swarm-facts).
    watching: tokio::sync::watch::Sender<bool>,
    /// The operation whose step hands this engine's leadership over
    /// (`DemoteSelfAndLeave`), while that step runs: passes look at nothing
    /// meanwhile (see [`Controller::guarded_pass`]).
    handing_over: Option<String>,
    /// Who hears of every step that ends.
    step_reports: Option<mpsc::UnboundedSender<StepReport>>,
    /// This term's view of the join tokens placed in readable user data
    /// (see `tokens`).
    tokens: Tokens,
}

impl Controller {
    /// A controller wired to `ctx`; its providers' calls are rate-limited
    /// and retried (see `paced`).
    pub fn new(mut ctx: Context) -> Self {
        ctx.providers = crate::paced::wrap(ctx.providers);
        let (done_tx, done_rx) = mpsc::unbounded_channel();
        let (left_tx, left_rx) = mpsc::unbounded_channel();
        Controller {
            ctx: Arc::new(ctx),
            started: Instant::now(),
            memory: Memory::default(),
            epoch: None,
            running: HashMap::new(),
            done_tx,
            done_rx,
            left_tx,
            left_rx,
            last_publish: None,
            published: Default::default(),
            passes: 0,
            immediate: 0,
            fresh: Vec::new(),
            triggers: None,
            fenced: false,
            last_beat: None,
            engine: None,
            refused: None,
            blocked: BTreeMap::new(),
            rollback_refused: BTreeMap::new(),
            metrics: None,
            watching: tokio::sync::watch::Sender::new(false),
            handing_over: None,
            step_reports: None,
            tokens: Tokens::default(),
        }
    }

    /// Records into `metrics`: every pass, step, and provider and engine call.
    pub fn with_metrics(mut self, metrics: Metrics) -> Self {
        let mut ctx = (*self.ctx).clone();
        for p in ctx.providers.values_mut() {
            *p = Arc::new(MeteredProvider {
                inner: p.clone(),
                metrics: metrics.clone(),
            });
        }
        ctx.cluster = Arc::new(MeteredCluster {
            inner: ctx.cluster.clone(),
            metrics: metrics.clone(),
        });
        self.ctx = Arc::new(ctx);
        self.metrics = Some(metrics);
        self
    }

    /// Also wakes on every message of `triggers` (e.g. the engine's node
    /// events), so a leadership change is noticed at once, not at the resync.
    pub fn with_triggers(mut self, triggers: mpsc::UnboundedReceiver<()>) -> Self {
        self.triggers = Some(triggers);
        self
    }

    /// Also reports every step that ends to `reports` (e.g. a bootstrap
    /// waiting for its first manager's provision).
    pub fn with_step_reports(mut self, reports: mpsc::UnboundedSender<StepReport>) -> Self {
        self.step_reports = Some(reports);
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
        let mut commits = watch_store(self.ctx.clone(), self.watching.subscribe());
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
                // The journal changed: plan again at once
                // (bounded, so a planner that keeps changing its mind cannot
                // spin the loop without letting time pass) — or, while a step
                // that pass started still runs, once it ends or `SETTLE` has
                // passed. Most steps are one quick call; observed before it
                // returns, the world still looks as before it, and a pass on
                // that view finds nothing new to do: where observing takes
                // seconds (a describe of 1000 EC2 instances), every step
                // would wait a whole extra pass to be seen done.
                self.immediate += 1;
                let settling = self.fresh.iter().any(|op| self.running.contains_key(op));
                sleep = if settling {
                    sleep.min(SETTLE)
                } else {
                    Duration::ZERO
                };
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
                Some(node) = self.left_rx.recv() => self.report_left(&node).await,
                Some(()) = nudge => {}
                Some(()) = commits.recv() => {}
                _ = tokio::time::sleep(sleep) => {}
            }
            // Take in whatever else finished or nudged meanwhile: the next
            // pass observes all of it, so each needs no pass of its own (a
            // batch of 100 machines joining is a burst of node events).
            while let Ok(done) = self.done_rx.try_recv() {
                self.finished(done).await;
            }
            if let Some(rx) = self.triggers.as_mut() {
                while rx.try_recv().is_ok() {}
            }
            while commits.try_recv().is_ok() {}
        }
    }

    fn now(&self) -> u64 {
        self.started.elapsed().as_millis() as u64
    }

    async fn finished(&mut self, done: Finished) {
        self.running.remove(&done.op);
        if self.handing_over.as_ref() == Some(&done.op) {
            self.handing_over = None;
        }
        if let (Some(node), Ok(())) = (&done.handed_over, &done.result) {
            // Unless its task told of the leave already, before the call returned.
            let told = self
                .engine
                .as_ref()
                .and_then(|v| v.left.as_ref())
                .is_some_and(|l| l.node == *node);
            if !told {
                self.report_left(node).await;
            }
        }
        if let Err(e) = &done.result
            && e.is_deposed()
            && self.epoch == Some(done.epoch)
        {
            self.stand_down("the store named a newer term before a side effect");
            self.fenced = true;
        }
        let outcome = match (&done.result, &done.output) {
            (Ok(()), Some(said)) if !said.is_empty() => format!("ok: {said}"),
            (Ok(()), _) => "ok".to_string(),
            (Err(e), _) => {
                if let Some(m) = &self.metrics {
                    m.step_failed(done.kind, e.failure());
                }
                format!("failed: {e}")
            }
        };
        tracing::info!(op = %done.op, what = %done.what, %outcome, "step finished");
        if let Some(tx) = &self.step_reports {
            let _ = tx.send(StepReport {
                op: done.op.clone(),
                kind: done.kind,
                failure: done
                    .result
                    .as_ref()
                    .err()
                    .map(|e| (e.failure(), e.to_string())),
            });
        }
        if let (true, Err(e)) = (done.provision, &done.result)
            && e.failure() != Failure::Term
        {
            let short = done.zone.as_deref().filter(|_| e.is_capacity());
            self.record_provision_failure(&done.op, short).await;
        }
        if let Some((step, on_failure)) = done.hook {
            self.record_hook(&done.op, step, on_failure, &done.result)
                .await;
        }
        self.event(
            done.group.clone(),
            Some(done.op.clone()),
            "step",
            &done.what,
            outcome,
        )
        .await;
        if let (Some(zone), Err(e)) = (&done.zone, &done.result)
            && e.is_capacity()
        {
            let reason = format!(
                "zone {zone} has no capacity for this machine ({e}): the slot's next provision goes to another of the group's zones unless its logical id pins it, and the group avoids zone {zone} for {}s",
                drover_core::plan::ZONE_BACKOFF.as_secs()
            );
            self.event(
                done.group,
                Some(done.op),
                "zone-fallback",
                &reason,
                "zone avoided".into(),
            )
            .await;
        }
    }

    /// Counts a failed provision call on its journaled operation (with the
    /// zone, when it lacked capacity there): the planner backs off, moves
    /// the slot's next call to another zone, and blocks the group once the
    /// slot's `health.max_attempts` are used. A fact about the world the
    /// planner cannot observe itself, so the journal (fenced) keeps it
    /// across leaders.
    async fn record_provision_failure(&mut self, op: &str, short_zone: Option<&str>) {
        self.update_entry(op, "a failed provision", |e| e.provision_failed(short_zone))
            .await;
    }

    /// Journals a hook's end, which nothing in the world shows: its step
    /// done when it succeeded (or failed with `on_failure: continue`),
    /// otherwise its failure, with which the planner blocks the group and
    /// after which it calls the hook again. A call that never started
    /// (this controller's term ended first) records nothing.
    async fn record_hook(
        &mut self,
        op: &str,
        step: Step,
        on_failure: HookOnFailure,
        result: &Result<(), StepError>,
    ) {
        let failed = match result {
            Err(e) if e.failure() == Failure::Term => return,
            Ok(()) => None,
            Err(e) => Some(e.to_string()),
        };
        self.update_entry(op, "a hook's end", |entry| match failed {
            Some(message) if on_failure == HookOnFailure::Block => {
                let before = entry.hook_failure.as_ref().filter(|f| f.step == step);
                let attempts = before.map_or(0, |f| f.attempts) + 1;
                entry.hook_failure = Some(HookFailed {
                    step,
                    message,
                    attempts,
                });
            }
            _ => {
                entry.done.insert(step);
                entry.hook_failure = None;
            }
        })
        .await;
    }

    /// Changes journaled operation `op` by `change`, fenced by this
    /// controller's term (`what` names the change in a warning).
    async fn update_entry(&mut self, op: &str, what: &str, change: impl FnOnce(&mut Operation)) {
        let Some(epoch) = self.epoch else { return };
        let journal = match self.ctx.store.journal().await {
            Ok(j) => j,
            Err(e) => {
                tracing::warn!(error = %e, op, "could not record {what}");
                return;
            }
        };
        let Some(mut entry) = journal.into_iter().find(|o| o.id == op) else {
            return;
        };
        change(&mut entry);
        match self.ctx.store.journal_put(epoch, &entry).await {
            Err(StoreError::Fenced { .. }) => {
                self.stand_down("journal write fenced");
                self.fenced = true;
            }
            Err(e) => tracing::warn!(error = %e, op, "could not record {what}"),
            Ok(()) => {}
        }
    }

    /// One event per garbage collection begun: the item, the rule and the evidence.
    async fn collection_event(&mut self, op: &drover_core::journal::Operation) {
        let (Some(c), Some(epoch)) = (&op.collection, self.epoch) else {
            return;
        };
        let event = Event {
            at_ms: wall_ms(),
            controller: self.ctx.identity.clone(),
            group: Some(op.group.clone()),
            op: Some(op.id.clone()),
            action: "gc".into(),
            target: Some(c.item.clone()),
            outcome: format!("collecting ({})", c.rule.as_str()),
            reason: format!("{}: {}", c.rule.as_str(), c.evidence),
        };
        self.append(epoch, &event).await;
    }

    /// One event when a group becomes blocked or its reason changes (the
    /// meltdown guard and a spent attempt budget among them).
    async fn blocked_events(&mut self, plan: &Plan) {
        let now: BTreeMap<String, String> = plan
            .groups
            .iter()
            .filter(|g| g.phase == Phase::Blocked)
            .map(|g| (g.name.clone(), g.reason.clone().unwrap_or_default()))
            .collect();
        for (group, reason) in &now {
            if self.blocked.get(group) != Some(reason) {
                self.event(
                    Some(group.clone()),
                    None,
                    "blocked",
                    reason,
                    "blocked".into(),
                )
                .await;
            }
        }
        self.blocked = now;
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
        self.append(epoch, &event).await;
    }

    async fn append(&mut self, epoch: Epoch, event: &Event) {
        if let Err(StoreError::Fenced { .. }) = self.ctx.store.append_event(epoch, event).await {
            self.stand_down("event write fenced");
            self.fenced = true;
        }
    }

    /// Stops acting: forgets its term and memory, and cancels the side
    /// effects it started (each stops at its next await; one whose call
    /// already reached its engine or provider may have happened, which its
    /// journaled intent tells the next leader). Except the leader's own
    /// `DemoteSelfAndLeave`: once its node is demoted (its first call, the
    /// only one that touches the raft, made after the term was confirmed)
    /// the protocol must end with the leave, or the engine stays a
    /// demoted-but-joined node that the next leader destroys only after
    /// `LEAVE_BOUND` instead of on its `left` answer; and its demotion moves
    /// leadership away, so the next leader's campaign soon refuses a write of
    /// this one (a finished step's event) and stands it down while it still
    /// leaves: were the hand-over cancellable, that would cut it in half.
    fn stand_down(&mut self, why: &str) {
        if self.epoch.is_some() {
            tracing::warn!(why, "standing down: another controller leads");
        }
        self.epoch = None;
        self.memory = Memory::default();
        self.watching.send_replace(false);
        for (op, abort) in &self.running {
            if let Some(abort) = abort {
                tracing::info!(op = %op, "cancelling its step: this controller stood down");
                abort.abort();
            }
        }
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

    /// Notes what its own engine said of the swarm (`swarm`): the view its
    /// heartbeat publishes and the metrics show.
    fn see_engine(&mut self, swarm: &SwarmView) {
        let view = EngineView::next(
            self.engine.as_ref(),
            swarm,
            self.ctx.self_link.as_deref(),
            wall_ms(),
        );
        if let Some(m) = &self.metrics {
            m.engine_seen(&view);
        }
        self.engine = Some(view);
    }

    /// Its hand-over's `swarm leave` returned: says so in the store at once
    /// (its heartbeat's `left`), where the next leader's controller is
    /// woken by it and destroys this machine without asking its engine.
    /// Nothing in a swarm store: this engine can no longer write the raft.
    async fn report_left(&mut self, node: &str) {
        let mut view = self.engine.clone().unwrap_or_else(|| {
            EngineView::next(None, &SwarmView::Absent, self.ctx.self_link.as_deref(), 0)
        });
        view.answer = EngineAnswer::NotAManager;
        view.manager = false;
        view.leader = None;
        view.left = Some(Left {
            node: node.to_string(),
            at_ms: wall_ms(),
        });
        self.engine = Some(view);
        if let Err(e) = self.beat(true).await {
            tracing::warn!(error = %e, "could not report this engine's leave; the next leader asks the engine");
        }
    }

    /// Writes its heartbeat: the newest record format this build reads and
    /// what its own engine last said. Every pass (`every_pass`) where the
    /// store lives outside the raft, else once a minute; and once a minute
    /// it picks the format to write: the oldest any live controller reads.
    async fn beat(&mut self, every_pass: bool) -> Result<(), StoreError> {
        let due = self
            .last_beat
            .is_none_or(|t| t.elapsed() >= HEARTBEAT_EVERY);
        let each_pass = every_pass && self.ctx.store.outside_raft();
        if !due && !each_pass {
            return Ok(());
        }
        let beat = Heartbeat {
            holder: self.ctx.identity.clone(),
            format: FORMAT,
            at_ms: wall_ms(),
            engine: self.engine.clone().filter(|_| self.ctx.self_link.is_some()),
        };
        if let Err(e) = self.ctx.store.heartbeat(&beat).await {
            if !due {
                // The per-pass beat is best effort (the engine view for
                // `status`, a reported leave): a failed one must not stop a
                // pass that may be in the middle of a hand-over.
                tracing::warn!(error = %e, "heartbeat not written");
                return Ok(());
            }
            return Err(e);
        }
        if due {
            let format = self.ctx.store.negotiate_format(beat.at_ms).await?;
            tracing::debug!(format, "record format negotiated");
            self.last_beat = Some(Instant::now());
        }
        Ok(())
    }

    /// A record this build cannot read (damaged, or from a newer drover):
    /// act on nothing, leave it as it is, and say so — in the log, and in
    /// the event log while this controller still holds its term.
    async fn refuse(&mut self, e: StoreError) -> Result<PassReport, StoreError> {
        let why = e.to_string();
        if self.refused.as_ref() != Some(&why) {
            tracing::error!(error = %why, "refusing to act on the store");
            self.event(None, None, "refuse", &why, "not acting".into())
                .await;
            self.refused = Some(why);
        }
        Ok(PassReport {
            acting: false,
            fenced: false,
            plan: None,
            progressed: false,
        })
    }

    /// One observe → plan → journal → act pass.
    pub async fn pass(&mut self) -> Result<PassReport, StoreError> {
        self.fresh.clear();
        let passed = self.guarded_pass().await;
        if let Some(m) = &self.metrics {
            m.passed(wall_ms());
        }
        let on_cluster = self.ctx.self_link.is_some() || self.metrics.is_some();
        if passed.is_err() && on_cluster && self.handing_over.is_none() {
            // The store may be unreadable because the quorum is lost (a
            // swarm store): say what this controller's engine sees anyway,
            // in the metrics and, where the store is outside the raft and
            // answers, in its heartbeat (not while it leaves: asked then,
            // the engine holds the leave up).
            let swarm = self.ctx.cluster.observe().await;
            self.see_engine(&swarm);
            if let Err(e) = self.beat(true).await {
                tracing::debug!(error = %e, "heartbeat after a failed pass not written");
            }
        }
        match passed {
            Err(e) if e.is_unreadable_record() => self.refuse(e).await,
            other => {
                if other.is_ok() {
                    self.refused = None;
                }
                other
            }
        }
    }

    async fn guarded_pass(&mut self) -> Result<PassReport, StoreError> {
        self.passes += 1;
        if self.handing_over.is_some() {
            // Its engine is demoting itself and leaving. Asked anything now
            // (`info` reaches the manager it stops), it holds that stop
            // until the call gives up, 5-8 s (swarm-facts): the pass right
            // after the step started did so in 4 of 8 benchmark runs, before
            // the step's own task could tell the swarm adapter to stop
            // asking. Nothing to act on meanwhile: the step ends with this
            // controller standing down.
            return Ok(PassReport::empty(false, false));
        }
        // The pass's reads overlap where nothing orders them (the swarm
        // with the store; the heartbeat with the term): each is a round trip
        // to a busy engine or store, and the pass after a former leader's
        // leave is what stands between that leave and its machine's destroy
        // (issue 18: within 0.1 s).
        let started = Instant::now();
        let (stored, swarm) = tokio::join!(observe::stored(&self.ctx), self.ctx.cluster.observe());
        let Some(mut stored) = stored? else {
            self.beat(true).await?;
            return Ok(PassReport::empty(false, false));
        };
        let mut observed =
            observe::around(&self.ctx, &stored.desired, &stored.journal, swarm).await;
        let seen = started.elapsed();
        self.see_engine(&observed.swarm);
        let leads = self.leads(&observed.swarm);
        // A newer term anywhere means this controller was deposed: it stops
        // at once, before acting, rather than at its next refused write.
        let store = self.ctx.store.clone();
        let term = async move {
            match leads {
                true => Some(store.leader().await),
                false => None,
            }
        };
        // One write per pass, whether this controller acts or not.
        let (beat, term) = tokio::join!(self.beat(true), term);
        beat?;
        if let Some(m) = &self.metrics {
            m.acting(leads);
        }
        let Some(term) = term else {
            if let (SwarmView::NoQuorum(_), Some(epoch)) = (&observed.swarm, self.epoch) {
                return self.report_only(&stored, &observed, epoch).await;
            }
            self.stand_down("not the swarm leader");
            return Ok(PassReport::empty(false, false));
        };
        if let (Some(mine), Some((current, _))) = (self.epoch, term?)
            && current != mine
        {
            self.stand_down("a newer controller term exists");
            self.fenced = true;
            return Ok(PassReport::empty(false, true));
        }
        let epoch = match self.epoch {
            Some(e) => e,
            None => {
                let Some((e, fresh, seen)) = self.take_term(&observed).await? else {
                    return Ok(PassReport::empty(true, false));
                };
                (stored, observed) = (fresh, seen);
                e
            }
        };
        let nonce = RandomState::new().hash_one(self.passes);
        let mut plan = plan::plan(PlanInput {
            desired: &stored.desired,
            observed: &observed,
            journal: &stored.journal,
            memory: &self.memory,
            now: self.now(),
            wall_ms: wall_ms(),
            nonce,
        });
        self.memory = plan.memory.clone();
        let planned = started.elapsed();
        let acted = self.act(&stored, &plan, epoch).await;
        tracing::debug!(
            observed_ms = seen.as_millis() as u64,
            planned_ms = planned.as_millis() as u64,
            acted_ms = started.elapsed().as_millis() as u64,
            actions = plan.actions.len(),
            "pass"
        );
        self.block_refused_rollbacks(&mut plan);
        // Nothing more through an engine that is demoting itself.
        if self.handing_over.is_none() {
            self.blocked_events(&plan).await;
        }
        let progressed = match acted {
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
        if self.handing_over.is_none() {
            self.rotate_tokens(&stored, &plan, &observed.swarm, epoch)
                .await;
        }
        let due = self.status_due(&stored, &plan);
        let members = self.members(due, &stored, &plan, &observed);
        // Freed only now that the steps are started (they need not wait
        // for it), and before the status document is written.
        drop(observed);
        if self.handing_over.is_none() {
            // Not through an engine that leaves (the swarm store's): the
            // next leader publishes.
            self.publish(&stored, &plan, members.filter(|_| due), epoch)
                .await?;
        }
        Ok(PassReport {
            acting: true,
            fenced: false,
            plan: Some(plan),
            progressed,
        })
    }

    /// Rotates the join tokens that were placed in readable user data and
    /// have served (`tokens`): the journal as this pass left it (the
    /// operations it began included) says which machines still await
    /// their join. Each rotation is an event.
    async fn rotate_tokens(
        &mut self,
        stored: &Stored,
        plan: &Plan,
        swarm: &SwarmView,
        epoch: Epoch,
    ) {
        let begun = plan.actions.iter().filter_map(|a| match a {
            Action::Begin { op } => Some(&**op),
            _ => None,
        });
        let journal: Vec<_> = stored.journal.iter().chain(begun).collect();
        // Provisions this pass started (their intents are in the store,
        // not in `stored`): they take the current token now.
        let starting: BTreeSet<&str> = plan
            .actions
            .iter()
            .filter(|a| matches!(a, Action::Provision { .. }))
            .filter_map(Action::op_id)
            .collect();
        let term = Term {
            store: self.ctx.store.clone(),
            epoch,
        };
        let now = self.now();
        let done = tokens::rotate_due(
            &self.ctx,
            &term,
            &mut self.tokens,
            &journal,
            &starting,
            swarm,
            now,
        )
        .await;
        for (role, result) in done {
            let outcome = match result {
                Ok(()) => "rotated".to_string(),
                Err(e) => {
                    tracing::warn!(role = role.as_str(), error = %e, "join token not rotated");
                    format!("failed: {e}")
                }
            };
            let why = format!(
                "the {} join token was placed in readable user data and no machine awaits its join",
                role.as_str()
            );
            self.event(None, None, "rotate-join-token", &why, outcome)
                .await;
        }
    }

    /// After acting: a rollback the store refused blocks its group in this
    /// very pass's status and events.
    fn block_refused_rollbacks(&self, plan: &mut Plan) {
        for (group, why) in &self.rollback_refused {
            if let Some(g) = plan.groups.iter_mut().find(|g| g.name == *group) {
                g.phase = Phase::Blocked;
                g.reason = Some(why.clone());
            }
        }
    }

    /// Campaigns for the store's term and, once won, reads the store again:
    /// the controller it deposed may have journaled a Begin or an intent
    /// since the pass read it, and a plan that cannot see it starts a
    /// second removal beside it. From now on that controller's writes are
    /// refused, so this read is the last word on them; the world is looked
    /// at again too (`observed` was the pass's look). `None` when the store
    /// then holds no desired state.
    async fn take_term(
        &mut self,
        observed: &Observed,
    ) -> Result<Option<(Epoch, Stored, Observed)>, StoreError> {
        let e = self.ctx.store.campaign(&self.ctx.identity).await?;
        tracing::info!(epoch = e, "acting as the leader's controller");
        self.memory = Memory::default();
        self.epoch = Some(e);
        self.watching.send_replace(true);
        let took_over = takeover::event(&self.ctx.identity, e, &observed.swarm);
        self.append(e, &took_over).await;
        let Some(fresh) = observe::stored(&self.ctx).await? else {
            return Ok(None);
        };
        self.tokens = tokens::new_term(&self.ctx, self.now());
        // The world as of now, sorted by the new journal and spec: a
        // provider's newest listing may be older than what the last term
        // did with it (its launches and terminations).
        let observed = observe::world(&self.ctx, &fresh.desired, &fresh.journal).await;
        Ok(Some((e, fresh, observed)))
    }

    /// Quorum is lost and this controller led last: it keeps publishing
    /// status (the groups blocked, the quorum problem that makes `drover
    /// status` print the runbook) and never acts. Its epoch still fences
    /// it: a controller that campaigns later wins every write.
    async fn report_only(
        &mut self,
        stored: &Stored,
        observed: &Observed,
        epoch: Epoch,
    ) -> Result<PassReport, StoreError> {
        let plan = plan::plan(PlanInput {
            desired: &stored.desired,
            observed,
            journal: &stored.journal,
            memory: &self.memory,
            now: self.now(),
            wall_ms: wall_ms(),
            nonce: 0,
        });
        self.memory = plan.memory.clone();
        self.blocked_events(&plan).await;
        let due = self.status_due(stored, &plan);
        let members = self.members(due, stored, &plan, observed);
        match self
            .publish(stored, &plan, members.filter(|_| due), epoch)
            .await
        {
            Err(StoreError::Fenced { .. }) => {
                self.stand_down("status write fenced");
                self.fenced = true;
            }
            Err(e) => return Err(e),
            Ok(()) => {}
        }
        Ok(PassReport {
            acting: false,
            fenced: self.fenced,
            plan: Some(plan),
            progressed: false,
        })
    }

    /// Executes the plan in order: journal writes first, side effects as
    /// tasks. True when the journal was written.
    async fn act(
        &mut self,
        stored: &Stored,
        plan: &Plan,
        epoch: Epoch,
    ) -> Result<bool, StoreError> {
        let mut walk = Execution::new(stored.journal.clone(), epoch);
        let mut progressed = false;
        self.rollback_refused.clear();
        for action in execute_plan::walk_order(&plan.actions) {
            if self.epoch != Some(epoch) {
                // Fenced mid-plan (an event write was refused): act no further.
                return Err(StoreError::Fenced {
                    mine: epoch,
                    current: 0,
                });
            }
            progressed |= !action.is_side_effect();
            let running = action
                .op_id()
                .is_some_and(|id| self.running.contains_key(id));
            let ending = match action {
                Action::Complete { op } => walk.journal().iter().find(|o| o.id == *op).cloned(),
                _ => None,
            };
            match walk.next(action, running) {
                Carry::Nothing => {}
                Carry::Journal(JournalWrite::Put(op)) => {
                    self.ctx.store.journal_put(epoch, &op).await?;
                    if let Action::Begin { op } = action {
                        self.begun(op).await;
                    }
                }
                Carry::Journal(JournalWrite::Remove(op)) => {
                    self.ctx.store.journal_remove(epoch, &op).await?;
                    self.ended(op, ending.as_ref()).await;
                }
                Carry::Rollback => {
                    if let Action::Rollback { group, reason } = action {
                        self.rollback(stored, group, reason, epoch).await?
                    }
                }
                Carry::Effect { intent } => {
                    // The intent, fenced by the epoch, just before the side
                    // effect: a deposed controller's is refused and it starts
                    // nothing; the next leader judges the step from the world.
                    if let Some(o) = intent {
                        self.ctx.store.journal_put(epoch, &o).await?;
                    }
                    let now = self.now();
                    tokens::note(&mut self.tokens, &self.ctx, &stored.desired, action, now);
                    let group = walk.group_of(action).map(str::to_string);
                    // Recorded when started too. A leader's own demotion is
                    // recorded before it starts: it can never record its
                    // end (it no longer leads then), and once it runs
                    // nothing may be written through its engine (the swarm
                    // store's).
                    let hand_over = execute_plan::ends_the_walk(action);
                    if hand_over {
                        self.started(group.clone(), action).await;
                    }
                    self.spawn(stored, group.clone(), action, epoch);
                    if !hand_over {
                        self.started(group, action).await;
                    }
                }
            }
        }
        Ok(progressed)
    }

    /// Records that operation `op` (its journal record, `record`) is over,
    /// done or abandoned: out of the journal.
    async fn ended(&mut self, op: String, record: Option<&Operation>) {
        let group = record.map(|o| o.group.clone());
        let kind = record.map(|o| format!("{:?}", o.kind)).unwrap_or_default();
        self.event(group, Some(op), "end", &kind, "out of the journal".into())
            .await;
    }

    /// Records that `op` was journaled.
    async fn begun(&mut self, op: &drover_core::journal::Operation) {
        self.event(
            Some(op.group.clone()),
            Some(op.id.clone()),
            "begin",
            &format!("{:?}", op.kind),
            "journaled".into(),
        )
        .await;
        self.collection_event(op).await;
    }

    /// Records that `effect` (of an operation of `group`) starts.
    async fn started(&mut self, group: Option<String>, effect: &Action) {
        self.event(
            group,
            effect.op_id().map(str::to_string),
            "step",
            &effect.describe(),
            "started".into(),
        )
        .await;
    }

    /// Starts a side effect (its operation has none running) under `epoch`.
    fn spawn(&mut self, stored: &Stored, group: Option<String>, action: &Action, epoch: Epoch) {
        let op = action.op_id().unwrap_or_default().to_string();
        let (ctx, desired, tx, action) = (
            self.ctx.clone(),
            stored.desired.clone(),
            self.done_tx.clone(),
            action.clone(),
        );
        let hand_over = matches!(action, Action::DemoteSelfAndLeave { .. });
        if hand_over {
            self.watching.send_replace(false);
            self.handing_over = Some(op.clone());
        }
        tracing::info!(op = %op, step = %action.describe(), "starting");
        let kind = action.kind();
        if let Some(m) = &self.metrics {
            m.step_started(kind);
        }
        // The effect runs in a task of its own so that a panic in it is
        // reported like a failure (a step that never reported its end would
        // hold its operation, and a hand-over every pass, forever), and so
        // that standing down can cancel it.
        let effect = {
            let (group, action) = (group.clone(), action.clone());
            let (left_tx, handed_over) = (self.left_tx.clone(), action.clone());
            tokio::spawn(async move {
                let term = Term {
                    store: ctx.store.clone(),
                    epoch,
                };
                // The hand-over's engine seen out of the swarm: the loop
                // says so in the store at once (`report_left`).
                let left = move || {
                    if let Action::DemoteSelfAndLeave { node, .. } = &handed_over {
                        let _ = left_tx.send(node.clone());
                    }
                };
                execute::side_effect(&ctx, &term, &desired, group.as_deref(), &action, &left).await
            })
        };
        self.running
            .insert(op.clone(), (!hand_over).then(|| effect.abort_handle()));
        self.fresh.push(op.clone());
        tokio::spawn(async move {
            let (result, output) = match effect.await {
                Ok(Ok(output)) => (Ok(()), output),
                Ok(Err(e)) => (Err(e), None),
                Err(e) if e.is_cancelled() => (Err(StepError::Cancelled), None),
                Err(e) => (Err(StepError::Panicked(e.to_string())), None),
            };
            let _ = tx.send(Finished {
                op,
                group,
                what: action.describe(),
                provision: matches!(action, Action::Provision { .. }),
                zone: match &action {
                    Action::Provision { zone, .. } => zone.clone(),
                    _ => None,
                },
                handed_over: match &action {
                    Action::DemoteSelfAndLeave { node, .. } => Some(node.clone()),
                    _ => None,
                },
                kind,
                epoch,
                result,
                output,
                hook: match &action {
                    Action::RunHook { step, hook, .. } => Some((*step, hook.on_failure)),
                    _ => None,
                },
            });
        });
    }

    /// Commits the last converged revision's spec of `group` as a rollback,
    /// fenced by `epoch`: a deposed controller's rollback is refused by the
    /// store like any other write of its term. The spec it would commit
    /// passes the one rule of every commit (`validate_commit`) or is never
    /// committed: a converged revision stored by an older drover, or one
    /// whose group no longer fits beside the current others, blocks the
    /// group with the reason instead (an operator decides, with `apply`).
    async fn rollback(
        &mut self,
        stored: &Stored,
        group: &str,
        reason: &str,
        epoch: Epoch,
    ) -> Result<(), StoreError> {
        let history = self.ctx.store.history().await?;
        let Some((target, old)) = rollback_target(
            history.iter().map(Revision::past),
            stored.revision.past(),
            group,
        ) else {
            tracing::warn!(group, "no converged revision to roll back to");
            return Ok(());
        };
        let spec = with_group(&stored.revision.spec, old.clone());
        let spec = match validate_commit(Some(&stored.revision.spec), spec) {
            Ok(spec) => spec,
            Err(refused) => {
                let why = format!(
                    "automatic rollback to revision {target} refused, nothing committed ({refused}); fix {group} with drover apply. It was asked for because: {reason}"
                );
                if self.blocked.get(group) != Some(&why) {
                    tracing::warn!(group, %why, "automatic rollback refused");
                }
                self.rollback_refused.insert(group.to_string(), why);
                return Ok(());
            }
        };
        let provenance = Provenance {
            who: format!("controller {}", self.ctx.identity),
            at_ms: wall_ms(),
            message: format!("automatic rollback of {group}: {reason}"),
        };
        match self
            .ctx
            .store
            .commit_rollback(epoch, stored.revision.rev, spec.spec(), provenance)
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

    /// Whether this pass publishes status: at once when a group's phase or
    /// the swarm's status changed, at most every [`ACTIVE_PUBLISH_EVERY`]
    /// while the plan acts, every 2 s otherwise, and on converging.
    fn status_due(&self, stored: &Stored, plan: &Plan) -> bool {
        let since = self.last_publish.map(|t| t.elapsed());
        let (phases, swarm) = &self.published;
        since.is_none_or(|t| t >= Duration::from_secs(2))
            || !phases.iter().eq(plan.groups.iter().map(|g| &g.phase))
            || *swarm != plan.swarm
            || (!plan.actions.is_empty() && since.is_some_and(|t| t >= ACTIVE_PUBLISH_EVERY))
            // Converging is news too: followers (`apply --wait`) show this
            // document as the final state.
            || (converged(stored, plan) && !stored.revision.converged)
    }

    /// Every member's status, when this pass publishes it (`due`) or
    /// serves metrics, which it then records. Judging every member is a
    /// fair part of a 1000-member pass, and most passes of a rollout
    /// publish nothing (issue 7).
    fn members(
        &self,
        due: bool,
        stored: &Stored,
        plan: &Plan,
        observed: &Observed,
    ) -> Option<Vec<plan::MemberStatus>> {
        if !due && self.metrics.is_none() {
            return None;
        }
        let members = plan::member_status(&stored.desired, observed);
        if let Some(m) = &self.metrics {
            m.observed(plan, &members, wall_ms());
        }
        Some(members)
    }

    /// Marks convergence, and publishes status with `members` when given
    /// (see [`Self::status_due`]).
    async fn publish(
        &mut self,
        stored: &Stored,
        plan: &Plan,
        members: Option<Vec<plan::MemberStatus>>,
        epoch: Epoch,
    ) -> Result<(), StoreError> {
        if converged(stored, plan) && !stored.revision.converged {
            self.ctx
                .store
                .mark_converged(epoch, stored.revision.rev)
                .await?;
        }
        let Some(members) = members else {
            return Ok(());
        };
        let doc = status_json(
            &self.ctx.identity,
            epoch,
            stored.revision.rev,
            plan,
            &members,
            stored.journal.len(),
        );
        drop(members);
        self.ctx.store.publish_status(epoch, doc).await?;
        self.last_publish = Some(Instant::now());
        self.published = (
            plan.groups.iter().map(|g| g.phase).collect(),
            plan.swarm.clone(),
        );
        Ok(())
    }
}

/// Every group converged and nothing is left to do or in flight.
fn converged(stored: &Stored, plan: &Plan) -> bool {
    plan.groups.iter().all(|g| g.phase == Phase::Converged)
        && stored.journal.is_empty()
        && plan.actions.is_empty()
}

/// Forwards the store's change notifications (a commit, new controls) for
/// as long as the controller runs (its receiver lives); a broken watch is
/// retried at the resync interval, which also finds a change made meanwhile.
fn watch_store(
    ctx: Arc<Context>,
    mut watching: tokio::sync::watch::Receiver<bool>,
) -> mpsc::UnboundedReceiver<()> {
    let (tx, rx) = mpsc::unbounded_channel();
    tokio::spawn(async move {
        loop {
            // Only while acting: a change would wake nothing useful otherwise.
            tokio::select! {
                _ = tx.closed() => return,
                r = watching.wait_for(|w| *w) => if r.is_err() { return },
            }
            let changed = tokio::select! {
                // The controller stopped: so does its watch.
                _ = tx.closed() => return,
                _ = watching.wait_for(|w| !*w) => continue,
                r = ctx.store.changed() => r,
            };
            match changed {
                Ok(()) => {
                    let _ = tx.send(());
                }
                Err(e) => {
                    tracing::debug!(error = %e, "store watch broke; re-armed after the resync interval");
                    tokio::select! {
                        _ = tx.closed() => return,
                        _ = tokio::time::sleep(ctx.resync) => {}
                    }
                }
            }
        }
    });
    rx
}

#[cfg(test)]
mod tests {
    use super::*;
    use async_trait::async_trait;
    use drover_core::spec::{Role, parse_str};
    use drover_spi::{Cluster, ClusterError, JoinMaterial, Store};
    use drover_store::MemStore;
    use std::sync::atomic::{AtomicBool, Ordering};
    use tokio::sync::Notify;

    /// A swarm whose drain and self-demotion wait for `release`, recording
    /// which ended.
    #[derive(Default)]
    struct Held {
        release: Notify,
        drained: AtomicBool,
        left: AtomicBool,
    }

    #[async_trait]
    impl Cluster for Held {
        async fn observe(&self) -> SwarmView {
            SwarmView::Absent
        }
        async fn services(&self) -> drover_core::model::Services {
            drover_core::model::Services::default()
        }
        async fn drain(&self, _: &str, _fence: &dyn drover_spi::Fence) -> Result<(), ClusterError> {
            self.release.notified().await;
            self.drained.store(true, Ordering::SeqCst);
            Ok(())
        }
        async fn demote(
            &self,
            _: &str,
            _fence: &dyn drover_spi::Fence,
        ) -> Result<(), ClusterError> {
            Ok(())
        }
        async fn demote_self_and_leave(
            &self,
            _: &str,
            _fence: &dyn drover_spi::Fence,
            left: &(dyn Fn() + Send + Sync),
        ) -> Result<(), ClusterError> {
            // Out of the swarm before the call returns, as a real engine is.
            left();
            self.release.notified().await;
            self.left.store(true, Ordering::SeqCst);
            Ok(())
        }
        async fn remove_node(
            &self,
            _: &str,
            _: bool,
            _fence: &dyn drover_spi::Fence,
        ) -> Result<(), ClusterError> {
            Ok(())
        }
        async fn join_material(&self, _: Role) -> Result<Option<JoinMaterial>, ClusterError> {
            Ok(None)
        }
    }

    /// A controller (`identity`, on `self_link`) that won the first term of
    /// a memory store holding one revision (a 1-manager sim group), over a
    /// cluster whose calls are held until released.
    async fn one_manager_controller(
        self_link: Option<&str>,
        identity: &str,
    ) -> (Arc<MemStore>, Arc<Held>, Controller, Epoch) {
        let store = Arc::new(MemStore::default());
        store.init_cluster("c1").await.unwrap();
        let spec = parse_str(
            "groups:\n- name: m\n  role: manager\n  allocation: {size: 1}\n  instance: {provider: sim}\n",
        )
        .spec
        .unwrap();
        let who = Provenance {
            who: "test".into(),
            at_ms: 0,
            message: "test".into(),
        };
        store.commit(0, &spec, who, false).await.unwrap();
        let held = Arc::new(Held::default());
        let ctx = Context {
            providers: Default::default(),
            cluster: held.clone(),
            store: store.clone(),
            self_link: self_link.map(Into::into),
            identity: identity.into(),
            store_url: None,
            resync: Duration::from_secs(2),
        };
        let c = Controller::new(ctx);
        let epoch = store.campaign(identity).await.unwrap();
        (store, held, c, epoch)
    }

    /// Issue 18, fast planned hand-over: the moment its own hand-over's
    /// engine is seen out of the swarm (before the leave call returns), a
    /// controller says so in the store (its heartbeat's engine view, `left`
    /// naming the node it demoted), and the store's change watch — what the
    /// acting controller waits on — fires for it.
    #[tokio::test(start_paused = true)]
    async fn a_finished_hand_over_reports_the_leave_in_the_store_and_wakes_the_watch() {
        let (store, held, mut c, epoch) = one_manager_controller(Some("l1"), "l1").await;
        c.epoch = Some(epoch);
        let stored = observe::stored(&c.ctx).await.unwrap().unwrap();
        let hand_over = Action::DemoteSelfAndLeave {
            op: "leader-op".into(),
            node: "n1".into(),
        };
        c.spawn(&stored, None, &hand_over, epoch);
        let watch = {
            let store = store.clone();
            tokio::spawn(async move { store.changed().await })
        };
        tokio::time::sleep(Duration::from_millis(10)).await;
        // The loop hears it from the step's task while the call still runs.
        let node = c.left_rx.recv().await.unwrap();
        c.report_left(&node).await;
        assert!(
            !held.left.load(Ordering::SeqCst),
            "the call already returned"
        );
        let beats = store.heartbeats().await.unwrap();
        let left = beats
            .iter()
            .find_map(|b| b.engine.as_ref()?.left_report())
            .expect("no leave reported");
        assert_eq!((left.link.as_str(), left.node.as_str()), ("l1", "n1"));
        tokio::time::timeout(Duration::from_millis(1), watch)
            .await
            .expect("the change watch did not fire")
            .unwrap()
            .unwrap();
        // The call's return reports nothing new: no second wake.
        let watch = {
            let store = store.clone();
            tokio::spawn(async move { store.changed().await })
        };
        tokio::time::sleep(Duration::from_millis(10)).await;
        held.release.notify_waiters();
        let done = c.done_rx.recv().await.unwrap();
        c.finished(done).await;
        tokio::time::sleep(Duration::from_millis(10)).await;
        assert!(!watch.is_finished(), "woken again by the same leave");
    }

    /// A leader's pass carries its own hand-over last: the rest of the plan
    /// (here another group's operation, planned after it) is journaled while
    /// its engine still leads, and nothing goes through a demoting one.
    #[tokio::test(start_paused = true)]
    async fn a_pass_carries_its_own_hand_over_last() {
        let (store, held, mut c, epoch) = one_manager_controller(Some("l1"), "l1").await;
        c.epoch = Some(epoch);
        let stored = observe::stored(&c.ctx).await.unwrap().unwrap();
        let (leader_op, next_op) = (observe::tests::op("m"), observe::tests::op("w"));
        let plan = Plan {
            actions: vec![
                Action::Begin {
                    op: Box::new(leader_op.clone()),
                },
                Action::DemoteSelfAndLeave {
                    op: leader_op.id.clone(),
                    node: "n1".into(),
                },
                Action::Begin {
                    op: Box::new(next_op.clone()),
                },
            ],
            groups: Vec::new(),
            swarm: Default::default(),
            explanation: Vec::new(),
            memory: Memory::default(),
            wake_at: None,
            garbage: Vec::new(),
        };
        c.act(&stored, &plan, epoch).await.unwrap();
        let journaled: BTreeSet<String> = store
            .journal()
            .await
            .unwrap()
            .into_iter()
            .map(|o| o.id)
            .collect();
        assert_eq!(
            journaled,
            BTreeSet::from([leader_op.id, next_op.id.clone()])
        );
        let events: Vec<(String, Option<String>)> = store
            .events(0)
            .await
            .unwrap()
            .into_iter()
            .map(|e| (e.action, e.op))
            .collect();
        let at = |action: &str, op: &str| {
            events
                .iter()
                .position(|(a, o)| a == action && o.as_deref() == Some(op))
                .unwrap_or_else(|| panic!("no {action} of {op} in {events:?}"))
        };
        assert!(
            at("begin", &next_op.id) < at("step", "m-op"),
            "the hand-over started before the rest of the plan: {events:?}"
        );
        held.release.notify_waiters();
    }

    #[tokio::test(start_paused = true)]
    async fn standing_down_cancels_every_step_but_the_leaders_own_hand_over() {
        let (_store, held, mut c, epoch) = one_manager_controller(None, "t").await;
        c.epoch = Some(epoch);
        let stored = observe::stored(&c.ctx).await.unwrap().unwrap();
        let drain = Action::Drain {
            op: "drain-op".into(),
            node: "n2".into(),
        };
        let hand_over = Action::DemoteSelfAndLeave {
            op: "leader-op".into(),
            node: "n1".into(),
        };
        c.spawn(&stored, None, &drain, epoch);
        c.spawn(&stored, None, &hand_over, epoch);
        tokio::time::sleep(Duration::from_millis(10)).await; // both under way

        c.stand_down("test");
        held.release.notify_waiters();
        tokio::time::sleep(Duration::from_millis(10)).await;
        assert!(
            held.left.load(Ordering::SeqCst),
            "the hand-over was cut short"
        );
        assert!(!held.drained.load(Ordering::SeqCst), "the drain ran on");
        let mut ends = BTreeMap::new();
        for _ in 0..2 {
            let done = c.done_rx.recv().await.unwrap();
            ends.insert(done.op, done.result.map_err(|e| e.to_string()));
        }
        assert_eq!(
            ends,
            BTreeMap::from([
                (
                    "drain-op".to_string(),
                    Err("cancelled: this controller stood down".to_string())
                ),
                ("leader-op".to_string(), Ok(())),
            ])
        );
    }
}
