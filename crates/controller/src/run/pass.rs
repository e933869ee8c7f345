//! One pass: look at the store and the world, settle the term on what was
//! seen, then plan and act under it.

use super::report::Publish;
use super::term::{Leading, Place};
use super::{Controller, PassReport};
use crate::observe::{self, Stored};
use crate::status::wall_ms;
use crate::takeover;
use drover_core::control::{self, Turn, Waits};
use drover_core::model::{Observed, SwarmView};
use drover_core::plan::{self, Desired, Plan, PlanInput};
use drover_core::spec::Role;
use drover_spi::{EventAction, StoreError};
use std::collections::hash_map::RandomState;
use std::hash::BuildHasher;
use std::time::Duration;
use tokio::time::Instant;

/// What a pass saw before it planned: the store and the world, read
/// together, and when the look started.
struct Look {
    stored: Stored,
    observed: Observed,
    started: Instant,
    /// How long the look took.
    seen: Duration,
}

impl Look {
    /// What a new term's fresh look keeps of the pass's first one: the
    /// machines' boots asked about, and the pass's timing. The rest — a
    /// whole world and the stored state — is dropped here, before the
    /// world is looked at again, so a take-over never holds two (issue 37:
    /// at 10 000 members the peak heap was 26.7 MB with both, 17.2 MB with
    /// one).
    fn into_kept(self) -> (drover_core::boot::Boots, Instant, Duration) {
        (self.observed.boots, self.started, self.seen)
    }
}

/// How a controller that may act campaigns for the term.
enum Campaign {
    /// Whoever holds it (a manager's controller whose engine leads, or
    /// `apply`'s bootstrap).
    Take,
    /// Only while nobody holds the store's lease (an external controller).
    WhenFree,
}

/// How a pass goes on once the term is settled on what it saw.
enum Settled {
    /// Plan and act under this term, on this look.
    Act(Leading, Box<Look>),
    /// The pass is over.
    Done(Box<PassReport>),
}

impl Controller {
    /// One observe → plan → journal → act pass.
    pub async fn pass(&mut self) -> Result<PassReport, StoreError> {
        self.acting.new_pass();
        let passed = self.guarded_pass().await;
        // What the pass's batch did not carry (it wrote none, or was cut
        // short): the steps' ends heard before it, its own events. Not
        // while its engine leaves (nothing through it then): they wait.
        if self.tenancy.term.observes() {
            self.flush_events().await;
        }
        if let Some(m) = &self.reporting.metrics {
            m.passed(wall_ms());
        }
        let served = self.place() == Place::Manager || self.reporting.metrics.is_some();
        if passed.is_err() && served && self.tenancy.term.observes() {
            // The store may be unreadable because the quorum is lost (a
            // swarm store): say what this controller's engine sees anyway,
            // in the metrics and, where the store is outside the raft and
            // answers, in its heartbeat (not while it leaves: asked then,
            // the engine holds the leave up).
            let swarm = self.ctx.cluster.observe().await;
            self.see_engine(&swarm);
            if let Err(e) = self.beat().await {
                tracing::debug!(error = %e, "heartbeat after a failed pass not written");
            }
        }
        match passed {
            Err(e) if e.is_unreadable_record() => self.refuse(e).await,
            other => {
                if other.is_ok() {
                    self.reporting.refused = None;
                }
                other
            }
        }
    }

    /// A pass that wrote no journal record, with the term as it left it.
    fn report(&self, plan: Option<Plan>) -> PassReport {
        PassReport {
            standing: self.tenancy.term.standing(),
            plan,
            progressed: false,
        }
    }

