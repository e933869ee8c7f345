//! Every EC2 call the provider makes goes through here: its family's
//! token bucket first, then the signed call; throttling, AWS's 5xx and a
//! lost answer are retried with jittered exponential backoff, a bounded
//! number of times, and a throttle answer empties the bucket. A mutating
//! call's fence is checked right before each attempt. Calls and throttles
//! are counted by action.

use crate::api::{Api, ApiError};
use crate::throttle::{Bucket, Family, Rates};
use backon::{ExponentialBuilder, Retryable};
use drover_spi::{Fence, LeaseExpired};
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family as Metric;
use prometheus_client::registry::Registry;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Why a call did not succeed.
#[derive(Debug, thiserror::Error)]
pub enum CallError {
    /// EC2 (or the way to it) failed; after the retries, when retryable.
    #[error("{action}: {source}")]
    Api {
        /// The action.
        action: &'static str,
        /// What failed.
        #[source]
        source: ApiError,
    },
    /// Nothing was sent: the fence refused right before.
    #[error(transparent)]
    Fenced(#[from] LeaseExpired),
}

/// How hard a call is retried.
#[derive(Debug, Clone, Copy)]
pub struct Retry {
    /// The first backoff.
    pub min_delay: Duration,
    /// The longest backoff.
    pub max_delay: Duration,
    /// Retries after the first attempt.
    pub times: usize,
}

impl Default for Retry {
    fn default() -> Retry {
        Retry {
            min_delay: Duration::from_millis(200),
            max_delay: Duration::from_secs(5),
            times: 6,
        }
    }
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ActionLabel {
    action: &'static str,
}

/// The provider's API counters: calls made (every attempt) and throttle
/// answers received, by action. Registered by the binary beside its own.
#[derive(Debug, Clone, Default)]
pub struct Metrics {
    calls: Metric<ActionLabel, Counter>,
    throttles: Metric<ActionLabel, Counter>,
}

impl Metrics {
    /// Registers the counters as `ec2_api_calls` and `ec2_api_throttles`.
    pub fn register(&self, registry: &mut Registry) {
        registry.register(
            "ec2_api_calls",
            "EC2 API calls made (each attempt), by action",
            self.calls.clone(),
        );
        registry.register(
            "ec2_api_throttles",
            "EC2 RequestLimitExceeded answers received, by action",
            self.throttles.clone(),
        );
    }

    /// Calls of `action` made so far.
    pub fn calls(&self, action: &'static str) -> u64 {
        self.calls.get_or_create(&ActionLabel { action }).get()
    }

    /// Throttle answers to `action` so far.
    pub fn throttles(&self, action: &'static str) -> u64 {
        self.throttles.get_or_create(&ActionLabel { action }).get()
    }
}

/// How much sooner than its predecessor a call may reach EC2's bucket,
/// relative to when each left (connection, scheduling, reading the body).
/// Calls that leave exactly at EC2's rate arrive closer than it half the
/// time, and each throttle costs a token: this client spaces its calls by
/// this much more than the rate asks (at 2 launches/s, 1 % slower).
const ARRIVAL_JITTER: Duration = Duration::from_millis(5);

/// A rate-limited, retrying EC2 client (cheap to clone: shared buckets).
#[derive(Debug, Clone)]
pub struct Client {
    api: Api,
    buckets: Arc<[Mutex<Bucket>; 3]>,
    /// The same limits, spent when a call leaves rather than when its
    /// token was reserved: EC2's own bucket counts arrivals. A call that
    /// reserved its token first may leave after one that reserved later
    /// (its caller took a lease meanwhile), and two leaving closer than
    /// the rate allows meet an empty bucket at EC2 once the burst is
    /// spent; the call waits here for that difference (milliseconds).
    departures: Arc<[Mutex<Bucket>; 3]>,
    /// Tokens reserved (and waited for) by [`Client::prepay`], per family,
    /// that the next calls spend instead of reserving their own.
    prepaid: Arc<[AtomicU32; 3]>,
    retry: Retry,
    metrics: Metrics,
}

impl Client {
    /// Calls through `api` within `rates`.
    pub fn new(api: Api, rates: Rates, retry: Retry) -> Client {
        let paced = rates.spaced(ARRIVAL_JITTER);
        Client {
            api,
            buckets: Arc::new(paced.buckets(Instant::now()).map(Mutex::new)),
            departures: Arc::new(paced.buckets(Instant::now()).map(Mutex::new)),
            prepaid: Arc::default(),
            retry,
            metrics: Metrics::default(),
        }
    }

