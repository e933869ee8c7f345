//! Provider calls, paced and retried.
//!
//! Cloud APIs throttle: a controller that hammers one (a loop gone wrong,
//! a thousand-member group) gets every caller refused. Every provider the
//! controller uses is wrapped here: calls take a token from a bucket
//! (bursts allowed, a sustained rate enforced), and a call that failed
//! transiently is retried with jittered exponential backoff before the
//! failure reaches the planner. Every call is safe to retry: describe and
//! label are reads or overwrites, destroy treats "absent" as success, and
//! provision is idempotent on the operation's link (its provision token).
//!
//! A describe that still fails after its retries is the provider's outage:
//! logged once when it begins and once when it ends ([`crate::outage`]).

use crate::outage::Outage;
use async_trait::async_trait;
use backon::{ExponentialBuilder, Retryable};
use drover_core::model::Instance;
use drover_spi::{Fence, InstanceProvider, ProviderError, ProvisionRequest};
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::time::Instant;

/// The limits of one provider.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Pacing {
    /// Calls allowed at once after a quiet spell.
    pub(crate) burst: u32,
    /// Sustained calls per second.
    pub(crate) per_second: u32,
    /// Retries of a transiently failed call.
    pub(crate) retries: usize,
    /// First retry delay (doubling, with jitter, up to 2 s).
    pub(crate) first_retry: Duration,
}

impl Default for Pacing {
    /// Generous enough that a 1000-member group is created in one burst,
    /// strict enough that a runaway loop cannot exceed 200 calls a second.
    fn default() -> Self {
        Pacing {
            burst: 1000,
            per_second: 200,
            retries: 3,
            first_retry: Duration::from_millis(100),
        }
    }
}

/// A token bucket: `tokens` refill at `per_second` up to `burst`.
struct Bucket {
    tokens: f64,
    at: Instant,
}

/// An [`InstanceProvider`] whose calls are rate-limited and retried.
pub(crate) struct Paced {
    /// The provider's name, as groups name it (for the outage's log).
    name: String,
    inner: Arc<dyn InstanceProvider>,
    pacing: Pacing,
    bucket: Mutex<Bucket>,
    outage: Mutex<Outage>,
}

impl Paced {
    /// Wraps `inner`, the provider groups call `name`.
    pub(crate) fn new(name: &str, inner: Arc<dyn InstanceProvider>, pacing: Pacing) -> Self {
        Paced {
            name: name.to_string(),
            inner,
            pacing,
            bucket: Mutex::new(Bucket {
                tokens: f64::from(pacing.burst),
                at: Instant::now(),
            }),
            outage: Mutex::default(),
        }
    }

    /// Tells the provider's outage, once when a describe first fails and
    /// once when one succeeds again (not on every pass in between).
    fn watch(&self, listed: &Result<Vec<Instance>, ProviderError>) {
        let told = self
            .outage
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .after(listed.as_ref().map(drop), Instant::now());
        if let Some(told) = told {
            told.log(&self.name);
        }
    }

    /// Waits for a token.
    async fn token(&self) {
        loop {
            let wait = {
                let mut b = self.bucket.lock().unwrap_or_else(|e| e.into_inner());
                let now = Instant::now();
                let rate = f64::from(self.pacing.per_second.max(1));
                let refill = now.duration_since(b.at).as_secs_f64() * rate;
                b.tokens = (b.tokens + refill).min(f64::from(self.pacing.burst.max(1)));
                b.at = now;
                if b.tokens >= 1.0 {
                    b.tokens -= 1.0;
                    return;
                }
                Duration::from_secs_f64((1.0 - b.tokens) / rate)
            };
            tokio::time::sleep(wait).await;
        }
    }

    /// Runs `call` under the bucket, retrying transient failures.
    async fn call<T, F, Fut>(&self, call: F) -> Result<T, ProviderError>
    where
        F: Fn() -> Fut,
        Fut: std::future::Future<Output = Result<T, ProviderError>>,
    {
        let backoff = ExponentialBuilder::default()
            .with_min_delay(self.pacing.first_retry)
            .with_max_delay(Duration::from_secs(2))
            .with_max_times(self.pacing.retries)
            .with_jitter();
        (|| async {
            self.token().await;
            call().await
        })
        .retry(backoff)
        .sleep(tokio::time::sleep)
        .when(ProviderError::is_transient)
        .await
    }
}

