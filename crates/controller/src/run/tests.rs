use super::*;
use crate::observe;
use async_trait::async_trait;
use drover_core::journal::Operation;
use drover_core::model::SwarmView;
use drover_core::plan::{Action, Memory, Plan};
use drover_core::spec::{Role, parse_str};
use drover_spi::{Cluster, ClusterError, JoinMaterial, Store};
use drover_spi::{Epoch, EventAction, Provenance};
use drover_store::MemStore;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use tokio::sync::Notify;

/// A swarm whose drain and self-demotion wait for `release`, recording
/// which ended.
#[derive(Default)]
struct Held {
    release: Notify,
    drained: AtomicBool,
    left: AtomicBool,
    /// How often the swarm was looked at.
    observed: AtomicUsize,
    /// Journaled under the given term at the first look: what a deposed
    /// controller writes while another campaigns.
    plant: std::sync::Mutex<Option<(Arc<MemStore>, Epoch, Operation)>>,
}

#[async_trait]
impl Cluster for Held {
    async fn observe(&self) -> SwarmView {
        self.observed.fetch_add(1, Ordering::SeqCst);
        let plant = self.plant.lock().unwrap().take();
        if let Some((store, epoch, op)) = plant {
            store.journal_put(epoch, &op).await.unwrap();
        }
        SwarmView::Absent
    }
    async fn services(&self) -> drover_core::model::Services {
        drover_core::model::Services::default()
    }
    async fn drain(&self, _: &str, _fence: &dyn drover_spi::Fence) -> Result<(), ClusterError> {
        self.release.notified().await;
        self.drained.store(true, Ordering::SeqCst);
        Ok(())
    }
    async fn demote(&self, _: &str, _fence: &dyn drover_spi::Fence) -> Result<(), ClusterError> {
        Ok(())
    }
    async fn promote(&self, _: &str, _fence: &dyn drover_spi::Fence) -> Result<(), ClusterError> {
        Ok(())
    }
    async fn activate(&self, _: &str, _fence: &dyn drover_spi::Fence) -> Result<(), ClusterError> {
        Ok(())
    }
    async fn demote_self_and_leave(
        &self,
        _: &str,
        _fence: &dyn drover_spi::Fence,
        left: &(dyn Fn() + Send + Sync),
    ) -> Result<(), ClusterError> {
        // Out of the swarm before the call returns, as a real engine is.
        left();
        self.release.notified().await;
        self.left.store(true, Ordering::SeqCst);
        Ok(())
    }
    async fn remove_node(
        &self,
        _: &str,
        _: bool,
        _fence: &dyn drover_spi::Fence,
    ) -> Result<(), ClusterError> {
        Ok(())
    }
    async fn join_material(&self, _: Role) -> Result<Option<JoinMaterial>, ClusterError> {
        Ok(None)
    }
}

/// A controller (`identity`, on `self_link`) that won the first term of
/// a memory store holding one revision (a 1-manager sim group), over a
/// cluster whose calls are held until released.
async fn one_manager_controller(
    self_link: Option<&str>,
    identity: &str,
) -> (Arc<MemStore>, Arc<Held>, Controller, Epoch) {
    let store = Arc::new(MemStore::default());
    store.init_cluster("c1").await.unwrap();
    let spec = parse_str(
        "groups:\n- name: m\n  role: manager\n  allocation: {size: 1}\n  instance: {provider: sim}\n",
    )
    .spec
    .unwrap();
    let who = Provenance {
        who: "test".into(),
        at_ms: 0,
        message: "test".into(),
    };
    store.commit(0, &spec, who, false).await.unwrap();
    let held = Arc::new(Held::default());
    let ctx = Context {
        providers: Default::default(),
        cluster: held.clone(),
        store: store.clone(),
        self_link: self_link.map(Into::into),
        identity: identity.into(),
        store_url: None,
        resync: Duration::from_secs(2),
    };
    let c = Controller::new(ctx);
    let epoch = store.campaign(identity).await.unwrap();
    (store, held, c, epoch)
}

