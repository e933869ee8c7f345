//! The `Store` contract, one generic suite run against every backend on
//! real servers (redb file, a real etcd, a real single-node swarm).

#[path = "contract/leases.rs"]
mod leases;
mod support;

use support::spec;

use drover_core::journal::{OpKind, Operation, Step, Target, Victim};
use drover_core::spec::Role;
use drover_spi::{Controls, Event, EventAction, Provenance, StatusJson, Store, StoreError, Write};
use drover_store::{
    EtcdOptions, EtcdStore, FileStore, FollowingStore, Limits, MemStore, SwarmOptions, SwarmStore,
};
use serde_json::json;
use std::future::Future;
use std::sync::Arc;

/// Small caps so the suite can show pruning quickly.
const LIMITS: Limits = Limits {
    history: 5,
    events: 10,
};

/// Two handles (two controllers) on one fresh store.
type Pair = (Arc<dyn Store>, Arc<dyn Store>);

fn prov(who: &str, msg: &str) -> Provenance {
    Provenance {
        who: who.into(),
        at_ms: 1_700_000_000_000,
        message: msg.into(),
    }
}

fn op(id: &str) -> Operation {
    Operation {
        id: id.into(),
        group: "web".into(),
        kind: OpKind::Roll,
        role: Role::Worker,
        victim: Some(Victim {
            instance: Some("i-1".into()),
            link: Some("l-1".into()),
            node: Some("n-1".into()),
            logical_id: None,
            zone: Some("a".into()),
            is_self: false,
        }),
        target: Some(Target {
            logical_id: None,
            zone: Some("a".into()),
            attempt: 2,
        }),
        surge: true,
        done: Default::default(),
        intent: None,
        // Garbage-collection fields round-trip through every backend too.
        collection: Some(drover_core::journal::Collection {
            rule: drover_core::journal::GcRule::NeverJoined,
            item: "i-0".into(),
            evidence: "no node carries link l-0".into(),
        }),
        provision_failures: 1,
        // A zone refused for lack of capacity too.
        short_zones: vec!["b".into()],
        // A blocking hook's failure too.
        hook_failure: Some(drover_core::journal::HookFailed {
            step: Step::PreDrainHook,
            message: "maintenance calendar says no".into(),
            attempts: 2,
        }),
        // An in-place update's failure too.
        in_place: true,
        update_failure: Some(drover_core::journal::UpdateFailed {
            config: "0123456789abcdef".into(),
            summary: "exited with status 100: E: Unable to locate package".into(),
        }),
    }
}

/// An event at `at_ms`, told apart from others by its `outcome`.
fn event(at_ms: u64, outcome: &str) -> Event {
    Event {
        at_ms,
        controller: "c1".into(),
        group: Some("web".into()),
        op: None,
        action: EventAction::Step,
        target: Some("i-1".into()),
        outcome: outcome.into(),
        reason: "because \"quoted\" ünïcode\n".into(),
    }
}

/// `doc` as a status document's text.
fn status_json(doc: &serde_json::Value) -> StatusJson {
    StatusJson::new(doc).expect("JSON")
}

fn fenced<T: std::fmt::Debug>(r: Result<T, StoreError>, mine: u64, current: u64) {
    match r {
        Err(StoreError::Fenced {
            mine: m,
            current: c,
        }) => {
            assert_eq!((m, c), (mine, current));
        }
        other => panic!("expected Fenced({mine}, {current}), got {other:?}"),
    }
}

async fn cluster_id(s: &dyn Store) {
    assert_eq!(s.cluster_id().await.unwrap(), None);
    s.init_cluster("c-1").await.unwrap();
    s.init_cluster("c-1").await.unwrap(); // same id: idempotent
    match s.init_cluster("c-2").await {
        Err(StoreError::ClusterMismatch { current, requested }) => {
            assert_eq!((current.as_str(), requested.as_str()), ("c-1", "c-2"));
        }
        other => panic!("second id accepted: {other:?}"),
    }
    assert_eq!(s.cluster_id().await.unwrap().as_deref(), Some("c-1"));
}

