//! An in-memory [`Store`], as raft ships `MemStorage`: for the simulator,
//! controller tests and trying drover without any backend. Same contract as
//! the real backends (CAS on revisions, epoch fencing), one process only.

use crate::store::{Controls, Epoch, Event, Provenance, Revision, Store, StoreError};
use async_trait::async_trait;
use drover_core::journal::Operation;
use drover_core::spec::ClusterSpec;
use std::sync::Mutex;

/// How many revisions and events are kept.
const HISTORY: usize = 50;
const EVENTS: usize = 1000;

#[derive(Default)]
struct State {
    cluster_id: Option<String>,
    revisions: Vec<Revision>,
    controls: Controls,
    epoch: Epoch,
    holder: String,
    journal: Vec<Operation>,
    status: Option<serde_json::Value>,
    events: Vec<Event>,
}

/// The in-memory store.
#[derive(Default)]
pub struct MemStore {
    state: Mutex<State>,
}

impl MemStore {
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

    fn fenced<T>(&self, epoch: Epoch, f: impl FnOnce(&mut State) -> T) -> Result<T, StoreError> {
        self.with(|s| {
            if s.epoch != epoch {
                return Err(StoreError::Fenced {
                    mine: epoch,
                    current: s.epoch,
                });
            }
            Ok(f(s))
        })
    }
}

#[async_trait]
impl Store for MemStore {
    async fn cluster_id(&self) -> Result<Option<String>, StoreError> {
        self.with(|s| Ok(s.cluster_id.clone()))
    }

    async fn init_cluster(&self, id: &str) -> Result<(), StoreError> {
        self.with(|s| match &s.cluster_id {
            Some(existing) if existing != id => Err(StoreError::ClusterMismatch {
                current: existing.clone(),
                requested: id.to_string(),
            }),
            _ => {
                s.cluster_id = Some(id.to_string());
                Ok(())
            }
        })
    }

    async fn desired(&self) -> Result<Option<Revision>, StoreError> {
        self.with(|s| Ok(s.revisions.last().cloned()))
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
        self.with(|s| {
            let current = s.revisions.last().map_or(0, |r| r.rev);
            if current != expected {
                return Err(StoreError::Conflict { expected, current });
            }
            s.revisions.push(Revision {
                rev: current + 1,
                spec: spec.clone(),
                provenance,
                is_rollback,
                converged: false,
            });
            if s.revisions.len() > HISTORY {
                s.revisions.remove(0);
            }
            Ok(current + 1)
        })
    }

    async fn mark_converged(&self, epoch: Epoch, rev: u64) -> Result<(), StoreError> {
        self.fenced(epoch, |s| {
            if let Some(r) = s.revisions.iter_mut().find(|r| r.rev == rev) {
                r.converged = true;
            }
        })
    }

    async fn controls(&self) -> Result<Controls, StoreError> {
        self.with(|s| Ok(s.controls.clone()))
    }

    async fn set_controls(&self, controls: &Controls) -> Result<(), StoreError> {
        self.with(|s| {
            s.controls = controls.clone();
            Ok(())
        })
    }

    async fn campaign(&self, holder: &str) -> Result<Epoch, StoreError> {
        self.with(|s| {
            s.epoch += 1;
            s.holder = holder.to_string();
            Ok(s.epoch)
        })
    }

    async fn leader(&self) -> Result<Option<(Epoch, String)>, StoreError> {
        self.with(|s| Ok((s.epoch > 0).then(|| (s.epoch, s.holder.clone()))))
    }

    async fn journal(&self) -> Result<Vec<Operation>, StoreError> {
        self.with(|s| Ok(s.journal.clone()))
    }

    async fn journal_put(&self, epoch: Epoch, op: &Operation) -> Result<(), StoreError> {
        self.fenced(epoch, |s| {
            match s.journal.iter_mut().find(|o| o.id == op.id) {
                Some(o) => *o = op.clone(),
                None => s.journal.push(op.clone()),
            }
        })
    }

    async fn journal_remove(&self, epoch: Epoch, op: &str) -> Result<(), StoreError> {
        self.fenced(epoch, |s| s.journal.retain(|o| o.id != op))
    }

    async fn publish_status(
        &self,
        epoch: Epoch,
        status: &serde_json::Value,
    ) -> Result<(), StoreError> {
        self.fenced(epoch, |s| s.status = Some(status.clone()))
    }

    async fn status(&self) -> Result<Option<serde_json::Value>, StoreError> {
        self.with(|s| Ok(s.status.clone()))
    }

    async fn append_event(&self, epoch: Epoch, event: &Event) -> Result<(), StoreError> {
        self.fenced(epoch, |s| {
            s.events.push(event.clone());
            if s.events.len() > EVENTS {
                s.events.remove(0);
            }
        })
    }

    async fn events(&self, since_ms: u64) -> Result<Vec<Event>, StoreError> {
        self.with(|s| {
            Ok(s.events
                .iter()
                .filter(|e| e.at_ms >= since_ms)
                .cloned()
                .collect())
        })
    }
}
