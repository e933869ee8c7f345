//! The reconcile loop: observe → plan → journal → act, event-driven. This
//! module holds the loop and its timing; [`term`] where this controller
//! stands among the store's terms, [`pass`] one pass, [`act`] carrying a
//! plan out, and [`report`] what it tells the store (status, events,
//! heartbeats).

mod act;
mod pass;
mod report;
mod term;
#[cfg(test)]
mod tests;

use crate::context::Context;
use crate::execute::Failure;
use crate::metrics::{MeteredCluster, MeteredProvider, Metrics};
use act::Acting;
use drover_core::plan::Plan;
use report::Reporting;
use std::sync::Arc;
use std::time::Duration;
pub use term::Standing;
use term::{Place, Tenancy};
use tokio::sync::mpsc;
use tokio::time::Instant;

/// Consecutive passes allowed without sleeping while no step succeeds: a
/// planner that keeps rewriting the journal with nothing happening in the
/// world is spinning; a step's success is the world moving, and resets the
/// count (a roll of instant machines is hundreds of passes in a row).
const MAX_IMMEDIATE_PASSES: u32 = 20;

/// How long the pass that follows a pass at once first waits for the
/// steps that pass started (a finished step wakes it sooner).
const FRESH_STEP_WAIT: Duration = Duration::from_secs(1);

/// How often an external controller standing by asks whether the store's
/// lease is free.
const STANDBY_POLL: Duration = Duration::from_millis(500);

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
    /// Where the pass left this controller.
    pub standing: Standing,
    /// The plan, when one was made.
    pub plan: Option<Plan>,
    /// The pass wrote the journal: planning again may find more to do at
    /// once. (A step it started reports its end to the loop itself.)
    pub progressed: bool,
}

impl PassReport {
    /// The store refused this controller's term: another controller took over.
    pub fn deposed(&self) -> bool {
        self.standing == Standing::Deposed
    }
}

/// A controller. One per manager; only the leader's acts.
pub struct Controller {
    ctx: Arc<Context>,
    /// The loop's clock and pace.
    pace: Pace,
    /// Where it stands among the store's terms, and what each term keeps.
    tenancy: Tenancy,
    /// The side effects it started and what they reported.
    acting: Acting,
    /// What it tells the store and the metrics.
    reporting: Reporting,
    /// What machines that have not joined show of their boot.
    boots: crate::boots::BootWatch,
    /// One of any number of external controllers taking turns by the
    /// store's lease ([`Controller::external`]).
    external: bool,
    /// It reaches the engines of the swarm's machines (an external
    /// controller may not: then it acts only for plain groups).
    reaches_engines: bool,
}

/// The loop's timing: when it started (the planner's clock), how many
/// passes it made, and what wakes it besides its own steps.
struct Pace {
    started: Instant,
    passes: u64,
    /// Consecutive passes run without sleeping.
    immediate: u32,
    /// Nudges from outside (engine events): look again now.
    triggers: Option<mpsc::UnboundedReceiver<()>>,
}

impl Controller {
    /// A controller wired to `ctx`; its providers' calls are rate-limited
    /// and retried (see `paced`).
    pub fn new(mut ctx: Context) -> Self {
        ctx.providers = crate::paced::wrap(ctx.providers);
        Controller {
            ctx: Arc::new(ctx),
            pace: Pace {
                started: Instant::now(),
                passes: 0,
                immediate: 0,
                triggers: None,
            },
            tenancy: Tenancy::new(),
            acting: Acting::new(),
            reporting: Reporting::default(),
            boots: Default::default(),
            external: false,
            reaches_engines: true,
        }
    }

    /// Runs off the cluster as one of any number of external controllers
    /// (`drover controller --external`): it acts only while it holds the
    /// store's lease and the cluster file's `control:` admits it; deposed,
    /// it stands by again rather than stopping. `reaches_engines`: whether
    /// it reaches the swarm's engines through its providers' machines;
    /// one that does not acts only for clusters of plain groups (a swarm it
    /// cannot see is not a swarm that is absent).
    pub fn external(mut self, reaches_engines: bool) -> Self {
        self.external = true;
        self.reaches_engines = reaches_engines;
        self
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
        self.reporting.metrics = Some(metrics);
        self
    }

    /// Also wakes on every message of `triggers` (e.g. the engine's node
    /// events), so a leadership change is noticed at once, not at the resync.
    pub fn with_triggers(mut self, triggers: mpsc::UnboundedReceiver<()>) -> Self {
        self.pace.triggers = Some(triggers);
        self
    }