async fn commit_cas((a, b): Pair) {
    assert!(a.desired().await.unwrap().is_none());
    assert_eq!(
        a.commit(0, &spec(1), prov("op@h", "one"), false)
            .await
            .unwrap(),
        1
    );
    assert_eq!(
        a.commit(1, &spec(2), prov("op@h", "two"), false)
            .await
            .unwrap(),
        2
    );
    match a.commit(1, &spec(3), prov("op@h", "stale"), false).await {
        Err(StoreError::Conflict { expected, current }) => assert_eq!((expected, current), (1, 2)),
        other => panic!("stale commit: {other:?}"),
    }
    // Two writers from the same base: exactly one wins.
    let (s4, s5) = (spec(4), spec(5));
    let (x, y) = tokio::join!(
        a.commit(2, &s4, prov("alice@h", "race"), false),
        b.commit(2, &s5, prov("bob@h", "race"), false)
    );
    let wins = [&x, &y].iter().filter(|r| r.is_ok()).count();
    assert_eq!(wins, 1, "{x:?} {y:?}");
    let loser = if x.is_ok() { y } else { x };
    assert!(
        matches!(
            loser,
            Err(StoreError::Conflict {
                expected: 2,
                current: 3
            })
        ),
        "{loser:?}"
    );
    let d = b.desired().await.unwrap().unwrap();
    assert_eq!(d.rev, 3);
    assert!(d.spec == spec(4) || d.spec == spec(5));
}

async fn history((a, _): Pair) {
    for i in 0..8u64 {
        let rb = i == 7;
        a.commit(
            i,
            &spec(i as u32 + 1),
            prov(&format!("u{i}@h"), &format!("m{i}")),
            rb,
        )
        .await
        .unwrap();
    }
    let h = a.history().await.unwrap();
    assert_eq!(h.len(), LIMITS.history, "bounded");
    assert_eq!(
        h.iter().map(|r| r.rev).collect::<Vec<_>>(),
        vec![4, 5, 6, 7, 8]
    );
    let last = h.last().unwrap();
    assert_eq!(last.provenance, prov("u7@h", "m7"));
    assert!(last.is_rollback && !h[0].is_rollback);
    assert_eq!(last.spec, spec(8));
    assert_eq!(a.desired().await.unwrap().as_ref(), Some(last));
}

async fn converged((a, b): Pair) {
    a.commit(0, &spec(1), prov("o", "1"), false).await.unwrap();
    a.commit(1, &spec(2), prov("o", "2"), false).await.unwrap();
    let e = b.campaign("ctl-b").await.unwrap();
    b.mark_converged(e, 1).await.unwrap();
    let h = a.history().await.unwrap();
    assert_eq!(
        h.iter().map(|r| r.converged).collect::<Vec<_>>(),
        vec![true, false]
    );
    assert!(matches!(
        b.mark_converged(e, 9).await,
        Err(StoreError::Conflict {
            expected: 9,
            current: 2
        })
    ));
}

async fn controls((a, b): Pair) {
    assert_eq!(a.controls().await.unwrap(), Controls::default());
    let c = Controls {
        paused: ["web".to_string()].into(),
        held: ["i-1".to_string(), "i-2".to_string()].into(),
        replace: ["i-3".to_string(), "i-4".to_string()].into(),
        skip_drain: ["i-4".to_string()].into(),
    };
    a.set_controls(&c).await.unwrap();
    assert_eq!(b.controls().await.unwrap(), c);
}

async fn campaigns((a, b): Pair) {
    assert_eq!(a.leader().await.unwrap(), None);
    let e1 = a.campaign("ctl-a").await.unwrap();
    let e2 = b.campaign("ctl-b").await.unwrap();
    let e3 = a.campaign("ctl-a").await.unwrap();
    assert!(0 < e1 && e1 < e2 && e2 < e3, "{e1} {e2} {e3}");
    assert_eq!(b.leader().await.unwrap(), Some((e3, "ctl-a".to_string())));
}

