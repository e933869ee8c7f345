//! What a controller tells others: the status document, the audit log's
//! events, its heartbeat (with what its own engine last said) and the
//! metrics. Every write but the heartbeat is fenced by the term it holds.

use super::Controller;
use super::term::{Leading, Place};
use crate::metrics::Metrics;
use crate::observe::Stored;
use crate::status::{status_json, wall_ms};
use drover_core::journal::Operation;
use drover_core::model::{Observed, SwarmView};
use drover_core::plan::{self, Phase, Plan};
use drover_core::quorum_probe::{EngineAnswer, EngineView, Left};
use drover_spi::{Epoch, Event, EventAction, FORMAT, Heartbeat, StoreError, Write};
use std::collections::BTreeMap;
use std::time::Duration;
use tokio::time::Instant;

/// While a pass acts, status is published at most this often, and at once
/// when a group's phase or the swarm's status changes: the document lists
/// every member, and writing it on every pass of a 1000-member rollout was
/// a fifth of the controller's work.
const ACTIVE_PUBLISH_EVERY: Duration = Duration::from_millis(250);

/// How often a controller advertises the record format it reads (and
/// re-reads everyone's to pick the format it writes); with a swarm store,
/// also how often it beats at all (see [`drover_spi::Store::outside_raft`]).
const HEARTBEAT_EVERY: Duration = Duration::from_secs(60);

/// What a controller last told, to tell only news.
#[derive(Default)]
pub(super) struct Reporting {
    last_publish: Option<Instant>,
    /// The group phases and swarm status last published.
    published: (Vec<Phase>, plan::SwarmStatus),
    /// Last format negotiation (and, with a swarm store, heartbeat).
    last_beat: Option<Instant>,
    /// What its own engine said at the last look, as the heartbeat
    /// publishes it (a manager's controller only).
    engine: Option<EngineView>,
    /// Events of the held term not written yet ([`Controller::queue`]).
    queued: Vec<Event>,
    /// The unreadable record this controller last refused to act on.
    pub(super) refused: Option<String>,
    /// Groups reported blocked (or waiting behind a blocked group), with
    /// the reason last recorded as an event.
    blocked: BTreeMap<String, String>,
    /// Where passes, steps and API calls are counted, when served.
    pub(super) metrics: Option<Metrics>,
    /// Why it does not act, while it may not or waits for another
    /// controller's term (its heartbeat carries it to `drover status`).
    pub(super) waiting: Option<String>,
}

impl Reporting {
    /// Drops the events queued under a term that ended.
    pub(super) fn drop_queued(&mut self) {
        self.queued.clear();
    }

    /// Its engine's leave as `node` is already reported.
    pub(super) fn left_told(&self, node: &str) -> bool {
        self.engine
            .as_ref()
            .and_then(|v| v.left.as_ref())
            .is_some_and(|l| l.node == node)
    }

    /// `group` was last reported blocked for `why`.
    pub(super) fn blocked_for(&self, group: &str, why: &str) -> bool {
        self.blocked.get(group).is_some_and(|b| b == why)
    }
}

impl Controller {
    /// One event per garbage collection begun: the item, the rule and the
    /// evidence (queued: written with the pass's batch).
    pub(super) fn queue_collection(&mut self, op: &Operation) {
        let Some(c) = &op.collection else {
            return;
        };
        let event = Event {
            target: Some(c.item.clone()),
            ..self.event_of(
                Some(op.group.clone()),
                Some(op.id.clone()),
                EventAction::Gc,
                &format!("{}: {}", c.rule.as_str(), c.evidence),
                format!("collecting ({})", c.rule.as_str()),
            )
        };
        self.queue(event);
    }

    /// One event when a group becomes blocked or its reason changes (the
    /// meltdown guard and a spent attempt budget among them), and when a
    /// group starts waiting behind a blocked or paused one (its reason
    /// quotes that group's): outcome `blocked`, or `waiting behind <group>`.
    pub(super) async fn blocked_events(&mut self, plan: &Plan) {
        let now: BTreeMap<String, (String, String)> = plan
            .groups
            .iter()
            .filter_map(|g| {
                let outcome = match &g.behind {
                    _ if g.phase == Phase::Blocked => "blocked".to_string(),
                    Some(behind) => format!("waiting behind {behind}"),
                    None => return None,
                };
                Some((
                    g.name.clone(),
                    (g.reason.clone().unwrap_or_default(), outcome),
                ))
            })
            .collect();
        for (group, (reason, outcome)) in &now {
            if !self.reporting.blocked_for(group, reason) {
                let (group, blocked) = (Some(group.clone()), EventAction::Blocked);
                self.queue_event(group, None, blocked, reason, outcome.clone());
            }
        }
        self.reporting.blocked = now.into_iter().map(|(g, (r, _))| (g, r)).collect();
        // Every group's news in one commit.
        self.flush_events().await;
    }

