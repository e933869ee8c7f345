//! A pass's writes are batched (issue 37): the journal's writes, each
//! step's intent and the pass's events reach the store in one commit
//! before the side effects start, not one commit (an fsync, a raft round)
//! per record; the steps that end together are recorded in the next
//! pass's commit.

mod support;

use drover_controller::{Context, Controller};
use drover_sim::{SimCloud, Timings, World};
use drover_spi::Store;
use drover_store::MemStore;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use support::{Running, Tapped, seeded_store, sim_context};

/// Ten plain machines to make at once (no swarm needed).
const SPEC: &str = "groups:
- name: plain
  role: plain
  allocation: {size: 10}
  instance: {provider: sim, properties: {image: v1}}
  update: {max_in_flight: 10}
";

/// The store's write calls of a pass, by name (reads left out).
fn writes(calls: &Mutex<Vec<&'static str>>) -> Vec<&'static str> {
    let writes = [
        "write_batch",
        "journal_put",
        "journal_remove",
        "append_event",
    ];
    let all = std::mem::take(&mut *calls.lock().unwrap());
    all.into_iter().filter(|c| writes.contains(c)).collect()
}

/// The store's calls, recorded by name.
type Calls = Arc<Mutex<Vec<&'static str>>>;

/// A seeded memory store, its calls recorded, under an off-cluster
/// controller's context over the simulated cloud.
async fn tapped_context() -> (Arc<MemStore>, Calls, Context) {
    let cloud = SimCloud::new(World::new(7, Timings::default()));
    let store = seeded_store(SPEC).await;
    let calls: Calls = Arc::default();
    let tapped = Tapped {
        inner: store.clone(),
        tap: Box::new({
            let calls = calls.clone();
            move |call| calls.lock().unwrap().push(call)
        }),
    };
    (store, calls, sim_context(&cloud, Arc::new(tapped)))
}

#[tokio::test(start_paused = true)]
async fn a_pass_starting_ten_steps_writes_the_journal_and_events_in_one_commit() {
    let (store, calls, ctx) = tapped_context().await;
    let mut c = Controller::new(ctx);

    // The first pass takes the term and begins ten operations, each with
    // its provision's intent: twenty journal writes and their events.
    let report = c.pass().await.unwrap();
    let plan = report.plan.expect("a plan");
    let provisions = plan.actions.iter().filter(|a| a.is_side_effect()).count();
    assert_eq!(provisions, 10, "{:?}", plan.actions);
    assert_eq!(writes(&calls), vec!["write_batch"], "one commit");
    let journal = store.journal().await.unwrap();
    assert_eq!(journal.len(), 10);
    assert!(journal.iter().all(|o| o.intent.is_some()), "{journal:#?}");
    let events = store.events(0).await.unwrap();
    let started = events.iter().filter(|e| e.outcome == "started").count();
    assert_eq!(started, 10, "{events:#?}");
}

#[tokio::test(start_paused = true)]
async fn steps_that_end_together_are_recorded_in_one_commit() {
    let (store, calls, ctx) = tapped_context().await;
    let running = Running::start(Controller::new(ctx));
    let mut waited = 0;
    while !store.history().await.unwrap().iter().any(|r| r.converged) {
        tokio::time::sleep(Duration::from_millis(100)).await;
        waited += 1;
        assert!(waited < 6000, "the group was never made");
    }
    running.stop().await;
    // The simulated machines are made in the same time, so their steps
    // end together: the Begins and intents in one commit, the ten ends in
    // another (the pass after them), the operations' removals in a third —
    // never a commit per record (thirty and more before).
    let events = store.events(0).await.unwrap();
    let ended = events.iter().filter(|e| e.outcome == "ok").count();
    assert_eq!(ended, 10, "{events:#?}");
    let writes = writes(&calls);
    assert!(
        writes.iter().all(|w| *w == "write_batch") && writes.len() <= 3,
        "{writes:?}"
    );
}
