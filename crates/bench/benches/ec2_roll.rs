//! A plain group rolled through the EC2 API: moto behind the test kit's
//! proxy, which enforces EC2's default account limits per API family
//! (describes 20/s burst 100, launches 2/s burst 5, other mutations 5/s
//! burst 50); the real controller over the ec2 provider, instant machines
//! (a plain group joins no swarm). Prints the roll's API calls by kind,
//! the throttles absorbed, describes per pass, and the wall time against
//! the least the limits allow (each family's calls beyond its burst at its
//! rate; the slowest family bounds the roll).
//!
//! `cargo bench -p drover-bench --bench ec2_roll` (moto from
//! scripts/setup.sh); `DROVER_EC2_BENCH_SIZE` (100) instances,
//! `DROVER_EC2_BENCH_IN_FLIGHT` (10) at a time;
//! `DROVER_EC2_BENCH_FAST_BRINGUP=1` brings the group up without the
//! limits, by a first controller that then stops (the roll's controller
//! takes over), when only the roll is of interest.

use drover_controller::Metrics;
use drover_ec2::testkit::controlled::{commit, controller, converged, plain_group, store};
use drover_ec2::testkit::{Faults, Moto, Proxy, REGION};
use drover_ec2::throttle::{Family, Rate, Rates};
use drover_ec2::{Ec2Provider, Settings};
use std::time::{Duration, Instant};

const ACTIONS: [&str; 4] = [
    "DescribeInstances",
    "RunInstances",
    "TerminateInstances",
    "CreateTags",
];

fn env(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// `drover_passes_total` from the controller's metrics.
fn passes(metrics: &Metrics) -> f64 {
    metrics
        .encode()
        .lines()
        .find_map(|l| l.strip_prefix("drover_passes_total "))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0.0)
}

/// The least time `calls` take at `rate`, its burst spent at once.
fn least(calls: u64, rate: Rate) -> f64 {
    (calls as f64 - rate.burst).max(0.0) / rate.per_sec
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let size = env("DROVER_EC2_BENCH_SIZE", 100);
    let in_flight = env("DROVER_EC2_BENCH_IN_FLIGHT", 10);
    let limits = Rates::default();
    let fast_bringup = std::env::var_os("DROVER_EC2_BENCH_FAST_BRINGUP").is_some();
    let moto = Moto::start().await;
    let proxy = Proxy::start(&moto).await;
    let subnet = moto.subnets().await["us-east-1a"].clone();
    let store = store(&plain_group(size, in_flight, "t3.micro", &subnet)).await;
    let settings = |rates| Settings {
        credentials: moto.credentials(),
        rates,
        ..Settings::new(REGION, Some(&proxy.endpoint))
    };
    let long = Duration::from_secs(3600);
    let up = Instant::now();
    let metrics = Metrics::new();
    let running = if fast_bringup {
        let unlimited = Rate {
            per_sec: 1000.0,
            burst: 1000.0,
        };
        let first = controller(
            Ec2Provider::new(settings(Rates {
                describe: unlimited,
                run: unlimited,
                mutate: unlimited,
            })),
            &store,
            Metrics::new(),
        );
        converged(&store, 1, long).await;
        first.stop().await;
        println!(
            "brought up {size} instances without limits in {:.1} s\n",
            up.elapsed().as_secs_f64()
        );
        proxy.set(Faults {
            rates: Some(limits),
            ..Faults::default()
        });
        controller(Ec2Provider::new(settings(limits)), &store, metrics.clone())
    } else {
        proxy.set(Faults {
            rates: Some(limits),
            ..Faults::default()
        });
        let running = controller(Ec2Provider::new(settings(limits)), &store, metrics.clone());
        converged(&store, 1, long).await;
        println!(
            "brought up {size} instances in {:.1} s (least at the launch limit: {:.1} s)\n",
            up.elapsed().as_secs_f64(),
            least(size as u64, limits.run)
        );
        running
    };
    let before: Vec<(u64, u64)> = ACTIONS
        .iter()
        .map(|a| (proxy.calls(a), proxy.throttled(a)))
        .collect();
    let passes0 = passes(&metrics);
    let t0 = Instant::now();
    commit(
        &store,
        1,
        &plain_group(size, in_flight, "t3.small", &subnet),
    )
    .await;
    converged(&store, 2, long).await;
    let wall = t0.elapsed().as_secs_f64();
    let passes = passes(&metrics) - passes0;
    running.stop().await;
    println!("roll of {size} instances, max_in_flight {in_flight}, EC2's default limits\n");
    println!("| call | calls | throttled | least time at its limit (s) |");
    println!("|---|---:|---:|---:|");
    let mut bound: f64 = 0.0;
    let mut describes = 0;
    for (a, (calls0, throttled0)) in ACTIONS.iter().zip(before) {
        let calls = proxy.calls(a) - calls0;
        let throttled = proxy.throttled(a) - throttled0;
        let family = Family::of(a);
        if family == Family::Describe {
            describes += calls;
        }
        let t = least(calls, limits.of(family));
        bound = bound.max(t);
        println!("| {a} | {calls} | {throttled} | {t:.1} |");
    }
    println!(
        "\npasses {passes:.0}, describes per pass {:.2}; wall {wall:.1} s, least {bound:.1} s ({:+.0} %)",
        describes as f64 / passes.max(1.0),
        (wall / bound.max(f64::EPSILON) - 1.0) * 100.0
    );
}