/// A fast planned hand-over: the moment its own hand-over's
/// engine is seen out of the swarm (before the leave call returns), a
/// controller says so in the store (its heartbeat's engine view, `left`
/// naming the node it demoted), and the store's change watch — what the
/// acting controller waits on — fires for it.
#[tokio::test(start_paused = true)]
async fn a_finished_hand_over_reports_the_leave_in_the_store_and_wakes_the_watch() {
    let (store, held, mut c, epoch) = one_manager_controller(Some("l1"), "l1").await;
    let lead = c.take(epoch);
    let stored = observe::stored(&c.ctx).await.unwrap().unwrap();
    let hand_over = Action::DemoteSelfAndLeave {
        op: "leader-op".into(),
        node: "n1".into(),
    };
    c.spawn(&stored, None, &hand_over, &lead);
    let watch = {
        let store = store.clone();
        tokio::spawn(async move { store.changed().await })
    };
    tokio::time::sleep(Duration::from_millis(10)).await;
    // The loop hears it from the step's task while the call still runs.
    let node = c.acting.left_rx.recv().await.unwrap();
    c.report_left(&node).await;
    assert!(
        !held.left.load(Ordering::SeqCst),
        "the call already returned"
    );
    let beats = store.heartbeats().await.unwrap();
    let left = beats
        .iter()
        .find_map(|b| b.engine.as_ref()?.left_report())
        .expect("no leave reported");
    assert_eq!((left.link.as_str(), left.node.as_str()), ("l1", "n1"));
    tokio::time::timeout(Duration::from_millis(1), watch)
        .await
        .expect("the change watch did not fire")
        .unwrap()
        .unwrap();
    // The call's return reports nothing new: no second wake.
    let watch = {
        let store = store.clone();
        tokio::spawn(async move { store.changed().await })
    };
    tokio::time::sleep(Duration::from_millis(10)).await;
    held.release.notify_waiters();
    let done = c.acting.done_rx.recv().await.unwrap();
    c.finished(done).await;
    tokio::time::sleep(Duration::from_millis(10)).await;
    assert!(!watch.is_finished(), "woken again by the same leave");
}

/// A leader's pass carries its own hand-over last: the rest of the plan
/// (here another group's operation, planned after it) is journaled while
/// its engine still leads, and nothing goes through a demoting one.
#[tokio::test(start_paused = true)]
async fn a_pass_carries_its_own_hand_over_last() {
    let (store, held, mut c, epoch) = one_manager_controller(Some("l1"), "l1").await;
    let lead = c.take(epoch);
    let stored = observe::stored(&c.ctx).await.unwrap().unwrap();
    let (leader_op, next_op) = (observe::tests::op("m"), observe::tests::op("w"));
    let plan = Plan {
        boot_asks: Vec::new(),
        actions: vec![
            Action::Begin {
                op: Box::new(leader_op.clone()),
            },
            Action::DemoteSelfAndLeave {
                op: leader_op.id.clone(),
                node: "n1".into(),
            },
            Action::Begin {
                op: Box::new(next_op.clone()),
            },
        ],
        groups: Vec::new(),
        swarm: Default::default(),
        explanation: Vec::new(),
        memory: Memory::default(),
        wake_at: None,
        garbage: Vec::new(),
        causes: Default::default(),
        parked: Default::default(),
    };
    c.act(&stored, &plan, &lead).await.unwrap();
    let journaled: BTreeSet<String> = store
        .journal()
        .await
        .unwrap()
        .into_iter()
        .map(|o| o.id)
        .collect();
    assert_eq!(
        journaled,
        BTreeSet::from([leader_op.id, next_op.id.clone()])
    );
    let events: Vec<(EventAction, Option<String>)> = store
        .events(0)
        .await
        .unwrap()
        .into_iter()
        .map(|e| (e.action, e.op))
        .collect();
    let at = |action: &str, op: &str| {
        events
            .iter()
            .position(|(a, o)| a == action && o.as_deref() == Some(op))
            .unwrap_or_else(|| panic!("no {action} of {op} in {events:?}"))
    };
    assert!(
        at("begin", &next_op.id) < at("step", "m-op"),
        "the hand-over started before the rest of the plan: {events:?}"
    );
    held.release.notify_waiters();
}

#[tokio::test(start_paused = true)]
async fn standing_down_cancels_every_step_but_the_leaders_own_hand_over() {
    let (_store, held, mut c, epoch) = one_manager_controller(None, "t").await;
    let lead = c.take(epoch);
    let stored = observe::stored(&c.ctx).await.unwrap().unwrap();
    let drain = Action::Drain {
        op: "drain-op".into(),
        node: "n2".into(),
    };
    let hand_over = Action::DemoteSelfAndLeave {
        op: "leader-op".into(),
        node: "n1".into(),
    };
    c.spawn(&stored, None, &drain, &lead);
    c.spawn(&stored, None, &hand_over, &lead);
    tokio::time::sleep(Duration::from_millis(10)).await; // both under way

    c.stand_down("test");
    held.release.notify_waiters();
    tokio::time::sleep(Duration::from_millis(10)).await;
    assert!(
        held.left.load(Ordering::SeqCst),
        "the hand-over was cut short"
    );
    assert!(!held.drained.load(Ordering::SeqCst), "the drain ran on");
    let mut ends = BTreeMap::new();
    for _ in 0..2 {
        let done = c.acting.done_rx.recv().await.unwrap();
        ends.insert(done.op, done.result.map_err(|e| e.to_string()));
    }
    assert_eq!(
        ends,
        BTreeMap::from([
            (
                "drain-op".to_string(),
                Err("cancelled: this controller stood down".to_string())
            ),
            ("leader-op".to_string(), Ok(())),
        ])
    );
}

