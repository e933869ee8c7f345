//! The recovery procedure over fakes: a provider whose machines' engines
//! answer as the test sets, an engine that records what it was asked to
//! do, and an in-memory store for the audit event.

use super::*;
use drover_core::model::{Availability, Instance, Node, NodeState, RaftMember};
use drover_core::recover::{Peer, Raft, Started};
use drover_spi::{EngineReport, LeaseExpired, ProvisionRequest, Unfenced};
use std::sync::Mutex;

const NO_LEADER: &str = "The swarm does not have a leader";

/// A provider listing `reports`, or failing.
struct Machines(Result<Vec<EngineReport>, String>);

#[async_trait]
impl drover_spi::InstanceProvider for Machines {
    async fn provision(&self, _: ProvisionRequest, _: &dyn Fence) -> Result<String, ProviderError> {
        unreachable!("recover provisions nothing")
    }
    async fn destroy_fenced(&self, _: &str, _: &dyn Fence) -> Result<(), ProviderError> {
        unreachable!("recover destroys nothing")
    }
    async fn describe(&self, _: &BTreeMap<String, String>) -> Result<Vec<Instance>, ProviderError> {
        unreachable!("recover asks the engines")
    }
    async fn label(
        &self,
        _: &str,
        _: &BTreeMap<String, String>,
        _: &dyn Fence,
    ) -> Result<(), ProviderError> {
        unreachable!("recover labels nothing")
    }
    async fn ask_engines(
        &self,
        _: &BTreeMap<String, String>,
    ) -> Result<Vec<EngineReport>, ProviderError> {
        self.0.clone().map_err(ProviderError::Transient)
    }
    fn engine_endpoint(&self, instance: &str) -> Option<String> {
        Some(format!("fake://{instance}"))
    }
}

/// The survivor's engine: no leader until forced (or from the start,
/// `leads`), then the nodes `after`; every call it was asked is kept.
struct FakeEngine {
    calls: Mutex<Vec<String>>,
    leads: Mutex<bool>,
    never_leads: bool,
    /// Force-new-cluster forms the cluster and still answers an error (its
    /// settings update "out of sequence", as seen on Incus machines).
    errs: Mutex<bool>,
    after: Vec<Node>,
    /// The record's file, to see it was written before force-new-cluster.
    record: std::path::PathBuf,
}

#[async_trait]
impl SurvivorEngine for FakeEngine {
    fn endpoint(&self) -> &str {
        "fake://m3"
    }
    async fn observe(&self) -> SwarmView {
        if *self.leads.lock().unwrap() && !self.never_leads {
            SwarmView::Ok(self.after.clone())
        } else {
            SwarmView::NoQuorum(NO_LEADER.into())
        }
    }
    async fn force_new_cluster(
        &self,
        addr: &str,
        fence: &dyn Fence,
    ) -> Result<(), EngineCallError> {
        fence.check()?;
        assert!(self.record.exists(), "the record is written first");
        self.calls.lock().unwrap().push(format!("force {addr}"));
        *self.leads.lock().unwrap() = true;
        if *self.errs.lock().unwrap() {
            return Err("update out of sequence".into());
        }
        Ok(())
    }
    async fn remove_node(&self, node: &str, fence: &dyn Fence) -> Result<(), EngineCallError> {
        fence.check()?;
        self.calls.lock().unwrap().push(format!("rm {node}"));
        Ok(())
    }
}

struct FakeReach {
    engine: Arc<FakeEngine>,
    store: Arc<dyn Store>,
}

#[async_trait]
impl Reach for FakeReach {
    async fn connect(&self, endpoint: &str) -> Result<Arc<dyn SurvivorEngine>, EngineCallError> {
        assert_eq!(
            endpoint, "fake://m3",
            "the survivor's engine, by its provider"
        );
        Ok(self.engine.clone())
    }
    async fn audit_store(&self, survivor: &str) -> Result<Arc<dyn Store>, StoreError> {
        assert_eq!(survivor, "fake://m3");
        Ok(self.store.clone())
    }
}

/// A fence that refuses: a deposed caller.
struct Deposed;

impl Fence for Deposed {
    fn check(&self) -> Result<(), LeaseExpired> {
        Err(LeaseExpired("deposed".into()))
    }
}

