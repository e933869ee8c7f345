//! First sightings: when *this* controller first saw a condition.
//!
//! Every timer (watch, grace, startup and step timeouts, drain) measures from
//! here. A pass copies forward only the keys it touched, so a condition that
//! stopped holding resets its timer, and a new leader (empty memory) starts
//! every timer afresh from its own observation.

use super::fast::Map;
use crate::journal::Step;
use crate::model::Time;
use std::cell::{Cell, RefCell};
use std::time::Duration;

/// How long a new leader waits for the old leader's `swarm leave` to show
/// (node Down, machine stopped) before concluding it cannot and moving on.
/// swarm-facts: an ex-leader that left shows Down 27-34 s after; a demoted,
/// not-yet-left node is harmless to destroy once it is out of the raft.
pub const LEAVE_BOUND: Duration = Duration::from_secs(45);

/// How long a victim this operation never started destroying must stay
/// out of successful describes before it counts as gone: a successful
/// answer can leave a machine out (eventual consistency), and taking that
/// for a destroy would make a second machine for its slot.
pub const UNLISTED_BOUND: Duration = Duration::from_secs(30);

/// Timer first-sightings, keyed by condition.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Memory {
    /// Hashed, not ordered: a pass looks up and re-inserts every timer it
    /// touches (one per operation step, watch and grace).
    seen: Map<Timer, Time>,
    /// Zones short of capacity (`plan::zones`).
    pub(super) short_zones: super::zones::ShortZones,
}

/// A condition a timer measures, and whose. Typed rather than formatted
/// into a text key: a pass makes one key per operation in flight, and
/// formatting them was a tenth of a pass over 10 000 operations.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) enum Timer {
    /// An operation (by id) has been at this step.
    Step(String, Step),
    /// A member (by instance id) has been healthy: the watch.
    Healthy(String),
    /// A member has been unhealthy.
    Unhealthy(String),
    /// A member's machine runs, and no swarm node carries its link yet.
    Pending(String),
    /// A member's engine, not joined, reports its join failed.
    JoinFailed(String),
    /// An operation's node has been draining.
    Drain(String),
    /// A former leader has been asked to leave, by operation.
    Leave(String),
    /// An operation's provision attempt waits out its backoff.
    Backoff(String, u32),
    /// An operation's blocking hook, after its nth failure, waits to be
    /// called again.
    HookRetry(String, u32),
    /// A disruption (by operation id, or by instance id before one
    /// begins) has been held by a service budget.
    Budget(String),
    /// An operation (by id) has started its provision and no swarm node
    /// carries its link (`plan::parked`), whether or not its machine is
    /// listed: one timer, so a machine flickering out of describes does
    /// not restart it.
    Unjoined(String),
    /// A machine of an undeclared group has been seen (by instance id).
    Orphan(String),
    /// A node (by id) has been Down with no machine carrying its link.
    Down(String),
    /// An operation's victim (by operation id) has been missing from
    /// successful describes, not destroyed by it.
    Unlisted(String),
    /// A pet slot (`group/logical id`) has read empty.
    EmptySlot(String),
    /// A raft member without drover's labels (by node id) has been seen
    /// while every machine of ours had a node.
    Unlabelled(String),
    /// A worker's raft member (by node id) has been seen unreachable with
    /// no manager behind it (`plan::ghost`).
    Ghost(String),
    /// A ghost's heal (by node id) was last planned.
    GhostHealed(String),
}

impl Memory {
    /// Number of running timers.
    pub fn len(&self) -> usize {
        self.seen.len() + self.short_zones.len()
    }
    /// True when no timer runs.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// A pass's view of time: the old memory in, the new memory out.
///
/// Interior mutability keeps timer reads usable while the planner holds
/// shared borrows of its observation (the pass is single-threaded).
pub(crate) struct Clock<'a> {
    old: &'a Memory,
    new: RefCell<Memory>,
    now: Time,
    wake_at: Cell<Option<Time>>,
}

impl<'a> Clock<'a> {
    pub(crate) fn new(old: &'a Memory, now: Time) -> Self {
        Clock {
            old,
            new: RefCell::new(Memory {
                seen: Map::with_capacity_and_hasher(old.len(), Default::default()),
                short_zones: Default::default(),
            }),
            now,
            wake_at: Cell::new(None),
        }
    }

    /// Keeps timer `key` running; true once it has run for `limit`.
    /// While it has not, remembers when it will, for `wake_at`.
    pub(crate) fn elapsed(&self, key: Timer, limit: Duration) -> bool {
        self.elapsed_from(key, limit, None)
    }

