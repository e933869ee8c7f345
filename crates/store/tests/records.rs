//! Record formats on every backend: the write format follows the oldest
//! live controller, both formats are read, and a record that is damaged or
//! written by a newer drover is refused with a clear error and left exactly
//! as it was. The damaged records are written with each backend's raw
//! client (redb, etcd's kv API, the engine's swarm update).

mod support;

use support::spec;

use async_trait::async_trait;
use base64::Engine as _;
use bollard::query_parameters::UpdateSwarmOptionsBuilder;
use drover_core::journal::{OpKind, Operation};
use drover_core::spec::Role;
use drover_spi::{
    Controls, Event, EventAction, FORMAT, HEARTBEAT_TTL_MS, Heartbeat, OLDEST_FORMAT, Provenance,
    StatusJson, Store, StoreError,
};
use drover_store::{EtcdOptions, EtcdStore, FileStore, MemStore, SwarmOptions, SwarmStore};
use flate2::Compression;
use flate2::read::GzDecoder;
use flate2::write::GzEncoder;
use redb::{ReadableDatabase, TableDefinition};
use std::io::{Read, Write};
use std::path::PathBuf;
use std::sync::Arc;

const NOW: u64 = 1_800_000_000_000;

/// `doc` as a status document's text.
fn status_json(doc: serde_json::Value) -> StatusJson {
    StatusJson::new(&doc).expect("JSON")
}

fn prov() -> Provenance {
    Provenance {
        who: "op@h".into(),
        at_ms: NOW,
        message: "m".into(),
    }
}

fn op(id: &str) -> Operation {
    Operation {
        id: id.into(),
        group: "web".into(),
        kind: OpKind::Provision,
        role: Role::Worker,
        victim: None,
        target: None,
        surge: false,
        done: Default::default(),
        intent: None,
        collection: None,
        provision_failures: 0,
        short_zones: Vec::new(),
        hook_failure: None,
        in_place: false,
        update_failure: None,
    }
}

fn event() -> Event {
    Event {
        at_ms: NOW,
        controller: "c".into(),
        group: None,
        op: None,
        action: EventAction::Step,
        target: None,
        outcome: "ok".into(),
        reason: "r".into(),
    }
}

fn beat(holder: &str, format: u32, at_ms: u64) -> Heartbeat {
    Heartbeat {
        holder: holder.into(),
        format,
        at_ms,
        engine: None,
        seat: None,
        waiting: None,
    }
}

/// The write format follows the oldest live controller; stale beats do not
/// count; records of either format are read by a handle writing the other.
async fn negotiation(a: &dyn Store, b: &dyn Store) {
    assert_eq!(
        a.write_format(),
        OLDEST_FORMAT,
        "starts at the previous format"
    );
    assert_eq!(
        a.negotiate_format(NOW).await.unwrap(),
        FORMAT,
        "nobody else runs"
    );
    a.heartbeat(&beat("old", 1, NOW)).await.unwrap();
    a.heartbeat(&beat("new", FORMAT, NOW)).await.unwrap();
    a.heartbeat(&beat("gone", 1, NOW - HEARTBEAT_TTL_MS - 1))
        .await
        .unwrap();
    assert_eq!(a.negotiate_format(NOW).await.unwrap(), 1);
    assert_eq!(b.negotiate_format(NOW).await.unwrap(), 1);
    let r1 = a.commit(0, &spec(1), prov(), false).await.unwrap();
    // The old controller is upgraded: its next beat lifts the format.
    a.heartbeat(&beat("old", FORMAT, NOW + 1)).await.unwrap();
    assert_eq!(b.negotiate_format(NOW + 1).await.unwrap(), FORMAT);
    b.commit(r1, &spec(2), prov(), false).await.unwrap();
    let history = a.history().await.unwrap();
    assert_eq!(
        history.iter().map(|r| r.spec.clone()).collect::<Vec<_>>(),
        vec![spec(1), spec(2)]
    );
    let mut holders: Vec<_> = a
        .heartbeats()
        .await
        .unwrap()
        .into_iter()
        .map(|b| b.holder)
        .collect();
    holders.sort();
    assert_eq!(holders, ["gone", "new", "old"]);
}