    /// The counters.
    pub fn metrics(&self) -> &Metrics {
        &self.metrics
    }

    /// The region calls go to.
    pub fn region(&self) -> &str {
        self.api.region()
    }

    fn bucket(&self, family: Family) -> &Mutex<Bucket> {
        &self.buckets[family.index()]
    }

    /// Waits for a token of `family` and sets it aside for the next call
    /// of that family, which then goes at once: the caller waits here,
    /// before its fence's lease starts, rather than inside the call.
    pub async fn prepay(&self, family: Family) {
        let wait = lock(self.bucket(family)).reserve(Instant::now());
        tokio::time::sleep(wait).await;
        self.prepaid[family.index()].fetch_add(1, Ordering::SeqCst);
    }

    /// Takes a token set aside by [`Client::prepay`], if one is.
    fn take_prepaid(&self, family: Family) -> bool {
        self.prepaid[family.index()]
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
            .is_ok()
    }

    /// `action` with `params`, retried; `fence` (for mutations) checked
    /// right before every attempt.
    pub async fn call(
        &self,
        action: &'static str,
        params: &[(String, String)],
        fence: Option<&dyn Fence>,
    ) -> Result<String, CallError> {
        let family = Family::of(action);
        let bucket = self.bucket(family);
        let departures = &self.departures[family.index()];
        let label = ActionLabel { action };
        let attempt = || async {
            if !self.take_prepaid(family) {
                let wait = lock(bucket).reserve(Instant::now());
                tokio::time::sleep(wait).await;
            }
            let api = |source| CallError::Api { action, source };
            // Signed before the fence is checked: signing may wait on the
            // credential chain, and nothing may stand between the check
            // and the send.
            let req = match self.api.signed(action, params).await {
                Ok(req) => req,
                Err(e) => {
                    lock(bucket).refund(Instant::now());
                    return Err(api(e));
                }
            };
            let spacing = lock(departures).reserve(Instant::now());
            tokio::time::sleep(spacing).await;
            if let Some(f) = fence
                && let Err(e) = f.check()
            {
                lock(bucket).refund(Instant::now());
                lock(departures).refund(Instant::now());
                return Err(e.into());
            }
            self.metrics.calls.get_or_create(&label).inc();
            self.api.send(req).await.map_err(api)
        };
        let backoff = ExponentialBuilder::default()
            .with_min_delay(self.retry.min_delay)
            .with_max_delay(self.retry.max_delay)
            .with_max_times(self.retry.times)
            .with_jitter();
        attempt
            .retry(backoff)
            .when(|e| matches!(e, CallError::Api { source, .. } if source.is_retryable()))
            .notify(|e, after| {
                if let CallError::Api { source, .. } = e
                    && source.is_throttle()
                {
                    self.metrics.throttles.get_or_create(&label).inc();
                    lock(bucket).drain(Instant::now());
                    lock(departures).drain(Instant::now());
                }
                tracing::debug!(action, error = %e, retry_in = ?after, "EC2 call retried");
            })
            .await
    }
}

fn lock(b: &Mutex<Bucket>) -> std::sync::MutexGuard<'_, Bucket> {
    // A panic while holding it leaves a consistent bucket (plain numbers).
    b.lock().unwrap_or_else(|e| e.into_inner())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_counters_are_registered_by_action() {
        let m = Metrics::default();
        let mut r = Registry::with_prefix("drover");
        m.register(&mut r);
        let run = ActionLabel {
            action: "RunInstances",
        };
        m.calls.get_or_create(&run).inc();
        m.throttles.get_or_create(&run).inc();
        let mut out = String::new();
        prometheus_client::encoding::text::encode(&mut out, &r).unwrap();
        assert!(
            out.contains(r#"drover_ec2_api_calls_total{action="RunInstances"} 1"#),
            "{out}"
        );
        assert!(
            out.contains(r#"drover_ec2_api_throttles_total{action="RunInstances"} 1"#),
            "{out}"
        );
        assert_eq!(m.calls("RunInstances"), 1);
    }
}