fn peer(n: u8) -> Peer {
    Peer {
        node_id: format!("node{n}"),
        addr: format!("127.0.9.{n}:2377"),
    }
}

fn instance(id: &str, group: &str) -> Instance {
    let tags: BTreeMap<String, String> = [(tags::GROUP.to_string(), group.to_string())].into();
    Instance {
        id: id.into(),
        tags: tags.into(),
        running: true,
        created_ms: 0,
    }
}

fn report(n: u8, answer: EngineAnswer) -> EngineReport {
    EngineReport {
        instance: instance(&format!("m{n}"), "managers"),
        address: format!("127.0.9.{n}"),
        raft: matches!(answer, EngineAnswer::NoLeader(_)).then(|| Raft {
            node_id: format!("node{n}"),
            peers: vec![peer(1), peer(2), peer(3)],
        }),
        answer,
    }
}

fn node(n: u8, state: NodeState, leader: bool) -> Node {
    Node {
        id: format!("node{n}"),
        link: None,
        cluster: None,
        group: None,
        state,
        availability: Availability::Active,
        manager_role: true,
        raft: leader.then(|| RaftMember {
            leader: true,
            reachable: true,
            addr: format!("127.0.9.{n}:2377"),
        }),
        running_tasks: 0,
        locked: false,
        left: false,
        engine_no_manager: false,
        engine_version: None,
    }
}

struct World {
    dir: tempfile::TempDir,
    engine: Arc<FakeEngine>,
    store: Arc<dyn Store>,
    providers: Providers,
}

impl World {
    fn new(reports: Result<Vec<EngineReport>, String>, leads: bool, never_leads: bool) -> World {
        let dir = tempfile::tempdir().expect("a directory");
        let engine = Arc::new(FakeEngine {
            calls: Mutex::new(Vec::new()),
            leads: Mutex::new(leads),
            never_leads,
            errs: Mutex::new(false),
            after: vec![
                node(1, NodeState::Down, false),
                node(2, NodeState::Unknown, false),
                node(3, NodeState::Ready, true),
            ],
            record: dir.path().join("recovery.json"),
        });
        let mut providers = Providers::new();
        providers.insert("local".into(), Arc::new(Machines(reports)) as _);
        World {
            dir,
            engine,
            store: Arc::new(drover_store::MemStore::default()),
            providers,
        }
    }

    fn record(&self) -> Record {
        Record::in_dir(self.dir.path())
    }

    async fn run(&self, request: &Request, fence: &dyn Fence) -> Result<Outcome, RecoverFailure> {
        let reach = FakeReach {
            engine: self.engine.clone(),
            store: self.store.clone(),
        };
        recover(&self.providers, &reach, &self.record(), request, fence).await
    }

    fn calls(&self) -> Vec<String> {
        self.engine.calls.lock().unwrap().clone()
    }

    async fn events(&self) -> Vec<drover_spi::Event> {
        self.store.events(0).await.expect("events")
    }
}

fn survivor_alone() -> Vec<EngineReport> {
    vec![report(3, EngineAnswer::NoLeader(NO_LEADER.into()))]
}

fn named_gone() -> Request {
    Request {
        gone: vec!["127.0.9.1".into(), "node2".into()],
        ..Request::default()
    }
}

/// Two members destroyed and named gone: the record is written, then
/// force-new-cluster on the survivor's address, the gone members' node
/// entries removed, the audit event written, and the record cleared.
#[tokio::test]
async fn a_decided_recovery_forces_removes_records_and_clears() {
    let w = World::new(Ok(survivor_alone()), false, false);
    let out = w.run(&named_gone(), &Unfenced).await.expect("recovered");
    assert!(matches!(out.decision, Decision::Proceed(_)));
    assert_eq!(w.calls(), ["force 127.0.9.3:2377", "rm node1", "rm node2"]);
    let done = out.done.expect("done");
    assert!(done.forced.is_some() && done.not_recorded.is_none());
    assert_eq!(done.record_left, None);
    assert!(!w.record().path().exists(), "the record is cleared");
    let events = w.events().await;
    assert_eq!(events.len(), 1, "{events:?}");
    assert_eq!(
        (events[0].action.as_str(), events[0].controller.as_str()),
        ("recover", IDENTITY)
    );
    assert_eq!(events[0].group.as_deref(), Some("managers"));
    assert!(events[0].op.as_deref().unwrap().starts_with("recover-"));
}