    async fn guarded_pass(&mut self) -> Result<PassReport, StoreError> {
        self.pace.passes += 1;
        if !self.tenancy.term.observes() {
            // Its engine is demoting itself and leaving. Asked anything now
            // (`info` reaches the manager it stops), it holds that stop
            // until the call gives up, 5-8 s (swarm-facts): the pass right
            // after the step started did so in 4 of 8 benchmark runs, before
            // the step's own task could tell the swarm adapter to stop
            // asking. Nothing to act on meanwhile: the step ends with this
            // controller standing down.
            return Ok(self.report(None));
        }
        if self.standing_by().await? {
            return Ok(self.report(None));
        }
        let Some(look) = self.look().await? else {
            self.beat().await?;
            return Ok(self.report(None));
        };
        let (lead, look) = match self.settle_term(look).await? {
            Settled::Act(lead, look) => (lead, look),
            Settled::Done(report) => return Ok(*report),
        };
        self.plan_and_act(&lead, *look).await
    }

    /// The store and the world, read together: the pass's reads overlap
    /// where nothing orders them (each a round trip to a busy engine or
    /// store, and the pass after a former leader's leave is what stands
    /// between that leave and its machine's destroy: within 0.1 s). `None`
    /// when the store holds no desired state.
    async fn look(&mut self) -> Result<Option<Look>, StoreError> {
        let started = Instant::now();
        let (stored, swarm, boots) = tokio::join!(
            observe::stored(&self.ctx),
            self.ctx.cluster.observe(),
            self.boots.refresh(&self.ctx.providers)
        );
        let Some(stored) = stored? else {
            return Ok(None);
        };
        let mut observed =
            observe::around(&self.ctx, &stored.desired, &stored.journal, swarm).await;
        observed.boots = boots;
        self.see_engine(&observed.swarm);
        Ok(Some(Look {
            stored,
            observed,
            started,
            seen: started.elapsed(),
        }))
    }

    /// Settles the term on what `look` saw: keeps it while its engine
    /// leads and no newer one exists, stands down otherwise, and campaigns
    /// for one when it holds none and may act.
    async fn settle_term(&mut self, look: Look) -> Result<Settled, StoreError> {
        let leads = self.leads(&look.observed.swarm);
        // A newer term anywhere means this controller was deposed: it stops
        // at once, before acting, rather than at its next refused write.
        let store = self.ctx.store.clone();
        let current = async move {
            match leads {
                true => Some(store.leader().await),
                false => None,
            }
        };
        // One write per pass, whether this controller acts or not.
        let (beat, current) = tokio::join!(self.beat(), current);
        beat?;
        if let Some(m) = &self.reporting.metrics {
            m.acting(leads);
        }
        let Some(current) = current else {
            if let (SwarmView::NoQuorum(_), Some(lead)) =
                (&look.observed.swarm, self.tenancy.term.acting().cloned())
            {
                let report = self.report_only(&look, &lead).await?;
                return Ok(Settled::Done(Box::new(report)));
            }
            // What it heard under its term (a step's end) is written while
            // the term still holds, not dropped with it.
            self.flush_events().await;
            self.stand_down("not the swarm leader");
            return Ok(Settled::Done(Box::new(self.report(None))));
        };
        let current = current?;
        let turn = self.turn(&look.stored.desired);
        let done = |c: &Self| Ok(Settled::Done(Box::new(c.report(None))));
        if let Some(lead) = self.tenancy.term.acting().cloned() {
            if current.is_some_and(|(epoch, _)| epoch != lead.epoch()) {
                self.depose("a newer controller term exists");
                return done(self);
            }
            if let Some(Turn::Wait(why)) = turn {
                self.resign(why).await;
                return done(self);
            }
            return Ok(Settled::Act(lead, Box::new(look)));
        }
        if !self.tenancy.term.may_campaign(self.place()) {
            return done(self);
        }
        let how = match turn {
            Some(Turn::Wait(why)) => {
                self.wait(why.to_string());
                return done(self);
            }
            Some(Turn::Acquire) => Campaign::WhenFree,
            Some(Turn::Take) | None => Campaign::Take,
        };
        match self.take_term(look, how).await? {
            Some((lead, look)) => Ok(Settled::Act(lead, Box::new(look))),
            None => done(self),
        }
    }

    /// What the declared control lets this controller do, where it runs
    /// (`None`: `apply`'s bootstrap, which the rule does not govern).
    fn turn(&self, desired: &Desired) -> Option<Turn> {
        let swarm = desired.groups.iter().any(|g| g.spec.role != Role::Plain);
        let blind = swarm && !self.reaches_engines;
        let seat = self.place().seat()?;
        Some(control::turn(desired.control, seat, blind))
    }