#[tokio::test]
async fn mem_store_negotiates_the_format() {
    let s = MemStore::default();
    negotiation(&s, &s).await;
}

/// One stored record, named the same on every backend.
#[derive(Debug, Clone, Copy)]
enum Rec {
    Revisions,
    Journal,
    Status,
    Events,
    Leader,
    Controls,
    Controllers,
}

const RECS: [Rec; 7] = [
    Rec::Revisions,
    Rec::Journal,
    Rec::Status,
    Rec::Events,
    Rec::Leader,
    Rec::Controls,
    Rec::Controllers,
];

/// A backend's raw client: puts and gets a record's JSON where the store
/// keeps it, bypassing the store.
#[async_trait]
trait Raw: Send + Sync {
    /// A fresh store handle for `case` (the previous one was dropped).
    async fn open(&self, case: &str) -> Arc<dyn Store>;
    async fn put(&self, case: &str, rec: Rec, json: &[u8]);
    async fn get(&self, case: &str, rec: Rec) -> Option<Vec<u8>>;
}

const NEWER: &[u8] = br#"{"drover_format": 99, "data": {"from": "drover 9"}}"#;
const GARBAGE: &[u8] = br#"{"drover_format": 2, "data": [tru"#;

/// Reads `rec` through the store: must be refused.
async fn read(s: &dyn Store, rec: Rec) -> Result<(), StoreError> {
    match rec {
        Rec::Revisions => s.history().await.map(drop),
        Rec::Journal => s.journal().await.map(drop),
        Rec::Status => s.status().await.map(drop),
        Rec::Events => s.events(0).await.map(drop),
        Rec::Leader => s.leader().await.map(drop),
        Rec::Controls => s.controls().await.map(drop),
        Rec::Controllers => s.heartbeats().await.map(drop),
    }
}

/// The write that would replace `rec`. It may be refused or land beside
/// the record (etcd keeps one key per event); it must never replace it.
async fn write(s: &dyn Store, rec: Rec, epoch: u64) -> Result<(), StoreError> {
    match rec {
        Rec::Revisions => s.commit(1, &spec(9), prov(), false).await.map(drop),
        Rec::Journal => s.journal_put(epoch, &op("op-1")).await,
        Rec::Status => {
            s.publish_status(epoch, status_json(serde_json::json!({"x": 1})))
                .await
        }
        Rec::Events => s.append_event(epoch, &event()).await,
        Rec::Leader => s.campaign("ctl-2").await.map(drop),
        Rec::Controls => s.set_controls(&Controls::default()).await,
        Rec::Controllers => s.heartbeat(&beat("ctl", FORMAT, NOW)).await,
    }
}

/// For every record: the previous format is written bare until negotiated,
/// then enveloped; a newer-format and a damaged record are each refused by
/// the reader with a clear error and left byte for byte untouched by the
/// writer that would replace them.
async fn unreadable_records(raw: &dyn Raw) {
    for rec in RECS {
        let case = format!("{rec:?}").to_lowercase();
        let s = raw.open(&case).await;
        s.commit(0, &spec(1), prov(), false).await.unwrap();
        let epoch = s.campaign("ctl-1").await.unwrap();
        s.journal_put(epoch, &op("op-1")).await.unwrap();
        s.publish_status(epoch, status_json(serde_json::json!({"ok": true})))
            .await
            .unwrap();
        s.append_event(epoch, &event()).await.unwrap();
        s.set_controls(&Controls::default()).await.unwrap();
        s.heartbeat(&beat("ctl-1", FORMAT, NOW)).await.unwrap();
        drop(s);
        // Written in the previous format (bare JSON) before negotiation.
        let bare = raw.get(&case, rec).await.expect("record written");
        assert!(
            !String::from_utf8_lossy(&bare).contains("drover_format"),
            "{rec:?} in the previous format: {}",
            String::from_utf8_lossy(&bare)
        );
        for (bad, newer) in [(NEWER, true), (GARBAGE, false)] {
            raw.put(&case, rec, bad).await;
            let s = raw.open(&case).await;
            let e = read(s.as_ref(), rec).await.unwrap_err();
            let msg = e.to_string();
            if newer {
                assert!(
                    matches!(e, StoreError::NewerFormat { found: 99, .. })
                        && msg.contains("record format 99")
                        && msg.contains("upgrade drover"),
                    "{rec:?}: {msg}"
                );
            } else {
                assert!(
                    matches!(e, StoreError::Corrupt(_)) && msg.contains("left untouched"),
                    "{rec:?}: {msg}"
                );
            }
            assert!(e.is_unreadable_record());
            let _ = write(s.as_ref(), rec, epoch).await;
            drop(s);
            assert_eq!(
                raw.get(&case, rec).await.as_deref(),
                Some(bad),
                "{rec:?} was overwritten"
            );
        }
    }
    // After negotiation, records are enveloped in this build's format.
    let s = raw.open("enveloped").await;
    s.negotiate_format(NOW).await.unwrap();
    s.commit(0, &spec(1), prov(), false).await.unwrap();
    drop(s);
    let json = raw.get("enveloped", Rec::Revisions).await.unwrap();
    let v: serde_json::Value = serde_json::from_slice(&json).unwrap();
    assert_eq!(v["drover_format"], FORMAT);
}