    /// Also reports every step that ends to `reports` (e.g. a bootstrap
    /// waiting for its first manager's provision).
    pub fn with_step_reports(mut self, reports: mpsc::UnboundedSender<StepReport>) -> Self {
        self.acting.step_reports = Some(reports);
        self
    }

    /// Passes made so far.
    pub fn passes(&self) -> u64 {
        self.pace.passes
    }

    /// Runs until `shutdown` resolves. Wakes on a finished step, the
    /// planner's next timer, or the resync tick.
    pub async fn run(mut self, shutdown: impl std::future::Future<Output = ()>) {
        tokio::pin!(shutdown);
        let mut commits = watch_store(self.ctx.clone(), self.tenancy.watching.subscribe());
        loop {
            if let (Some(why), Place::Outside) = (self.tenancy.term.deposed(), self.place()) {
                tracing::info!(why, "another controller took over; this one stops");
                return;
            }
            let report = self.pass().await;
            if let Err(e) = &report {
                tracing::warn!(error = %e, "pass failed; retrying at the next resync");
            }
            let sleep = self.sleep_after(report.ok().as_ref());
            let nudge = async {
                match self.pace.triggers.as_mut() {
                    Some(rx) => rx.recv().await,
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                _ = &mut shutdown => return,
                Some(done) = self.acting.done_rx.recv() => self.heard(done).await,
                Some(node) = self.acting.left_rx.recv() => self.report_left(&node).await,
                Some(()) = nudge => {}
                Some(()) = commits.recv() => {}
                _ = tokio::time::sleep(sleep) => {}
            }
            // Take in whatever else finished or nudged meanwhile: the next
            // pass observes all of it, so each needs no pass of its own (a
            // batch of 100 machines joining is a burst of node events).
            while let Ok(done) = self.acting.done_rx.try_recv() {
                self.heard(done).await;
            }
            if let Some(rx) = self.pace.triggers.as_mut() {
                while rx.try_recv().is_ok() {}
            }
            while commits.try_recv().is_ok() {}
        }
    }

    /// A step ended: the world moved if it succeeded, so the spin guard
    /// starts counting again (a step failing at once, every pass, does not
    /// reset it).
    async fn heard(&mut self, done: act::Finished) {
        if done.result.is_ok() {
            self.pace.immediate = 0;
        }
        self.finished(done).await;
    }

    /// How long the loop sleeps after a pass that reported `report` (none:
    /// it failed), unless something wakes it sooner.
    fn sleep_after(&mut self, report: Option<&PassReport>) -> Duration {
        let wake = report.and_then(|r| r.plan.as_ref()).and_then(|p| p.wake_at);
        let changed = report.is_some_and(|r| r.progressed);
        let mut sleep = self.ctx.resync;
        if self.place() == Place::External && self.tenancy.term.held().is_none() {
            // Standing by: the store's lease is asked after often enough to
            // act within a second of its lapse (a pass that finds it held
            // looks at nothing else).
            sleep = sleep.min(STANDBY_POLL);
        }
        if let Some(at) = wake {
            sleep = sleep.min(Duration::from_millis(at.saturating_sub(self.now())));
        }
        if changed && self.pace.immediate < MAX_IMMEDIATE_PASSES {
            // The journal changed: plan again at once
            // (bounded, so a planner that keeps changing its mind cannot
            // spin the loop without letting time pass) — or, while a step
            // that pass started still runs, once it ends or
            // `FRESH_STEP_WAIT` has passed. Most steps are one quick call;
            // observed before it returns, the world still looks as before
            // it, and a pass on that view finds nothing new to do: where
            // observing takes seconds (a describe of 1000 EC2 instances),
            // every step would wait a whole extra pass to be seen done.
            self.pace.immediate += 1;
            if self.acting.fresh_still_running() {
                sleep.min(FRESH_STEP_WAIT)
            } else {
                Duration::ZERO
            }
        } else {
            self.pace.immediate = 0;
            sleep
        }
    }

    /// The planner's clock: ms since this controller started.
    fn now(&self) -> u64 {
        self.pace.started.elapsed().as_millis() as u64
    }

    /// Where it runs: next to a manager (its engine's leadership decides
    /// whether it may act), or off the cluster.
    fn place(&self) -> Place {
        match (&self.ctx.self_link, self.external) {
            (Some(_), _) => Place::Manager,
            (None, true) => Place::External,
            (None, false) => Place::Outside,
        }
    }
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
