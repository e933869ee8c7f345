//! Taking over is in the audit log: a manager's controller that wins the
//! epoch writes `took-over` (its epoch, the leader it saw) before anything
//! else, once per term — so the failover gap can be read from `drover events`.

mod support;

use drover_controller::{Context, Controller};
use drover_sim::{SimCloud, Timings, World};
use drover_spi::{Event, Store};
use drover_store::MemStore;
use std::sync::Arc;
use std::time::Duration;
use support::{seeded_store, sim_context};

const SPEC: &str = "groups:
- name: managers
  role: manager
  allocation: {size: 3}
  instance: {provider: sim}
";

fn context(cloud: &SimCloud, store: &Arc<MemStore>, self_link: Option<String>) -> Context {
    let mut ctx = sim_context(cloud, store.clone());
    ctx.identity = self_link.clone().unwrap_or_else(|| "bootstrap".into());
    ctx.self_link = self_link;
    ctx
}

fn took_over(events: &[Event]) -> Vec<&Event> {
    events.iter().filter(|e| e.action == "took-over").collect()
}

#[tokio::test(start_paused = true)]
async fn the_controller_that_takes_over_records_it_first_under_its_new_epoch() {
    let cloud = SimCloud::new(World::new(7, Timings::default()));
    let store = seeded_store(SPEC).await;
    let rev = 1;

    // Bring-up by an off-cluster controller (no swarm yet).
    let mut bootstrap = Controller::new(context(&cloud, &store, None));
    for _ in 0..600 {
        bootstrap.pass().await.unwrap();
        let history = store.history().await.unwrap();
        if history.iter().any(|r| r.rev == rev && r.converged) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    let events = store.events(0).await.unwrap();
    let first = took_over(&events);
    assert_eq!(first.len(), 1, "{events:#?}");
    assert_eq!(first[0].controller, "bootstrap");
    assert_eq!(first[0].outcome, "epoch 1");
    assert_eq!(first[0].reason, "no swarm yet: bootstrap");
    assert_eq!(events[0].action, "took-over", "not the first event");

    // One controller per manager: only the leader's takes over, once.
    let links: Vec<String> = cloud
        .world()
        .nodes
        .values()
        .filter_map(|n| n.node.link.clone())
        .collect();
    assert_eq!(links.len(), 3);
    let mut controllers: Vec<Controller> = links
        .iter()
        .map(|l| Controller::new(context(&cloud, &store, Some(l.clone()))))
        .collect();
    for _ in 0..2 {
        for c in &mut controllers {
            c.pass().await.unwrap();
        }
    }
    let (leader, leader_node) = {
        let w = cloud.world();
        (w.leader_link().unwrap(), w.leader.clone().unwrap())
    };
    let events = store.events(0).await.unwrap();
    let second = took_over(&events);
    assert_eq!(second.len(), 2, "{second:#?}");
    assert_eq!(second[1].controller, leader);
    assert_eq!(second[1].outcome, "epoch 2");
    assert_eq!(second[1].target.as_deref(), Some(leader_node.as_str()));
    assert!(
        second[1].reason.contains(&leader),
        "the leader it saw: {}",
        second[1].reason
    );

    // The leadership moves: the next leader's controller takes over under a
    // newer epoch, naming the new leader.
    cloud.world().change_leader();
    let (next, next_node) = {
        let w = cloud.world();
        (w.leader_link().unwrap(), w.leader.clone().unwrap())
    };
    assert_ne!(next, leader);
    for c in &mut controllers {
        c.pass().await.unwrap();
    }
    let events = store.events(0).await.unwrap();
    let third = took_over(&events);
    assert_eq!(third.len(), 3, "{third:#?}");
    assert_eq!(third[2].controller, next);
    assert_eq!(third[2].outcome, "epoch 3");
    assert_eq!(third[2].target.as_deref(), Some(next_node.as_str()));
    let by_next = events.iter().position(|e| e.controller == next);
    assert_eq!(
        by_next.map(|i| events[i].action.as_str()),
        Some("took-over"),
        "not the new controller's first event"
    );
}