    /// An external controller holding no term while another holds the
    /// store's lease: it beats, says whom it waits for, and looks at
    /// nothing else (it asks every [`super::STANDBY_POLL`]).
    async fn standing_by(&mut self) -> Result<bool, StoreError> {
        if self.place() != Place::External || self.tenancy.term.held().is_some() {
            return Ok(false);
        }
        let Some((epoch, holder)) = self.ctx.store.leader().await? else {
            return Ok(false);
        };
        self.wait_for(epoch, &holder);
        self.beat().await?;
        Ok(true)
    }

    /// Gives its term up because the declared control no longer admits
    /// it (`why`): what it heard under the term is written first, and the
    /// store's lease is ended at once so the controller that may act need
    /// not wait out its expiry.
    async fn resign(&mut self, why: Waits) {
        self.flush_events().await;
        // Standing down ends the term's lease.
        self.stand_down(&why.to_string());
        self.wait(why.to_string());
    }

    /// Plans on `look` and carries the plan out under `lead`; then records
    /// what the plan says (blocked groups, tokens to rotate, status) unless
    /// the term moved meanwhile (its own hand-over started, or a write was
    /// refused).
    async fn plan_and_act(&mut self, lead: &Leading, look: Look) -> Result<PassReport, StoreError> {
        let Look {
            stored,
            observed,
            started,
            seen,
        } = look;
        let nonce = RandomState::new().hash_one(self.pace.passes);
        let mut plan = self.plan(&stored, &observed, nonce);
        let planned = started.elapsed();
        let acted = self.act(&stored, &plan, lead).await;
        tracing::debug!(
            observed_ms = seen.as_millis() as u64,
            planned_ms = planned.as_millis() as u64,
            acted_ms = started.elapsed().as_millis() as u64,
            actions = plan.actions.len(),
            "pass"
        );
        self.block_refused_rollbacks(&mut plan);
        // Nothing more through an engine that is demoting itself.
        if self.tenancy.term.acting() == Some(lead) {
            self.blocked_events(&plan).await;
        }
        let progressed = match acted {
            Err(StoreError::Fenced { .. }) => {
                self.depose("journal write fenced");
                return Ok(self.report(Some(plan)));
            }
            Err(e) => return Err(e),
            Ok(p) => p,
        };
        if self.tenancy.term.acting() == Some(lead) {
            self.rotate_tokens(&stored, &plan, &observed.swarm, lead)
                .await;
        }
        let due = self.status_due(&stored, &plan);
        let members = self.members(due, &stored, &plan, &observed);
        // Freed only now that the steps are started (they need not wait
        // for it), and before the status document is written.
        drop(observed);
        if self.tenancy.term.acting() == Some(lead) {
            // Not through an engine that leaves (the swarm store's): the
            // next leader publishes.
            self.publish(
                &stored,
                &plan,
                members.filter(|_| due == Publish::Now),
                lead,
            )
            .await?;
        }
        Ok(PassReport {
            progressed,
            ..self.report(Some(plan))
        })
    }

    /// The planner's answer on what was seen, its memory kept for the next.
    fn plan(&mut self, stored: &Stored, observed: &Observed, nonce: u64) -> Plan {
        let plan = plan::plan(PlanInput {
            desired: &stored.desired,
            observed,
            journal: &stored.journal,
            memory: &self.tenancy.memory,
            now: self.now(),
            wall_ms: wall_ms(),
            nonce,
        });
        self.tenancy.memory = plan.memory.clone();
        self.boots.asked(&plan.boot_asks);
        plan
    }

