//! Controller overhead: simulated rollouts with fixed machine latencies,
//! timed on the real clock, against their theoretical minimum; and the
//! same simulated work as the InfraKit reference figures.

use crate::simrun::{Bench, Calls, Images, spec};
use crate::stats::median_ms;
use drover_sim::Timings;
use std::time::Duration;

/// Latencies of the overhead runs, in ms (`watch` is the spec's).
const PROVISION: u64 = 300;
const JOIN: u64 = 300;
const OUT_OF_RAFT: u64 = 300;
const WATCH: u64 = 400;
/// The controller delay that must make the ratio worse.
const INJECTED: Duration = Duration::from_millis(50);
/// InfraKit's group controller, measured on this kind of machine: the
/// baseline the rollout ratios are held against (BENCHMARKS.md §2).
const INFRAKIT_ROLL_100_S: f64 = 109.0;
const INFRAKIT_CREATE_1000_S: f64 = 4.4;

fn timings(provision: u64, join: u64, out_of_raft: u64) -> Timings {
    Timings {
        provision,
        join,
        out_of_raft,
        // No tasks: a drain completes as soon as it is observed.
        tasks_per_worker: 0,
        ..Timings::default()
    }
}

/// One scenario: a cluster, the change rolled through it, its minimum.
struct Scenario {
    name: String,
    managers: usize,
    workers: usize,
    m: usize,
    /// Roll the managers (else the workers).
    roll_managers: bool,
    delay: Duration,
    /// Theoretical minimum in s (0: none, compared to a reference instead).
    minimum: f64,
    /// Zero-latency machines (the InfraKit comparisons).
    instant: bool,
    /// Start without workers and create them (else roll an image change).
    create: bool,
}

impl Scenario {
    fn workers(n: usize, m: usize, delay: Duration) -> Self {
        let batches = n.div_ceil(m) as f64;
        Scenario {
            name: format!(
                "{n} workers, max_in_flight {m}{}",
                if delay.is_zero() {
                    String::new()
                } else {
                    format!(", +{} ms per pass", delay.as_millis())
                }
            ),
            managers: 3,
            workers: n,
            m,
            roll_managers: false,
            delay,
            minimum: batches * (PROVISION + JOIN + WATCH) as f64 / 1e3,
            instant: false,
            create: false,
        }
    }

    fn managers(count: usize) -> Self {
        Scenario {
            name: format!("{count} managers (serially)"),
            managers: count,
            workers: 0,
            m: 1,
            roll_managers: true,
            delay: Duration::ZERO,
            // Demote (the leader's hands leadership over at once), out of
            // the raft, destroy and node rm (instant), provision, join, watch.
            minimum: count as f64 * (OUT_OF_RAFT + PROVISION + JOIN + WATCH) as f64 / 1e3,
            instant: false,
            create: false,
        }
    }

    async fn run(&self) -> (f64, Calls) {
        let (watch, t) = if self.instant {
            ("0s".to_string(), timings(0, 0, 0))
        } else {
            (format!("{WATCH}ms"), timings(PROVISION, JOIN, OUT_OF_RAFT))
        };
        let before = spec(
            self.managers,
            if self.create { 0 } else { self.workers },
            self.m,
            &watch,
            Images {
                managers: "v1",
                workers: "v1",
            },
        );
        let after = spec(
            self.managers,
            self.workers,
            self.m,
            &watch,
            Images {
                managers: if self.roll_managers { "v2" } else { "v1" },
                workers: if self.create || self.roll_managers {
                    "v1"
                } else {
                    "v2"
                },
            },
        );
        let mut b = Bench::start(&before, t, Duration::from_secs(2), self.delay).await;
        let baseline = snapshot(&b.calls);
        let took = b.roll(&after, Duration::from_secs(900)).await;
        let rolled = if self.roll_managers {
            ("managers", self.managers)
        } else {
            ("workers", self.workers)
        };
        assert_eq!(
            b.current(&after, rolled.0),
            rolled.1,
            "{}: not every member is current",
            self.name
        );
        let calls = diff(&b.calls, &baseline);
        b.stop().await;
        (took.as_secs_f64(), calls)
    }
}

fn snapshot(c: &Calls) -> Calls {
    let out = Calls::default();
    for (to, from) in [
        (&out.describe, &c.describe),
        (&out.provision, &c.provision),
        (&out.destroy, &c.destroy),
        (&out.label, &c.label),
    ] {
        to.store(Calls::get(from), std::sync::atomic::Ordering::Relaxed);
    }
    out
}

fn diff(now: &Calls, before: &Calls) -> Calls {
    let out = snapshot(now);
    for (to, from) in [
        (&out.describe, &before.describe),
        (&out.provision, &before.provision),
        (&out.destroy, &before.destroy),
        (&out.label, &before.label),
    ] {
        to.fetch_sub(Calls::get(from), std::sync::atomic::Ordering::Relaxed);
    }
    out
}

/// Runs every scenario whose name contains `only` `runs` times and prints
/// medians and ratios.
pub async fn run(runs: usize, only: &str) {
    println!(
        "\n## Controller overhead: simulated rollouts on the real clock (provision {PROVISION} ms, join {JOIN} ms, out of raft {OUT_OF_RAFT} ms, watch {WATCH} ms; median of {runs})\n"
    );
    println!(
        "| scenario | minimum s | drover s (median) | ratio | runs s | describes | provisions | destroys |"
    );
    println!("|---|---|---|---|---|---|---|---|");
    let mut scenarios = vec![
        Scenario::workers(100, 10, Duration::ZERO),
        Scenario::workers(1000, 100, Duration::ZERO),
        Scenario::managers(3),
        Scenario::managers(5),
        Scenario::workers(100, 10, INJECTED),
    ];
    let mut roll = Scenario::workers(100, 1, Duration::ZERO);
    roll.name =
        "InfraKit comparison: rolling update of 100, one at a time, instant machines".into();
    roll.instant = true;
    roll.minimum = INFRAKIT_ROLL_100_S;
    let mut create = Scenario::workers(1000, 1000, Duration::ZERO);
    create.name = "InfraKit comparison: new 1000-instance group, instant machines".into();
    create.instant = true;
    create.create = true;
    create.minimum = INFRAKIT_CREATE_1000_S;
    scenarios.push(roll);
    scenarios.push(create);
    for s in scenarios.iter().filter(|s| s.name.contains(only)) {
        let mut times = Vec::new();
        let mut calls = Calls::default();
        for _ in 0..runs {
            let (t, c) = s.run().await;
            times.push(t);
            calls = c;
        }
        let med = median_ms(&times);
        let ratio = med / s.minimum;
        let all: Vec<String> = times.iter().map(|t| format!("{t:.2}")).collect();
        let minimum = if s.instant {
            format!("InfraKit {}", s.minimum)
        } else {
            format!("{:.2}", s.minimum)
        };
        println!(
            "| {} | {minimum} | {med:.2} | {ratio:.3} | {} | {} | {} | {} |",
            s.name,
            all.join(" "),
            Calls::get(&calls.describe),
            Calls::get(&calls.provision),
            Calls::get(&calls.destroy),
        );
    }
}