/// While its own hand-over runs, a pass asks its engine nothing (the engine
/// would hold its own leave up) and writes nothing.
#[tokio::test(start_paused = true)]
async fn a_handing_over_pass_observes_nothing_and_starts_nothing() {
    let (store, held, mut c, epoch) = one_manager_controller(None, "t").await;
    let lead = c.take(epoch);
    let stored = observe::stored(&c.ctx).await.unwrap().unwrap();
    let hand_over = Action::DemoteSelfAndLeave {
        op: "leader-op".into(),
        node: "n1".into(),
    };
    c.spawn(&stored, None, &hand_over, &lead);
    tokio::time::sleep(Duration::from_millis(10)).await;
    let (journal, events) = (
        store.journal().await.unwrap(),
        store.events(0).await.unwrap(),
    );
    let seen = held.observed.load(Ordering::SeqCst);

    let report = c.pass().await.unwrap();
    assert_eq!(report.standing, Standing::HandingOver);
    assert!(report.plan.is_none(), "planned while handing over");
    assert_eq!(
        held.observed.load(Ordering::SeqCst),
        seen,
        "asked its engine"
    );
    assert_eq!(store.journal().await.unwrap(), journal);
    assert_eq!(store.events(0).await.unwrap(), events);
    held.release.notify_waiters();
}

/// Deposed off the cluster, a controller acts no more: its pass neither
/// plans nor campaigns the term back from the controller that took it.
#[tokio::test(start_paused = true)]
async fn a_deposed_controller_never_acts_again_off_the_cluster() {
    let (store, held, mut c, epoch) = one_manager_controller(None, "t").await;
    c.take(epoch);
    let newer = store.campaign("usurper").await.unwrap();
    let report = c.pass().await.unwrap();
    assert!(report.deposed(), "{report:?}");
    assert!(report.plan.is_none(), "planned after a newer term was seen");

    let seen = held.observed.load(Ordering::SeqCst);
    for _ in 0..3 {
        let report = c.pass().await.unwrap();
        assert!(report.deposed() && report.plan.is_none(), "{report:?}");
    }
    assert_eq!(
        store.leader().await.unwrap(),
        Some((newer, "usurper".to_string())),
        "the deposed controller campaigned again"
    );
    assert!(store.journal().await.unwrap().is_empty(), "it acted");
    assert!(
        held.observed.load(Ordering::SeqCst) > seen,
        "it stopped looking"
    );
}

/// A write of its refused while its engine hands over deposes the
/// controller, and the hand-over's end leaves it deposed: no pass acts.
#[tokio::test(start_paused = true)]
async fn a_hand_over_deposed_meanwhile_ends_deposed() {
    let (store, held, mut c, epoch) = one_manager_controller(None, "t").await;
    let lead = c.take(epoch);
    let stored = observe::stored(&c.ctx).await.unwrap().unwrap();
    let hand_over = Action::DemoteSelfAndLeave {
        op: "leader-op".into(),
        node: "n1".into(),
    };
    c.spawn(&stored, None, &hand_over, &lead);
    store.campaign("usurper").await.unwrap();
    c.queue_event(None, None, EventAction::Step, "a step's end", "ok".into());
    c.flush_events().await;
    assert_eq!(
        c.tenancy.term.held(),
        None,
        "the fenced write kept the term"
    );
    held.release.notify_waiters();
    let done = c.acting.done_rx.recv().await.unwrap();
    c.finished(done).await;
    let report = c.pass().await.unwrap();
    assert!(report.deposed(), "{report:?}");
    assert!(report.plan.is_none());
}

