//! Machine lifetime (`health.max_age`): a machine older than the group's
//! `max_age` is replaced like an outdated member, through the roll stage
//! and every gate a roll passes (quorum, `max_in_flight`, canaries, zone
//! at a time, leader last, maintenance windows).
//!
//! Spread: machines made together (a new cluster, a big roll) would all
//! come due together and the group would roll wholesale on one day. So
//! each machine is due up to a quarter of `max_age` early, by an offset
//! taken from a hash of its instance id: deterministic (every controller,
//! every pass, the same answer), no state to keep, and spread evenly over
//! `[max_age − max_age/4, max_age]` of age. A machine whose provider does
//! not report its creation time (`created_ms` 0) never comes due: its age
//! is unknown, and taking it for 1970 would replace it at once.

use super::group::Planner;
use super::stage::Group;
use crate::model::{Instance, Time};
use crate::spec::{GroupSpec, format_duration};
use sha2::{Digest, Sha256};
use std::time::Duration;

/// A machine is due up to `max_age / SPREAD` early.
const SPREAD: u64 = 4;

/// The youngest a machine of a group with this `max_age` may come due (up
/// to `max_age / SPREAD` early): the decoder refuses a `max_age` whose
/// earliest due falls within a successor's start and watch by this number.
pub(crate) fn earliest_due(max_age: Duration) -> Duration {
    max_age - max_age / SPREAD as u32
}

/// The least whole-second `max_age` whose [`earliest_due`] exceeds `step`.
pub(crate) fn least_max_age_beyond(step: Duration) -> Duration {
    let spread = u128::from(SPREAD);
    Duration::from_secs((step.as_millis() * spread / (spread - 1) / 1000) as u64 + 1)
}

/// How many due machines `plan` names before it only counts them.
const LISTED: usize = 5;

/// When `inst` is due for replacement (epoch ms), if the group has a
/// `max_age` and the machine's creation time is known.
pub(crate) fn due_at(spec: &GroupSpec, inst: &Instance) -> Option<Time> {
    let age = u64::try_from(spec.health.max_age?.as_millis()).unwrap_or(u64::MAX);
    if inst.created_ms == 0 {
        return None;
    }
    let early = spread(&inst.id) % (age / SPREAD + 1);
    Some(inst.created_ms.saturating_add(age - early))
}

/// A stable number from an instance id (SHA-256, not the std hasher,
/// whose output may change between Rust releases).
fn spread(id: &str) -> u64 {
    let digest = Sha256::digest(id.as_bytes());
    u64::from_be_bytes(digest[..8].try_into().unwrap_or_default())
}

/// `ms` as UTC, for `plan`'s lines.
fn utc(ms: Time) -> String {
    i64::try_from(ms)
        .ok()
        .and_then(|ms| jiff::Timestamp::from_millisecond(ms).ok())
        .map_or_else(
            || format!("{ms} ms"),
            |t| t.strftime("%Y-%m-%d %H:%M UTC").to_string(),
        )
}

impl Planner<'_> {
    /// `inst` is past its group's `max_age` at this pass's wall-clock time.
    pub(crate) fn expired(&self, spec: &GroupSpec, inst: &Instance) -> bool {
        due_at(spec, inst).is_some_and(|t| t <= self.facts.input.wall_ms)
    }

    /// Tells which of `g`'s members are due and which comes due next (and
    /// wakes the controller then).
    pub(crate) fn explain_lifetimes(&mut self, g: &Group<'_, '_>) {
        let Some(age) = g.d().spec.health.max_age else {
            return;
        };
        let wall = self.facts.input.wall_ms;
        let mut dues: Vec<(Time, &str)> = g
            .live
            .iter()
            .filter_map(|i| Some((due_at(&g.d().spec, i)?, i.id.as_str())))
            .collect();
        dues.sort_unstable();
        let split = dues.partition_point(|(t, _)| *t <= wall);
        let (due, later) = dues.split_at(split);
        let age = format_duration(age);
        if !due.is_empty() {
            let mut names: Vec<String> = due
                .iter()
                .take(LISTED)
                .map(|(t, id)| format!("{id} (due {})", utc(*t)))
                .collect();
            if due.len() > LISTED {
                names.push(format!("and {} more", due.len() - LISTED));
            }
            self.out.explanation.push(format!(
                "{}: past health.max_age {age}, replaced as a roll: {}",
                g.name(),
                names.join(", ")
            ));
        }
        if let Some((t, id)) = later.first() {
            self.out.explanation.push(format!(
                "{}: next machine due (health.max_age {age}): {id} at {}",
                g.name(),
                utc(*t)
            ));
            self.clock.wake_within(Duration::from_millis(t - wall));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spec::parse_str;

    const DAY: u64 = 86_400_000;

    fn spec(max_age: &str) -> GroupSpec {
        let text = format!(
            "groups:\n- name: w\n  role: worker\n  allocation: {{size: 3}}\n  instance: {{provider: sim}}\n  health: {{max_age: {max_age}}}\n"
        );
        parse_str(&text).spec.expect("spec").groups.remove(0)
    }

    fn inst(id: &str, created_ms: u64) -> Instance {
        Instance {
            id: id.into(),
            tags: Default::default(),
            running: true,
            created_ms,
        }
    }

    #[test]
    fn due_within_the_last_quarter_of_max_age() {
        let s = spec("40d");
        for k in 0..200 {
            let t = due_at(&s, &inst(&format!("i-{k}"), DAY)).unwrap();
            assert!((31 * DAY..=41 * DAY).contains(&t), "i-{k}: {t}");
        }
    }

    #[test]
    fn machines_made_together_come_due_apart() {
        let s = spec("40d");
        let mut days: Vec<u64> = (0..100)
            .map(|k| due_at(&s, &inst(&format!("i-{k}"), DAY)).unwrap() / DAY)
            .collect();
        days.sort_unstable();
        days.dedup();
        assert!(days.len() >= 8, "spread over days: {days:?}");
    }

    #[test]
    fn no_max_age_or_unknown_creation_is_never_due() {
        assert_eq!(due_at(&spec("40d"), &inst("i-1", 0)), None);
        let mut s = spec("40d");
        s.health.max_age = None;
        assert_eq!(due_at(&s, &inst("i-1", DAY)), None);
    }
}
