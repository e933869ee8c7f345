//! The real controller over the ec2 provider, against moto behind the
//! fault-injecting proxy: a plain group (its machines join no swarm, so
//! the simulator plays the swarm side) brought up and rolled while EC2
//! throttles, hides new instances and loses launch answers, across a
//! controller crash; and a controller whose describes are throttled for
//! many passes acting on nothing. Real time: moto is a real server.

use drover_controller::Metrics;
use drover_ec2::Ec2Provider;
use drover_ec2::testkit::controlled::{commit, controller, converged, plain_group, store};
use drover_ec2::testkit::{Faults, Moto, Proxy};
use drover_ec2::throttle::{Rate, Rates};
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

const SIZE: usize = 6;

fn spec(instance_type: &str, subnet: &str) -> String {
    plain_group(SIZE, 3, instance_type, subnet)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_group_comes_up_and_rolls_under_sustained_throttling_with_no_duplicate() {
    let moto = Moto::start().await;
    let proxy = Proxy::start(&moto).await;
    let subnet = moto.subnets().await["us-east-1a"].clone();
    // EC2 allows less than the client assumes (2 calls/s per family), hides
    // new instances for a second, and loses the first launch answers.
    let slow = Rate {
        per_sec: 2.0,
        burst: 2.0,
    };
    proxy.set(Faults {
        rates: Some(Rates {
            describe: slow,
            run: slow,
            mutate: slow,
        }),
        invisible_for: Duration::from_secs(1),
        drop_run_answers: 3,
        ..Faults::default()
    });
    let store = store(&spec("t3.micro", &subnet)).await;
    let first = controller(
        Ec2Provider::new(moto.settings(&proxy.endpoint)),
        &store,
        Metrics::new(),
    );
    // The controller crashes once it has launched: its successor (a new
    // process: a fresh provider; the journal in the store) finishes.
    let t0 = Instant::now();
    while proxy.calls("RunInstances") < 2 {
        assert!(t0.elapsed() < Duration::from_secs(30), "no launch");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    first.stop().await;
    let running = controller(
        Ec2Provider::new(moto.settings(&proxy.endpoint)),
        &store,
        Metrics::new(),
    );
    converged(&store, 1, Duration::from_secs(120)).await;
    assert_eq!(
        moto.states().await,
        BTreeMap::from([("running".to_string(), SIZE)])
    );
    // A roll: every instance replaced, exactly once.
    commit(&store, 1, &spec("t3.small", &subnet)).await;
    converged(&store, 2, Duration::from_secs(180)).await;
    let rolled = BTreeMap::from([
        ("running".to_string(), SIZE),
        ("terminated".to_string(), SIZE),
    ]);
    let t0 = Instant::now();
    while moto.states().await != rolled {
        assert!(
            t0.elapsed() < Duration::from_secs(30),
            "{:?}",
            moto.states().await
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let throttled: u64 = ["DescribeInstances", "RunInstances", "TerminateInstances"]
        .iter()
        .map(|a| proxy.throttled(a))
        .sum();
    assert!(
        throttled > 0,
        "the proxy never throttled: the test proves nothing"
    );
    eprintln!(
        "calls (throttled): describe {} ({}), run {} ({}), terminate {} ({})",
        proxy.calls("DescribeInstances"),
        proxy.throttled("DescribeInstances"),
        proxy.calls("RunInstances"),
        proxy.throttled("RunInstances"),
        proxy.calls("TerminateInstances"),
        proxy.throttled("TerminateInstances"),
    );
    running.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn throttled_describes_make_the_controller_act_on_nothing() {
    let moto = Moto::start().await;
    let proxy = Proxy::start(&moto).await;
    let subnet = moto.subnets().await["us-east-1a"].clone();
    let store = store(&spec("t3.micro", &subnet)).await;
    let running = controller(
        Ec2Provider::new(moto.settings(&proxy.endpoint)),
        &store,
        Metrics::new(),
    );
    converged(&store, 1, Duration::from_secs(60)).await;
    let (runs, terminates) = (
        proxy.calls("RunInstances"),
        proxy.calls("TerminateInstances"),
    );
    // Every describe throttled, for many passes: "unknown", not "none".
    proxy.set(Faults {
        throttle_next: [("DescribeInstances".to_string(), 1_000_000)].into(),
        ..Faults::default()
    });
    tokio::time::sleep(Duration::from_secs(10)).await;
    assert!(proxy.throttled("DescribeInstances") > 20);
    assert_eq!(proxy.calls("RunInstances"), runs, "nothing launched");
    assert_eq!(
        proxy.calls("TerminateInstances"),
        terminates,
        "nothing reaped"
    );
    proxy.set(Faults::default());
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(proxy.calls("RunInstances"), runs);
    assert_eq!(
        moto.states().await,
        BTreeMap::from([("running".to_string(), SIZE)])
    );
    running.stop().await;
}