    /// Should this controller act on what it sees? On a manager: only while
    /// its engine's node is the swarm leader. Off-cluster (no self link):
    /// the store's leadership (the epoch) decides alone.
    fn leads(&self, swarm: &SwarmView) -> bool {
        let Some(link) = &self.ctx.self_link else {
            return true;
        };
        match swarm {
            SwarmView::Ok(nodes) => {
                let leader = nodes
                    .iter()
                    .find(|n| n.raft.as_ref().is_some_and(|r| r.leader));
                leader.and_then(|n| n.link.as_ref()) == Some(link)
            }
            SwarmView::Absent | SwarmView::NoQuorum(_) | SwarmView::Unavailable(_) => false,
        }
    }

    /// Campaigns for the store's term and, once won, reads the store again:
    /// the controller it deposed may have journaled a Begin or an intent
    /// since the pass read it, and a plan that cannot see it starts a
    /// second removal beside it. From now on that controller's writes are
    /// refused, so this read is the last word on them; the world is looked
    /// at again too (`before` was the pass's look). The new term's proof
    /// comes only with that fresh look. `None` when the store then holds no
    /// desired state.
    async fn take_term(
        &mut self,
        before: Look,
        how: Campaign,
    ) -> Result<Option<(Leading, Look)>, StoreError> {
        let epoch = match how {
            Campaign::WhenFree => match self.ctx.store.acquire(&self.ctx.identity).await? {
                Some(epoch) => epoch,
                None => {
                    // Another standby won it first.
                    if let Some((epoch, holder)) = self.ctx.store.leader().await? {
                        self.wait_for(epoch, &holder);
                    }
                    return Ok(None);
                }
            },
            Campaign::Take => self.ctx.store.campaign(&self.ctx.identity).await?,
        };
        tracing::info!(epoch, "acting: this controller holds the store's term");
        let lead = self.take(epoch);
        let took_over = takeover::event(&self.ctx.identity, epoch, &before.observed.swarm);
        let (boots, started, seen) = before.into_kept();
        // Written with the new term's first batch: the campaign already
        // fences the deposed controller.
        self.queue(took_over);
        let Some(stored) = observe::stored(&self.ctx).await? else {
            return Ok(None);
        };
        // The revision as of now may no longer admit it (committed since
        // the pass's first look): then it gives the term up unused.
        if let Some(Turn::Wait(why)) = self.turn(&stored.desired) {
            self.resign(why).await;
            return Ok(None);
        }
        // The world as of now, sorted by the new journal and spec: a
        // provider's newest listing may be older than what the last term
        // did with it (its launches and terminations).
        let mut observed = observe::world(&self.ctx, &stored.desired, &stored.journal).await;
        observed.boots = boots;
        let look = Look {
            stored,
            observed,
            started,
            seen,
        };
        Ok(Some((lead, look)))
    }

    /// Quorum is lost and this controller led last: it keeps publishing
    /// status (the groups blocked, the quorum problem that makes `drover
    /// status` print the runbook) and never acts. Its epoch still fences
    /// it: a controller that campaigns later wins every write.
    async fn report_only(&mut self, look: &Look, lead: &Leading) -> Result<PassReport, StoreError> {
        let (stored, observed) = (&look.stored, &look.observed);
        let plan = self.plan(stored, observed, 0);
        self.blocked_events(&plan).await;
        let due = self.status_due(stored, &plan);
        let members = self.members(due, stored, &plan, observed);
        match self
            .publish(stored, &plan, members.filter(|_| due == Publish::Now), lead)
            .await
        {
            Err(StoreError::Fenced { .. }) => self.depose("status write fenced"),
            Err(e) => return Err(e),
            Ok(()) => {}
        }
        Ok(self.report(Some(plan)))
    }

    /// A record this build cannot read (damaged, or from a newer drover):
    /// act on nothing, leave it as it is, and say so — in the log, and in
    /// the event log while this controller still holds its term.
    async fn refuse(&mut self, e: StoreError) -> Result<PassReport, StoreError> {
        let why = e.to_string();
        if self.reporting.refused.as_ref() != Some(&why) {
            tracing::error!(error = %why, "refusing to act on the store");
            let refused = EventAction::Refuse;
            self.queue_event(None, None, refused, &why, "not acting".into());
            self.flush_events().await;
            self.reporting.refused = Some(why);
        }
        Ok(self.report(None))
    }
}
