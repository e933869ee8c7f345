//! A provider's outage, told twice: when its listing first fails and when
//! it lists again. A pass describes every provider, so a plugin that is
//! down or hung fails every pass: logged each time it would drown the log,
//! logged never (as before) only `drover status` showed it. The decision
//! is a pure function of the describe's outcome and the time, so it is
//! tested without a log; [`crate::paced`] asks it after each describe and
//! logs what it says.

use drover_spi::ProviderError;
use std::time::Duration;
use tokio::time::Instant;

/// Whether a provider's listing is failing, and since when.
#[derive(Debug, Default)]
pub(crate) struct Outage {
    /// When the failing began, and how many describes have failed since.
    since: Option<(Instant, u32)>,
}

/// What to tell of an outage.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Told {
    /// The provider's describe failed after it had succeeded (or at its
    /// first try), with this error.
    Began {
        /// The failed describe's error.
        error: String,
    },
    /// It succeeded again.
    Ended {
        /// From the first failed describe to this success.
        after: Duration,
        /// Describes that failed meanwhile.
        failed: u32,
    },
}

impl Outage {
    /// Notes a describe's outcome at `now`; what to tell, if anything: the
    /// first failure and the first success after failures, nothing between.
    pub(crate) fn after(
        &mut self,
        outcome: Result<(), &ProviderError>,
        now: Instant,
    ) -> Option<Told> {
        match (outcome, &mut self.since) {
            (Err(e), None) => {
                self.since = Some((now, 1));
                Some(Told::Began {
                    error: e.to_string(),
                })
            }
            (Err(_), Some((_, failed))) => {
                *failed += 1;
                None
            }
            (Ok(()), Some((began, failed))) => {
                let told = Told::Ended {
                    after: now.duration_since(*began),
                    failed: *failed,
                };
                self.since = None;
                Some(told)
            }
            (Ok(()), None) => None,
        }
    }
}

impl Told {
    /// Logs it at `warn`, naming `provider`.
    pub(crate) fn log(&self, provider: &str) {
        match self {
            Told::Began { error } => tracing::warn!(
                provider,
                error = %error,
                "provider {provider} is failing: its machines cannot be listed, so its groups wait (told again when it recovers)"
            ),
            Told::Ended { after, failed } => tracing::warn!(
                provider,
                after_s = after.as_secs_f64(),
                failed,
                "provider {provider} recovered after {:.1}s ({failed} failed describes)",
                after.as_secs_f64()
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_provider_failing_n_passes_then_recovering_is_told_twice() {
        let t0 = Instant::now();
        let down = ProviderError::Transient("plugin p: not sent: connection refused".into());
        let mut outage = Outage::default();
        let mut told = Vec::new();
        // Well, then 5 failed passes 10 s apart, then well again.
        told.extend(outage.after(Ok(()), t0));
        for pass in 1..=5 {
            told.extend(outage.after(Err(&down), t0 + Duration::from_secs(10 * pass)));
        }
        for pass in 6..=8 {
            told.extend(outage.after(Ok(()), t0 + Duration::from_secs(10 * pass)));
        }
        assert_eq!(
            told,
            [
                Told::Began {
                    error: down.to_string()
                },
                Told::Ended {
                    after: Duration::from_secs(50),
                    failed: 5
                }
            ]
        );

        // A second outage is told again, from its own start.
        let t1 = t0 + Duration::from_secs(100);
        assert!(matches!(
            outage.after(Err(&down), t1),
            Some(Told::Began { .. })
        ));
        assert_eq!(
            outage.after(Ok(()), t1 + Duration::from_secs(3)),
            Some(Told::Ended {
                after: Duration::from_secs(3),
                failed: 1
            })
        );
    }
}
