//! Machines that have not joined yet: when their `startup_timeout` runs
//! out (from the machine's creation as its provider reports it), whether
//! their join already failed, and what the controller should ask their
//! provider about them ([`BootAsk`]) so the planner can say why a machine
//! never joins (docs/status.md, "A machine that never joins").

use super::blocked::Blocked;
use super::group::Planner;
use super::health::Health;
use super::memory::Timer;
use super::view::Member;
use crate::boot::{BootLog, JoinFailed};
use crate::model::{Instance, Time};
use crate::spec::Role;
use serde::Serialize;
use std::time::Duration;

/// A machine the controller should ask its provider about before the next
/// pass: its engine's swarm state always, its boot log's tail when `log`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct BootAsk {
    /// Its group.
    pub group: String,
    /// Its group's provider (`instance.provider`, as the controller's
    /// providers are keyed).
    pub provider: String,
    /// The instance id.
    pub instance: String,
    /// Its boot log's tail is wanted: it has waited half its
    /// `startup_timeout`, or its join failed (so the tail is at hand when
    /// the planner reports it).
    pub log: bool,
}

/// How long an engine must keep reporting a failed join before the
/// planner acts on it: far longer than a boot script takes to clear one
/// attempt and start the next (`drover engine join`: a forced leave,
/// about a second), far shorter than any `startup_timeout`.
pub const JOIN_FAILED_FOR: Duration = Duration::from_secs(15);

/// How many of a boot log's last lines a one-line reason shows.
pub const REASON_LINES: usize = 3;

/// When a machine created at wall time `created_ms` (its provider's
/// clock; 0 when it reports none) was, on the planner's clock (`now`,
/// whose wall time is `wall_ms`): `None` when unknown or in the future
/// (a provider clock ahead of this host's): the first sighting counts then.
pub(crate) fn created_at(created_ms: u64, now: Time, wall_ms: Time) -> Option<Time> {
    (created_ms > 0 && created_ms <= wall_ms).then(|| now.saturating_sub(wall_ms - created_ms))
}

impl<'a> Planner<'a> {
    /// True once machine `inst`, not joined yet, has had its whole
    /// `startup_timeout`: counted from its creation as its provider reports
    /// it, else from this controller's first sighting (a new controller
    /// taking over does not give it a fresh timeout).
    pub(crate) fn startup_over(&self, inst: &Instance, startup_timeout: Duration) -> bool {
        let input = &self.facts.input;
        let began = created_at(inst.created_ms, input.now, input.wall_ms);
        self.clock
            .elapsed_from(Timer::Pending(inst.id.clone()), startup_timeout, began)
    }

    /// Its provider reports when `inst` was created (in this host's past).
    pub(crate) fn creation_known(&self, inst: &Instance) -> bool {
        let input = &self.facts.input;
        created_at(inst.created_ms, input.now, input.wall_ms).is_some()
    }

    /// `blocked`, about machine `id` that never joined, with what the
    /// machine itself says: its boot log's last lines, else its engine's
    /// failed join, when known.
    pub(crate) fn saying_why(&self, blocked: Blocked, id: &str) -> Blocked {
        let why = match (self.boot_log(id), self.join_failed(id)) {
            (Some(log), _) => format!("its boot log ends: {}", log.last(REASON_LINES)),
            (None, Some(failed)) => failed.to_string(),
            (None, None) => return blocked,
        };
        Blocked::NeverJoinedSays {
            blocked: Box::new(blocked),
            why,
        }
    }

    /// The engine of machine `id` has reported a failed join for
    /// [`JOIN_FAILED_FOR`]: a boot script that tries its managers in turn
    /// clears a failed attempt before the next within moments, so only a
    /// failure that stays is one nobody will retry.
    pub(crate) fn join_failed(&self, id: &str) -> Option<&'a JoinFailed> {
        let observed: &'a crate::model::Observed = self.facts.input.observed;
        let failed = observed.boots.get(id)?.join_failed.as_ref()?;
        let key = Timer::JoinFailed(id.to_string());
        self.clock.elapsed(key, JOIN_FAILED_FOR).then_some(failed)
    }

    /// The tail of machine `id`'s boot log, if it was fetched and shows
    /// anything.
    pub(crate) fn boot_log(&self, id: &str) -> Option<&'a BootLog> {
        let observed: &'a crate::model::Observed = self.facts.input.observed;
        observed
            .boots
            .get(id)
            .and_then(|b| b.log.as_ref())
            .filter(|l| !l.is_empty())
    }

    /// Why member `inst`, not joined, never will by waiting more: its
    /// engine's join failed, or its `startup_timeout` ran out.
    pub(crate) fn join_over(&self, inst: &Instance, startup_timeout: Duration) -> bool {
        self.join_failed(&inst.id).is_some() || self.startup_over(inst, startup_timeout)
    }

    /// What the controller should ask about before the next pass: every
    /// machine of a swarm group that has not joined yet.
    pub(crate) fn boot_asks(&self) -> Vec<BootAsk> {
        let mut out = Vec::new();
        for v in &self.facts.views {
            let (Ok(members), false) = (&v.described, v.d.spec.role == Role::Plain) else {
                continue;
            };
            let half = v.d.spec.health.startup_timeout / 2;
            let provider = v.d.spec.instance.provider_key();
            for m in members.iter().filter(|m| m.health == Health::Pending) {
                out.push(BootAsk {
                    group: v.d.spec.name.clone(),
                    provider: provider.clone(),
                    instance: m.id.clone(),
                    log: self.join_failed(&m.id).is_some() || self.pending_for(m) >= half,
                });
            }
        }
        out
    }

    /// How long member `m` has been waiting to join (its `Pending` timer).
    fn pending_for(&self, m: &Member<'_>) -> Duration {
        self.clock.running_for(&Timer::Pending(m.id.clone()))
    }
}

#[cfg(test)]
mod tests {
    use super::created_at;

    /// A creation time is placed on the planner's clock by its age on the
    /// wall clock; none, or one in the future, is unknown.
    #[test]
    fn a_creation_time_is_placed_on_the_planners_clock() {
        // The planner's clock reads 100 s while the wall reads 1 000 000 s.
        let (now, wall) = (100_000, 1_000_000_000);
        assert_eq!(created_at(wall - 30_000, now, wall), Some(70_000));
        assert_eq!(created_at(wall - 500_000, now, wall), Some(0));
        assert_eq!(created_at(0, now, wall), None);
        assert_eq!(created_at(wall + 1, now, wall), None);
    }
}
