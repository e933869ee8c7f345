//! Hooks told when the world moves on (issue 36): the real controller loop
//! over the simulated cloud rolls its managers with a `pre_drain` and an
//! `on_abort` hook (endpoints served here). While the first `pre_drain`
//! call is answered, another manager's machine crashes: the roll may no
//! longer demote its member, steps aside, and calls `on_abort` for that
//! member before it ends; the roll then finishes once the crash is healed.

mod support;

use axum::Json;
use drover_controller::Controller;
use drover_core::spec::{HookFacts, HookPoint, parse_str};
use drover_sim::{SimCloud, Timings, World};
use drover_spi::Store;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use support::{Running, seeded_store, sim_context, who};

/// Three managers whose hooks call `url`'s `/pre` and `/abort`.
fn spec(url: &str, image: &str) -> String {
    format!(
        "groups:
- name: managers
  role: manager
  allocation: {{size: 3}}
  instance: {{provider: sim, properties: {{image: {image}}}}}
  hooks:
    pre_drain: {{http: {url}/pre, timeout: 50s}}
    on_abort: {{http: {url}/abort, timeout: 50s}}
"
    )
}

/// The hooks' calls, in order; the first `pre_drain` crashes another
/// manager (neither its member nor the leader) before it is answered.
#[derive(Default)]
struct Seen {
    calls: Vec<HookFacts>,
    crashed: Option<String>,
}

fn hooks(cloud: SimCloud, seen: Arc<Mutex<Seen>>) -> axum::Router {
    let answer = move |Json(facts): Json<HookFacts>| {
        let (cloud, seen) = (cloud.clone(), seen.clone());
        async move {
            let mut seen = seen.lock().unwrap();
            if facts.hook == HookPoint::PreDrain && seen.crashed.is_none() {
                let mut world = cloud.world();
                let leader = world.leader_link();
                let other = world
                    .instances
                    .values()
                    .filter(|i| i.inst.owned_by("c1", "managers") && i.inst.running)
                    .find(|i| {
                        Some(&i.inst.id) != facts.instance.as_ref()
                            && i.inst.link().map(str::to_string) != leader
                    })
                    .map(|i| i.inst.id.clone())
                    .expect("a third manager");
                world.crash(&other);
                seen.crashed = Some(other);
            }
            seen.calls.push(facts);
            "noted"
        }
    };
    axum::Router::new()
        .route("/pre", axum::routing::post(answer.clone()))
        .route("/abort", axum::routing::post(answer))
}

#[tokio::test(start_paused = true)]
async fn a_roll_that_steps_aside_after_its_pre_drain_hook_calls_on_abort() {
    let _ = tracing_subscriber::fmt().with_test_writer().try_init();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let cloud = SimCloud::new(World::new(3, Timings::default()));
    let seen = Arc::new(Mutex::new(Seen::default()));
    let server =
        tokio::spawn(axum::serve(listener, hooks(cloud.clone(), seen.clone())).into_future());
    let store = seeded_store(&spec(&url, "v1")).await;
    let controller = Running::start(Controller::new(sim_context(&cloud, store.clone())));
    let converged = |rev: u64| {
        let store = store.clone();
        async move {
            let mut waited = 0;
            while !store
                .history()
                .await
                .unwrap()
                .iter()
                .any(|r| r.rev == rev && r.converged)
            {
                tokio::time::sleep(Duration::from_secs(1)).await;
                waited += 1;
                assert!(
                    waited < 7200,
                    "revision {rev} did not converge: {:?}",
                    store.status().await.unwrap()
                );
            }
        }
    };
    converged(1).await;
    let v2 = parse_str(&spec(&url, "v2")).spec.expect("valid spec");
    let rev2 = store.commit(1, &v2, who(), false).await.unwrap();
    converged(rev2).await;
    controller.stop().await;
    server.abort();

    let seen = seen.lock().unwrap();
    assert!(seen.crashed.is_some(), "no pre_drain hook was called");
    let first = &seen.calls[0];
    assert_eq!(first.hook, HookPoint::PreDrain);
    let abort = seen
        .calls
        .iter()
        .find(|f| f.hook == HookPoint::OnAbort)
        .expect("on_abort was not called after the roll stepped aside");
    // For the same member and operation the pre_drain hook was told of.
    assert_eq!(abort.instance, first.instance);
    assert_eq!(abort.operation, first.operation);
    assert_eq!(
        abort.idempotency_key,
        format!("{}/on_abort", first.operation)
    );
    // Every on_abort undoes a pre_drain called before it, of its operation.
    for (k, f) in seen.calls.iter().enumerate() {
        if f.hook == HookPoint::OnAbort {
            assert!(
                seen.calls[..k]
                    .iter()
                    .any(|p| p.hook == HookPoint::PreDrain && p.operation == f.operation),
                "on_abort of {} with no pre_drain before it",
                f.operation
            );
        }
    }
}
