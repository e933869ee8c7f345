//! Which operations hold back no join token's rotation
//! ([`crate::join_token::awaiting`], issue 36).

use super::group::Planner;
use super::memory::Timer;
use crate::journal::Step;
use std::collections::BTreeSet;

impl Planner<'_> {
    /// The operations whose machine can no longer join: stopped, or not
    /// joined within the group's `startup_timeout` since its machine's
    /// reported creation, or since this controller first saw its provision
    /// done (a new term's memory starts empty; a machine not listed yet may
    /// still boot with the current token; a call in flight is never
    /// parked). Such
    /// a machine (a `NeverJoined` block's last, kept for diagnosis; one
    /// whose operation is stuck on a failing `post_provision` hook) must
    /// not keep an exposed token valid for ever. Whatever the group shows
    /// this pass: a group stuck on a failing hook reads blocked only in the
    /// passes that call it, and waiting for its window in the others (a
    /// rule read from the group's phase kept the token valid for good in
    /// the simulator). One still within its `startup_timeout` is not
    /// parked: a heal begun in a pass where a hook's block lifted must not
    /// have the token rotated under its machine. A machine past it that
    /// still joins finds the token rotated and is replaced as never joined,
    /// as it would be anyway. The timer runs for every operation, so no
    /// pass restarts it.
    pub(super) fn parked(&self) -> BTreeSet<String> {
        let world = &self.facts.world;
        let mut parked = BTreeSet::new();
        for op in self.facts.input.journal.iter() {
            // A provision call still running is never parked: its machine
            // may be slow to make (an image to download) and boots with the
            // current token once made.
            if !op.done.contains(&Step::Provision) || world.node_for(Some(&op.id)).is_some() {
                continue;
            }
            let view = self.facts.views.iter().find(|v| v.d.spec.name == op.group);
            let Some(view) = view else {
                // An undeclared group's: retired, never joined.
                parked.insert(op.id.clone());
                continue;
            };
            let limit = view.d.spec.health.startup_timeout;
            let seen = self.clock.elapsed(Timer::Unjoined(op.id.clone()), limit);
            let machine = view.member(view.found(world, op).replacement);
            let stopped = machine.is_some_and(|m| !m.running);
            let made = machine.filter(|m| m.created_ms != 0).map(|m| m.created_ms);
            let wall = self.facts.input.wall_ms;
            let aged = made.is_some_and(|at| wall >= at.saturating_add(limit.as_millis() as u64));
            let timed_out = seen || aged;
            if timed_out || stopped {
                parked.insert(op.id.clone());
            }
        }
        parked
    }
}
