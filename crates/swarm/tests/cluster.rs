//! `SwarmCluster` over real engines from the local provider (127.0.43.x).
//! 3 managers + 1 worker; demote/destroy/remove a follower; the leader's
//! demote → leave protocol, and the new leader hearing from the old one's
//! engine that it left; a join token rotation (127.0.171.240+).

use drover_core::model::{Node, SwarmView, tags};
use drover_core::spec::Role;
use drover_core::template::default_boot_script;
use drover_engine::{Engine, LocalState, PeerEndpoints};
use drover_local::testkit::{self, StateGuard};
use drover_spi::{Cluster, InstanceProvider, Unfenced};
use drover_swarm::SwarmCluster;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Stand-in for `drover engine join` in boot scripts (see testkit).
#[tokio::test]
async fn drover_shim() {
    testkit::run_shim_from_env().await;
}

fn nodes(v: SwarmView) -> Option<Vec<Node>> {
    match v {
        SwarmView::Ok(n) => Some(n),
        _ => None,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_managers_one_worker_follower_then_leader_leave() {
    let state = testkit::short_tempdir("ds").unwrap();
    let _guard = StateGuard {
        state_dir: state.clone(),
    };
    let p = testkit::shimmed_provider(&state, "127.0.43.10-127.0.43.30");
    let peers: Arc<dyn PeerEndpoints> = p.clone();

    // Before any swarm: Absent, and no join material.
    let t0 = Instant::now();
    let m1 = testkit::first_manager(&p, "c43").await;
    eprintln!("first manager (start + init) {:?}", t0.elapsed());
    let c1 = SwarmCluster::new(p.endpoint(&m1).unwrap(), Some(peers.clone()));
    let mut ids = vec![m1.clone()];
    for _ in 0..2 {
        let jm = c1
            .join_material(Role::Manager)
            .await
            .unwrap()
            .expect("swarm exists");
        assert_eq!(jm.addr, "127.0.43.10:2377");
        assert_eq!(format!("{:?}", jm.token), "[redacted]");
        let t0 = Instant::now();
        let id = p
            .provision(
                testkit::request(
                    "c43",
                    "m",
                    Role::Manager,
                    default_boot_script(drover_core::spec::LOCAL_PROVIDER, Role::Manager),
                    &jm.addr,
                    false,
                    vec![("DROVER_JOIN_TOKEN".into(), jm.token.clone())],
                ),
                &Unfenced,
            )
            .await
            .expect("manager join");
        eprintln!("manager (start + join) {:?}", t0.elapsed());
        ids.push(id);
    }
    let w = testkit::joined_member(&p, &c1, "c43", "w", Role::Worker).await;

    // Observe: 3 raft members, 1 leader, every node matched by link.
    let described = p
        .describe(&[(tags::CLUSTER.to_string(), "c43".to_string())].into())
        .await
        .unwrap();
    assert_eq!(described.len(), 4);
    let link_of: BTreeMap<String, String> = described
        .iter()
        .map(|i| (i.link().unwrap().to_string(), i.id.clone()))
        .collect();
    let ns = testkit::wait_for(Duration::from_secs(20), || async {
        let ns = nodes(c1.observe().await)?;
        (ns.len() == 4 && ns.iter().filter(|n| n.raft.is_some()).count() == 3).then_some(ns)
    })
    .await
    .expect("4 nodes, 3 in raft");
    assert_eq!(
        ns.iter()
            .filter(|n| n.raft.as_ref().is_some_and(|r| r.leader))
            .count(),
        1
    );
    let inst_of_node: BTreeMap<String, String> = ns
        .iter()
        .map(|n| {
            (
                n.id.clone(),
                link_of[n.link.as_deref().expect("link label")].clone(),
            )
        })
        .collect();
    let node_of_inst: BTreeMap<String, String> = inst_of_node
        .iter()
        .map(|(n, i)| (i.clone(), n.clone()))
        .collect();
    assert!(ns.iter().all(|n| n.cluster.as_deref() == Some("c43")));
    let leader = ns
        .iter()
        .find(|n| n.raft.as_ref().is_some_and(|r| r.leader))
        .unwrap();
    assert_eq!(inst_of_node[&leader.id], m1);
    assert!(
        !ns.iter()
            .find(|n| n.id == node_of_inst[&w])
            .unwrap()
            .manager_role
    );

    // A follower: demote, wait out of raft, destroy, remove its node.
    let follower_inst = ids[1].clone();
    let follower = node_of_inst[&follower_inst].clone();
    let t0 = Instant::now();
    c1.demote(&follower, &Unfenced).await.unwrap();
    testkit::wait_for(Duration::from_secs(20), || async {
        let ns = nodes(c1.observe().await)?;
        ns.iter()
            .find(|n| n.id == follower && n.raft.is_none() && !n.manager_role)
            .map(|_| ())
    })
    .await
    .expect("follower out of raft");
    eprintln!("follower out of raft {:?} after demote", t0.elapsed());
    let t0 = Instant::now();
    p.destroy(&follower_inst).await.unwrap();
    eprintln!("destroy of a manager instance {:?}", t0.elapsed());
    c1.remove_node(&follower, true, &Unfenced).await.unwrap();
    let ns = nodes(c1.observe().await).unwrap();
    assert!(ns.iter().all(|n| n.id != follower), "node still listed");
    assert_eq!(ns.iter().filter(|n| n.raft.is_some()).count(), 2);
    // Removing it again is success.
    c1.remove_node(&follower, true, &Unfenced).await.unwrap();

    // The leader leaves: demote self, wait out of raft from a peer, leave.
    let old_leader = node_of_inst[&m1].clone();
    let t0 = Instant::now();
    c1.demote_self_and_leave(&old_leader, &Unfenced, &|| {})
        .await
        .expect("leader demote+leave");
    eprintln!("leader demote_self_and_leave {:?}", t0.elapsed());
    let old = Engine::connect(&p.endpoint(&m1).unwrap()).await.unwrap();
    assert_eq!(old.info().await.unwrap().state, LocalState::Inactive);
    assert_eq!(c1.observe().await, SwarmView::Absent);
    assert!(c1.join_material(Role::Worker).await.unwrap().is_none());

    // As the remaining manager's own controller sees it (it asks other
    // engines only while its node leads).
    let c3 = SwarmCluster::new(p.endpoint(&ids[2]).unwrap(), Some(peers.clone()))
        .acting_only_as_leader();
    let ns = testkit::wait_for(Duration::from_secs(20), || async {
        let ns = nodes(c3.observe().await)?;
        let l = ns
            .iter()
            .find(|n| n.raft.as_ref().is_some_and(|r| r.leader))?;
        (l.id == node_of_inst[&ids[2]]).then_some(ns)
    })
    .await
    .expect("the remaining manager leads");
    let gone = ns
        .iter()
        .find(|n| n.id == old_leader)
        .expect("old node still listed");
    assert!(gone.raft.is_none() && !gone.manager_role);
    // First seen out of the raft: its engine is left alone until it
    // settles (it may still be shutting its manager down), then asked.
    assert!(!gone.left, "asked before it settled: {gone:?}");
    let gone = testkit::wait_for(Duration::from_secs(10), || async {
        let ns = nodes(c3.observe().await)?;
        ns.into_iter().find(|n| n.id == old_leader && n.left)
    })
    .await;
    assert!(gone.is_some(), "its own engine says it left");
    // The new leader can hand out join material.
    let jm = c3.join_material(Role::Manager).await.unwrap().unwrap();
    assert_eq!(jm.addr, "127.0.43.12:2377");

    // The adapter keeps what its last view showed (a manager, its node id)
    // to ask only the node list next time; the engine leaving by another
    // hand must still read as gone at once, not as the kept view.
    assert!(matches!(c3.observe().await, SwarmView::Ok(_)));
    c3.engine().await.unwrap().leave(true).await.unwrap();
    assert_eq!(c3.observe().await, SwarmView::Absent);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unreachable_engine_is_unavailable() {
    let c = SwarmCluster::new("unix:///tmp/drover-no-such.sock", None);
    assert!(matches!(c.observe().await, SwarmView::Unavailable(_)));
    assert!(
        c.join_material(Role::Worker)
            .await
            .unwrap_err()
            .is_transient()
    );
}

/// A refusing fence: the lease ran out.
struct Expired;

impl drover_spi::Fence for Expired {
    fn check(&self) -> Result<(), drover_spi::LeaseExpired> {
        Err(drover_spi::LeaseExpired("the test's lease ran out".into()))
    }
}

/// Issue 19: rotating a role's join token (a token left readable in EC2
/// user data made useless) changes that role's token only, and an expired
/// fence sends nothing (127.0.171.240+).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rotation_changes_that_roles_token_only_and_is_fenced() {
    let state = testkit::short_tempdir("dt").unwrap();
    let _guard = StateGuard {
        state_dir: state.clone(),
    };
    let p = testkit::shimmed_provider(&state, "127.0.171.240-127.0.171.250");
    let m1 = testkit::first_manager(&p, "c171").await;
    let endpoint = p.endpoint(&m1).unwrap();
    let c = SwarmCluster::new(endpoint.clone(), None);
    let engine = Engine::connect(&endpoint).await.unwrap();
    let before = engine.join_tokens().await.unwrap();
    c.rotate_join_token(Role::Worker, &Unfenced).await.unwrap();
    let after = engine.join_tokens().await.unwrap();
    assert_ne!(before.worker.expose(), after.worker.expose());
    assert_eq!(before.manager.expose(), after.manager.expose());
    let e = c
        .rotate_join_token(Role::Manager, &Expired)
        .await
        .unwrap_err();
    assert!(matches!(e, drover_spi::ClusterError::Fenced(_)), "{e}");
    let fenced = engine.join_tokens().await.unwrap();
    assert_eq!(
        fenced.manager.expose(),
        before.manager.expose(),
        "sent anyway"
    );
    c.rotate_join_token(Role::Manager, &Unfenced).await.unwrap();
    let last = engine.join_tokens().await.unwrap();
    assert_ne!(last.manager.expose(), before.manager.expose());
    assert_eq!(last.worker.expose(), after.worker.expose());
    assert!(c.rotate_join_token(Role::Plain, &Unfenced).await.is_err());
}
