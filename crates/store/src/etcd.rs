//! The `etcd` store: keys under a prefix (default `/drover/default`).
//!
//! | key                         | value                                     |
//! |-----------------------------|-------------------------------------------|
//! | `<p>/cluster_id`            | the cluster id                            |
//! | `<p>/rev`                   | current revision number (decimal)         |
//! | `<p>/revs/<rev:020>`        | a [`Revision`] (JSON)                     |
//! | `<p>/controls`              | [`Controls`] (JSON)                       |
//! | `<p>/epoch`                 | current epoch (decimal), never leased     |
//! | `<p>/leader`                | `{epoch, holder}` (JSON), under a lease   |
//! | `<p>/journal/<op id>`       | an [`Operation`] (JSON)                   |
//! | `<p>/status`                | the status document (JSON)                |
//! | `<p>/events/seq`            | last event sequence number (decimal)      |
//! | `<p>/events/e/<seq:020>`    | an [`Event`] (JSON)                       |
//! | `<p>/controllers/<holder>`  | a [`Heartbeat`] (JSON)                    |
//!
//! JSON values are records in the negotiated format (`crate::format`); a key
//! is only ever replaced after its current record was read and understood.
//!
//! A spec commit is one txn comparing `<p>/rev`'s value with the caller's
//! base revision. Every controller write is one txn whose first compare is
//! `value(<p>/epoch) == caller's epoch`: etcd itself refuses a stale epoch,
//! atomically with the write; there is no client-side pre-check to skip.
//!
//! `campaign` grants a lease (TTL [`EtcdOptions::lease_ttl`], 5 s by
//! default), bumps `<p>/epoch` in a txn and puts `<p>/leader` under the
//! lease, kept alive by a background task. 5 s: a dead controller's
//! `leader` key disappears within 5 s (so standbys see "no leader" and
//! campaign), while a keep-alive every TTL/3 ≈ 1.7 s survives two lost
//! round trips or a short etcd leader election (~1 s by default).

mod batch;
mod connect;
mod import;
mod lease;
mod probe;
mod refusal;

pub use connect::EtcdOptions;
pub(crate) use connect::parse_endpoints;
use lease::Election;

use crate::format::{self, WriteFormat};
use crate::model::{Limits, events_since, unavailable};
use async_trait::async_trait;
use drover_core::journal::Operation;
use drover_core::spec::ClusterSpec;
use drover_spi::{
    Controls, Epoch, Event, Heartbeat, Imported, Provenance, Reach, Revision, StatusJson, Store,
    StoreError, Write,
};
use etcd_client::{
    Client, Compare, CompareOp, DeleteOptions, GetOptions, KvClient, Txn, TxnOp, WatchFilterType,
    WatchOptions,
};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use std::sync::Mutex;
use std::time::Duration;

#[derive(Serialize, Deserialize)]
struct LeaderRecord {
    epoch: Epoch,
    holder: String,
}

/// A store in etcd.
pub struct EtcdStore {
    client: Client,
    prefix: String,
    lease_ttl: Duration,
    limits: Limits,
    /// The lease of our last campaign, kept alive while held.
    lease: Mutex<Option<lease::Held>>,
    format: WriteFormat,
    /// The store as error messages name it (no secret).
    peer: refusal::Peer,
}

impl std::fmt::Debug for EtcdStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EtcdStore")
            .field("prefix", &self.prefix)
            .finish()
    }
}

impl Drop for EtcdStore {
    fn drop(&mut self) {
        if let Ok(mut g) = self.lease.lock()
            && let Some(held) = g.take()
        {
            held.keeper.abort();
        }
    }
}

/// A heartbeat put that newly reports its controller's engine left (see
/// [`Heartbeat::newly_left`]); a beat that does not decode is no news.
fn reports_a_leave(event: &etcd_client::Event) -> bool {
    let beat = |kv: &etcd_client::KeyValue| parse::<Heartbeat>("heartbeat", kv.value()).ok();
    event
        .kv()
        .and_then(beat)
        .is_some_and(|b| b.newly_left(event.prev_kv().and_then(beat).as_ref()))
}

