//! The term: where this controller stands in the store's succession of
//! epochs, and the only place that moves it. Every write and side effect of
//! the controller needs a [`Leading`], which only [`Term::take`] builds (by
//! winning a campaign), and which a pass is handed only while the term is
//! [`Term::Leading`]: a controller that follows, hands its engine's
//! leadership over or was deposed has none to act with.

use super::Controller;
use crate::execute::Tenure;
use crate::tokens;
use drover_core::join_token::Tokens;
use drover_core::plan::Memory;
use drover_spi::{Epoch, Store};
use std::sync::Arc;

/// This controller's place among the store's terms.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Term {
    /// Holds no term: it observes, and campaigns once it may act.
    Following,
    /// Holds the store's current term, won by its own campaign.
    Leading(Leading),
    /// Its engine's own hand-over (`op`, a `DemoteSelfAndLeave`) runs: asked
    /// anything meanwhile, the engine holds its own stop 5-8 s (swarm-facts),
    /// so a pass looks at nothing and starts nothing. `then` is where it
    /// stands when the step ends (a write of a finished step may still be
    /// fenced meanwhile).
    HandingOver { op: String, then: Box<Term> },
    /// A write of its term was refused: another controller holds a newer
    /// one. Off the cluster that is for good; a manager's controller
    /// campaigns again only once its engine leads the swarm.
    Deposed { why: &'static str },
}

/// Proof that this controller holds term `epoch`. Only [`Term::take`]
/// builds one; acting, spawning a side effect and every fenced write ask
/// for it, so none of them is reachable from a term that may not act.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Leading {
    epoch: Epoch,
}

impl Leading {
    /// The epoch this term fences its writes with.
    pub(crate) fn epoch(&self) -> Epoch {
        self.epoch
    }

    /// What a side effect of this term confirms its term with.
    pub(crate) fn tenure(&self, store: Arc<dyn Store>) -> Tenure {
        Tenure {
            store,
            epoch: self.epoch,
        }
    }
}

/// Where a controller stands, as a pass reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Standing {
    /// Holds no term.
    Following,
    /// Holds the current term.
    Leading,
    /// Its engine hands the swarm's leadership over.
    HandingOver,
    /// The store refused its term: another controller took over.
    Deposed,
}

/// Where a controller runs, which decides what may end its deposition.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Place {
    /// Next to a manager: it acts while its engine leads the swarm.
    Manager,
    /// Off the cluster, for one task (`apply`'s bootstrap): the store's
    /// term alone decides, and once deposed it stops.
    Outside,
    /// Off the cluster, one of any number of external controllers: it
    /// acquires the term only while nobody holds the store's lease, as the
    /// declared `control:` allows, and once deposed stands by again.
    External,
}

impl Place {
    /// Where the control rule ([`drover_core::control::turn`]) places it;
    /// `None` for a one-task controller, which the rule does not govern.
    pub(crate) fn seat(self) -> Option<drover_core::control::Seat> {
        use drover_core::control::Seat;
        match self {
            Place::Manager => Some(Seat::Manager),
            Place::External => Some(Seat::External),
            Place::Outside => None,
        }
    }
}

impl Term {
    /// May it campaign for a new term now, at `place` (its engine leads,
    /// or it runs outside)? Only while it holds none, and once deposed
    /// only next to a manager, whose engine's leadership says when its
    /// turn came again, or as an external controller, which the store's
    /// lease tells: a one-task controller outside is told by nothing.
    pub(crate) fn may_campaign(&self, place: Place) -> bool {
        match self {
            Term::Following => true,
            Term::Deposed { .. } => place != Place::Outside,
            Term::Leading(_) | Term::HandingOver { .. } => false,
        }
    }

    /// Starts term `epoch`, just won by campaigning.
    pub(crate) fn take(&mut self, epoch: Epoch) -> Leading {
        let lead = Leading { epoch };
        *self = Term::Leading(lead.clone());
        lead
    }

    /// The term a pass may plan and act under: only while leading.
    pub(crate) fn acting(&self) -> Option<&Leading> {
        match self {
            Term::Leading(lead) => Some(lead),
            _ => None,
        }
    }

    /// The term its writes are fenced by: also while its hand-over runs
    /// (the ends of steps it started are recorded under it).
    pub(crate) fn held(&self) -> Option<&Leading> {
        match self {
            Term::Leading(lead) => Some(lead),
            Term::HandingOver { then, .. } => then.held(),
            Term::Following | Term::Deposed { .. } => None,
        }
    }

    /// Whether a pass may look at the world (its engine among it).
    pub(crate) fn observes(&self) -> bool {
        !matches!(self, Term::HandingOver { .. })
    }

    /// Its engine's own hand-over, `op`, starts under `lead`.
    pub(crate) fn hand_over(&mut self, lead: &Leading, op: &str) {
        if self.acting() == Some(lead) {
            let then = Box::new(std::mem::replace(self, Term::Following));
            *self = Term::HandingOver {
                op: op.to_string(),
                then,
            };
        }
    }