// --- file: redb opened directly while no store handle holds the lock ---

const TABLE: TableDefinition<&str, &[u8]> = TableDefinition::new("drover");

fn section(rec: Rec) -> &'static str {
    match rec {
        Rec::Revisions => "revisions",
        Rec::Journal => "journal",
        Rec::Status => "status",
        Rec::Events => "events",
        Rec::Leader => "meta",
        Rec::Controls => "controls",
        Rec::Controllers => "controllers",
    }
}

struct RawFile(PathBuf);

impl RawFile {
    fn path(&self, case: &str) -> PathBuf {
        self.0.join(format!("{case}.db"))
    }
}

#[async_trait]
impl Raw for RawFile {
    async fn open(&self, case: &str) -> Arc<dyn Store> {
        Arc::new(FileStore::open(self.path(case)).unwrap())
    }
    async fn put(&self, case: &str, rec: Rec, json: &[u8]) {
        let db = redb::Database::open(self.path(case)).unwrap();
        let txn = db.begin_write().unwrap();
        txn.open_table(TABLE)
            .unwrap()
            .insert(section(rec), json)
            .unwrap();
        txn.commit().unwrap();
    }
    async fn get(&self, case: &str, rec: Rec) -> Option<Vec<u8>> {
        let db = redb::Database::open(self.path(case)).unwrap();
        let txn = db.begin_read().unwrap();
        let table = txn.open_table(TABLE).unwrap();
        table.get(section(rec)).unwrap().map(|v| v.value().to_vec())
    }
}

#[tokio::test]
async fn file_store_refuses_unreadable_records_and_leaves_them() {
    let dir = tempfile::tempdir().unwrap();
    let s = FileStore::open(dir.path().join("n.db")).unwrap();
    negotiation(&s, &s).await;
    drop(s);
    unreadable_records(&RawFile(dir.path().to_path_buf())).await;
}

// --- etcd: its kv API ---

struct RawEtcd {
    url: String,
}

impl RawEtcd {
    fn prefix(case: &str) -> String {
        format!("/drover/records-{case}")
    }
    fn key(case: &str, rec: Rec) -> String {
        let name = match rec {
            Rec::Revisions => format!("revs/{:020}", 1),
            Rec::Journal => "journal/op-1".into(),
            Rec::Status => "status".into(),
            Rec::Events => format!("events/e/{:020}", 1),
            Rec::Leader => "leader".into(),
            Rec::Controls => "controls".into(),
            Rec::Controllers => "controllers/ctl-1".into(),
        };
        format!("{}/{name}", RawEtcd::prefix(case))
    }
    async fn client(&self) -> etcd_client::Client {
        let ep = self.url.replace("etcd://", "http://");
        etcd_client::Client::connect([ep], None).await.unwrap()
    }
}