fn parse<T: DeserializeOwned>(key: &str, bytes: &[u8]) -> Result<T, StoreError> {
    format::decode(&format!("etcd key {key}"), bytes)
}

fn number(key: &str, bytes: &[u8]) -> Result<u64, StoreError> {
    std::str::from_utf8(bytes)
        .ok()
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| StoreError::Corrupt(format!("{key}: not a number")))
}

/// Compare: `key`'s decimal value is `n`, where 0 means "absent".
fn value_is(key: &str, n: u64) -> Compare {
    if n == 0 {
        Compare::version(key, CompareOp::Equal, 0)
    } else {
        Compare::value(key, CompareOp::Equal, n.to_string())
    }
}

impl EtcdStore {
    /// The full key for `name` under the prefix.
    pub fn key(&self, name: &str) -> String {
        format!("{}/{name}", self.prefix)
    }

    /// The raw etcd client (for tools and tests).
    pub fn client(&self) -> &Client {
        &self.client
    }

    fn etcd_err(&self, e: etcd_client::Error) -> StoreError {
        refusal::store_error(&self.peer, e)
    }

    fn kv(&self) -> KvClient {
        self.client.kv_client()
    }

    /// `v` as a record in the negotiated format.
    fn json<T: Serialize>(&self, v: &T) -> Vec<u8> {
        format::encode(v, self.format.get())
    }

    /// Before a key is replaced: its current record must be one this build
    /// reads (else that error, and nothing is written, so a newer drover's or
    /// a damaged record is never overwritten); the returned compare makes
    /// the write land only if the key is still what was checked.
    async fn readable<T: DeserializeOwned>(&self, key: &str) -> Result<Compare, StoreError> {
        Ok(match self.get(key).await? {
            Some((v, m)) => {
                parse::<T>(key, &v)?;
                Compare::mod_revision(key, CompareOp::Equal, m)
            }
            None => Compare::version(key, CompareOp::Equal, 0),
        })
    }

    /// Replaces `key` with `value` (fenced by `epoch` when given), never
    /// over a record this build cannot read.
    async fn replace<T: Serialize + DeserializeOwned>(
        &self,
        key: &str,
        value: &T,
        epoch: Option<Epoch>,
    ) -> Result<(), StoreError> {
        self.replace_record::<T>(key, self.json(value), epoch).await
    }

    /// [`Self::replace`] with the record already encoded; `T` is what the
    /// key holds, to check the record it replaces.
    async fn replace_record<T: DeserializeOwned>(
        &self,
        key: &str,
        record: Vec<u8>,
        epoch: Option<Epoch>,
    ) -> Result<(), StoreError> {
        loop {
            let same = self.readable::<T>(key).await?;
            let put = TxnOp::put(key, record.clone(), None);
            let written = match epoch {
                Some(e) => self.fenced(e, vec![same], vec![put]).await?,
                None => self
                    .kv()
                    .txn(Txn::new().when(vec![same]).and_then(vec![put]))
                    .await
                    .map_err(|e| self.etcd_err(e))?
                    .succeeded(),
            };
            if written {
                return Ok(());
            }
        }
    }

    /// Value and mod revision of one key.
    async fn get(&self, key: &str) -> Result<Option<(Vec<u8>, i64)>, StoreError> {
        let resp = self
            .kv()
            .get(key, None)
            .await
            .map_err(|e| self.etcd_err(e))?;
        Ok(resp
            .kvs()
            .first()
            .map(|kv| (kv.value().to_vec(), kv.mod_revision())))
    }

    async fn get_number(&self, name: &str) -> Result<u64, StoreError> {
        let key = self.key(name);
        match self.get(&key).await? {
            Some((v, _)) => number(&key, &v),
            None => Ok(0),
        }
    }

    /// Values under `name/`, in key order.
    async fn get_prefix(&self, name: &str) -> Result<Vec<(String, Vec<u8>)>, StoreError> {
        let resp = self
            .kv()
            .get(self.key(name), Some(GetOptions::new().with_prefix()))
            .await
            .map_err(|e| self.etcd_err(e))?;
        Ok(resp
            .kvs()
            .iter()
            .map(|kv| {
                (
                    String::from_utf8_lossy(kv.key()).into_owned(),
                    kv.value().to_vec(),
                )
            })
            .collect())
    }

