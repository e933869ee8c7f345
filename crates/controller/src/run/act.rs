//! Acting on a plan: journal writes in the plan's order, each side effect
//! started as a task of its own under the term's proof ([`Leading`]), and
//! what a finished step tells the journal. The rollback and the join
//! tokens' rotation, the plan's other acts, are in [`rollback`].

mod rollback;

use super::Controller;
use super::term::Leading;
use crate::execute::{self, Failure, StepError};
use crate::observe::Stored;
use crate::tokens;
use drover_core::execute::{self as execute_plan, Carry, Execution, JournalWrite};
use drover_core::journal::{HookFailed, Operation, Step, UpdateFailed};
use drover_core::plan::{Action, Plan};
use drover_core::spec::HookOnFailure;
use drover_spi::{Epoch, Event, EventAction, StoreError, Write};
use std::collections::{BTreeMap, HashMap};
use tokio::sync::mpsc;
use tokio::task::AbortHandle;

/// A finished side effect, reported back to the loop.
pub(super) struct Finished {
    pub(super) op: String,
    group: Option<String>,
    /// The step that ended.
    action: Action,
    /// The term it was started under.
    epoch: Epoch,
    pub(super) result: Result<(), StepError>,
    /// What a hook said (its output's end), when it succeeded.
    output: Option<String>,
}

impl Finished {
    /// The zone it provisioned in (a refusal there for lack of capacity
    /// moves the slot's next call to another zone).
    fn zone(&self) -> Option<&str> {
        match &self.action {
            Action::Provision { zone, .. } => zone.as_deref(),
            _ => None,
        }
    }

    /// The node this engine's own hand-over demoted, if it was that.
    fn handed_over(&self) -> Option<&str> {
        match &self.action {
            Action::DemoteSelfAndLeave { node, .. } => Some(node),
            _ => None,
        }
    }
}

/// The side effects a controller started, and where their ends arrive.
pub(super) struct Acting {
    /// Operations with a side effect running, each with the handle that
    /// cancels it when this controller stands down (`None`: never cut short).
    running: HashMap<String, Option<AbortHandle>>,
    done_tx: mpsc::UnboundedSender<Finished>,
    pub(super) done_rx: mpsc::UnboundedReceiver<Finished>,
    /// From its own hand-over's task: the node its engine was seen to
    /// leave as, before the leave call returned.
    left_tx: mpsc::UnboundedSender<String>,
    pub(super) left_rx: mpsc::UnboundedReceiver<String>,
    /// The operations whose step the last pass started.
    fresh: Vec<String>,
    /// Who hears of every step that ends.
    pub(super) step_reports: Option<mpsc::UnboundedSender<super::StepReport>>,
    /// Groups whose automatic rollback this pass refused to commit (the
    /// spec it would commit is not valid: `validate_commit`), with why:
    /// reported blocked for as long as the planner asks for it.
    rollback_refused: BTreeMap<String, String>,
}

impl Acting {
    pub(super) fn new() -> Self {
        let (done_tx, done_rx) = mpsc::unbounded_channel();
        let (left_tx, left_rx) = mpsc::unbounded_channel();
        Acting {
            running: HashMap::new(),
            done_tx,
            done_rx,
            left_tx,
            left_rx,
            fresh: Vec::new(),
            step_reports: None,
            rollback_refused: BTreeMap::new(),
        }
    }

    /// A new pass starts: no step of its started yet.
    pub(super) fn new_pass(&mut self) {
        self.fresh.clear();
    }

    /// A step the last pass started still runs.
    pub(super) fn fresh_still_running(&self) -> bool {
        self.fresh.iter().any(|op| self.running.contains_key(op))
    }

    /// Cancels every step that may be cut short (see `Controller::stand_down`).
    pub(super) fn cancel_all(&self) {
        for (op, abort) in &self.running {
            if let Some(abort) = abort {
                tracing::info!(op = %op, "cancelling its step: this controller stood down");
                abort.abort();
            }
        }
    }
}