#[async_trait]
impl InstanceProvider for Paced {
    async fn ready(&self, call: drover_spi::ProviderCall) {
        self.inner.ready(call).await
    }

    fn exposes_boot_env(&self) -> bool {
        self.inner.exposes_boot_env()
    }

    fn listing_is_complete(&self) -> bool {
        self.inner.listing_is_complete()
    }

    fn updates_in_place(&self) -> bool {
        self.inner.updates_in_place()
    }

    /// Not paced: one long run on one machine, which its step times; a
    /// failure is the step's to retry, not the pacer's.
    async fn run_update(
        &self,
        instance: &str,
        run: &drover_core::in_place::UpdateRun,
        fence: &dyn Fence,
    ) -> Result<drover_core::in_place::UpdateOutcome, ProviderError> {
        self.inner.run_update(instance, run, fence).await
    }

    async fn boot_log(
        &self,
        instance: &str,
    ) -> Result<Option<drover_core::boot::BootLog>, ProviderError> {
        self.inner.boot_log(instance).await
    }

    async fn join_failed(&self, instance: &str) -> Option<drover_core::boot::JoinFailed> {
        self.inner.join_failed(instance).await
    }

    /// Each attempt, retries included, hands `fence` on: the inner provider
    /// checks it right before it acts, so an attempt after the lease ran
    /// out (a long pacing wait or backoff) does nothing and ends the call
    /// (a refusal is not transient).
    async fn provision(
        &self,
        req: ProvisionRequest,
        fence: &dyn Fence,
    ) -> Result<String, ProviderError> {
        self.call(|| self.inner.provision(req.clone(), fence)).await
    }

    async fn destroy_fenced(&self, instance: &str, fence: &dyn Fence) -> Result<(), ProviderError> {
        self.call(|| self.inner.destroy_fenced(instance, fence))
            .await
    }

    async fn describe(
        &self,
        tags: &BTreeMap<String, String>,
    ) -> Result<Vec<Instance>, ProviderError> {
        let listed = self.call(|| self.inner.describe(tags)).await;
        self.watch(&listed);
        listed
    }

    async fn describe_fresh(
        &self,
        tags: &BTreeMap<String, String>,
    ) -> Result<Vec<Instance>, ProviderError> {
        let listed = self.call(|| self.inner.describe_fresh(tags)).await;
        self.watch(&listed);
        listed
    }

    async fn label(
        &self,
        instance: &str,
        labels: &BTreeMap<String, String>,
        fence: &dyn Fence,
    ) -> Result<(), ProviderError> {
        self.call(|| self.inner.label(instance, labels, fence))
            .await
    }
}

