//! Garbage collection through the real controller loop (simulated cloud and
//! swarm, tokio's clock paused): every collection is an event naming the
//! item, the rule and the evidence; failed provision calls are recorded in
//! the journal and block the group once `health.max_attempts` are used.

use async_trait::async_trait;
mod support;

use drover_controller::Controller;
use drover_core::model::{Instance, tags};
use drover_core::spec::Role;
use drover_sim::{SimCloud, Timings, World};
use drover_spi::{Event, InstanceProvider, ProviderError, ProvisionRequest, Store};
use drover_store::MemStore;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;
use support::{Refusing, Running, seeded_store, sim_context};

/// A provider whose every provision call fails (quota exhausted).
const NO_QUOTA: Refusing = Refusing {
    why: "quota exceeded",
    everything: false,
};

/// A provider whose provision calls panic (a bug in a provider plugin).
struct Panics;

#[async_trait]
impl InstanceProvider for Panics {
    async fn provision(
        &self,
        _req: ProvisionRequest,
        _fence: &dyn drover_spi::Fence,
    ) -> Result<String, ProviderError> {
        panic!("provider bug");
    }
    async fn destroy_fenced(
        &self,
        instance: &str,
        fence: &dyn drover_spi::Fence,
    ) -> Result<(), ProviderError> {
        NO_QUOTA.destroy_fenced(instance, fence).await
    }
    async fn describe(
        &self,
        tags: &BTreeMap<String, String>,
    ) -> Result<Vec<Instance>, ProviderError> {
        NO_QUOTA.describe(tags).await
    }
    async fn label(
        &self,
        instance: &str,
        labels: &BTreeMap<String, String>,
        fence: &dyn drover_spi::Fence,
    ) -> Result<(), ProviderError> {
        NO_QUOTA.label(instance, labels, fence).await
    }
}

/// The simulated cloud, with no capacity left in zone c: its provision
/// calls there are refused as EC2 refuses `InsufficientInstanceCapacity`.
struct ShortOfC(SimCloud);

#[async_trait]
impl InstanceProvider for ShortOfC {
    async fn provision(
        &self,
        req: ProvisionRequest,
        fence: &dyn drover_spi::Fence,
    ) -> Result<String, ProviderError> {
        if req.tags.get(tags::ZONE).map(String::as_str) == Some("c") {
            return Err(ProviderError::Capacity(
                "InsufficientInstanceCapacity in zone c".into(),
            ));
        }
        self.0.provision(req, fence).await
    }
    async fn destroy_fenced(
        &self,
        instance: &str,
        fence: &dyn drover_spi::Fence,
    ) -> Result<(), ProviderError> {
        self.0.destroy_fenced(instance, fence).await
    }
    async fn describe(
        &self,
        tags: &BTreeMap<String, String>,
    ) -> Result<Vec<Instance>, ProviderError> {
        self.0.describe(tags).await
    }
    async fn label(
        &self,
        instance: &str,
        labels: &BTreeMap<String, String>,
        fence: &dyn drover_spi::Fence,
    ) -> Result<(), ProviderError> {
        self.0.label(instance, labels, fence).await
    }
}

/// Runs a controller on `text` until `done(events)` or an hour of virtual time.
async fn run_until(
    cloud: &SimCloud,
    text: &str,
    done: impl Fn(&[Event]) -> bool,
) -> (Arc<MemStore>, Vec<Event>) {
    let store = seeded_store(text).await;
    let mut ctx = sim_context(cloud, store.clone());
    ctx.providers.insert(
        "quota".to_string(),
        Arc::new(NO_QUOTA) as Arc<dyn InstanceProvider>,
    );
    ctx.providers.insert(
        "panics".to_string(),
        Arc::new(Panics) as Arc<dyn InstanceProvider>,
    );
    ctx.providers.insert(
        "short-of-c".to_string(),
        Arc::new(ShortOfC(cloud.clone())) as Arc<dyn InstanceProvider>,
    );
    let controller = Running::start(Controller::new(ctx));
    let mut events = Vec::new();
    for _ in 0..3600 {
        tokio::time::sleep(Duration::from_secs(1)).await;
        events = store.events(0).await.unwrap();
        if done(&events) {
            break;
        }
    }
    controller.stop().await;
    (store, events)
}