async fn journal((a, b): Pair) {
    let e = a.campaign("ctl-a").await.unwrap();
    let mut o = op("op-1");
    a.journal_put(e, &o).await.unwrap();
    a.journal_put(e, &op("op-2")).await.unwrap();
    o.done.insert(Step::Provision);
    o.done.insert(Step::AwaitHealthy);
    a.journal_put(e, &o).await.unwrap(); // replace
    let mut j = b.journal().await.unwrap();
    j.sort_by(|x, y| x.id.cmp(&y.id));
    assert_eq!(j, vec![o.clone(), op("op-2")]);
    a.journal_remove(e, "op-2").await.unwrap();
    a.journal_remove(e, "op-2").await.unwrap(); // absent: fine
    assert_eq!(b.journal().await.unwrap(), vec![o]);
}

async fn status((a, b): Pair) {
    assert_eq!(b.status().await.unwrap(), None);
    let e = a.campaign("ctl-a").await.unwrap();
    let doc = json!({
        "groups": {"web": {"blocked": null, "n": 3, "ratio": 0.25, "big": u64::MAX}},
        "list": [1, "two", [true, false], {}],
        "text": "tab\t \"quote\" ünïcode \u{1F600} <>&",
    });
    a.publish_status(e, status_json(&doc)).await.unwrap();
    assert_eq!(b.status().await.unwrap(), Some(doc));
    a.publish_status(e, status_json(&json!("just a string")))
        .await
        .unwrap();
    assert_eq!(b.status().await.unwrap(), Some(json!("just a string")));
}

async fn events((a, b): Pair) {
    let e = a.campaign("ctl-a").await.unwrap();
    for i in 0..13u64 {
        a.append_event(e, &event(1000 + i, &format!("a{i}")))
            .await
            .unwrap();
    }
    let all = b.events(0).await.unwrap();
    assert_eq!(all.len(), LIMITS.events, "bounded");
    assert_eq!(all[0], event(1003, "a3"));
    assert_eq!(all.last().unwrap(), &event(1012, "a12"));
    let since = b.events(1010).await.unwrap();
    assert_eq!(
        since.iter().map(|e| e.at_ms).collect::<Vec<_>>(),
        vec![1010, 1011, 1012]
    );
    assert!(b.events(5000).await.unwrap().is_empty());
}

/// A controller's batch: applied in order (a put, then the same
/// operation's replacement, a put removed again), events appended in order
/// to the bounded log, more writes than one etcd transaction holds, and a
/// deposed controller's batch refused whole.
async fn batches((a, b): Pair) {
    let put = |o: Operation| Write::JournalPut(Box::new(o));
    let e = a.campaign("ctl-a").await.unwrap();
    let mut o = op("op-1");
    let first = put(o.clone());
    o.done.insert(Step::Provision);
    let mut writes = vec![
        first,
        put(op("op-2")),
        Write::Event(event(1, "begun")),
        put(o.clone()),
        Write::JournalRemove("op-2".into()),
    ];
    // Past one etcd transaction: the operations op-10.. and their events.
    for i in 10..60u64 {
        writes.push(put(op(&format!("op-{i}"))));
        writes.push(Write::Event(event(i, &format!("e{i}"))));
    }
    for i in 10..59u64 {
        writes.push(Write::JournalRemove(format!("op-{i}")));
    }
    a.write_batch(e, &writes).await.unwrap();
    let mut j = b.journal().await.unwrap();
    j.sort_by(|x, y| x.id.cmp(&y.id));
    assert_eq!(j, vec![o.clone(), op("op-59")]);
    let events: Vec<u64> = b.events(0).await.unwrap().iter().map(|e| e.at_ms).collect();
    assert_eq!(events, (50..60).collect::<Vec<_>>(), "the newest, in order");

    let new = b.campaign("ctl-b").await.unwrap();
    let refused = vec![
        Write::JournalRemove("op-1".into()),
        put(op("op-3")),
        Write::Event(event(99, "by-a-again")),
    ];
    fenced(a.write_batch(e, &refused).await, e, new);
    let mut j = b.journal().await.unwrap();
    j.sort_by(|x, y| x.id.cmp(&y.id));
    assert_eq!(j, vec![o, op("op-59")], "nothing of it landed");
    assert_eq!(b.events(0).await.unwrap().len(), LIMITS.events);
}

