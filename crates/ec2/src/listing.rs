//! The cluster's instances as the newest describe listed them, kept
//! between passes and refreshed in the background.
//!
//! A describe of a large cluster takes seconds (moto answers one of 1000
//! live instances among 2000 in 7–10 s), and a pass that waits for a
//! fresh one makes every step of every operation wait for it: a plain
//! member's replacement took four to five describes, and a roll of 1000
//! ran at the pace of describes rather than at EC2's launch limit. So a
//! pass plans on the newest answer and starts the next describe (one at a
//! time per filter); what this process did since that describe was sent
//! is laid over it: an instance it launched is there ([`crate::machine::Young`]),
//! one it terminated is gone ([`Since`]: EC2 answered that it is shutting
//! down, which a describe sent after the call shows too), one it labelled
//! carries the labels.
//!
//! A pass waits for a describe of its own — as before — for the first
//! one, after one failed (the failure is the pass's answer: unknown,
//! never an old list), and once the newest answer was sent more than
//! [`MAX_AGE`] ago. Looks that must be EC2's word as of now (a new term's
//! first, an ownership check before a destroy) use `describe_fresh`,
//! which always describes.

use drover_core::model::Instance;
use std::collections::{BTreeMap, HashMap};
use std::time::{Duration, Instant};

/// The oldest answer a pass plans on, counted from when its describe was
/// sent: past it, the pass waits for a fresh one.
pub const MAX_AGE: Duration = Duration::from_secs(30);

/// A describe's answer and when its request was sent.
#[derive(Debug, Clone)]
pub struct Answer {
    pub sent: Instant,
    pub instances: Vec<Instance>,
}

/// The newest answer for each filter (tags) and whether a describe for
/// it is running.
#[derive(Debug, Default)]
pub struct Listings {
    by_filter: HashMap<BTreeMap<String, String>, Listing>,
}

#[derive(Debug, Default)]
struct Listing {
    newest: Option<Answer>,
    refreshing: bool,
    failed: bool,
}

/// What a pass does for a filter at a moment.
#[derive(Debug)]
pub enum Plan {
    /// Plan on this answer; start a describe in the background if
    /// `refresh` (none is running).
    Use { answer: Answer, refresh: bool },
    /// Describe now and wait for it.
    Wait,
}

impl Listings {
    /// What to do for `filter` at `now`.
    pub fn plan(&mut self, filter: &BTreeMap<String, String>, now: Instant) -> Plan {
        let l = self.by_filter.entry(filter.clone()).or_default();
        match &l.newest {
            Some(a) if !l.failed && now.saturating_duration_since(a.sent) < MAX_AGE => {
                let refresh = !l.refreshing;
                l.refreshing = true;
                Plan::Use {
                    answer: a.clone(),
                    refresh,
                }
            }
            _ => Plan::Wait,
        }
    }

    /// A describe for `filter` sent at `sent` answered (`None`: failed).
    /// A newer answer already kept stays.
    pub fn answered(
        &mut self,
        filter: &BTreeMap<String, String>,
        sent: Instant,
        instances: Option<Vec<Instance>>,
    ) {
        let l = self.by_filter.entry(filter.clone()).or_default();
        l.refreshing = false;
        let Some(instances) = instances else {
            l.failed = true;
            return;
        };
        l.failed = false;
        if l.newest.as_ref().is_none_or(|a| a.sent <= sent) {
            l.newest = Some(Answer { sent, instances });
        }
    }
}

/// Terminations and labels EC2 accepted from this process, each laid
/// over any answer whose describe was sent before it.
#[derive(Debug, Default)]
pub struct Since {
    terminated: HashMap<String, Instant>,
    labelled: HashMap<String, (BTreeMap<String, String>, Instant)>,
}

impl Since {
    /// EC2 accepted the termination of `id` at `at`.
    pub fn terminated(&mut self, id: &str, at: Instant) {
        self.terminated.insert(id.to_string(), at);
    }

    /// EC2 put `labels` on `id` at `at`.
    pub fn labelled(&mut self, id: &str, labels: &BTreeMap<String, String>, at: Instant) {
        let entry = self
            .labelled
            .entry(id.to_string())
            .or_insert_with(|| (BTreeMap::new(), at));
        entry
            .0
            .extend(labels.iter().map(|(k, v)| (k.clone(), v.clone())));
        entry.1 = at;
    }

