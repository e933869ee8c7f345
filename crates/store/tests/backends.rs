//! What only one backend can show: file mode and lock, etcd's txn guard,
//! lease and change watch (and the memory store's), the swarm's versioned
//! update and size limit.

mod support;

use bollard::query_parameters::UpdateSwarmOptionsBuilder;
use drover_core::spec::ClusterSpec;
use drover_spi::Controls;
use drover_spi::{Provenance, StatusJson, Store, StoreError};
use drover_store::{
    Access, EtcdOptions, EtcdStore, FileStore, Limits, MemStore, SwarmOptions, SwarmStore,
};
use etcd_client::{Compare, CompareOp, Txn, TxnOp};
use std::os::unix::fs::PermissionsExt;
use std::sync::Arc;
use std::time::{Duration, Instant};

fn prov() -> Provenance {
    Provenance {
        who: "op@h".into(),
        at_ms: 0,
        message: "m".into(),
    }
}

/// A valid spec carrying `label` as an instance property. Set on the
/// resolved spec: a cluster file of several MiB is refused by the parser
/// (`yaml::MAX_BYTES`), while the store's own size limit is under test here.
fn spec_with(label: &str) -> ClusterSpec {
    let text = "groups:\n  - name: web\n    role: worker\n    allocation:\n      size: 2\n    instance:\n      provider: local\n";
    let mut spec = drover_core::spec::parse_str(text).spec.expect("valid spec");
    spec.groups[0].instance.properties = serde_json::json!({ "blob": label });
    spec
}

#[tokio::test]
async fn file_store_is_0600_and_serves_one_controller() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("state.db");
    let s = FileStore::open(&path).unwrap();
    let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600);

    let second = FileStore::open(&path).unwrap_err();
    let msg = second.to_string();
    assert!(
        matches!(second, StoreError::Held(_))
            && msg.contains(&format!("is held by pid {} (`", std::process::id()))
            && msg.contains("a file store serves one controller"),
        "{msg}"
    );
    // The lock goes with the handle.
    s.init_cluster("c").await.unwrap();
    drop(s);
    let again = FileStore::open(&path).unwrap();
    assert_eq!(again.cluster_id().await.unwrap().as_deref(), Some("c"));
    drop(again);

    // An existing file with looser permissions is tightened.
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
    let _s = FileStore::open(&path).unwrap();
    let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600);
}

/// The CLI's writer ([`Access::Shared`]) lets readers open the file beside
/// it (`status`, `history` beside a controller), which see its commits,
/// while a second writer is refused at once naming the holder; the
/// holder's record goes with it.
#[tokio::test]
async fn a_shared_file_store_has_one_writer_and_readers_beside_it() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("state.db");
    let open = |access| FileStore::open_as(&path, access, Limits::default());
    let writer = open(Access::Shared).unwrap();
    writer.init_cluster("c").await.unwrap();
    let reader = open(Access::ReadOnly).unwrap();
    assert_eq!(reader.cluster_id().await.unwrap().as_deref(), Some("c"));

    for access in [Access::Shared, Access::Exclusive] {
        let refused = open(access).unwrap_err();
        let msg = refused.to_string();
        assert!(matches!(refused, StoreError::Held(_)), "{msg}");
        assert!(
            msg.contains(&format!("is held by pid {} (`", std::process::id())),
            "{msg}"
        );
    }

    // The reader follows the writer's commits, the per-pass ones (synced
    // in a shared file: redb refuses unsynced commits there) included.
    let rev = writer
        .commit(0, &spec_with("a"), prov(), false)
        .await
        .unwrap();
    let epoch = writer.campaign("m-1").await.unwrap();
    let doc = StatusJson::new(&serde_json::json!({"revision": rev})).unwrap();
    writer.publish_status(epoch, doc).await.unwrap();
    assert_eq!(reader.desired().await.unwrap().map(|r| r.rev), Some(rev));
    assert_eq!(reader.status().await.unwrap().unwrap()["revision"], rev);
    let write = reader.init_cluster("d").await.unwrap_err();
    assert!(write.to_string().contains("opened read-only"), "{write}");

    let record = dir.path().join("state.db.holder");
    assert!(record.exists());
    drop(writer);
    assert!(!record.exists(), "the holder record outlived its holder");
    let again = open(Access::Shared).unwrap();
    assert_eq!(again.desired().await.unwrap().map(|r| r.rev), Some(rev));
}