    /// One fenced txn: `value(epoch) == mine` AND `extra`, then `ops`.
    /// `Ok(true)`: written. `Ok(false)`: the epoch held but an `extra`
    /// compare failed (the caller re-reads and retries). A stale epoch is
    /// [`StoreError::Fenced`]: the refusal is etcd's compare, atomic with the
    /// write.
    async fn fenced(
        &self,
        mine: Epoch,
        extra: Vec<Compare>,
        ops: Vec<TxnOp>,
    ) -> Result<bool, StoreError> {
        let epoch_key = self.key("epoch");
        let mut cmp = vec![Compare::value(
            epoch_key.as_str(),
            CompareOp::Equal,
            mine.to_string(),
        )];
        cmp.extend(extra);
        let resp = self
            .kv()
            .txn(Txn::new().when(cmp).and_then(ops))
            .await
            .map_err(|e| self.etcd_err(e))?;
        if resp.succeeded() {
            return Ok(true);
        }
        let current = self.get_number("epoch").await?;
        if mine == 0 || current != mine {
            return Err(StoreError::Fenced { mine, current });
        }
        Ok(false)
    }

    /// A commit's txn: the compare that revision `expected` is still
    /// current, and the writes of revision `expected + 1` (the oldest
    /// revisions beyond the history limit pruned).
    fn commit_txn(
        &self,
        expected: u64,
        spec: &ClusterSpec,
        provenance: Provenance,
        is_rollback: bool,
    ) -> (Compare, Vec<TxnOp>) {
        let rev = expected + 1;
        let revision = Revision {
            rev,
            spec: spec.clone(),
            provenance,
            is_rollback,
            converged: false,
        };
        let rev_key = self.key("rev");
        let mut ops = vec![
            TxnOp::put(rev_key.as_str(), rev.to_string(), None),
            TxnOp::put(self.rev_key(rev), self.json(&revision), None),
        ];
        // Keep the newest `history` revisions: delete [revs/0, revs/<rev-history+1>).
        let keep_from = (rev + 1).saturating_sub(self.limits.history.max(1) as u64);
        if keep_from > 1 {
            ops.push(TxnOp::delete(
                self.rev_key(0),
                Some(DeleteOptions::new().with_range(self.rev_key(keep_from))),
            ));
        }
        (value_is(&rev_key, expected), ops)
    }

    /// The refusal of a commit whose base `expected` is no longer current,
    /// naming the store's revision (or why it could not be read).
    async fn conflict(&self, expected: u64) -> StoreError {
        match self.get_number("rev").await {
            Ok(current) => StoreError::Conflict { expected, current },
            Err(e) => e,
        }
    }

    fn rev_key(&self, rev: u64) -> String {
        self.key(&format!("revs/{rev:020}"))
    }

    fn journal_key(&self, op: &str) -> String {
        self.key(&format!("journal/{op}"))
    }

    fn event_key(&self, seq: u64) -> String {
        self.key(&format!("events/e/{seq:020}"))
    }
}

#[async_trait]
impl Store for EtcdStore {
    async fn cluster_id(&self) -> Result<Option<String>, StoreError> {
        Ok(self
            .get(&self.key("cluster_id"))
            .await?
            .map(|(v, _)| String::from_utf8_lossy(&v).into_owned()))
    }

    async fn init_cluster(&self, id: &str) -> Result<(), StoreError> {
        let key = self.key("cluster_id");
        let resp = self
            .kv()
            .txn(
                Txn::new()
                    .when(vec![Compare::version(key.as_str(), CompareOp::Equal, 0)])
                    .and_then(vec![TxnOp::put(key.as_str(), id, None)]),
            )
            .await
            .map_err(|e| self.etcd_err(e))?;
        if resp.succeeded() {
            return Ok(());
        }
        match self.cluster_id().await? {
            Some(cur) if cur == id => Ok(()),
            Some(cur) => Err(StoreError::ClusterMismatch {
                current: cur,
                requested: id.to_string(),
            }),
            None => Err(StoreError::Unavailable(
                "cluster id vanished while being set; retry".into(),
            )),
        }
    }

