//! Starting a store process on this machine and waiting, bounded, until it
//! answers (`drover demo up`'s etcd: the one store that exists before the
//! swarm does, so `apply` can bootstrap the first manager). A store that
//! answers already is left as it is (a second `demo up`).

use async_trait::async_trait;
use std::path::PathBuf;
use std::time::Duration;
use tokio::time::Instant;

/// How often a started store is asked again.
const POLL: Duration = Duration::from_millis(200);

/// A store process the procedure may start and ask.
#[async_trait]
pub trait StoreProcess: Send + Sync {
    /// The program, as the operator knows it (`etcd`).
    fn name(&self) -> &str;
    /// Where it is asked (its client URL).
    fn address(&self) -> &str;
    /// Where it writes what it says about itself.
    fn log(&self) -> PathBuf;
    /// True when it answers now; bounded by the implementation.
    async fn answers(&self) -> bool;
    /// Starts it in its own process group (it outlives this command);
    /// returns its pid.
    fn start(&self) -> std::io::Result<u32>;
}

/// How the store came to answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Started {
    /// It answered already: nothing was started.
    Running,
    /// It was started, with this pid, and answered.
    Now(u32),
}

/// Why the store does not answer.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    /// The program could not be started.
    #[error("starting {name}: {error}")]
    Start {
        /// The program.
        name: String,
        /// The operating system's refusal.
        error: std::io::Error,
    },
    /// Started, but silent for the whole bound: its log says why.
    #[error("{name} did not answer on {address} within {}s: see {}", .within.as_secs(), .log.display())]
    Silent {
        /// The program.
        name: String,
        /// Where it was asked.
        address: String,
        /// The bound.
        within: Duration,
        /// Its log.
        log: PathBuf,
        /// The pid started (still running: the operator decides).
        pid: u32,
    },
}

/// Starts `store` unless it answers already, then waits up to `within` for
/// it to answer; `started` hears the pid as soon as it is started.
pub async fn ensure(
    store: &dyn StoreProcess,
    within: Duration,
    started: impl FnOnce(u32),
) -> Result<Started, StartError> {
    if store.answers().await {
        return Ok(Started::Running);
    }
    let pid = store.start().map_err(|error| StartError::Start {
        name: store.name().to_string(),
        error,
    })?;
    started(pid);
    let deadline = Instant::now() + within;
    while Instant::now() < deadline {
        if store.answers().await {
            return Ok(Started::Now(pid));
        }
        tokio::time::sleep(POLL).await;
    }
    Err(StartError::Silent {
        name: store.name().to_string(),
        address: store.address().to_string(),
        within,
        log: store.log(),
        pid,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicU32, Ordering};

    /// Answers from its `answer_at`th question on (0: never); started
    /// with pid 42, or refused when `refuse`.
    struct Fake {
        asked: AtomicU32,
        starts: AtomicU32,
        answer_at: u32,
        refuse: bool,
    }

    impl Fake {
        fn new(answer_at: u32, refuse: bool) -> Self {
            Fake {
                asked: AtomicU32::new(0),
                starts: AtomicU32::new(0),
                answer_at,
                refuse,
            }
        }
    }

    #[async_trait]
    impl StoreProcess for Fake {
        fn name(&self) -> &str {
            "etcd"
        }
        fn address(&self) -> &str {
            "http://127.0.0.1:2379"
        }
        fn log(&self) -> PathBuf {
            "/demo/etcd.log".into()
        }
        async fn answers(&self) -> bool {
            let n = self.asked.fetch_add(1, Ordering::SeqCst) + 1;
            self.answer_at != 0 && n >= self.answer_at
        }
        fn start(&self) -> std::io::Result<u32> {
            self.starts.fetch_add(1, Ordering::SeqCst);
            if self.refuse {
                return Err(std::io::Error::from(std::io::ErrorKind::NotFound));
            }
            Ok(42)
        }
    }

    const BOUND: Duration = Duration::from_secs(20);

    #[tokio::test(start_paused = true)]
    async fn a_store_that_answers_is_not_started_again() {
        let store = Fake::new(1, false);
        let got = ensure(&store, BOUND, |_| panic!("started")).await;
        assert_eq!(got.unwrap(), Started::Running);
        assert_eq!(store.starts.load(Ordering::SeqCst), 0);
    }

    #[tokio::test(start_paused = true)]
    async fn a_started_store_is_waited_for_until_it_answers() {
        let store = Fake::new(4, false);
        let mut said = None;
        let got = ensure(&store, BOUND, |pid| said = Some(pid)).await;
        assert_eq!(got.unwrap(), Started::Now(42));
        assert_eq!(said, Some(42));
        assert_eq!(store.starts.load(Ordering::SeqCst), 1);
    }

    #[tokio::test(start_paused = true)]
    async fn a_silent_store_is_given_up_on_at_the_bound_with_where_to_look() {
        let store = Fake::new(0, false);
        let start = Instant::now();
        let e = ensure(&store, BOUND, |_| {}).await.unwrap_err();
        let waited = start.elapsed();
        assert!(waited >= BOUND && waited < BOUND + POLL * 2, "{waited:?}");
        assert_eq!(
            e.to_string(),
            "etcd did not answer on http://127.0.0.1:2379 within 20s: see /demo/etcd.log"
        );
        assert!(matches!(e, StartError::Silent { pid: 42, .. }));
    }

    #[tokio::test(start_paused = true)]
    async fn a_store_that_cannot_start_says_so_at_once() {
        let store = Fake::new(0, true);
        let e = ensure(&store, BOUND, |_| panic!("not started"))
            .await
            .unwrap_err();
        assert!(e.to_string().starts_with("starting etcd: "), "{e}");
        assert_eq!(store.asked.load(Ordering::SeqCst), 1);
    }
}