async fn fencing((a, b): Pair) {
    a.commit(0, &spec(1), prov("o", "1"), false).await.unwrap();
    // No campaign yet: nobody may write.
    fenced(a.journal_put(0, &op("x")).await, 0, 0);
    fenced(a.check_epoch(0).await, 0, 0);
    let old = a.campaign("ctl-a").await.unwrap();
    a.check_epoch(old).await.unwrap();
    a.journal_put(old, &op("op-1")).await.unwrap();
    a.publish_status(old, status_json(&json!({"by": "a"})))
        .await
        .unwrap();
    a.append_event(old, &event(1, "by-a")).await.unwrap();

    let new = b.campaign("ctl-b").await.unwrap();
    assert!(new > old);
    // Every fenced write of the deposed controller is refused by the store.
    fenced(a.mark_converged(old, 1).await, old, new);
    fenced(a.journal_put(old, &op("op-2")).await, old, new);
    fenced(a.journal_remove(old, "op-1").await, old, new);
    fenced(
        a.publish_status(old, status_json(&json!({"by": "a again"})))
            .await,
        old,
        new,
    );
    fenced(a.append_event(old, &event(2, "by-a-again")).await, old, new);
    // The check made before each side effect says the same, writing nothing.
    fenced(a.check_epoch(old).await, old, new);
    b.check_epoch(new).await.unwrap();
    // An epoch from the future is no better.
    fenced(a.journal_put(new + 1, &op("op-3")).await, new + 1, new);
    // Nothing of it landed.
    assert_eq!(b.journal().await.unwrap(), vec![op("op-1")]);
    assert_eq!(b.status().await.unwrap(), Some(json!({"by": "a"})));
    assert_eq!(b.events(0).await.unwrap(), vec![event(1, "by-a")]);
    assert!(!b.history().await.unwrap()[0].converged);
    // The new leader writes.
    b.journal_remove(new, "op-1").await.unwrap();
    b.mark_converged(new, 1).await.unwrap();
    assert!(a.journal().await.unwrap().is_empty());
    assert_eq!(a.leader().await.unwrap(), Some((new, "ctl-b".to_string())));
}

/// The controller's automatic rollback is a commit fenced by its epoch as
/// well as a CAS on the revision: a deposed controller's is refused and
/// nothing changes, even when its base revision is still current.
async fn fenced_rollback((a, b): Pair) {
    a.commit(0, &spec(1), prov("op@h", "one"), false)
        .await
        .unwrap();
    let by_a = || prov("controller ctl-a", "automatic rollback");
    fenced(a.commit_rollback(0, 1, &spec(2), by_a()).await, 0, 0);
    let old = a.campaign("ctl-a").await.unwrap();
    assert_eq!(
        a.commit_rollback(old, 1, &spec(2), by_a()).await.unwrap(),
        2
    );
    let before = b.history().await.unwrap();
    assert!(before[1].is_rollback && !before[0].is_rollback);

    let new = b.campaign("ctl-b").await.unwrap();
    // Deposed, on the current revision: refused.
    fenced(a.commit_rollback(old, 2, &spec(3), by_a()).await, old, new);
    // Deposed and on a stale revision: the epoch is the refusal it hears.
    fenced(a.commit_rollback(old, 1, &spec(3), by_a()).await, old, new);
    assert_eq!(
        b.history().await.unwrap(),
        before,
        "a refused commit landed"
    );
    assert_eq!(a.desired().await.unwrap().map(|r| r.rev), Some(2));
    // The current leader on a stale revision loses the CAS.
    match b.commit_rollback(new, 1, &spec(3), by_a()).await {
        Err(StoreError::Conflict { expected, current }) => assert_eq!((expected, current), (1, 2)),
        other => panic!("stale fenced commit: {other:?}"),
    }
    let by_b = prov("controller ctl-b", "automatic rollback");
    assert_eq!(b.commit_rollback(new, 2, &spec(3), by_b).await.unwrap(), 3);
    let last = a.desired().await.unwrap().unwrap();
    assert!(last.is_rollback && last.spec == spec(3));
}