/// Design rule 11: paused members (their provider says so) refuse the
/// recovery, and nothing is touched: no record, no engine call, no event.
#[tokio::test]
async fn a_refusal_changes_nothing() {
    let paused = |n| {
        report(
            n,
            drover_core::verdict::machine::engine_answer(
                drover_core::verdict::machine::Power::Paused,
                None,
            ),
        )
    };
    let mut reports = survivor_alone();
    reports.extend([paused(1), paused(2)]);
    let w = World::new(Ok(reports), false, false);
    let out = w.run(&Request::default(), &Unfenced).await.expect("judged");
    assert!(
        matches!(out.decision, Decision::Refuse { .. }),
        "{:?}",
        out.decision
    );
    assert!(out.done.is_none());
    assert!(w.calls().is_empty() && !w.record().path().exists());
    assert!(w.events().await.is_empty());
    // Naming a paused machine gone is bad input, before anything.
    let named = Request {
        gone: vec!["m1".into()],
        ..Request::default()
    };
    assert!(matches!(
        w.run(&named, &Unfenced).await,
        Err(RecoverFailure::BadInput(BadInput::GoneStillRuns { .. }))
    ));
}

#[tokio::test]
async fn a_dry_run_decides_and_does_nothing() {
    let w = World::new(Ok(survivor_alone()), false, false);
    let request = Request {
        dry_run: true,
        ..named_gone()
    };
    let out = w.run(&request, &Unfenced).await.expect("judged");
    assert!(matches!(out.decision, Decision::Proceed(_)) && out.done.is_none());
    assert!(w.calls().is_empty() && !w.record().path().exists());
}

/// Every write is fenced: a refusing fence sends no force-new-cluster.
#[tokio::test]
async fn a_refusing_fence_sends_no_force_new_cluster() {
    let w = World::new(Ok(survivor_alone()), false, false);
    let err = w.run(&named_gone(), &Deposed).await.unwrap_err();
    assert!(
        matches!(
            err,
            RecoverFailure::Act(RecoverError::ForceNewCluster { .. })
        ),
        "{err:?}"
    );
    assert!(w.calls().is_empty(), "{:?}", w.calls());
    assert!(w.events().await.is_empty());
}

/// A run cut short after force-new-cluster left its record: the rerun
/// finds a leader and finishes that recovery without forcing again, and
/// writes the audit event once.
#[tokio::test]
async fn a_rerun_finishes_the_recorded_recovery_without_forcing_again() {
    let first = World::new(Ok(survivor_alone()), false, false);
    let Decision::Proceed(r) = first
        .run(
            &Request {
                dry_run: true,
                ..named_gone()
            },
            &Unfenced,
        )
        .await
        .expect("judged")
        .decision
    else {
        panic!("not proceed")
    };
    let w = World::new(Ok(vec![report(3, EngineAnswer::Led)]), true, false);
    w.record()
        .write(&Started::new(r, crate::status::wall_ms()))
        .expect("recorded");
    let out = w
        .run(&Request::default(), &Unfenced)
        .await
        .expect("finished");
    assert!(
        matches!(out.decision, Decision::Finish(_)),
        "{:?}",
        out.decision
    );
    assert_eq!(w.calls(), ["rm node1", "rm node2"]);
    assert!(!w.record().path().exists());
    assert_eq!(w.events().await.len(), 1);
}

#[tokio::test]
async fn a_provider_that_cannot_list_is_an_error_never_no_machine() {
    let w = World::new(Err("the API is down".into()), false, false);
    let err = w.run(&named_gone(), &Unfenced).await.unwrap_err();
    assert!(matches!(err, RecoverFailure::List { .. }), "{err:?}");
    assert!(err.to_string().contains("nothing was changed"), "{err}");
}

/// The new cluster never leads: the run says so after its bound, the
/// record kept for the rerun.
#[tokio::test(start_paused = true)]
async fn a_new_cluster_without_a_leader_is_reported_and_the_record_kept() {
    let w = World::new(Ok(survivor_alone()), false, true);
    let err = w.run(&named_gone(), &Unfenced).await.unwrap_err();
    assert!(
        matches!(err, RecoverFailure::Act(RecoverError::NoLeader { .. })),
        "{err:?}"
    );
    assert!(w.record().path().exists(), "kept for the rerun");
}