    async fn import(&self, cluster: &Imported) -> Result<(), StoreError> {
        self.import_txn(cluster).await
    }

    async fn desired(&self) -> Result<Option<Revision>, StoreError> {
        let rev = self.get_number("rev").await?;
        if rev == 0 {
            return Ok(None);
        }
        let key = self.rev_key(rev);
        match self.get(&key).await? {
            Some((v, _)) => Ok(Some(parse(&key, &v)?)),
            None => Err(StoreError::Corrupt(format!("{key} is missing"))),
        }
    }

    async fn history(&self) -> Result<Vec<Revision>, StoreError> {
        self.get_prefix("revs/")
            .await?
            .iter()
            .map(|(k, v)| parse(k, v))
            .collect()
    }

    async fn commit(
        &self,
        expected: u64,
        spec: &ClusterSpec,
        provenance: Provenance,
        is_rollback: bool,
    ) -> Result<u64, StoreError> {
        let (same_rev, ops) = self.commit_txn(expected, spec, provenance, is_rollback);
        let resp = self
            .kv()
            .txn(Txn::new().when(vec![same_rev]).and_then(ops))
            .await
            .map_err(|e| self.etcd_err(e))?;
        if resp.succeeded() {
            return Ok(expected + 1);
        }
        Err(self.conflict(expected).await)
    }

    async fn commit_rollback(
        &self,
        epoch: Epoch,
        expected: u64,
        spec: &ClusterSpec,
        provenance: Provenance,
    ) -> Result<u64, StoreError> {
        // One txn: the epoch compare first, then the revision's.
        let (same_rev, ops) = self.commit_txn(expected, spec, provenance, true);
        if self.fenced(epoch, vec![same_rev], ops).await? {
            return Ok(expected + 1);
        }
        Err(self.conflict(expected).await)
    }

    async fn mark_converged(&self, epoch: Epoch, rev: u64) -> Result<(), StoreError> {
        let key = self.rev_key(rev);
        loop {
            let Some((v, mod_rev)) = self.get(&key).await? else {
                // Fenced first: a deposed controller learns it is deposed.
                self.fenced(epoch, vec![], vec![]).await?;
                return Err(StoreError::Conflict {
                    expected: rev,
                    current: self.get_number("rev").await?,
                });
            };
            let mut r: Revision = parse(&key, &v)?;
            r.converged = true;
            let same = Compare::mod_revision(key.as_str(), CompareOp::Equal, mod_rev);
            let put = TxnOp::put(key.as_str(), self.json(&r), None);
            if self.fenced(epoch, vec![same], vec![put]).await? {
                return Ok(());
            }
        }
    }

    async fn changed(&self) -> Result<(), StoreError> {
        // One watch per key the controllers act on (not the whole prefix:
        // status and heartbeats change every pass), and one on the
        // heartbeats that wakes only for a beat newly reporting a leave
        // (each event carries the beat it replaced, so no read is needed).
        let mut client = self.client.clone();
        let mut revs = client
            .watch(self.key("rev"), None)
            .await
            .map_err(|e| self.etcd_err(e))?;
        let mut controls = client
            .watch(self.key("controls"), None)
            .await
            .map_err(|e| self.etcd_err(e))?;
        let beats_opts = WatchOptions::new()
            .with_prefix()
            .with_prev_key()
            .with_filters([WatchFilterType::NoDelete]);
        let mut beats = client
            .watch(self.key("controllers/"), Some(beats_opts))
            .await
            .map_err(|e| self.etcd_err(e))?;
        loop {
            let (message, is_beat) = tokio::select! {
                m = revs.message() => (m, false),
                m = controls.message() => (m, false),
                m = beats.message() => (m, true),
            };
            match message.map_err(|e| self.etcd_err(e))? {
                Some(r) if r.canceled() => {
                    return Err(unavailable("etcd", "the watch was cancelled"));
                }
                Some(r) if is_beat => {
                    if r.events().iter().any(reports_a_leave) {
                        return Ok(());
                    }
                }
                Some(r) if !r.events().is_empty() => return Ok(()),
                // The watch's own "created" notice, or progress: keep waiting.
                Some(_) => {}
                None => return Err(unavailable("etcd", "the watch stream ended")),
            }
        }
    }
    async fn controls(&self) -> Result<Controls, StoreError> {
        let key = self.key("controls");
        match self.get(&key).await? {
            Some((v, _)) => parse(&key, &v),
            None => Ok(Controls::default()),
        }
    }