/// `import`: one write of everything (renumbered 1.., converged flags and
/// controls kept, history bounded as commits bound it), into an empty
/// store only: a store holding a cluster or a revision is left as it was.
async fn import((a, b): Pair) {
    let revision = |rev: u64, converged: bool| drover_spi::Revision {
        rev,
        spec: spec(rev as u32),
        provenance: prov("op@h", &format!("r{rev}")),
        is_rollback: rev == 9,
        converged,
    };
    let controls = Controls {
        paused: ["web".to_string()].into(),
        ..Controls::default()
    };
    let cluster = drover_spi::Imported {
        cluster_id: "c-1".into(),
        revisions: (3..=9).map(|r| revision(r, r % 2 == 1)).collect(),
        controls: controls.clone(),
    };
    a.import(&cluster).await.unwrap();
    assert_eq!(b.cluster_id().await.unwrap().as_deref(), Some("c-1"));
    let h = b.history().await.unwrap();
    assert_eq!(
        h.iter().map(|r| (r.rev, r.converged)).collect::<Vec<_>>(),
        [(3, true), (4, false), (5, true), (6, false), (7, true)],
        "renumbered 1..7, the newest {} kept",
        LIMITS.history
    );
    assert_eq!(h[4].spec, spec(9));
    assert!(h[4].is_rollback);
    assert_eq!(b.desired().await.unwrap().map(|r| r.rev), Some(7));
    assert_eq!(b.controls().await.unwrap(), controls);
    // The next commit follows the imported history.
    assert_eq!(
        b.commit(7, &spec(1), prov("o", "x"), false).await.unwrap(),
        8
    );
    for other in ["c-1", "c-2"] {
        let again = drover_spi::Imported {
            cluster_id: other.into(),
            ..cluster.clone()
        };
        match b.import(&again).await {
            Err(StoreError::ClusterMismatch { current, .. }) => assert_eq!(current, "c-1"),
            r => panic!("an import into a store holding a cluster: {r:?}"),
        }
    }
    assert_eq!(b.history().await.unwrap().last().map(|r| r.rev), Some(8));
}

/// An import into a store that holds a revision but no cluster id (commits
/// made without one) is refused too, and changes nothing.
async fn import_over_revisions((a, _): Pair) {
    a.commit(0, &spec(1), prov("o", "1"), false).await.unwrap();
    let cluster = drover_spi::Imported {
        cluster_id: "c-1".into(),
        revisions: Vec::new(),
        controls: Controls::default(),
    };
    assert!(matches!(
        a.import(&cluster).await,
        Err(StoreError::ClusterMismatch { .. })
    ));
    assert_eq!(a.cluster_id().await.unwrap(), None);
    assert_eq!(a.desired().await.unwrap().map(|r| r.spec), Some(spec(1)));
}

