//! The plan's acts that are no operation's step: an automatic rollback
//! committed to the store, and the join tokens rotated once they served.

use super::Controller;
use crate::observe::Stored;
use crate::run::term::Leading;
use crate::status::wall_ms;
use crate::tokens;
use drover_core::model::SwarmView;
use drover_core::plan::{Action, Phase, Plan};
use drover_core::revision::{rollback_target, with_group};
use drover_core::spec::validate_commit;
use drover_spi::{EventAction, Provenance, Revision, StoreError};

impl Controller {
    /// Commits the last converged revision's spec of `group` as a rollback,
    /// fenced by `lead`: a deposed controller's rollback is refused by the
    /// store like any other write of its term. The spec it would commit
    /// passes the one rule of every commit (`validate_commit`) or is never
    /// committed: a converged revision stored by an older drover, or one
    /// whose group no longer fits beside the current others, blocks the
    /// group with the reason instead (an operator decides, with `apply`).
    pub(super) async fn rollback(
        &mut self,
        stored: &Stored,
        group: &str,
        reason: &str,
        lead: &Leading,
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
                if !self.reporting.blocked_for(group, &why) {
                    tracing::warn!(group, %why, "automatic rollback refused");
                }
                self.acting.rollback_refused.insert(group.to_string(), why);
                return Ok(());
            }
        };
        let provenance = Provenance {
            who: format!("controller {}", self.ctx.identity),
            at_ms: wall_ms(),
            message: format!("automatic rollback of {group}: {reason}"),
        };
        let rev = stored.revision.rev;
        match self
            .ctx
            .store
            .commit_rollback(lead.epoch(), rev, spec.spec(), provenance)
            .await
        {
            Ok(rev) => {
                let outcome = format!("committed revision {rev}");
                let (group, action) = (Some(group.into()), EventAction::Rollback);
                self.queue_event(group, None, action, reason, outcome);
                Ok(())
            }
            // Someone committed meanwhile: their spec supersedes the rollback.
            Err(StoreError::Conflict { .. }) => Ok(()),
            Err(e) => Err(e),
        }
    }

    /// After acting: a rollback the store refused blocks its group in this
    /// very pass's status and events.
    pub(in crate::run) fn block_refused_rollbacks(&self, plan: &mut Plan) {
        for (group, why) in &self.acting.rollback_refused {
            if let Some(g) = plan.groups.iter_mut().find(|g| g.name == *group) {
                g.phase = Phase::Blocked;
                g.reason = Some(why.clone());
            }
        }
    }

    /// Rotates the join tokens that were placed in readable user data and
    /// have served (`tokens`): the journal as this pass left it (the
    /// operations it began included) says which machines still await
    /// their join. Each rotation is an event.
    pub(in crate::run) async fn rotate_tokens(
        &mut self,
        stored: &Stored,
        plan: &Plan,
        swarm: &SwarmView,
        lead: &Leading,
    ) {
        let begun = plan.actions.iter().filter_map(|a| match a {
            Action::Begin { op } => Some(&**op),
            _ => None,
        });
        let journal: Vec<_> = stored.journal.iter().chain(begun).collect();
        let term = lead.tenure(self.ctx.store.clone());
        let now = self.now();
        let done = tokens::rotate_due(
            &self.ctx,
            &term,
            &mut self.tenancy.tokens,
            &journal,
            plan,
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
            self.queue_event(None, None, EventAction::RotateJoinToken, &why, outcome);
        }
    }
}