    /// An event of the term it holds, queued for the next write under it:
    /// the pass's batch (its journal writes, one commit) or
    /// [`Self::flush_events`] at the pass's end. A step's end is recorded so.
    pub(super) fn queue_event(
        &mut self,
        group: Option<String>,
        op: Option<String>,
        action: EventAction,
        reason: &str,
        outcome: String,
    ) {
        let event = self.event_of(group, op, action, reason, outcome);
        self.queue(event);
    }

    fn event_of(
        &self,
        group: Option<String>,
        op: Option<String>,
        action: EventAction,
        reason: &str,
        outcome: String,
    ) -> Event {
        Event {
            at_ms: wall_ms(),
            controller: self.ctx.identity.clone(),
            group,
            op,
            action,
            target: None,
            outcome,
            reason: reason.into(),
        }
    }

    /// Queues `event` while a term is held (an event is written under one;
    /// without one it is nobody's to write).
    pub(super) fn queue(&mut self, event: Event) {
        if self.tenancy.term.held().is_some() {
            self.reporting.queued.push(event);
        }
    }

    /// The queued events, taken out of the queue.
    pub(super) fn take_queued(&mut self) -> Vec<Event> {
        std::mem::take(&mut self.reporting.queued)
    }

    /// Puts `earlier` back at the queue's head: a batch that carried them
    /// was not written (not for a fence), and the next one carries them.
    pub(super) fn requeue(&mut self, mut earlier: Vec<Event>) {
        earlier.append(&mut self.reporting.queued);
        self.reporting.queued = earlier;
    }

    /// Writes the queued events under the term held, in one commit; a
    /// refusal deposes this controller. Another failure loses them, with a
    /// warning: the audit log is not worth a stopped pass.
    pub(super) async fn flush_events(&mut self) {
        let Some(lead) = self.tenancy.term.held().cloned() else {
            self.reporting.queued.clear();
            return;
        };
        let writes: Vec<Write> = self.take_queued().into_iter().map(Write::Event).collect();
        if writes.is_empty() {
            return;
        }
        match self.ctx.store.write_batch(lead.epoch(), &writes).await {
            Err(StoreError::Fenced { .. }) => self.depose("event write fenced"),
            Err(e) => tracing::warn!(error = %e, events = writes.len(), "events not written"),
            Ok(()) => {}
        }
    }

    /// Notes what its own engine said of the swarm (`swarm`): the view its
    /// heartbeat publishes and the metrics show.
    pub(super) fn see_engine(&mut self, swarm: &SwarmView) {
        let view = EngineView::next(
            self.reporting.engine.as_ref(),
            swarm,
            self.ctx.self_link.as_deref(),
            wall_ms(),
        );
        if let Some(m) = &self.reporting.metrics {
            m.engine_seen(&view);
        }
        self.reporting.engine = Some(view);
    }

    /// Its hand-over's `swarm leave` returned: says so in the store at once
    /// (its heartbeat's `left`), where the next leader's controller is
    /// woken by it and destroys this machine without asking its engine.
    /// Nothing in a swarm store: this engine can no longer write the raft.
    pub(super) async fn report_left(&mut self, node: &str) {
        let mut view = self.reporting.engine.clone().unwrap_or_else(|| {
            EngineView::next(None, &SwarmView::Absent, self.ctx.self_link.as_deref(), 0)
        });
        view.answer = EngineAnswer::NotAManager;
        view.manager = false;
        view.leader = None;
        view.left = Some(Left {
            node: node.to_string(),
            at_ms: wall_ms(),
        });
        self.reporting.engine = Some(view);
        if let Err(e) = self.beat().await {
            tracing::warn!(error = %e, "could not report this engine's leave; the next leader asks the engine");
        }
    }