    /// Operation `op` ended: if it was the hand-over, the term is what it
    /// became meanwhile.
    pub(crate) fn step_ended(&mut self, op: &str) {
        if let Term::HandingOver { op: o, then } = self
            && o == op
        {
            let then = std::mem::replace(&mut **then, Term::Following);
            *self = then;
        }
    }

    /// Gives its term up (its engine no longer leads); true if it held one.
    pub(crate) fn stand_down(&mut self) -> bool {
        match self {
            Term::Leading(_) => {
                *self = Term::Following;
                true
            }
            Term::HandingOver { then, .. } => then.stand_down(),
            Term::Following | Term::Deposed { .. } => false,
        }
    }

    /// The store refused its term (`why`); true if it held one.
    pub(crate) fn depose(&mut self, why: &'static str) -> bool {
        match self {
            Term::HandingOver { then, .. } => then.depose(why),
            other => {
                let held = matches!(other, Term::Leading(_));
                *other = Term::Deposed { why };
                held
            }
        }
    }

    /// Where it stands, as a pass reports it.
    pub(crate) fn standing(&self) -> Standing {
        match self {
            Term::Following => Standing::Following,
            Term::Leading(_) => Standing::Leading,
            Term::HandingOver { then, .. } if then.deposed().is_some() => Standing::Deposed,
            Term::HandingOver { .. } => Standing::HandingOver,
            Term::Deposed { .. } => Standing::Deposed,
        }
    }

    /// Why a write of its term was refused, if one was (also while its
    /// hand-over runs).
    pub(crate) fn deposed(&self) -> Option<&'static str> {
        match self {
            Term::Deposed { why } => Some(why),
            Term::HandingOver { then, .. } => then.deposed(),
            Term::Following | Term::Leading(_) => None,
        }
    }
}

/// What belongs to the term: its state, the planner's memory and the join
/// tokens' view (both start afresh with each term), and whether the store's
/// change watch looks (only while leading: a swarm store is read through
/// the very engine that must not be asked while it leaves).
pub(super) struct Tenancy {
    pub(super) term: Term,
    pub(super) memory: Memory,
    pub(super) tokens: Tokens,
    pub(super) watching: tokio::sync::watch::Sender<bool>,
}

impl Tenancy {
    pub(super) fn new() -> Self {
        Tenancy {
            term: Term::Following,
            memory: Memory::default(),
            tokens: Tokens::default(),
            watching: tokio::sync::watch::Sender::new(false),
        }
    }
}

impl Controller {
    /// Term `epoch` was won: planning starts from nothing remembered, the
    /// store's changes wake the loop, and the join tokens are seen anew.
    pub(super) fn take(&mut self, epoch: Epoch) -> Leading {
        let lead = self.tenancy.term.take(epoch);
        self.reporting.waiting = None;
        self.tenancy.memory = Memory::default();
        self.tenancy.watching.send_replace(true);
        self.tenancy.tokens = tokens::new_term(&self.ctx, self.now());
        lead
    }

    /// Its own hand-over, `op`, starts under `lead`: nothing more through
    /// its engine, the store's watch included.
    pub(super) fn hand_over(&mut self, lead: &Leading, op: &str) {
        self.tenancy.watching.send_replace(false);
        self.tenancy.term.hand_over(lead, op);
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
    pub(super) fn stand_down(&mut self, why: &str) {
        let held = self.tenancy.term.held().map(Leading::epoch);
        if self.tenancy.term.stand_down() {
            tracing::warn!(why, "standing down: another controller leads");
        }
        self.let_go(held);
        self.forget_term();
    }

    /// The store refused its term (`why`): it stands down for good off the
    /// cluster, and on it until its engine leads again.
    pub(super) fn depose(&mut self, why: &'static str) {
        let held = self.tenancy.term.held().map(Leading::epoch);
        if self.tenancy.term.depose(why) {
            tracing::warn!(why, "standing down: another controller leads");
        }
        self.let_go(held);
        self.forget_term();
    }

    /// Ends the store's lease of term `held` (if it held one) in the
    /// background: a controller that no longer acts must not keep a lease
    /// alive, or external controllers wait for one nobody uses (a manager
    /// whose engine lost the lead to one whose controller is down). A
    /// newer term is never touched ([`Store::resign`]); a lease etcd does
    /// not hear the end of lapses within its TTL.
    fn let_go(&self, held: Option<Epoch>) {
        let Some(epoch) = held else {
            return;
        };
        let store = self.ctx.store.clone();
        tokio::spawn(async move {
            if let Err(e) = store.resign(epoch).await {
                tracing::debug!(error = %e, epoch, "the term's lease was not ended: it lapses");
            }
        });
    }

    /// Forgets what belonged to the term, the events it queued included: a
    /// later term must not write them as its own.
    fn forget_term(&mut self) {
        self.reporting.drop_queued();
        self.tenancy.memory = Memory::default();
        self.tenancy.watching.send_replace(false);
        self.acting.cancel_all();
    }
}

#[cfg(test)]
#[path = "term_tests.rs"]
mod tests;
