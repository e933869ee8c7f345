//! A group whose provider is gone (issue 38, item 5), through the real
//! controller loop over the simulated cloud and swarm (tokio's clock
//! paused): the workers' plugin answers while the cluster comes up, then
//! goes away for good. The survey finds it gone and lists what drover last
//! knew; the forget takes the group out of the desired state, the journal
//! and the swarm's Down nodes, records every machine as an event, and the
//! controller then converges without it. While the plugin answers, the
//! survey says so (the command refuses `--forget-machines` on that).

mod support;

use drover_controller::Controller;
use drover_controller::procedure::forget::{forget, survey};
use drover_core::forget::{Reach, Source};
use drover_core::journal::Operation;
use drover_core::model::{NodeState, SwarmView};
use drover_core::spec::validate_forget;
use drover_sim::{SimCloud, Timings, World};
use drover_spi::{Cluster, EventAction, InstanceProvider, Store};
use std::sync::Arc;
use std::time::Duration;
use support::{Refusing, Running, seeded_store, sim_context};

const SPEC: &str = "groups:
- name: managers
  role: manager
  allocation: {size: 1}
  instance: {provider: sim}
- name: workers
  role: worker
  allocation: {size: 2}
  instance: {provider: plugin, plugin: p}
";

/// The workers' plugin once it is gone: nothing answers on its socket.
const GONE: Refusing = Refusing {
    why: "connection refused",
    everything: true,
};

/// An operation of the workers the controller had journaled when the
/// plugin went: removing `victim`.
fn removing(victim: &str) -> Operation {
    serde_json::from_value(serde_json::json!({
        "id": "workers-op-1", "group": "workers", "kind": "retire", "role": "worker",
        "victim": {"instance": victim, "is_self": false}, "target": null,
        "surge": false, "done": [],
    }))
    .expect("an operation")
}

async fn converged(store: &dyn Store, rev: u64, limit: u64) {
    for _ in 0..limit {
        let h = store.history().await.unwrap();
        if h.iter().any(|r| r.rev == rev && r.converged) {
            return;
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    panic!(
        "revision {rev} did not converge: {:?}",
        store.status().await.unwrap()
    );
}

#[tokio::test(start_paused = true)]
async fn a_group_whose_plugin_is_gone_is_forgotten_on_the_operators_word_only() {
    let cloud = SimCloud::new(World::new(7, Timings::default()));
    let store = seeded_store(SPEC).await;
    // The plugin answers (the simulated cloud behind it) while the cluster comes up.
    let mut ctx = sim_context(&cloud, store.clone());
    ctx.providers
        .insert("plugin:p".into(), Arc::new(cloud.clone()) as Arc<_>);
    let running = Running::start(Controller::new(ctx.clone()));
    converged(store.as_ref(), 1, 600).await;
    running.stop().await;
    let workers = store
        .desired()
        .await
        .unwrap()
        .unwrap()
        .spec
        .group("workers")
        .unwrap()
        .clone();

    // While it answers, the survey says so: --forget-machines is refused on that.
    let answering = survey(&ctx, &workers, "c1").await.unwrap();
    assert!(
        matches!(answering.reach, Reach::Answers(_)),
        "{:?}",
        answering.reach
    );

    // One worker's machine dies (its node goes Down), an operation of the
    // group is in the journal, and then the plugin is gone for good.
    let (dead, alive) = {
        let w = cloud.world();
        let mut ids: Vec<_> = w
            .instances
            .values()
            .filter(|i| i.inst.tag("drover.group") == Some("workers"))
            .map(|i| (i.inst.id.clone(), i.node.clone().unwrap()))
            .collect();
        ids.sort();
        (ids[0].clone(), ids[1].clone())
    };
    cloud.destroy(&dead.0).await.unwrap();
    tokio::time::sleep(Duration::from_secs(120)).await;
    ctx.providers
        .insert("plugin:p".into(), Arc::new(GONE) as Arc<_>);
    // Failing here alone would not do (the acting controller may still
    // describe the group): it publishes the group unobservable first.
    let failing_here = survey(&ctx, &workers, "c1").await.unwrap();
    assert!(
        matches!(failing_here.reach, Reach::Answers(_)),
        "{:?}",
        failing_here.reach
    );
    let running = Running::start(Controller::new(ctx.clone()));
    tokio::time::sleep(Duration::from_secs(10)).await;
    running.stop().await;
    let epoch = store.campaign("test").await.unwrap();
    store.journal_put(epoch, &removing("i-lost")).await.unwrap();

    let gone = survey(&ctx, &workers, "c1").await.unwrap();
    assert!(
        matches!(&gone.reach, Reach::Gone { why, configured_here: true } if why.contains("connection refused")),
        "{:?}",
        gone.reach
    );
    // The controller that cannot describe the group lists none of its
    // machines any more: what is left is the journal and the swarm's nodes.
    let known: Vec<(&str, Source)> = gone.known.iter().map(|k| (k.id(), k.from)).collect();
    assert_eq!(
        known,
        [
            ("i-lost", Source::Journal),
            (dead.1.as_str(), Source::Swarm),
            (alive.1.as_str(), Source::Swarm),
        ]
    );
    let SwarmView::Ok(nodes) = &gone.swarm else {
        panic!("{:?}", gone.swarm)
    };
    let down = nodes.iter().find(|n| n.id == dead.1).unwrap();
    assert_eq!(down.state, NodeState::Down);

    // The forget, on the operator's word.
    let current = store.desired().await.unwrap().unwrap();
    let without = validate_forget(&current.spec, "workers").unwrap();
    let done = forget(
        &ctx,
        &gone,
        &workers,
        (current.rev, &without),
        "operator@test",
    )
    .await
    .unwrap();
    assert_eq!(done.rev, 2);
    assert_eq!(done.operations, ["workers-op-1"]);
    assert_eq!(done.removed, std::slice::from_ref(&dead.1));
    assert_eq!(done.left.len(), 1);
    assert_eq!(done.left[0].0, alive.1);

    let now = store.desired().await.unwrap().unwrap();
    assert!(now.spec.group("workers").is_none(), "still declared");
    assert_eq!(now.provenance.who, "operator@test");
    assert!(store.journal().await.unwrap().is_empty());
    let SwarmView::Ok(nodes) = cloud.observe().await else {
        panic!("no swarm")
    };
    assert!(
        !nodes.iter().any(|n| n.id == dead.1),
        "the Down node stayed"
    );
    assert!(
        nodes.iter().any(|n| n.id == alive.1),
        "a live node was removed"
    );
    let events = store.events(0).await.unwrap();
    let forgotten: Vec<Option<&str>> = events
        .iter()
        .filter(|e| e.action == EventAction::Forget)
        .map(|e| e.target.as_deref())
        .collect();
    assert_eq!(
        forgotten,
        [
            Some("i-lost"),
            Some(dead.1.as_str()),
            Some(alive.1.as_str()),
            None
        ]
    );
    assert!(
        events
            .iter()
            .filter(|e| e.action == EventAction::Forget)
            .all(|e| e.group.as_deref() == Some("workers")
                && e.reason.contains("connection refused")),
        "{events:?}"
    );

    // The controller, its plugin still gone, converges without the group.
    let running = Running::start(Controller::new(ctx.clone()));
    converged(store.as_ref(), 2, 600).await;
    running.stop().await;
}