    /// Writes its heartbeat: the newest record format this build reads and
    /// what its own engine last said. Each time it is asked (every pass)
    /// where the store lives outside the raft, else once a minute; and once
    /// a minute it picks the format to write: the oldest any live
    /// controller reads.
    /// It does not act, because `why`: said once in the log when it
    /// changes, and in every heartbeat.
    pub(super) fn wait(&mut self, why: String) {
        if self.reporting.waiting.as_ref() != Some(&why) {
            tracing::info!(why = %why, "not acting");
            self.reporting.waiting = Some(why);
        }
    }

    /// It stands by while `holder` holds term `epoch`.
    pub(super) fn wait_for(&mut self, epoch: Epoch, holder: &str) {
        let who = match holder == self.ctx.identity {
            true => format!("{holder} (an earlier run of this controller)"),
            false => holder.to_string(),
        };
        self.wait(format!(
            "{who} holds the term (epoch {epoch}); standing by to act once its lease lapses"
        ));
    }

    pub(super) async fn beat(&mut self) -> Result<(), StoreError> {
        let due = self
            .reporting
            .last_beat
            .is_none_or(|t| t.elapsed() >= HEARTBEAT_EVERY);
        let each_pass = self.ctx.store.outside_raft();
        if !due && !each_pass {
            return Ok(());
        }
        let beat = Heartbeat {
            holder: self.ctx.identity.clone(),
            format: FORMAT,
            at_ms: wall_ms(),
            engine: (self.place() == Place::Manager)
                .then(|| self.reporting.engine.clone())
                .flatten(),
            seat: self.place().seat(),
            waiting: self.reporting.waiting.clone(),
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
            self.reporting.last_beat = Some(Instant::now());
        }
        Ok(())
    }

    /// Whether this pass publishes status: at once when a group's phase or
    /// the swarm's status changed, at most every [`ACTIVE_PUBLISH_EVERY`]
    /// while the plan acts, every 2 s otherwise, and on converging.
    pub(super) fn status_due(&self, stored: &Stored, plan: &Plan) -> Publish {
        let since = self.reporting.last_publish.map(|t| t.elapsed());
        let (phases, swarm) = &self.reporting.published;
        let now = since.is_none_or(|t| t >= Duration::from_secs(2))
            || !phases.iter().eq(plan.groups.iter().map(|g| &g.phase))
            || *swarm != plan.swarm
            || (!plan.actions.is_empty() && since.is_some_and(|t| t >= ACTIVE_PUBLISH_EVERY))
            // Converging is news too: followers (`apply --wait`) show this
            // document as the final state.
            || (converged(stored, plan) && !stored.revision.converged);
        if now { Publish::Now } else { Publish::Later }
    }

    /// Every member's status, when this pass publishes it (`due`) or
    /// serves metrics, which it then records. Judging every member is a
    /// fair part of a 1000-member pass, and most passes of a rollout
    /// publish nothing.
    pub(super) fn members(
        &self,
        due: Publish,
        stored: &Stored,
        plan: &Plan,
        observed: &Observed,
    ) -> Option<Vec<plan::MemberStatus>> {
        if due == Publish::Later && self.reporting.metrics.is_none() {
            return None;
        }
        let members = plan::member_status(&stored.desired, observed);
        if let Some(m) = &self.reporting.metrics {
            m.observed(plan, &members, wall_ms());
        }
        Some(members)
    }

    /// Marks convergence, and publishes status with `members` when given
    /// (see [`Self::status_due`]), under `lead`.
    pub(super) async fn publish(
        &mut self,
        stored: &Stored,
        plan: &Plan,
        members: Option<Vec<plan::MemberStatus>>,
        lead: &Leading,
    ) -> Result<(), StoreError> {
        let epoch = lead.epoch();
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
            &self.ctx.providers,
            (epoch, stored.revision.rev),
            stored.desired.control,
            plan,
            &members,
            stored.journal.len(),
        );
        drop(members);
        self.ctx.store.publish_status(epoch, doc).await?;
        self.reporting.last_publish = Some(Instant::now());
        self.reporting.published = (
            plan.groups.iter().map(|g| g.phase).collect(),
            plan.swarm.clone(),
        );
        Ok(())
    }
}

/// Whether a pass publishes the status document.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Publish {
    /// This pass: something changed, or the last is old enough.
    Now,
    /// Not yet: nothing new to tell.
    Later,
}

/// Every group converged and nothing is left to do or in flight.
fn converged(stored: &Stored, plan: &Plan) -> bool {
    plan.groups.iter().all(|g| g.phase == Phase::Converged)
        && stored.journal.is_empty()
        && plan.actions.is_empty()
}