/// swarmkit can form the new cluster and still answer an error: the
/// survivor leads, so the recovery goes on in the same run (what a rerun
/// would finish from the record) and keeps the engine's answer.
#[tokio::test(start_paused = true)]
async fn a_force_that_answers_an_error_but_formed_the_cluster_goes_on() {
    let w = World::new(Ok(survivor_alone()), false, false);
    *w.engine.errs.lock().unwrap() = true;
    let out = w.run(&named_gone(), &Unfenced).await.expect("recovered");
    assert_eq!(w.calls(), ["force 127.0.9.3:2377", "rm node1", "rm node2"]);
    let done = out.done.expect("done");
    let said = done.forced.and_then(|f| f.engine_said);
    assert_eq!(said.as_deref(), Some("update out of sequence"));
    assert!(!w.record().path().exists(), "the record is cleared");
    assert_eq!(w.events().await.len(), 1);
}

/// The same answer from a survivor that does not lead stands: nothing
/// more is done and the record is kept for the rerun.
#[tokio::test(start_paused = true)]
async fn a_force_that_answers_an_error_and_does_not_lead_fails() {
    let w = World::new(Ok(survivor_alone()), false, true);
    *w.engine.errs.lock().unwrap() = true;
    let err = w.run(&named_gone(), &Unfenced).await.unwrap_err();
    assert!(
        matches!(
            err,
            RecoverFailure::Act(RecoverError::ForceNewCluster { .. })
        ),
        "{err:?}"
    );
    assert_eq!(w.calls(), ["force 127.0.9.3:2377"]);
    assert!(w.record().path().exists(), "kept for the rerun");
    assert!(w.events().await.is_empty());
}

mod diagnosis {
    use super::*;
    use crate::procedure::recover::diagnose::{Published, diagnose};

    fn providers(reports: Result<Vec<EngineReport>, String>) -> Providers {
        let mut p = Providers::new();
        p.insert("incus".into(), Arc::new(Machines(reports)) as _);
        p
    }

    /// Two members destroyed: the survivor's engine lists a raft of 3 and
    /// no leader; status says lost, with the evidence it read.
    #[tokio::test]
    async fn a_survivor_alone_with_a_raft_of_three_is_a_lost_quorum() {
        let published = Published {
            last_status_ms: None,
            store_error: Some("the store cannot be read".into()),
        };
        let d = diagnose(None, &providers(Ok(survivor_alone())), true, published, 5).await;
        let lost = d.lost.expect("lost");
        assert_eq!(
            (
                lost.quorum,
                lost.evidence,
                lost.reachable,
                lost.managers,
                lost.unlisted
            ),
            ("lost", "engines", 1, 3, 2)
        );
        assert_eq!(lost.engine_says, NO_LEADER);
        assert_eq!(
            lost.store_error.as_deref(),
            Some("the store cannot be read")
        );
    }

    /// Paused members (their provider says so) may still vote: no verdict;
    /// and a status not in doubt asks nothing.
    #[tokio::test]
    async fn paused_members_or_a_fresh_status_are_no_lost_quorum() {
        let paused = |n| {
            report(
                n,
                drover_core::verdict::machine::engine_answer(
                    drover_core::verdict::machine::Power::Paused,
                    None,
                ),
            )
        };
        let mut reports = survivor_alone();
        reports.extend([paused(1), paused(2)]);
        let d = diagnose(None, &providers(Ok(reports)), true, Published::default(), 5).await;
        assert!(d.lost.is_none());
        let stopped = |n| {
            report(
                n,
                drover_core::verdict::machine::engine_answer(
                    drover_core::verdict::machine::Power::Stopped,
                    None,
                ),
            )
        };
        let mut reports = survivor_alone();
        reports.extend([stopped(1), stopped(2)]);
        let asked = providers(Ok(reports.clone()));
        let fresh = diagnose(None, &asked, false, Published::default(), 5).await;
        assert!(fresh.lost.is_none(), "not in doubt: not asked");
        let d = diagnose(None, &providers(Ok(reports)), true, Published::default(), 5).await;
        let lost = d.lost.expect("stopped members do not vote");
        assert_eq!(lost.unreachable.len(), 2);
        assert_eq!(lost.unreachable[0].why, "its machine is stopped");
    }
}