/// What a pass's walk gathered until its next commit: the journal writes
/// (each intent before its side effect, the journal-before-effect rule)
/// and the side effects they allow. One durable commit carries the writes
/// and the pass's queued events; only then do the effects start.
#[derive(Default)]
struct Batch {
    /// Events queued before this pass's walk (steps' ends heard since the
    /// last commit): kept if the batch cannot be written.
    earlier: Vec<Event>,
    writes: Vec<Write>,
    /// Side effects to start once the writes are durable, with their group.
    effects: Vec<(Option<String>, Action)>,
}

impl Batch {
    /// A step of operation `op` waits in this batch.
    fn starts(&self, op: &str) -> bool {
        self.effects.iter().any(|(_, a)| a.op_id() == Some(op))
    }
}

impl Controller {
    /// Executes the plan in order under `lead`: the journal's writes and
    /// the steps' intents gathered in one batch, written in one commit, and
    /// then the side effects started, each a task (a rollback, which
    /// commits a spec, first writes what was gathered before it). True
    /// when the journal was written.
    pub(super) async fn act(
        &mut self,
        stored: &Stored,
        plan: &Plan,
        lead: &Leading,
    ) -> Result<bool, StoreError> {
        let epoch = lead.epoch();
        let mut walk = Execution::new(stored.journal.clone(), epoch);
        let mut progressed = false;
        let mut batch = Batch {
            earlier: self.take_queued(),
            ..Batch::default()
        };
        self.acting.rollback_refused.clear();
        for action in execute_plan::walk_order(&plan.actions) {
            if self.tenancy.term.acting() != Some(lead) {
                // Fenced mid-plan (a write was refused): act no further.
                return Err(StoreError::Fenced {
                    mine: epoch,
                    current: 0,
                });
            }
            progressed |= !action.is_side_effect();
            let running = action
                .op_id()
                .is_some_and(|id| self.acting.running.contains_key(id) || batch.starts(id));
            let ending = match action {
                Action::Complete { op } => walk.journal().iter().find(|o| o.id == *op).cloned(),
                _ => None,
            };
            match walk.next(action, running) {
                Carry::Nothing => {}
                Carry::Journal(JournalWrite::Put(op)) => {
                    if let Action::Begin { op } = action {
                        self.begun(op);
                    }
                    batch.writes.push(Write::JournalPut(op));
                }
                Carry::Journal(JournalWrite::Remove(op)) => {
                    self.ended(&op, ending.as_ref());
                    batch.writes.push(Write::JournalRemove(op));
                }
                Carry::Rollback => {
                    if let Action::Rollback { group, reason } = action {
                        self.commit_batch(stored, std::mem::take(&mut batch), lead)
                            .await?;
                        self.rollback(stored, group, reason, lead).await?
                    }
                }
                Carry::Effect { intent } => {
                    // The intent, fenced by the epoch, is durable before the
                    // side effect starts: a deposed controller's is refused
                    // and it starts nothing; the next leader judges the step
                    // from the world.
                    batch.writes.extend(intent.map(Write::JournalPut));
                    let group = walk.group_of(action).map(str::to_string);
                    self.started(group.clone(), action);
                    batch.effects.push((group, action.clone()));
                }
            }
        }
        self.commit_batch(stored, batch, lead).await?;
        Ok(progressed)
    }