    async fn set_controls(&self, controls: &Controls) -> Result<(), StoreError> {
        self.replace(&self.key("controls"), controls, None).await
    }

    async fn campaign(&self, holder: &str) -> Result<Epoch, StoreError> {
        let won = self.elect(holder, Election::Take).await?;
        won.ok_or_else(|| StoreError::Unavailable("etcd: a campaign was not won".into()))
    }

    async fn acquire(&self, holder: &str) -> Result<Option<Epoch>, StoreError> {
        self.elect(holder, Election::WhenFree).await
    }

    async fn resign(&self, epoch: Epoch) -> Result<(), StoreError> {
        self.resign_term(epoch).await
    }

    fn reach(&self) -> Reach {
        Reach::Network
    }

    async fn leader(&self) -> Result<Option<(Epoch, String)>, StoreError> {
        let key = self.key("leader");
        Ok(match self.get(&key).await? {
            Some((v, _)) => {
                let r: LeaderRecord = parse(&key, &v)?;
                Some((r.epoch, r.holder))
            }
            None => None,
        })
    }

    async fn check_epoch(&self, epoch: Epoch) -> Result<(), StoreError> {
        // A txn of the epoch compare alone (not the leased `leader` record,
        // which can expire while the epoch still stands): linearizable.
        self.fenced(epoch, vec![], vec![]).await.map(|_| ())
    }

    async fn journal(&self) -> Result<Vec<Operation>, StoreError> {
        self.get_prefix("journal/")
            .await?
            .iter()
            .map(|(k, v)| parse(k, v))
            .collect()
    }

    async fn journal_put(&self, epoch: Epoch, op: &Operation) -> Result<(), StoreError> {
        self.replace(&self.journal_key(&op.id), op, Some(epoch))
            .await
    }

    async fn journal_remove(&self, epoch: Epoch, op: &str) -> Result<(), StoreError> {
        let del = TxnOp::delete(self.journal_key(op), None);
        self.fenced(epoch, vec![], vec![del]).await.map(|_| ())
    }

    async fn publish_status(&self, epoch: Epoch, status: StatusJson) -> Result<(), StoreError> {
        let record = format::encode_json(status.as_bytes(), self.format.get());
        self.replace_record::<serde_json::Value>(&self.key("status"), record, Some(epoch))
            .await
    }

    async fn status(&self) -> Result<Option<serde_json::Value>, StoreError> {
        let key = self.key("status");
        match self.get(&key).await? {
            Some((v, _)) => Ok(Some(parse(&key, &v)?)),
            None => Ok(None),
        }
    }

    async fn append_event(&self, epoch: Epoch, event: &Event) -> Result<(), StoreError> {
        self.write_batch(epoch, &[Write::Event(event.clone())])
            .await
    }

    /// In transactions of a bounded number of writes, in order
    /// ([`batch`]).
    async fn write_batch(&self, epoch: Epoch, writes: &[Write]) -> Result<(), StoreError> {
        self.write_chunks(epoch, writes).await
    }

    async fn events(&self, since_ms: u64) -> Result<Vec<Event>, StoreError> {
        let events = self
            .get_prefix("events/e/")
            .await?
            .iter()
            .map(|(k, v)| parse(k, v))
            .collect::<Result<Vec<Event>, _>>()?;
        Ok(events_since(events.into_iter(), since_ms))
    }

    async fn heartbeat(&self, beat: &Heartbeat) -> Result<(), StoreError> {
        let key = self.key(&format!("controllers/{}", beat.holder));
        self.replace(&key, beat, None).await
    }

    async fn heartbeats(&self) -> Result<Vec<Heartbeat>, StoreError> {
        self.get_prefix("controllers/")
            .await?
            .iter()
            .map(|(k, v)| parse(k, v))
            .collect()
    }

    fn write_format(&self) -> u32 {
        self.format.get()
    }

    fn set_write_format(&self, format: u32) {
        self.format.set(format);
    }
}