#[async_trait]
impl Raw for RawEtcd {
    async fn open(&self, case: &str) -> Arc<dyn Store> {
        let opts = EtcdOptions {
            prefix: RawEtcd::prefix(case),
            ..EtcdOptions::default()
        };
        Arc::new(EtcdStore::connect(&self.url, opts).await.unwrap())
    }
    async fn put(&self, case: &str, rec: Rec, json: &[u8]) {
        let mut c = self.client().await;
        c.put(RawEtcd::key(case, rec), json, None).await.unwrap();
    }
    async fn get(&self, case: &str, rec: Rec) -> Option<Vec<u8>> {
        let mut c = self.client().await;
        let r = c.get(RawEtcd::key(case, rec), None).await.unwrap();
        r.kvs().first().map(|kv| kv.value().to_vec())
    }
}

#[tokio::test]
async fn etcd_store_refuses_unreadable_records_and_leaves_them() {
    let etcd = support::Etcd::start().await;
    let raw = RawEtcd {
        url: etcd.url.clone(),
    };
    let (a, b) = (raw.open("negotiation").await, raw.open("negotiation").await);
    negotiation(a.as_ref(), b.as_ref()).await;
    unreadable_records(&raw).await;
}

// --- swarm: the engine's swarm update, labels packed as the store packs them ---

struct RawSwarm {
    endpoint: String,
    docker: bollard::Docker,
}

fn label(case: &str, rec: Rec) -> String {
    format!("drover.store.{case}.{}", section(rec))
}

#[async_trait]
impl Raw for RawSwarm {
    async fn open(&self, case: &str) -> Arc<dyn Store> {
        let opts = SwarmOptions {
            namespace: case.to_string(),
            ..SwarmOptions::default()
        };
        Arc::new(
            SwarmStore::connect_with(Some(&self.endpoint), opts)
                .await
                .unwrap(),
        )
    }
    async fn put(&self, case: &str, rec: Rec, json: &[u8]) {
        let swarm = self.docker.inspect_swarm().await.unwrap();
        let mut spec = swarm.spec.unwrap();
        let mut enc = GzEncoder::new(Vec::new(), Compression::default());
        enc.write_all(json).unwrap();
        let packed = format!(
            "gz:{}",
            base64::engine::general_purpose::STANDARD_NO_PAD.encode(enc.finish().unwrap())
        );
        spec.labels
            .get_or_insert_default()
            .insert(label(case, rec), packed);
        let version = swarm.version.unwrap().index.unwrap() as i64;
        let o = UpdateSwarmOptionsBuilder::default()
            .version(version)
            .build();
        self.docker.update_swarm(spec, o).await.unwrap();
    }
    async fn get(&self, case: &str, rec: Rec) -> Option<Vec<u8>> {
        let swarm = self.docker.inspect_swarm().await.unwrap();
        let packed = swarm.spec?.labels?.remove(&label(case, rec))?;
        let gz = base64::engine::general_purpose::STANDARD_NO_PAD
            .decode(packed.strip_prefix("gz:").unwrap())
            .unwrap();
        let mut out = Vec::new();
        GzDecoder::new(gz.as_slice()).read_to_end(&mut out).unwrap();
        Some(out)
    }
}

#[tokio::test]
async fn swarm_store_refuses_unreadable_records_and_leaves_them() {
    let d = support::Dockerd::start_swarm("127.0.90.1").await;
    let docker =
        bollard::Docker::connect_with_unix(&d.endpoint, 30, bollard::API_DEFAULT_VERSION).unwrap();
    let raw = RawSwarm {
        endpoint: d.endpoint.clone(),
        docker,
    };
    let (a, b) = (raw.open("negotiation").await, raw.open("negotiation").await);
    negotiation(a.as_ref(), b.as_ref()).await;
    unreadable_records(&raw).await;
    // A label that is not even a packed value is refused as well.
    let s = raw.open("revisions").await;
    let swarm = raw.docker.inspect_swarm().await.unwrap();
    let mut spec = swarm.spec.unwrap();
    spec.labels
        .get_or_insert_default()
        .insert(label("revisions", Rec::Revisions), "not packed".into());
    let o = UpdateSwarmOptionsBuilder::default()
        .version(swarm.version.unwrap().index.unwrap() as i64)
        .build();
    raw.docker.update_swarm(spec, o).await.unwrap();
    assert!(matches!(s.desired().await, Err(StoreError::Corrupt(_))));
}
