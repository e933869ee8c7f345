//! The swarm store as commands open it ([`FollowingStore`]), on real
//! single-node swarms (127.0.176.2–4): when the engine in use goes, a
//! read is asked again through another engine holding the same cluster,
//! never through one holding another; when none answers, the error names
//! every engine tried.

mod support;

use drover_spi::{Provenance, Store, StoreError};
use drover_store::FollowingStore;
use std::sync::Arc;

/// A swarm store on `d` holding cluster `id`.
async fn holding(d: &support::Dockerd, id: &str) -> Box<dyn Store> {
    let s = drover_store::open(&format!("swarm:{}", d.endpoint))
        .await
        .unwrap();
    s.init_cluster(id).await.unwrap();
    s
}

#[tokio::test]
async fn a_read_goes_on_through_another_manager_of_the_same_cluster_only() {
    let a = support::Dockerd::start_swarm("127.0.176.2").await;
    let b = support::Dockerd::start_swarm("127.0.176.3").await;
    let c = support::Dockerd::start_swarm("127.0.176.4").await;
    // Two swarms holding the same cluster id stand for two managers of
    // one swarm: the store is found again by that id.
    holding(&a, "same").await;
    let on_b = holding(&b, "same").await;
    holding(&c, "other").await;
    let who = Provenance {
        who: "test".into(),
        at_ms: 1,
        message: "on b".into(),
    };
    on_b.commit(0, &support::spec(2), who, false).await.unwrap();
    let (ea, eb, ec) = (a.endpoint.clone(), b.endpoint.clone(), c.endpoint.clone());
    // The machines list the other cluster's engine first.
    let machines: Arc<dyn drover_engine::PeerEndpoints> = Arc::new(vec![ec.clone(), eb.clone()]);
    let store = FollowingStore::open(Some(&ea), Some(machines))
        .await
        .unwrap();
    assert_eq!(store.desired().await.unwrap(), None, "read through a");

    drop(a);
    let desired = store.desired().await.unwrap().expect("read through b");
    assert_eq!(desired.provenance.message, "on b");
    assert_eq!(store.endpoint().as_deref(), Some(eb.as_str()));

    drop(b);
    match store.desired().await {
        Err(StoreError::Unavailable(m)) => {
            assert!(m.contains(&ea) && m.contains(&eb), "{m}");
            assert!(m.contains(&format!("{ec} (another cluster: other)")), "{m}");
        }
        other => panic!("{:?}", other.map(|_| ())),
    }
}