    /// Writes `batch` and the queued events in one commit under `lead`,
    /// then starts its side effects. A leader's own demotion is recorded
    /// (its `started` event in this commit) before it starts: it can never
    /// record its end (it no longer leads then), and once it runs nothing
    /// may be written through its engine (the swarm store's); it ends the
    /// walk, so nothing is gathered after it.
    async fn commit_batch(
        &mut self,
        stored: &Stored,
        batch: Batch,
        lead: &Leading,
    ) -> Result<(), StoreError> {
        let Batch {
            earlier,
            mut writes,
            effects,
        } = batch;
        // The pass's own events (its walk's) go only with its writes: a
        // batch not written started nothing they could tell of.
        let events = earlier.iter().cloned().chain(self.take_queued());
        writes.extend(events.map(Write::Event));
        if !writes.is_empty() {
            match self.ctx.store.write_batch(lead.epoch(), &writes).await {
                Err(e @ StoreError::Fenced { .. }) => return Err(e),
                Err(e) => {
                    self.requeue(earlier);
                    return Err(e);
                }
                Ok(()) => {}
            }
        }
        for (group, action) in effects {
            let now = self.now();
            tokens::note(
                &mut self.tenancy.tokens,
                &self.ctx,
                &stored.desired,
                &action,
                now,
            );
            self.spawn(stored, group, &action, lead);
        }
        Ok(())
    }

    /// Records that operation `op` (its journal record, `record`) is over,
    /// done or abandoned: out of the journal.
    fn ended(&mut self, op: &str, record: Option<&Operation>) {
        let group = record.map(|o| o.group.clone());
        let kind = record.map(|o| format!("{:?}", o.kind)).unwrap_or_default();
        let (op, end) = (Some(op.to_string()), EventAction::End);
        self.queue_event(group, op, end, &kind, "out of the journal".into());
    }

    /// Records that `op` was journaled.
    fn begun(&mut self, op: &Operation) {
        self.queue_event(
            Some(op.group.clone()),
            Some(op.id.clone()),
            EventAction::Begin,
            &format!("{:?}", op.kind),
            "journaled".into(),
        );
        self.queue_collection(op);
    }

    /// Records that `effect` (of an operation of `group`) starts.
    fn started(&mut self, group: Option<String>, effect: &Action) {
        self.queue_event(
            group,
            effect.op_id().map(str::to_string),
            EventAction::Step,
            &effect.describe(),
            "started".into(),
        );
    }

