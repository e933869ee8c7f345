//! An in-memory store over the same rules as the real backends (the shared
//! `model`): for the simulator, controller tests and trying drover without
//! any backend, as raft ships `MemStorage`. One process only.

use crate::format::WriteFormat;
use crate::model::{Limits, State};
use async_trait::async_trait;
use drover_core::journal::Operation;
use drover_core::spec::ClusterSpec;
use drover_spi::{
    Controls, Epoch, Event, Heartbeat, Imported, Provenance, Reach, Revision, StatusJson, Store,
    StoreError, Write,
};
use std::sync::Mutex;

/// The in-memory store.
#[derive(Default)]
pub struct MemStore {
    state: Mutex<State>,
    limits: Limits,
    /// Kept for the contract only: nothing is encoded in memory.
    format: WriteFormat,
    /// Wakes [`Store::changed`] waiters on a commit or new controls.
    changes: tokio::sync::Notify,
}

impl MemStore {
    /// A store keeping at most `limits` revisions and events.
    pub fn with_limits(limits: Limits) -> Self {
        MemStore {
            state: Mutex::default(),
            limits,
            format: WriteFormat::default(),
            changes: tokio::sync::Notify::new(),
        }
    }

    fn with<T>(
        &self,
        f: impl FnOnce(&mut State) -> Result<T, StoreError>,
    ) -> Result<T, StoreError> {
        let mut guard = self
            .state
            .lock()
            .map_err(|_| StoreError::Corrupt("store lock poisoned".into()))?;
        f(&mut guard)
    }

    /// The current holder's lease runs out, as etcd's does once its
    /// holder's process died: the term's epoch still fences it, and a
    /// standby may [`acquire`](Store::acquire) a new one. (Memory has no
    /// clock of its own: a test says when.)
    pub fn lapse_lease(&self) {
        if let Ok(mut s) = self.state.lock() {
            s.meta.holder = None;
        }
    }
}

#[async_trait]
impl Store for MemStore {
    async fn cluster_id(&self) -> Result<Option<String>, StoreError> {
        self.with(|s| Ok(s.meta.cluster_id.clone()))
    }
    async fn init_cluster(&self, id: &str) -> Result<(), StoreError> {
        self.with(|s| s.init_cluster(id))
    }
    async fn import(&self, cluster: &Imported) -> Result<(), StoreError> {
        self.with(|s| s.import(cluster, self.limits))?;
        self.changes.notify_waiters();
        Ok(())
    }
    async fn desired(&self) -> Result<Option<Revision>, StoreError> {
        self.with(|s| Ok(s.desired()))
    }
    async fn history(&self) -> Result<Vec<Revision>, StoreError> {
        self.with(|s| Ok(s.revisions.clone()))
    }
    async fn commit(
        &self,
        expected: u64,
        spec: &ClusterSpec,
        provenance: Provenance,
        is_rollback: bool,
    ) -> Result<u64, StoreError> {
        let rev = self.with(|s| s.commit(expected, spec, provenance, is_rollback, self.limits))?;
        self.changes.notify_waiters();
        Ok(rev)
    }
    async fn commit_rollback(
        &self,
        epoch: Epoch,
        expected: u64,
        spec: &ClusterSpec,
        provenance: Provenance,
    ) -> Result<u64, StoreError> {
        let rev =
            self.with(|s| s.commit_rollback(epoch, expected, spec, provenance, self.limits))?;
        self.changes.notify_waiters();
        Ok(rev)
    }
    async fn changed(&self) -> Result<(), StoreError> {
        self.changes.notified().await;
        Ok(())
    }
    async fn mark_converged(&self, epoch: Epoch, rev: u64) -> Result<(), StoreError> {
        self.with(|s| s.mark_converged(epoch, rev))
    }
    async fn controls(&self) -> Result<Controls, StoreError> {
        self.with(|s| Ok(s.controls.clone()))
    }
    async fn set_controls(&self, controls: &Controls) -> Result<(), StoreError> {
        self.with(|s| {
            s.controls = controls.clone();
            Ok(())
        })?;
        self.changes.notify_waiters();
        Ok(())
    }
    async fn campaign(&self, holder: &str) -> Result<Epoch, StoreError> {
        self.with(|s| Ok(s.campaign(holder)))
    }
    async fn leader(&self) -> Result<Option<(Epoch, String)>, StoreError> {
        self.with(|s| Ok(s.leader()))
    }
    async fn acquire(&self, holder: &str) -> Result<Option<Epoch>, StoreError> {
        self.with(|s| Ok(s.acquire(holder)))
    }
    async fn resign(&self, epoch: Epoch) -> Result<(), StoreError> {
        self.with(|s| s.resign(epoch))
    }
    fn reach(&self) -> Reach {
        Reach::Network
    }
    async fn check_epoch(&self, epoch: Epoch) -> Result<(), StoreError> {
        self.with(|s| s.fence(epoch))
    }
    async fn journal(&self) -> Result<Vec<Operation>, StoreError> {
        self.with(|s| Ok(s.journal.values().cloned().collect()))
    }
    async fn journal_put(&self, epoch: Epoch, op: &Operation) -> Result<(), StoreError> {
        self.with(|s| s.journal_put(epoch, op))
    }
    async fn journal_remove(&self, epoch: Epoch, op: &str) -> Result<(), StoreError> {
        self.with(|s| s.journal_remove(epoch, op))
    }
    async fn write_batch(&self, epoch: Epoch, writes: &[Write]) -> Result<(), StoreError> {
        // All or nothing: the only check is the fence, the same for every
        // write of the batch, so the first write's decides for all.
        self.with(|s| s.write_batch(epoch, writes, self.limits))
    }
    async fn publish_status(&self, epoch: Epoch, status: StatusJson) -> Result<(), StoreError> {
        self.with(|s| s.publish_status(epoch, status))
    }
    async fn status(&self) -> Result<Option<serde_json::Value>, StoreError> {
        self.with(|s| s.status())
    }
    async fn append_event(&self, epoch: Epoch, event: &Event) -> Result<(), StoreError> {
        self.with(|s| s.append_event(epoch, event, self.limits))
    }
    async fn events(&self, since_ms: u64) -> Result<Vec<Event>, StoreError> {
        self.with(|s| Ok(s.events_since(since_ms)))
    }
    async fn heartbeat(&self, beat: &Heartbeat) -> Result<(), StoreError> {
        if self.with(|s| Ok(s.heartbeat(beat)))? {
            self.changes.notify_waiters();
        }
        Ok(())
    }
    async fn heartbeats(&self) -> Result<Vec<Heartbeat>, StoreError> {
        self.with(|s| Ok(s.heartbeats.values().cloned().collect()))
    }
    fn write_format(&self) -> u32 {
        self.format.get()
    }
    fn set_write_format(&self, format: u32) {
        self.format.set(format);
    }
}
