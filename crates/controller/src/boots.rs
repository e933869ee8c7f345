//! What machines that have not joined show of their boot, fetched for the
//! planner: the machines the last plan asked about ([`BootAsk`]), each
//! machine's engine asked whether its join failed on every look, its boot
//! log's tail fetched when the plan wants it (at most every
//! [`LOG_EVERY`]: EC2 paces the call). The planner decides what to ask and
//! what it means; this only fetches, within bounds.

use crate::context::Providers;
use drover_core::boot::{BootFacts, Boots};
use drover_core::plan::BootAsk;
use futures_util::future::join_all;
use std::collections::HashMap;
use std::time::Duration;
use tokio::time::Instant;

/// The least time between two fetches of one machine's boot log.
pub(crate) const LOG_EVERY: Duration = Duration::from_secs(30);

/// How long one provider call of a fetch may take: a look waits for it.
const FETCH_WITHIN: Duration = Duration::from_secs(10);

/// The boot facts carried from pass to pass.
#[derive(Debug, Default)]
pub(crate) struct BootWatch {
    /// What the last plan asked about.
    asks: Vec<BootAsk>,
    /// What was fetched, by instance id.
    facts: Boots,
    /// When each machine's log was last fetched.
    fetched: HashMap<String, Instant>,
}

impl BootWatch {
    /// Remembers what `asks` (the last plan's) wants fetched next.
    pub(crate) fn asked(&mut self, asks: &[BootAsk]) {
        self.asks = asks.to_vec();
    }

    /// Fetches what the last plan asked about and returns every fact now
    /// known of those machines; facts of machines no longer asked about
    /// are dropped. A failed or late call keeps what was known.
    pub(crate) async fn refresh(&mut self, providers: &Providers) -> Boots {
        let now = Instant::now();
        let due = |a: &BootAsk| {
            a.log
                && self
                    .fetched
                    .get(&a.instance)
                    .is_none_or(|t| now.duration_since(*t) >= LOG_EVERY)
        };
        let asked = self.asks.iter().map(|a| {
            let provider = providers.get(&a.provider).cloned();
            let want_log = due(a);
            async move {
                let Some(p) = provider else {
                    return (a.instance.clone(), None, None);
                };
                let failed = bounded(p.join_failed(&a.instance)).await.flatten();
                let log = match want_log {
                    true => Some(bounded(p.boot_log(&a.instance)).await),
                    false => None,
                };
                (a.instance.clone(), Some(failed), log)
            }
        });
        let answers = join_all(asked).await;
        let mut facts = Boots::new();
        for (id, failed, log) in answers {
            let mut f = self.facts.remove(&id).unwrap_or_default();
            if let Some(failed) = failed {
                f.join_failed = failed;
            }
            match log {
                Some(Some(Ok(tail))) => {
                    self.fetched.insert(id.clone(), now);
                    f.log = tail;
                }
                Some(Some(Err(e))) => {
                    tracing::debug!(instance = %id, error = %e, "boot log not fetched");
                }
                Some(None) => tracing::debug!(instance = %id, "boot log fetch timed out"),
                None => {}
            }
            if f != BootFacts::default() {
                facts.insert(id, f);
            }
        }
        self.fetched
            .retain(|id, _| self.asks.iter().any(|a| a.instance == *id));
        self.facts = facts.clone();
        facts
    }
}

/// `f` within [`FETCH_WITHIN`], `None` when it took longer.
async fn bounded<T>(f: impl std::future::Future<Output = T>) -> Option<T> {
    tokio::time::timeout(FETCH_WITHIN, f).await.ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use async_trait::async_trait;
    use drover_core::boot::{BootLog, JoinFailed};
    use drover_core::model::Instance;
    use drover_spi::{Fence, InstanceProvider, ProviderError, ProvisionRequest};
    use std::collections::BTreeMap;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};

    /// A provider whose machine `i-1` failed its join and whose boot log
    /// says why; counts the log fetches.
    #[derive(Default)]
    struct Booting {
        logs: AtomicUsize,
    }

    #[async_trait]
    impl InstanceProvider for Booting {
        async fn provision(
            &self,
            _: ProvisionRequest,
            _: &dyn Fence,
        ) -> Result<String, ProviderError> {
            unreachable!("not provisioned")
        }
        async fn destroy_fenced(&self, _: &str, _: &dyn Fence) -> Result<(), ProviderError> {
            unreachable!("not destroyed")
        }
        async fn describe(
            &self,
            _: &BTreeMap<String, String>,
        ) -> Result<Vec<Instance>, ProviderError> {
            Ok(Vec::new())
        }
        async fn label(
            &self,
            _: &str,
            _: &BTreeMap<String, String>,
            _: &dyn Fence,
        ) -> Result<(), ProviderError> {
            Ok(())
        }
        async fn boot_log(&self, _: &str) -> Result<Option<BootLog>, ProviderError> {
            self.logs.fetch_add(1, Ordering::SeqCst);
            Ok(Some(BootLog::tail("connection refused\n")))
        }
        async fn join_failed(&self, instance: &str) -> Option<JoinFailed> {
            (instance == "i-1").then(|| JoinFailed::new("context deadline exceeded"))
        }
    }

    fn ask(instance: &str, log: bool) -> BootAsk {
        BootAsk {
            group: "workers".into(),
            provider: "p".into(),
            instance: instance.into(),
            log,
        }
    }

    /// What the plan asked about is fetched from its group's provider: the
    /// engine's state on every look, the log only when wanted and at most
    /// every LOG_EVERY; a machine no longer asked about is forgotten.
    #[tokio::test(start_paused = true)]
    async fn fetches_what_the_plan_asked_within_its_pace() {
        let booting = Arc::new(Booting::default());
        let providers: Providers = BTreeMap::from([(
            "p".to_string(),
            booting.clone() as Arc<dyn InstanceProvider>,
        )]);
        let mut watch = BootWatch::default();
        assert!(watch.refresh(&providers).await.is_empty());
        watch.asked(&[ask("i-1", false), ask("i-2", true)]);
        let facts = watch.refresh(&providers).await;
        assert_eq!(
            facts["i-1"]
                .join_failed
                .as_ref()
                .map(ToString::to_string)
                .as_deref(),
            Some("its engine reports swarm state error: context deadline exceeded")
        );
        assert_eq!(facts["i-1"].log, None);
        assert_eq!(
            facts["i-2"].log.as_ref().map(|l| l.last(1)).as_deref(),
            Some("connection refused")
        );
        assert_eq!(booting.logs.load(Ordering::SeqCst), 1);
        // Asked again at once: the log is kept, not fetched again.
        let facts = watch.refresh(&providers).await;
        assert!(facts["i-2"].log.is_some());
        assert_eq!(booting.logs.load(Ordering::SeqCst), 1);
        tokio::time::advance(LOG_EVERY).await;
        watch.refresh(&providers).await;
        assert_eq!(booting.logs.load(Ordering::SeqCst), 2);
        watch.asked(&[ask("i-1", false)]);
        let facts = watch.refresh(&providers).await;
        assert!(!facts.contains_key("i-2"), "{facts:?}");
    }
}