    /// Starts a side effect (its operation has none running) under `lead`.
    pub(super) fn spawn(
        &mut self,
        stored: &Stored,
        group: Option<String>,
        action: &Action,
        lead: &Leading,
    ) {
        let op = action.op_id().unwrap_or_default().to_string();
        let hand_over = drover_core::execute::ends_the_walk(action);
        if hand_over {
            self.hand_over(lead, &op);
        }
        tracing::info!(op = %op, step = %action.describe(), "starting");
        if let Some(m) = &self.reporting.metrics {
            m.step_started(action.kind());
        }
        // The effect runs in a task of its own so that a panic in it is
        // reported like a failure (a step that never reported its end would
        // hold its operation, and a hand-over every pass, forever), and so
        // that standing down can cancel it.
        let effect = {
            let (ctx, desired) = (self.ctx.clone(), stored.desired.clone());
            let (group, action) = (group.clone(), action.clone());
            let (left_tx, handed_over) = (self.acting.left_tx.clone(), action.clone());
            let term = lead.tenure(ctx.store.clone());
            tokio::spawn(async move {
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
        // Not cut short by standing down: the leader's own hand-over, and
        // an update running on a machine (cut mid-package-upgrade, the
        // machine would be left half updated; the next leader's run waits
        // for it on the machine and finds its mark).
        let cancellable = !hand_over && !matches!(action, Action::RunUpdate { .. });
        self.acting
            .running
            .insert(op.clone(), cancellable.then(|| effect.abort_handle()));
        self.acting.fresh.push(op.clone());
        let (tx, action, epoch) = (self.acting.done_tx.clone(), action.clone(), lead.epoch());
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
                action,
                epoch,
                result,
                output,
            });
        });
    }

    /// A step ended: the loop forgets it, hears of its hand-over's leave,
    /// stands down when it learnt of a newer term, and records its end.
    pub(super) async fn finished(&mut self, done: Finished) {
        self.acting.running.remove(&done.op);
        self.tenancy.term.step_ended(&done.op);
        if let (Some(node), Ok(())) = (done.handed_over(), &done.result)
            && !self.reporting.left_told(node)
        {
            // Its task had not told of the leave before the call returned.
            self.report_left(node).await;
        }
        if let Err(e) = &done.result
            && e.is_deposed()
            && self.tenancy.term.held().map(Leading::epoch) == Some(done.epoch)
        {
            self.depose("the store named a newer term before a side effect");
        }
        let outcome = match (&done.result, &done.output) {
            (Ok(()), Some(said)) if !said.is_empty() => format!("ok: {said}"),
            (Ok(()), _) => "ok".to_string(),
            (Err(e), _) => {
                if let Some(m) = &self.reporting.metrics {
                    m.step_failed(done.action.kind(), e.failure());
                }
                format!("failed: {e}")
            }
        };
        let what = done.action.describe();
        tracing::info!(op = %done.op, %what, %outcome, "step finished");
        if let Some(tx) = &self.acting.step_reports {
            let _ = tx.send(super::StepReport {
                op: done.op.clone(),
                kind: done.action.kind(),
                failure: done
                    .result
                    .as_ref()
                    .err()
                    .map(|e| (e.failure(), e.to_string())),
            });
        }
        self.record_end(&done).await;
        let (group, op) = (done.group.clone(), Some(done.op.clone()));
        // Written with the next pass's batch (or at its end): the steps
        // that end together cost one commit, not one each.
        self.queue_event(group, op, EventAction::Step, &what, outcome);
        self.zone_fallback(done);
    }

    /// Journals what a finished step tells that the world does not show:
    /// a failed provision's attempt, a hook's end.
    async fn record_end(&mut self, done: &Finished) {
        if let (Action::Provision { .. }, Err(e)) = (&done.action, &done.result)
            && e.failure() != Failure::Term
        {
            let short = done.zone().filter(|_| e.is_capacity());
            self.update_entry(&done.op, "a failed provision", |o| {
                o.provision_failed(short)
            })
            .await;
        }
        if let Action::RunHook { step, hook, .. } = &done.action {
            self.record_hook(&done.op, *step, hook.on_failure, &done.result)
                .await;
        }
        if let (Action::RunUpdate { config, .. }, Err(StepError::Update(outcome))) =
            (&done.action, &done.result)
        {
            let failed = UpdateFailed {
                config: config.clone(),
                summary: outcome.summary(),
            };
            self.update_entry(&done.op, "an update's failure", |o| {
                o.update_failure = Some(failed)
            })
            .await;
        }
    }

    /// A provision refused for lack of capacity in its zone: an event
    /// saying the slot's next call goes elsewhere.
    fn zone_fallback(&mut self, done: Finished) {
        let (Some(zone), Err(e)) = (done.zone(), &done.result) else {
            return;
        };
        if !e.is_capacity() {
            return;
        }
        let reason = format!(
            "zone {zone} has no capacity for this machine ({e}): the slot's next provision goes to another of the group's zones unless its logical id pins it, and the group avoids zone {zone} for {}s",
            drover_core::plan::ZONE_BACKOFF.as_secs()
        );
        let action = EventAction::ZoneFallback;
        let outcome = "zone avoided".into();
        self.queue_event(done.group, Some(done.op), action, &reason, outcome);
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
    /// controller's term (`what` names the change in a warning). A failed
    /// provision's count (with the zone, when it lacked capacity there) is
    /// one: the planner backs off, moves the slot's next call to another
    /// zone, and blocks the group once the slot's `health.max_attempts` are
    /// used; a fact the planner cannot observe itself, so the journal
    /// (fenced) keeps it across leaders.
    async fn update_entry(&mut self, op: &str, what: &str, change: impl FnOnce(&mut Operation)) {
        let Some(epoch) = self.tenancy.term.held().map(Leading::epoch) else {
            return;
        };
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
            Err(StoreError::Fenced { .. }) => self.depose("journal write fenced"),
            Err(e) => tracing::warn!(error = %e, op, "could not record {what}"),
            Ok(()) => {}
        }
    }
}