/// Runs every case, each on a fresh store from `fresh(case)`.
async fn contract<F, Fut>(fresh: F)
where
    F: Fn(&'static str) -> Fut,
    Fut: Future<Output = Pair>,
{
    cluster_id(fresh("cluster-id").await.0.as_ref()).await;
    commit_cas(fresh("commit").await).await;
    history(fresh("history").await).await;
    converged(fresh("converged").await).await;
    controls(fresh("controls").await).await;
    campaigns(fresh("campaigns").await).await;
    leases::leases(fresh("leases").await).await;
    journal(fresh("journal").await).await;
    status(fresh("status").await).await;
    events(fresh("events").await).await;
    fencing(fresh("fencing").await).await;
    batches(fresh("batches").await).await;
    fenced_rollback(fresh("fenced-rollback").await).await;
    import(fresh("import").await).await;
    import_over_revisions(fresh("import-over-revisions").await).await;
}

#[tokio::test]
async fn mem_store_keeps_the_contract() {
    contract(|_| async {
        let s: Arc<dyn Store> = Arc::new(MemStore::with_limits(LIMITS));
        (s.clone(), s)
    })
    .await;
}

#[tokio::test]
async fn file_store_keeps_the_contract() {
    let dir = tempfile::tempdir().unwrap();
    let dir = &dir;
    contract(|case| async move {
        // One file, one handle: the lock allows no second opener, so both
        // "controllers" share it (fencing is still checked per call).
        let s: Arc<dyn Store> =
            Arc::new(FileStore::open_with(dir.path().join(format!("{case}.db")), LIMITS).unwrap());
        (s.clone(), s)
    })
    .await;
}

#[tokio::test]
async fn etcd_store_keeps_the_contract() {
    let etcd = support::Etcd::start().await;
    let url = &etcd.url;
    contract(|case| async move {
        let opts = || EtcdOptions {
            prefix: format!("/drover/{case}"),
            limits: LIMITS,
            ..EtcdOptions::default()
        };
        let a: Arc<dyn Store> = Arc::new(EtcdStore::connect(url, opts()).await.unwrap());
        let b: Arc<dyn Store> = Arc::new(EtcdStore::connect(url, opts()).await.unwrap());
        (a, b)
    })
    .await;
}

#[tokio::test]
async fn swarm_store_keeps_the_contract() {
    let d = support::Dockerd::start_swarm("127.0.9.1").await;
    let ep = d.endpoint.as_str();
    contract(|case| async move {
        let opts = || SwarmOptions {
            namespace: case.to_string(),
            limits: LIMITS,
            ..SwarmOptions::default()
        };
        let a: Arc<dyn Store> = Arc::new(SwarmStore::connect_with(Some(ep), opts()).await.unwrap());
        let b: Arc<dyn Store> = Arc::new(SwarmStore::connect_with(Some(ep), opts()).await.unwrap());
        (a, b)
    })
    .await;
}

/// The swarm store as commands open it, following the swarm
/// ([`FollowingStore`]): its retries (a read asked again, a lost commit
/// looked for, a campaign taken to the leader) keep the same contract.
#[tokio::test]
async fn following_swarm_store_keeps_the_contract() {
    // 127.0.176.x: reserved for the following store's tests.
    let d = support::Dockerd::start_swarm("127.0.176.1").await;
    let ep = d.endpoint.as_str();
    contract(|case| async move {
        let opts = || SwarmOptions {
            namespace: case.to_string(),
            limits: LIMITS,
            ..SwarmOptions::default()
        };
        let a = FollowingStore::open_with(Some(ep), None, opts()).await;
        let b = FollowingStore::open_with(Some(ep), None, opts()).await;
        let a: Arc<dyn Store> = Arc::new(a.unwrap());
        let b: Arc<dyn Store> = Arc::new(b.unwrap());
        (a, b)
    })
    .await;
}

/// A CA, a server certificate for 127.0.0.1 and a client certificate, made
/// with `openssl` in `dir`.
fn certificates(dir: &std::path::Path) {
    let run = |args: &str| {
        let out = std::process::Command::new("openssl")
            .args(args.split_whitespace())
            .current_dir(dir)
            .output()
            .expect("run openssl");
        assert!(
            out.status.success(),
            "openssl {args}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    };
    std::fs::write(
        dir.join("server.ext"),
        "subjectAltName=IP:127.0.0.1\nextendedKeyUsage=serverAuth,clientAuth\n",
    )
    .unwrap();
    std::fs::write(dir.join("client.ext"), "extendedKeyUsage=clientAuth\n").unwrap();
    run(
        "req -x509 -newkey rsa:2048 -nodes -days 2 -subj /CN=drover-test-ca -keyout ca.key -out ca.pem",
    );
    for who in ["server", "client"] {
        run(&format!(
            "req -newkey rsa:2048 -nodes -subj /CN={who} -keyout {who}.key -out {who}.csr"
        ));
        run(&format!(
            "x509 -req -in {who}.csr -CA ca.pem -CAkey ca.key -CAcreateserial -days 2 -extfile {who}.ext -out {who}.pem"
        ));
    }
}

/// etcd with TLS on both sides (client certificates required) and
/// authentication on: the store connects with `etcds://`, a client
/// certificate and a user whose password comes from the options (in the CLI:
/// `DROVER_ETCD_PASSWORD`), and keeps the whole contract.
#[tokio::test]
async fn etcd_store_keeps_the_contract_over_tls_with_auth() {
    use drover_store::testkit::{free_port, log_file, stop};
    let dir = tempfile::Builder::new()
        .prefix("dt")
        .tempdir_in("/tmp")
        .unwrap();
    let d = dir.path();
    certificates(d);
    let (p, q) = (free_port(), free_port());
    let client = format!("https://127.0.0.1:{p}");
    let peer = format!("http://127.0.0.1:{q}");
    struct Stop(std::process::Child);
    impl Drop for Stop {
        fn drop(&mut self) {
            stop(&mut self.0, false, std::time::Duration::from_secs(10));
        }
    }
    let etcd = std::process::Command::new("etcd")
        .arg("--data-dir")
        .arg(d.join("data"))
        .args(["--name", "default", "--listen-client-urls", &client])
        .args([
            "--advertise-client-urls",
            &client,
            "--listen-peer-urls",
            &peer,
        ])
        .args(["--initial-advertise-peer-urls", &peer])
        .args(["--initial-cluster", &format!("default={peer}")])
        .arg("--cert-file")
        .arg(d.join("server.pem"))
        .arg("--key-file")
        .arg(d.join("server.key"))
        .arg("--trusted-ca-file")
        .arg(d.join("ca.pem"))
        .arg("--client-cert-auth")
        .stdout(log_file(d, "etcd.log"))
        .stderr(log_file(d, "etcd.err"))
        .spawn()
        .expect("spawn etcd");
    let _stop = Stop(etcd);
    let url = format!("etcds://127.0.0.1:{p}");
    let tls = |user: Option<&str>, password: Option<&str>| EtcdOptions {
        ca: Some(d.join("ca.pem")),
        cert: Some(d.join("client.pem")),
        key: Some(d.join("client.key")),
        user: user.map(str::to_string),
        password: password.map(str::to_string),
        ..EtcdOptions::default()
    };
    // Wait until it answers over TLS, then turn authentication on.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    let admin = loop {
        if let Ok(s) = EtcdStore::connect(&url, tls(None, None)).await {
            break s;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "etcd over TLS did not answer"
        );
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    };
    let mut c = admin.client().clone();
    c.user_add("root", "root-secret", None).await.unwrap();
    let _ = c.role_add("root").await;
    c.user_grant_role("root", "root").await.unwrap();
    c.auth_enable().await.unwrap();
    drop(admin);

    // Refused: no client certificate; a wrong password; TLS files without etcds://.
    let plain = EtcdOptions {
        ca: Some(d.join("ca.pem")),
        user: Some("root".into()),
        password: Some("root-secret".into()),
        ..EtcdOptions::default()
    };
    assert!(
        EtcdStore::connect(&url, plain).await.is_err(),
        "no client certificate accepted"
    );
    assert!(
        EtcdStore::connect(&url, tls(Some("root"), Some("wrong")))
            .await
            .is_err(),
        "a wrong password accepted"
    );
    assert!(matches!(
        EtcdStore::connect(&url.replace("etcds", "etcd"), tls(None, None)).await,
        Err(StoreError::BadAddress(_))
    ));

    let (url, tls) = (&url, &tls);
    contract(|case| async move {
        let opts = || EtcdOptions {
            prefix: format!("/drover/tls-{case}"),
            limits: LIMITS,
            ..tls(Some("root"), Some("root-secret"))
        };
        let a: Arc<dyn Store> = Arc::new(EtcdStore::connect(url, opts()).await.unwrap());
        let b: Arc<dyn Store> = Arc::new(EtcdStore::connect(url, opts()).await.unwrap());
        (a, b)
    })
    .await;
}