/// A new term plans from a look taken after winning it: what the controller
/// it deposed journaled after this pass's first look is in its plan.
#[tokio::test(start_paused = true)]
async fn a_new_term_plans_from_a_look_taken_after_winning_it() {
    let (store, held, mut c, _) = one_manager_controller(None, "b").await;
    let theirs = store.campaign("a").await.unwrap();
    let op = observe::tests::op("m");
    *held.plant.lock().unwrap() = Some((store.clone(), theirs, op.clone()));

    let report = c.pass().await.unwrap();
    assert!(held.plant.lock().unwrap().is_none(), "nothing journaled");
    assert_eq!(report.standing, Standing::Leading);
    let plan = report.plan.expect("a plan");
    let in_flight: Vec<_> = plan.groups.iter().map(|g| g.in_flight).collect();
    assert_eq!(
        in_flight,
        [1],
        "planned without the operation journaled before its term: {:?}",
        plan.explanation
    );
}

/// Issue 36: a group waiting behind a blocked one is recorded as such (a
/// `blocked` event, outcome `waiting behind GROUP`, its reason quoting the
/// blocked group's), once while nothing changes; the blocked group's own
/// event says `blocked`.
#[tokio::test(start_paused = true)]
async fn a_group_waiting_behind_a_blocked_one_is_an_event() {
    let (store, _held, mut c, epoch) = one_manager_controller(None, "t").await;
    let _lead = c.take(epoch);
    let group =
        |name: &str, phase, reason: &str, behind: Option<&str>| drover_core::plan::GroupStatus {
            name: name.into(),
            role: Role::Worker,
            phase,
            reason: Some(reason.into()),
            desired_hash: "h".into(),
            desired: 1,
            members: 1,
            current: 0,
            healthy: 1,
            in_flight: 0,
            window: None,
            behind: behind.map(Into::into),
        };
    use drover_core::plan::Phase;
    let why =
        "waiting for group managers to finish its rollout (…); managers is blocked: a hook failed";
    let plan = Plan {
        actions: Vec::new(),
        groups: vec![
            group("managers", Phase::Blocked, "a hook failed", None),
            group("workers", Phase::Rolling, why, Some("managers")),
        ],
        swarm: Default::default(),
        explanation: Vec::new(),
        memory: Memory::default(),
        wake_at: None,
        garbage: Vec::new(),
        causes: Default::default(),
        parked: Default::default(),
        boot_asks: Vec::new(),
    };
    c.blocked_events(&plan).await;
    c.blocked_events(&plan).await;
    let events = store.events(0).await.unwrap();
    let of = |g: &str| -> Vec<(String, String)> {
        events
            .iter()
            .filter(|e| e.group.as_deref() == Some(g) && e.action == EventAction::Blocked)
            .map(|e| (e.outcome.clone(), e.reason.clone()))
            .collect()
    };
    assert_eq!(
        of("workers"),
        [("waiting behind managers".into(), why.into())]
    );
    assert_eq!(of("managers"), [("blocked".into(), "a hook failed".into())]);
}

/// Events belong to the term they were queued under (review F5): a step's
/// end heard before the store refused the term is dropped with it, never
/// written later under the next term as that term's.
#[tokio::test(start_paused = true)]
async fn events_queued_under_an_ended_term_are_never_written_under_the_next() {
    let (store, _held, mut c, epoch) = one_manager_controller(None, "t").await;
    c.take(epoch);
    c.queue_event(
        None,
        None,
        EventAction::Step,
        "under the first term",
        "ok".into(),
    );
    let newer = store.campaign("usurper").await.unwrap();
    c.depose("a newer controller term exists");
    assert_ne!(newer, epoch);
    let mine = store.campaign("t").await.unwrap();
    c.take(mine);
    c.flush_events().await;
    let events = store.events(0).await.unwrap();
    assert!(
        !events.iter().any(|e| e.reason == "under the first term"),
        "{events:#?}"
    );
}

/// A step's end heard while the term still holds is written before the
/// controller stands down for not leading (review F3), not lost with the term.
#[tokio::test(start_paused = true)]
async fn a_step_end_heard_before_standing_down_is_written() {
    let (store, _held, mut c, epoch) = one_manager_controller(Some("l1"), "t").await;
    c.take(epoch);
    c.queue_event(
        None,
        None,
        EventAction::Step,
        "heard while leading",
        "ok".into(),
    );
    // Its engine no longer leads (it sees no swarm): the pass stands down.
    let report = c.pass().await.unwrap();
    assert_eq!(report.standing, Standing::Following, "{report:?}");
    let events = store.events(0).await.unwrap();
    assert!(
        events.iter().any(|e| e.reason == "heard while leading"),
        "{events:#?}"
    );
}