    /// `listed` (answered to a describe sent at `sent`) with what came
    /// after it; forgets what no answer still in use predates (`now`).
    pub fn apply(&mut self, listed: &mut Vec<Instance>, sent: Instant, now: Instant) {
        let current = |at: &Instant| now.saturating_duration_since(*at) < MAX_AGE * 2;
        self.terminated.retain(|_, at| current(at));
        self.labelled.retain(|_, (_, at)| current(at));
        listed.retain(|i| self.terminated.get(&i.id).is_none_or(|at| *at <= sent));
        for i in listed.iter_mut() {
            if let Some((labels, at)) = self.labelled.get(&i.id)
                && *at > sent
            {
                for (k, v) in labels {
                    i.tags.insert(k.clone(), v.clone());
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn instance(id: &str) -> Instance {
        Instance {
            id: id.into(),
            tags: Default::default(),
            running: true,
            created_ms: 0,
        }
    }

    fn filter() -> BTreeMap<String, String> {
        BTreeMap::from([("drover.cluster".to_string(), "c1".to_string())])
    }

    #[test]
    fn a_pass_waits_only_for_the_first_a_failed_or_a_stale_answer() {
        let t0 = Instant::now();
        let mut l = Listings::default();
        assert!(matches!(l.plan(&filter(), t0), Plan::Wait));
        l.answered(&filter(), t0, Some(vec![instance("i-1")]));
        // The answer is used, and one describe refreshes it at a time.
        let Plan::Use { answer, refresh } = l.plan(&filter(), t0 + Duration::from_secs(1)) else {
            panic!("the answer is fresh");
        };
        assert!(refresh && answer.instances.len() == 1);
        let Plan::Use { refresh, .. } = l.plan(&filter(), t0 + Duration::from_secs(2)) else {
            panic!("the answer is fresh");
        };
        assert!(!refresh, "a describe is running");
        // A failed describe: the next pass waits for its own.
        l.answered(&filter(), t0 + Duration::from_secs(1), None);
        assert!(matches!(
            l.plan(&filter(), t0 + Duration::from_secs(3)),
            Plan::Wait
        ));
        l.answered(&filter(), t0 + Duration::from_secs(3), Some(Vec::new()));
        assert!(matches!(
            l.plan(&filter(), t0 + Duration::from_secs(4)),
            Plan::Use { .. }
        ));
        // Too old: waited for.
        assert!(matches!(
            l.plan(&filter(), t0 + Duration::from_secs(3) + MAX_AGE),
            Plan::Wait
        ));
        // A late answer never replaces a newer one.
        l.answered(&filter(), t0 + Duration::from_secs(40), Some(Vec::new()));
        l.answered(
            &filter(),
            t0 + Duration::from_secs(39),
            Some(vec![instance("i-9")]),
        );
        let Plan::Use { answer, .. } = l.plan(&filter(), t0 + Duration::from_secs(41)) else {
            panic!("fresh");
        };
        assert!(answer.instances.is_empty());
    }

    #[test]
    fn a_termination_or_a_label_shows_over_answers_sent_before_it_only() {
        let t0 = Instant::now();
        let later = t0 + Duration::from_secs(5);
        let mut since = Since::default();
        since.terminated("i-1", later);
        since.labelled(
            "i-2",
            &BTreeMap::from([("drover.link".to_string(), "op-7".to_string())]),
            later,
        );
        let mut before = vec![instance("i-1"), instance("i-2")];
        since.apply(&mut before, t0, later);
        assert_eq!(before.len(), 1);
        assert_eq!(before[0].tag("drover.link"), Some("op-7"));
        // An answer to a describe sent after them is EC2's word.
        let mut after = vec![instance("i-1"), instance("i-2")];
        since.apply(&mut after, later, later);
        assert_eq!(after.len(), 2);
        assert_eq!(after[1].tag("drover.link"), None);
        // Forgotten once no answer in use can predate them.
        since.apply(&mut Vec::new(), later, later + MAX_AGE * 2);
        let mut old = vec![instance("i-1")];
        since.apply(&mut old, t0, later + MAX_AGE * 2);
        assert_eq!(old.len(), 1);
    }
}