    /// [`Self::elapsed`], for a condition known to have begun at `began`
    /// (on this clock) when that is before this controller first saw it: a
    /// machine's creation as its provider reports it.
    pub(crate) fn elapsed_from(&self, key: Timer, limit: Duration, began: Option<Time>) -> bool {
        let seen = self.old.seen.get(&key).copied().unwrap_or(self.now);
        let since = began.map_or(seen, |b| b.min(seen));
        let since = *self.new.borrow_mut().seen.entry(key).or_insert(since);
        let due = since.saturating_add(limit.as_millis() as u64);
        if self.now >= due {
            return true;
        }
        self.wake(due);
        false
    }

    /// The grace rule, the one garbage collection applies to every item it
    /// may remove (a dead node, an orphan): evidence counts only once this
    /// controller has seen it for the whole `grace` itself (design rule 6),
    /// never on another host's clock. `None` once it has; until then, how
    /// long it has been seen, in whole seconds (what status shows).
    pub(crate) fn in_grace(&self, key: Timer, grace: Duration) -> Option<Duration> {
        if self.elapsed(key.clone(), grace) {
            return None;
        }
        Some(Duration::from_secs(self.running_for(&key).as_secs()))
    }

    /// True, restarting timer `key`, when it was not running or has run for
    /// `period`: something done at most once per `period` (a ghost's heal).
    /// While it has not, keeps it and remembers when it will, for `wake_at`.
    pub(crate) fn every(&self, key: Timer, period: Duration) -> bool {
        let mut new = self.new.borrow_mut();
        if new.seen.contains_key(&key) {
            return false;
        }
        let period = period.as_millis() as u64;
        let since = match self.old.seen.get(&key) {
            Some(&since) if self.now < since.saturating_add(period) => since,
            _ => self.now,
        };
        new.seen.insert(key, since);
        drop(new);
        self.wake(since.saturating_add(period));
        since == self.now
    }

    /// Asks for a pass within `d` though no timer is due: for what is
    /// learnt by asking rather than told (a former leader's leave).
    pub(crate) fn wake_within(&self, d: Duration) {
        self.wake(self.now.saturating_add(d.as_millis() as u64));
    }

    /// Makes `wake_at` no later than `due`.
    fn wake(&self, due: Time) {
        self.wake_at
            .set(Some(self.wake_at.get().map_or(due, |w| w.min(due))));
    }

    /// How long timer `key` has run (0 if it was not running).
    pub(crate) fn running_for(&self, key: &Timer) -> Duration {
        let since = self.new.borrow().seen.get(key).copied().unwrap_or(self.now);
        Duration::from_millis(self.now.saturating_sub(since))
    }

    pub(crate) fn finish(self) -> (Memory, Option<Time>) {
        (self.new.into_inner(), self.wake_at.get())
    }
}

#[cfg(test)]
mod tests {
    use super::{Clock, Memory, Timer};
    use std::time::Duration;

    /// Something done at most once per period (a ghost's heal): at once
    /// the first time, then not until the period has passed since, however
    /// often it is asked; the pass wakes when it may be done again.
    #[test]
    fn every_allows_once_per_period_from_the_first_time() {
        let period = Duration::from_secs(10);
        let key = || Timer::GhostHealed("n1".into());
        let empty = Memory::default();
        let first = Clock::new(&empty, 1_000);
        assert!(first.every(key(), period));
        assert!(!first.every(key(), period), "once per pass too");
        let (seen, wake) = first.finish();
        assert_eq!(wake, Some(11_000));
        let early = Clock::new(&seen, 10_999);
        assert!(!early.every(key(), period));
        let (seen, _) = early.finish();
        let due = Clock::new(&seen, 11_000);
        assert!(due.every(key(), period));
        let (seen, wake) = due.finish();
        assert_eq!(wake, Some(21_000), "restarted when done");
        assert!(!Clock::new(&seen, 20_000).every(key(), period));
    }

    /// A condition is in grace from its first sighting until the whole
    /// grace has passed on this controller's clock; what it shows is the
    /// time seen in whole seconds, and the pass wakes when the grace ends.
    #[test]
    fn grace_runs_from_the_first_sighting_for_the_whole_period() {
        let grace = Duration::from_secs(60);
        let key = || Timer::Down("n1".into());
        let empty = Memory::default();
        let first = Clock::new(&empty, 1_000);
        assert_eq!(first.in_grace(key(), grace), Some(Duration::ZERO));
        let (seen, wake) = first.finish();
        assert_eq!(wake, Some(61_000));
        let later = Clock::new(&seen, 30_999);
        assert_eq!(later.in_grace(key(), grace), Some(Duration::from_secs(29)));
        let (seen, _) = later.finish();
        assert_eq!(Clock::new(&seen, 61_000).in_grace(key(), grace), None);
        // Another host's memory is never carried over: a fresh one starts again.
        assert!(Clock::new(&empty, 61_000).in_grace(key(), grace).is_some());
    }
}