const MANAGERS: &str = "groups:
- name: managers
  role: manager
  allocation: {size: 1}
  instance: {provider: sim}
";

#[tokio::test(start_paused = true)]
async fn an_orphan_is_destroyed_after_its_grace_with_an_event_naming_rule_and_evidence() {
    let cloud = SimCloud::new(World::new(3, Timings::default()));
    let tagged = |cluster: &str, link: &str| {
        BTreeMap::from([
            (tags::CLUSTER.to_string(), cluster.to_string()),
            (tags::GROUP.to_string(), "old-workers".to_string()),
            (tags::LINK.to_string(), link.to_string()),
        ])
    };
    let (orphan, other) = {
        let mut w = cloud.world();
        (
            w.provision(tagged("c1", "o-1"), Role::Plain, true),
            w.provision(tagged("another-cluster", "o-2"), Role::Plain, true),
        )
    };
    let text = format!("gc: {{orphan_grace: 2m}}\n{MANAGERS}");
    let (_, events) = run_until(&cloud, &text, |evs| {
        evs.iter().any(|e| {
            e.action == "step"
                && e.reason.contains(&format!("destroy instance {orphan}"))
                && e.outcome == "ok"
        })
    })
    .await;
    let gc = events
        .iter()
        .find(|e| e.action == "gc")
        .unwrap_or_else(|| panic!("no gc event: {events:#?}"));
    assert_eq!(gc.target.as_deref(), Some(orphan.as_str()));
    assert_eq!(gc.group.as_deref(), Some("old-workers"));
    assert!(gc.reason.starts_with("orphan: "), "{}", gc.reason);
    assert!(
        gc.reason.contains("no group old-workers is declared"),
        "{}",
        gc.reason
    );
    assert!(gc.reason.contains("gc.orphan_grace (2m)"), "{}", gc.reason);
    let w = cloud.world();
    assert!(!w.instances.contains_key(&orphan), "orphan survived");
    assert!(
        w.instances.contains_key(&other),
        "another cluster's machine destroyed"
    );
}

#[tokio::test(start_paused = true)]
async fn failed_provision_calls_are_counted_and_block_the_group_with_the_reason() {
    provision_failures_block_the_group("quota", "quota exceeded").await;
}

/// A step whose task panics reports a failure like any other: without that
/// its operation would stay "running" and never be tried again (and a
/// leader handing over would never observe again).
#[tokio::test(start_paused = true)]
async fn a_step_that_panics_is_a_failed_step_and_is_tried_again() {
    provision_failures_block_the_group("panics", "the step's task failed").await;
}

/// A zone without capacity: the refusal is journaled with its zone, told
/// in the event log, and the slot's machine is made in another zone.
#[tokio::test(start_paused = true)]
async fn a_provision_refused_for_capacity_is_made_in_another_zone_and_told() {
    let cloud = SimCloud::new(World::new(3, Timings::default()));
    let text = format!(
        "{MANAGERS}- name: batch
  role: plain
  allocation: {{size: 2, zones: [b, c]}}
  instance: {{provider: short-of-c}}
"
    );
    let made = |evs: &[Event]| {
        evs.iter()
            .filter(|e| e.reason.starts_with("provision batch") && e.outcome == "ok")
            .count()
    };
    let (_, events) = run_until(&cloud, &text, |evs| made(evs) == 2).await;
    assert_eq!(made(&events), 2, "{events:#?}");
    let told = events
        .iter()
        .find(|e| e.action == "zone-fallback")
        .unwrap_or_else(|| panic!("no zone-fallback event: {events:#?}"));
    assert_eq!(told.group.as_deref(), Some("batch"));
    assert!(
        told.reason.contains("zone c has no capacity"),
        "{}",
        told.reason
    );
    assert!(
        told.reason.contains("InsufficientInstanceCapacity"),
        "{}",
        told.reason
    );
    let w = cloud.world();
    let zones: Vec<&str> = w
        .instances
        .values()
        .filter(|i| i.inst.tag(tags::GROUP) == Some("batch"))
        .filter_map(|i| i.inst.tag(tags::ZONE))
        .collect();
    assert_eq!(zones, ["b", "b"]);
}