/// Wraps every provider of a controller with the default pacing.
pub(crate) fn wrap(providers: crate::Providers) -> crate::Providers {
    providers
        .into_iter()
        .map(|(name, p)| {
            let paced: Arc<dyn InstanceProvider> =
                Arc::new(Paced::new(&name, p, Pacing::default()));
            (name, paced)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicU32, Ordering};

    /// Fails transiently `failures` times, then describes nothing.
    struct Flaky {
        calls: AtomicU32,
        failures: u32,
        error: fn() -> ProviderError,
    }

    #[async_trait]
    impl InstanceProvider for Flaky {
        async fn provision(
            &self,
            _: ProvisionRequest,
            _: &dyn Fence,
        ) -> Result<String, ProviderError> {
            unreachable!("not used")
        }
        async fn destroy_fenced(&self, _: &str, _: &dyn Fence) -> Result<(), ProviderError> {
            unreachable!("not used")
        }
        async fn describe(
            &self,
            _: &BTreeMap<String, String>,
        ) -> Result<Vec<Instance>, ProviderError> {
            let n = self.calls.fetch_add(1, Ordering::SeqCst);
            if n < self.failures {
                return Err((self.error)());
            }
            Ok(Vec::new())
        }
        async fn label(
            &self,
            _: &str,
            _: &BTreeMap<String, String>,
            _: &dyn Fence,
        ) -> Result<(), ProviderError> {
            unreachable!("not used")
        }
    }

    fn flaky(failures: u32, error: fn() -> ProviderError) -> Arc<Flaky> {
        Arc::new(Flaky {
            calls: AtomicU32::new(0),
            failures,
            error,
        })
    }

    #[tokio::test(start_paused = true)]
    async fn transient_failures_are_retried_with_backoff() {
        let inner = flaky(2, || ProviderError::Transient("throttled".into()));
        let p = Paced::new("flaky", inner.clone(), Pacing::default());
        let started = Instant::now();
        assert!(p.describe(&BTreeMap::new()).await.is_ok());
        assert_eq!(inner.calls.load(Ordering::SeqCst), 3);
        // Two backoffs of at least 100 ms and 200 ms (jitter only adds).
        assert!(started.elapsed() >= Duration::from_millis(300));
    }

    #[tokio::test(start_paused = true)]
    async fn retries_are_bounded_and_permanent_failures_not_retried() {
        let inner = flaky(100, || ProviderError::Transient("down".into()));
        let p = Paced::new("flaky", inner.clone(), Pacing::default());
        assert!(p.describe(&BTreeMap::new()).await.is_err());
        assert_eq!(inner.calls.load(Ordering::SeqCst), 4, "1 call + 3 retries");

        let inner = flaky(100, || ProviderError::Permanent("bad image".into()));
        let p = Paced::new("flaky", inner.clone(), Pacing::default());
        assert!(p.describe(&BTreeMap::new()).await.is_err());
        assert_eq!(inner.calls.load(Ordering::SeqCst), 1);
    }

    /// What a test's log subscriber wrote.
    #[derive(Clone, Default)]
    struct Written(Arc<Mutex<Vec<u8>>>);

    impl std::io::Write for Written {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_failing_describe_is_logged_when_it_begins_and_when_it_ends() {
        let written = Written::default();
        let log = written.clone();
        let _log = tracing::subscriber::set_default(
            tracing_subscriber::fmt()
                .with_ansi(false)
                .with_max_level(tracing::Level::INFO)
                .with_writer(move || log.clone())
                .finish(),
        );
        let inner = flaky(5, || {
            ProviderError::Permanent("plugin p: socket gone".into())
        });
        let p = Paced::new("plugin:p", inner.clone(), Pacing::default());
        // 5 failed passes 10 s apart, then 5 good ones.
        for _ in 0..10 {
            let _ = p.describe(&BTreeMap::new()).await;
            tokio::time::advance(Duration::from_secs(10)).await;
        }
        let text = String::from_utf8(written.0.lock().unwrap().clone()).unwrap();
        let warns: Vec<&str> = text.lines().filter(|l| l.contains("WARN")).collect();
        assert_eq!(warns.len(), 2, "{text}");
        assert!(
            warns[0].contains("provider plugin:p is failing") && warns[0].contains("socket gone"),
            "{text}"
        );
        assert!(
            warns[1].contains("provider plugin:p recovered after 50.0s (5 failed describes)"),
            "{text}"
        );
        assert_eq!(text.lines().count(), 2, "{text}");
    }

    #[tokio::test(start_paused = true)]
    async fn calls_beyond_the_burst_wait_for_the_rate() {
        let inner = flaky(0, || unreachable!());
        let pacing = Pacing {
            burst: 5,
            per_second: 10,
            ..Pacing::default()
        };
        let p = Paced::new("flaky", inner.clone(), pacing);
        let started = Instant::now();
        for _ in 0..5 {
            p.describe(&BTreeMap::new()).await.unwrap();
        }
        assert!(
            started.elapsed() < Duration::from_millis(10),
            "the burst is free"
        );
        for _ in 0..10 {
            p.describe(&BTreeMap::new()).await.unwrap();
        }
        // 10 more calls at 10 a second.
        assert!(started.elapsed() >= Duration::from_millis(990));
        assert_eq!(inner.calls.load(Ordering::SeqCst), 15);
    }
}
