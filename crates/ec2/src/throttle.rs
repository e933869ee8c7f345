//! Client-side rate limits, as EC2 applies them: one token bucket per API
//! family (describes, launches, other mutations), shared by every group
//! the provider serves, so a roll of many groups never sends faster than
//! the account allows. A caller reserves its token (the bucket may go
//! below zero) and waits its turn, so waiters are served in order; a
//! `RequestLimitExceeded` answer empties the bucket (EC2 says it is ahead
//! of us). Pure arithmetic on a time passed in; the waiting is the
//! caller's.

use std::time::{Duration, Instant};

/// The API families EC2 throttles separately.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Family {
    /// `Describe*` and `Get*` (non-mutating).
    Describe,
    /// `RunInstances`.
    Run,
    /// Every other call (terminate, tags).
    Mutate,
}

impl Family {
    /// Its position among the families (of its bucket, in a `[_; 3]`).
    pub fn index(self) -> usize {
        match self {
            Family::Describe => 0,
            Family::Run => 1,
            Family::Mutate => 2,
        }
    }

    /// The family of `action`.
    pub fn of(action: &str) -> Family {
        // `Get*` calls are non-mutating too (EC2 limits them as such).
        if action.starts_with("Describe") || action.starts_with("Get") {
            Family::Describe
        } else if action == "RunInstances" {
            Family::Run
        } else {
            Family::Mutate
        }
    }
}

/// A bucket's refill rate and size.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Rate {
    /// Tokens added per second.
    pub per_sec: f64,
    /// Most tokens held.
    pub burst: f64,
}

/// The provider's rates: EC2's documented defaults for an account
/// (describe 20/s burst 100, RunInstances 2/s burst 5, mutations 5/s
/// burst 50).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Rates {
    /// `Describe*`.
    pub describe: Rate,
    /// `RunInstances`.
    pub run: Rate,
    /// Other mutations.
    pub mutate: Rate,
}

impl Default for Rates {
    fn default() -> Rates {
        Rates {
            describe: Rate {
                per_sec: 20.0,
                burst: 100.0,
            },
            run: Rate {
                per_sec: 2.0,
                burst: 5.0,
            },
            mutate: Rate {
                per_sec: 5.0,
                burst: 50.0,
            },
        }
    }
}

impl Rates {
    /// The rate of `family`.
    pub fn of(&self, family: Family) -> Rate {
        match family {
            Family::Describe => self.describe,
            Family::Run => self.run,
            Family::Mutate => self.mutate,
        }
    }

    /// These limits with every call of a family `margin` further from
    /// the next than its rate asks (bursts unchanged): what a client paces
    /// itself at so that jitter on the way does not make two calls arrive
    /// closer than the rate allows.
    pub fn spaced(&self, margin: Duration) -> Rates {
        let space = |r: Rate| Rate {
            per_sec: 1.0 / (1.0 / r.per_sec + margin.as_secs_f64()),
            burst: r.burst,
        };
        Rates {
            describe: space(self.describe),
            run: space(self.run),
            mutate: space(self.mutate),
        }
    }

    /// A full bucket per family, in [`Family::index`] order.
    pub fn buckets(&self, now: Instant) -> [Bucket; 3] {
        [Family::Describe, Family::Run, Family::Mutate].map(|f| Bucket::new(self.of(f), now))
    }
}

/// One token bucket.
#[derive(Debug, Clone)]
pub struct Bucket {
    rate: Rate,
    tokens: f64,
    at: Instant,
}

impl Bucket {
    /// A full bucket at `now`.
    pub fn new(rate: Rate, now: Instant) -> Bucket {
        Bucket {
            rate,
            tokens: rate.burst,
            at: now,
        }
    }

    fn refill(&mut self, now: Instant) {
        let elapsed = now.saturating_duration_since(self.at).as_secs_f64();
        self.tokens = (self.tokens + elapsed * self.rate.per_sec).min(self.rate.burst);
        self.at = now.max(self.at);
    }

    /// Reserves one token at `now`: how long to wait before using it.
    pub fn reserve(&mut self, now: Instant) -> Duration {
        self.refill(now);
        self.tokens -= 1.0;
        if self.tokens >= 0.0 {
            Duration::ZERO
        } else {
            Duration::from_secs_f64(-self.tokens / self.rate.per_sec)
        }
    }

    /// Takes a token at `now` if one is there (how EC2 itself decides to
    /// throttle: the test kit's proxy plays it).
    pub fn try_take(&mut self, now: Instant) -> bool {
        self.refill(now);
        let ok = self.tokens >= 1.0;
        if ok {
            self.tokens -= 1.0;
        }
        ok
    }

    /// Gives back a token reserved and not used (the caller's fence
    /// refused after its wait): abandoned reservations would otherwise
    /// queue every later caller behind calls never made.
    pub fn refund(&mut self, now: Instant) {
        self.refill(now);
        self.tokens = (self.tokens + 1.0).min(self.rate.burst);
    }

    /// EC2 throttled a call: no token is left (reservations already made
    /// stay queued behind).
    pub fn drain(&mut self, now: Instant) {
        self.refill(now);
        self.tokens = self.tokens.min(0.0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const RUN: Rate = Rate {
        per_sec: 2.0,
        burst: 5.0,
    };

    #[test]
    fn spaced_rates_leave_room_for_the_jitter_and_keep_the_burst() {
        let rates = Rates {
            describe: RUN,
            run: RUN,
            mutate: RUN,
        };
        let spaced = rates.spaced(Duration::from_millis(5));
        assert!((1.0 / spaced.run.per_sec - 0.505).abs() < 1e-9);
        assert_eq!(spaced.run.burst, RUN.burst);
    }

    #[test]
    fn a_burst_goes_at_once_then_the_rate_holds() {
        let t0 = Instant::now();
        let mut b = Bucket::new(RUN, t0);
        for _ in 0..5 {
            assert_eq!(b.reserve(t0), Duration::ZERO);
        }
        // The next waiters queue 0.5 s apart.
        assert_eq!(b.reserve(t0), Duration::from_millis(500));
        assert_eq!(b.reserve(t0), Duration::from_millis(1000));
        // Refilled over time, never above the burst.
        let mut b = Bucket::new(RUN, t0);
        b.reserve(t0);
        assert_eq!(b.reserve(t0 + Duration::from_secs(60)), Duration::ZERO);
        assert!(b.tokens <= RUN.burst);
    }

    #[test]
    fn an_unused_reservation_is_given_back() {
        let t0 = Instant::now();
        let mut b = Bucket::new(RUN, t0);
        for _ in 0..6 {
            b.reserve(t0);
        }
        b.refund(t0);
        assert_eq!(b.reserve(t0), Duration::from_millis(500));
    }

    #[test]
    fn a_throttle_answer_empties_the_bucket() {
        let t0 = Instant::now();
        let mut b = Bucket::new(RUN, t0);
        b.drain(t0);
        assert_eq!(b.reserve(t0), Duration::from_millis(500));
    }

    #[test]
    fn families() {
        assert_eq!(Family::of("DescribeInstances"), Family::Describe);
        assert_eq!(Family::of("RunInstances"), Family::Run);
        assert_eq!(Family::of("TerminateInstances"), Family::Mutate);
        assert_eq!(Family::of("CreateTags"), Family::Mutate);
    }
}