/// Runs a plain group on `provider`, whose provision calls all fail with
/// `outcome`, until the group is blocked after `max_attempts` of them.
async fn provision_failures_block_the_group(provider: &str, outcome: &str) {
    let cloud = SimCloud::new(World::new(3, Timings::default()));
    let text = format!(
        "{MANAGERS}- name: batch
  role: plain
  allocation: {{size: 1}}
  instance: {{provider: {provider}}}
  health: {{max_attempts: 3}}
"
    );
    let (store, events) = run_until(&cloud, &text, |evs| {
        evs.iter().any(|e| e.action == "blocked")
    })
    .await;
    let blocked = events
        .iter()
        .find(|e| e.action == "blocked")
        .unwrap_or_else(|| panic!("never blocked: {events:#?}"));
    assert_eq!(blocked.group.as_deref(), Some("batch"));
    assert!(
        blocked.reason.contains("health.max_attempts"),
        "{}",
        blocked.reason
    );
    let failed = events
        .iter()
        .filter(|e| e.reason.starts_with("provision batch") && e.outcome.contains(outcome))
        .count();
    assert_eq!(failed, 3, "{events:#?}");
    let journal = store.journal().await.unwrap();
    let op = journal
        .iter()
        .find(|o| o.group == "batch")
        .expect("journaled");
    assert_eq!(op.provision_failures, 3);
}

#[tokio::test(start_paused = true)]
async fn without_quorum_the_last_leaders_controller_reports_blocked_and_destroys_nothing() {
    let cloud = SimCloud::new(World::new(3, Timings::default()));
    let text = "groups:
- name: managers
  role: manager
  allocation: {size: 3}
  instance: {provider: sim}
";
    // Bring-up by an off-cluster controller.
    let (store, _) = run_until(&cloud, text, |evs| {
        evs.iter()
            .filter(|e| e.reason.starts_with("provision managers") && e.outcome == "ok")
            .count()
            == 3
    })
    .await;
    tokio::time::sleep(Duration::from_secs(60)).await;
    // The leader's own controller takes over.
    let (leader_link, followers) = {
        let w = cloud.world();
        let leader = w.leader.clone().expect("a leader");
        let link = w.nodes[&leader].node.link.clone().expect("link");
        let followers: Vec<String> = w
            .instances
            .values()
            .filter(|i| i.inst.link() != Some(link.as_str()))
            .map(|i| i.inst.id.clone())
            .collect();
        (link, followers)
    };
    let mut ctx = sim_context(&cloud, store.clone());
    ctx.self_link = Some(leader_link);
    ctx.identity = "leader-controller".into();
    let controller = Running::start(Controller::new(ctx));
    tokio::time::sleep(Duration::from_secs(10)).await;
    let before: Vec<String> = cloud.world().instances.keys().cloned().collect();
    for id in &followers {
        cloud.world().crash(id);
    }
    let mut doc = serde_json::Value::Null;
    for _ in 0..600 {
        tokio::time::sleep(Duration::from_secs(1)).await;
        doc = store.status().await.unwrap().unwrap_or_default();
        let lost = serde_json::from_value(doc["swarm"]["problem"].clone())
            .is_ok_and(|p| matches!(p, drover_core::plan::SwarmProblem::QuorumLost(_)));
        if lost && doc["controller"] == "leader-controller" {
            break;
        }
    }
    controller.stop().await;
    assert!(
        doc["swarm"]["problem"]
            .as_str()
            .is_some_and(|p| p.contains("lost quorum")),
        "the last leader's controller did not report the quorum loss: {doc}"
    );
    let managers = &doc["groups"][0];
    assert_eq!(managers["phase"], "blocked", "{doc}");
    assert!(
        managers["reason"]
            .as_str()
            .is_some_and(|r| r.contains("meltdown guard")),
        "{doc}"
    );
    let after: Vec<String> = cloud.world().instances.keys().cloned().collect();
    assert_eq!(after, before, "a machine was destroyed without quorum");
}