/// A file kept to one process ([`FileStore::open`]) admits no reader, and
/// says who holds it.
#[tokio::test]
async fn an_exclusive_file_store_refuses_readers_naming_its_holder() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("state.db");
    let _writer = FileStore::open(&path).unwrap();
    let refused = FileStore::open_as(&path, Access::ReadOnly, Limits::default()).unwrap_err();
    let msg = refused.to_string();
    assert!(matches!(refused, StoreError::Held(_)), "{msg}");
    assert!(
        msg.contains(&format!("pid {}", std::process::id())),
        "{msg}"
    );
}

#[tokio::test]
async fn etcd_refuses_a_stale_epoch_in_its_own_compare_and_expires_the_leader() {
    let etcd = support::Etcd::start().await;
    let opts = || EtcdOptions {
        prefix: "/drover/raw".into(),
        lease_ttl: Duration::from_secs(1),
        ..EtcdOptions::default()
    };
    let a = EtcdStore::connect(&etcd.url, opts()).await.unwrap();
    let b = EtcdStore::connect(&etcd.url, opts()).await.unwrap();
    let old = a.campaign("ctl-a").await.unwrap();
    let new = b.campaign("ctl-b").await.unwrap();

    // A raw client that skips every client-side check and sends the same
    // txn the store sends, with its stale epoch: etcd refuses it.
    let mut kv = a.client().kv_client();
    let journal_key = a.key("journal/raw");
    let raw = |epoch: u64| {
        Txn::new()
            .when(vec![Compare::value(
                a.key("epoch"),
                CompareOp::Equal,
                epoch.to_string(),
            )])
            .and_then(vec![TxnOp::put(journal_key.as_str(), "{}", None)])
    };
    assert!(!kv.txn(raw(old)).await.unwrap().succeeded());
    assert!(
        kv.get(journal_key.as_str(), None)
            .await
            .unwrap()
            .kvs()
            .is_empty()
    );
    assert!(kv.txn(raw(new)).await.unwrap().succeeded());

    // The leader record lives under the lease: alive while kept alive...
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(a.leader().await.unwrap(), Some((new, "ctl-b".into())));
    // ...and gone within about one TTL after its controller goes away.
    drop(b);
    let t0 = Instant::now();
    while a.leader().await.unwrap().is_some() {
        assert!(
            t0.elapsed() < Duration::from_secs(10),
            "leader never expired"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    eprintln!(
        "etcd leader record expired {:?} after drop (TTL 1 s)",
        t0.elapsed()
    );
    // The epoch itself is never leased: the next term is still higher.
    assert_eq!(a.campaign("ctl-a").await.unwrap(), new + 1);
}

/// External controllers take turns by the lease: of five standbys asking
/// at once exactly one wins, and the term is free again only once its
/// holder stops keeping the lease alive (its process gone).
#[tokio::test]
async fn etcd_standbys_acquire_one_at_a_time_and_only_once_the_lease_lapses() {
    let etcd = support::Etcd::start().await;
    let opts = || EtcdOptions {
        prefix: "/drover/turns".into(),
        lease_ttl: Duration::from_secs(1),
        ..EtcdOptions::default()
    };
    let mut standbys = Vec::new();
    for _ in 0..5 {
        standbys.push(EtcdStore::connect(&etcd.url, opts()).await.unwrap());
    }
    let asks = standbys
        .iter()
        .enumerate()
        .map(|(i, s)| async move { s.acquire(&format!("ext-{i}")).await.unwrap() });
    let won: Vec<_> = futures_util::future::join_all(asks).await;
    let winners: Vec<usize> = (0..5).filter(|i| won[*i].is_some()).collect();
    assert_eq!(winners.len(), 1, "exactly one standby wins: {won:?}");
    let holder = winners[0];
    let epoch = won[holder].unwrap();

    // Kept alive past several TTLs: nobody else acquires.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let other = (holder + 1) % 5;
    assert_eq!(standbys[other].acquire("ext-late").await.unwrap(), None);

    // Its process goes: the next acquisition wins within about a TTL.
    drop(standbys.remove(holder));
    let t0 = Instant::now();
    let next = loop {
        if let Some(e) = standbys[0].acquire("ext-next").await.unwrap() {
            break e;
        }
        assert!(
            t0.elapsed() < Duration::from_secs(10),
            "the lease never lapsed"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert_eq!(next, epoch + 1);
    assert!(matches!(
        standbys[1].check_epoch(epoch).await,
        Err(StoreError::Fenced { .. })
    ));
}

#[tokio::test]
async fn swarm_versioned_update_fences_and_size_is_bounded() {
    let d = support::Dockerd::start_swarm("127.0.9.2").await;
    let ep = Some(d.endpoint.as_str());
    let a = SwarmStore::connect(ep).await.unwrap();
    let b = SwarmStore::connect(ep).await.unwrap();
    let docker = a.docker().clone();

    // An operator's own label survives drover's writes.
    let sw = docker.inspect_swarm().await.unwrap();
    let mut spec = sw.spec.unwrap();
    spec.labels
        .get_or_insert_default()
        .insert("team".into(), "infra".into());
    let v = sw.version.unwrap().index.unwrap() as i64;
    docker
        .update_swarm(
            spec,
            UpdateSwarmOptionsBuilder::default().version(v).build(),
        )
        .await
        .unwrap();

    let old = a.campaign("ctl-a").await.unwrap();
    // A deposed controller that read the swarm (and its epoch) while it
    // still led, then writes raw, skipping any check: the version it read is
    // stale once the new term is written, and the swarm refuses.
    let before = docker.inspect_swarm().await.unwrap();
    let stale_version = before.version.unwrap().index.unwrap() as i64;
    let new = b.campaign("ctl-b").await.unwrap();
    assert!(new > old);
    let mut raw = before.spec.unwrap();
    raw.labels
        .get_or_insert_default()
        .insert(a.label("journal"), "gz:forged".into());
    let err = docker
        .update_swarm(
            raw,
            UpdateSwarmOptionsBuilder::default()
                .version(stale_version)
                .build(),
        )
        .await
        .unwrap_err();
    assert!(err.to_string().contains("update out of sequence"), "{err}");
    assert!(a.journal().await.unwrap().is_empty());

    // Sizes: a typical state compresses well.
    b.commit(0, &spec_with("x"), prov(), false).await.unwrap();
    let status = serde_json::json!({"groups": {"web": {"n": 2}}});
    b.publish_status(new, StatusJson::new(&status).unwrap())
        .await
        .unwrap();
    let labels = docker
        .inspect_swarm()
        .await
        .unwrap()
        .spec
        .unwrap()
        .labels
        .unwrap();
    assert_eq!(labels.get("team").map(String::as_str), Some("infra"));
    let ours: usize = labels
        .iter()
        .filter(|(k, _)| k.starts_with("drover.store."))
        .map(|(k, v)| k.len() + v.len())
        .sum();
    let rev_json = serde_json::to_vec(&b.history().await.unwrap())
        .unwrap()
        .len();
    eprintln!(
        "swarm labels after one commit + status: {ours} bytes (revisions JSON {rev_json} bytes)"
    );

    // Incompressible and over the budget: refused whole, nothing changes.
    let noise: String = (0..400_000u64)
        .map(|i| {
            let x = i.wrapping_mul(6364136223846793005).rotate_left(17) ^ (i >> 3);
            char::from(b'a' + (x % 26) as u8)
        })
        .collect();
    let big = spec_with(&noise);
    match b.commit(1, &big, prov(), false).await {
        Err(StoreError::TooLarge(m)) => eprintln!("refused: {m}"),
        other => panic!("oversized commit: {other:?}"),
    }
    assert_eq!(b.desired().await.unwrap().unwrap().rev, 1);

    // A larger budget lets it through up to the raft limit; the swarm's own
    // refusal beyond it surfaces as an error, never a partial write.
    let roomy = SwarmStore::connect_with(
        ep,
        SwarmOptions {
            budget: 4 * 1024 * 1024,
            ..SwarmOptions::default()
        },
    )
    .await
    .unwrap();
    let huge: String = noise.repeat(6);
    match roomy.commit(1, &spec_with(&huge), prov(), false).await {
        Err(StoreError::TooLarge(m)) => eprintln!("over the raft limit: {m}"),
        other => panic!("raft accepted > 1.5 MiB: {other:?}"),
    }
    assert_eq!(b.desired().await.unwrap().unwrap().rev, 1);
}

/// `changed` stays pending while nothing happens, and resolves on a commit
/// and on new controls. The watch is armed in a task before the write; a
/// write that raced ahead of it is retried (bounded), never counted.
async fn changed_fires_on_commits_and_controls(store: Arc<dyn Store>) {
    store.init_cluster("c1").await.unwrap();
    let mut rev = 0;
    for what in ["commit", "controls"] {
        let mut fired = false;
        for _ in 0..5 {
            let s = store.clone();
            let waiter = tokio::spawn(async move { s.changed().await });
            tokio::time::sleep(Duration::from_millis(500)).await;
            assert!(!waiter.is_finished(), "{what}: fired with no change");
            if what == "commit" {
                rev = store
                    .commit(rev, &spec_with(&format!("r{rev}")), prov(), false)
                    .await
                    .unwrap();
            } else {
                let controls = Controls {
                    paused: [format!("g{rev}")].into(),
                    ..Controls::default()
                };
                store.set_controls(&controls).await.unwrap();
            }
            if let Ok(done) = tokio::time::timeout(Duration::from_secs(5), waiter).await {
                done.unwrap().expect("the watch broke");
                fired = true;
                break;
            }
        }
        assert!(fired, "{what}: changed() never resolved");
    }
}

/// Issue 18: `changed` resolves when a heartbeat newly reports its
/// engine's leave (the next leader destroys the former leader's machine on
/// it), and not on the beats every controller writes every pass, nor on
/// the same leave beaten again.
async fn changed_fires_on_a_newly_reported_leave_only(store: Arc<dyn Store>) {
    use drover_core::model::SwarmView;
    use drover_core::quorum_probe::{EngineView, Left};
    store.init_cluster("c1").await.unwrap();
    let view = EngineView::next(None, &SwarmView::Absent, Some("l1"), 1);
    let beat = |at_ms: u64, left: bool| drover_spi::Heartbeat {
        holder: "l1".into(),
        format: drover_spi::FORMAT,
        at_ms,
        engine: Some(EngineView {
            left: left.then(|| Left {
                node: "n1".into(),
                at_ms: 7,
            }),
            ..view.clone()
        }),
        seat: None,
        waiting: None,
    };
    // Armed in a task before the write; a write that raced ahead of the
    // watch is retried (bounded), as above.
    let fires = |b: drover_spi::Heartbeat| {
        let store = store.clone();
        async move {
            let s = store.clone();
            let waiter = tokio::spawn(async move { s.changed().await });
            tokio::time::sleep(Duration::from_millis(500)).await;
            store.heartbeat(&b).await.unwrap();
            tokio::time::timeout(Duration::from_secs(2), waiter)
                .await
                .is_ok()
        }
    };
    assert!(!fires(beat(1, false)).await, "fired on an ordinary beat");
    let mut fired = false;
    for at in 2..6 {
        // Each try a new leave (a leave reported before the watch was
        // armed is no news to the next try).
        store.heartbeat(&beat(at * 10, false)).await.unwrap();
        if fires(beat(at * 10 + 1, true)).await {
            fired = true;
            break;
        }
    }
    assert!(fired, "changed() never resolved on a reported leave");
    assert!(
        !fires(beat(100, true)).await,
        "fired on the same leave beaten again"
    );
}

#[tokio::test]
async fn etcd_changed_fires_on_a_newly_reported_leave_only() {
    let etcd = support::Etcd::start().await;
    let store = EtcdStore::connect(&etcd.url, EtcdOptions::default())
        .await
        .unwrap();
    changed_fires_on_a_newly_reported_leave_only(Arc::new(store)).await;
}

#[tokio::test]
async fn file_and_mem_changed_fire_on_a_newly_reported_leave_only() {
    let dir = tempfile::tempdir().unwrap();
    let file = FileStore::open(dir.path().join("s.db")).unwrap();
    changed_fires_on_a_newly_reported_leave_only(Arc::new(file)).await;
    changed_fires_on_a_newly_reported_leave_only(Arc::new(MemStore::default())).await;
}

#[tokio::test]
async fn etcd_changed_fires_on_commits_and_controls() {
    let etcd = support::Etcd::start().await;
    let store = EtcdStore::connect(&etcd.url, EtcdOptions::default())
        .await
        .unwrap();
    changed_fires_on_commits_and_controls(Arc::new(store)).await;
}

/// The file store writes a heartbeat and the status document without an
/// fsync of their own (issue 37): read at once, and on disk with the next
/// durable commit.
#[tokio::test]
async fn file_store_soft_writes_are_read_at_once_and_kept_by_the_next_commit() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("state.db");
    let s = FileStore::open(&path).unwrap();
    s.init_cluster("c").await.unwrap();
    let epoch = s.campaign("ctl").await.unwrap();
    let beat = drover_spi::Heartbeat {
        holder: "ctl".into(),
        format: drover_spi::FORMAT,
        at_ms: 5,
        engine: None,
        seat: None,
        waiting: None,
    };
    s.heartbeat(&beat).await.unwrap();
    let doc = drover_spi::StatusJson::new(&serde_json::json!({"n": 1})).unwrap();
    s.publish_status(epoch, doc).await.unwrap();
    assert_eq!(s.heartbeats().await.unwrap(), vec![beat.clone()]);
    assert!(s.status().await.unwrap().is_some());
    s.set_controls(&Controls::default()).await.unwrap();
    drop(s);
    let again = FileStore::open(&path).unwrap();
    assert_eq!(again.heartbeats().await.unwrap(), vec![beat]);
    assert_eq!(
        again.status().await.unwrap(),
        Some(serde_json::json!({"n": 1}))
    );
}

#[tokio::test]
async fn file_and_mem_changed_fire_on_commits_and_controls() {
    // The file serves one process: its own commits are all there are
    // (issue 37: the controller saw them only at its resync, 250 ms).
    let dir = tempfile::tempdir().unwrap();
    let file = FileStore::open(dir.path().join("s.db")).unwrap();
    changed_fires_on_commits_and_controls(Arc::new(file)).await;
    changed_fires_on_commits_and_controls(Arc::new(MemStore::default())).await;
}

#[tokio::test]
async fn swarm_changed_fires_on_commits_and_controls() {
    let d = support::Dockerd::start_swarm("127.0.9.3").await;
    let store = SwarmStore::connect(Some(d.endpoint.as_str()))
        .await
        .unwrap();
    changed_fires_on_commits_and_controls(Arc::new(store)).await;
}
