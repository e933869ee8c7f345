//! The store's state as one value, split into sections, with every rule of
//! the [`Store`](drover_spi::Store) contract as a pure method: revision CAS,
//! epoch fencing, bounded history and events.
//!
//! The file and swarm backends load the sections an operation needs, apply
//! one of these methods and write the touched sections back *inside one
//! atomic unit* (a redb write transaction; a versioned swarm update), so the
//! checks made here and the write cannot be separated by another writer.

use crate::format;
use drover_core::journal::Operation;
use drover_core::spec::ClusterSpec;
use drover_spi::{
    Controls, Epoch, Event, HEARTBEAT_TTL_MS, Heartbeat, Imported, Provenance, Revision,
    StatusJson, StoreError, Write,
};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, VecDeque};

/// An import's revisions as stored: numbered 1.. in order.
pub(crate) fn renumbered(revisions: &[Revision]) -> Vec<Revision> {
    revisions
        .iter()
        .zip(1..)
        .map(|(r, rev)| Revision { rev, ..r.clone() })
        .collect()
}

/// How much history a backend keeps.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Revisions kept (the newest; older ones are pruned on commit).
    pub history: usize,
    /// Events kept (the newest; older ones are dropped on append).
    pub events: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            history: 100,
            events: 1000,
        }
    }
}

/// One independently stored part of the state.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Section {
    Meta,
    Revisions,
    Controls,
    Journal,
    Status,
    Events,
    /// Controller heartbeats (the format negotiation).
    Controllers,
}

impl Section {
    #[cfg(test)]
    pub(crate) const ALL: [Section; 7] = [
        Section::Meta,
        Section::Revisions,
        Section::Controls,
        Section::Journal,
        Section::Status,
        Section::Events,
        Section::Controllers,
    ];

    pub(crate) fn name(self) -> &'static str {
        match self {
            Section::Meta => "meta",
            Section::Revisions => "revisions",
            Section::Controls => "controls",
            Section::Journal => "journal",
            Section::Status => "status",
            Section::Events => "events",
            Section::Controllers => "controllers",
        }
    }
}

/// The sections a batch touches: the journal, the events, or both (with
/// the term's Meta). An event-free batch leaves the event ring unencoded.
pub(crate) fn batch_sections(writes: &[Write]) -> &'static [Section] {
    let events = writes.iter().any(|w| matches!(w, Write::Event(_)));
    let journal = writes.iter().any(|w| !matches!(w, Write::Event(_)));
    match (journal, events) {
        (true, true) => &[Section::Meta, Section::Journal, Section::Events],
        (false, true) => &[Section::Meta, Section::Events],
        _ => &[Section::Meta, Section::Journal],
    }
}

/// Cluster id, current revision and the controller term.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub(crate) struct Meta {
    pub cluster_id: Option<String>,
    pub rev: u64,
    pub epoch: Epoch,
    pub holder: Option<String>,
}

/// The whole state; sections not loaded stay at their defaults.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct State {
    pub meta: Meta,
    /// Oldest first.
    pub revisions: Vec<Revision>,
    pub controls: Controls,
    pub journal: BTreeMap<String, Operation>,
    pub status: Option<StatusJson>,
    /// Oldest first. A ring: once `Limits::events` are kept, every append
    /// drops the oldest, which a `Vec` did by moving all the others.
    pub events: VecDeque<Event>,
    /// By holder.
    pub heartbeats: BTreeMap<String, Heartbeat>,
}

impl State {
    /// Serialises one section as a record of `format` (see [`format`]).
    pub(crate) fn encode(&self, section: Section, fmt: u32) -> Vec<u8> {
        match section {
            Section::Meta => format::encode(&self.meta, fmt),
            Section::Revisions => format::encode(&self.revisions, fmt),
            Section::Controls => format::encode(&self.controls, fmt),
            Section::Journal => format::encode(&self.journal, fmt),
            Section::Status => {
                let json = self
                    .status
                    .as_ref()
                    .map_or(&b"null"[..], StatusJson::as_bytes);
                format::encode_json(json, fmt)
            }
            Section::Events => format::encode(&self.events, fmt),
            Section::Controllers => format::encode(&self.heartbeats, fmt),
        }
    }

    /// Loads one section; a newer format or garbage is an error (and the
    /// caller then writes nothing back).
    pub(crate) fn decode(&mut self, section: Section, bytes: &[u8]) -> Result<(), StoreError> {
        let record = format!("store section {}", section.name());
        let r = record.as_str();
        match section {
            Section::Meta => self.meta = format::decode(r, bytes)?,
            Section::Revisions => self.revisions = format::decode(r, bytes)?,
            Section::Controls => self.controls = format::decode(r, bytes)?,
            Section::Journal => self.journal = format::decode(r, bytes)?,
            Section::Status => {
                let doc: Option<serde_json::Value> = format::decode(r, bytes)?;
                self.status = doc
                    .map(|d| StatusJson::new(&d))
                    .transpose()
                    .map_err(|e| StoreError::Corrupt(format!("{r}: {e}")))?;
            }
            Section::Events => self.events = format::decode(r, bytes)?,
            Section::Controllers => self.heartbeats = format::decode(r, bytes)?,
        }
        Ok(())
    }

    /// Records a heartbeat; beats far older than the TTL are dropped so the
    /// section stays small (needs Controllers). True when it newly reports
    /// a leave ([`Heartbeat::newly_left`]): news for the change watch.
    pub(crate) fn heartbeat(&mut self, beat: &Heartbeat) -> bool {
        let before = self.heartbeats.insert(beat.holder.clone(), beat.clone());
        let horizon = beat.at_ms.saturating_sub(10 * HEARTBEAT_TTL_MS);
        self.heartbeats.retain(|_, b| b.at_ms >= horizon);
        beat.newly_left(before.as_ref())
    }

    /// Records the cluster id once.
    pub(crate) fn init_cluster(&mut self, id: &str) -> Result<(), StoreError> {
        match &self.meta.cluster_id {
            None => {
                self.meta.cluster_id = Some(id.to_string());
                Ok(())
            }
            Some(cur) if cur == id => Ok(()),
            Some(cur) => Err(StoreError::ClusterMismatch {
                current: cur.clone(),
                requested: id.to_string(),
            }),
        }
    }

    /// An import's whole write (needs Meta, Revisions and Controls): into
    /// an empty store only, every revision renumbered 1.. and the newest
    /// `limits.history` kept, as commits would have left them.
    pub(crate) fn import(&mut self, cluster: &Imported, limits: Limits) -> Result<(), StoreError> {
        if self.meta.cluster_id.is_some() || self.meta.rev != 0 || !self.revisions.is_empty() {
            return Err(StoreError::ClusterMismatch {
                current: self.meta.cluster_id.clone().unwrap_or_default(),
                requested: cluster.cluster_id.clone(),
            });
        }
        self.meta.cluster_id = Some(cluster.cluster_id.clone());
        self.revisions = renumbered(&cluster.revisions);
        self.meta.rev = self.revisions.len() as u64;
        let excess = self.revisions.len().saturating_sub(limits.history.max(1));
        self.revisions.drain(..excess);
        self.controls = cluster.controls.clone();
        Ok(())
    }

    /// The current revision (needs Meta and Revisions).
    pub(crate) fn desired(&self) -> Option<Revision> {
        self.revisions
            .iter()
            .rev()
            .find(|r| r.rev == self.meta.rev)
            .cloned()
    }

    /// Revision CAS (needs Meta and Revisions).
    pub(crate) fn commit(
        &mut self,
        expected: u64,
        spec: &ClusterSpec,
        provenance: Provenance,
        is_rollback: bool,
        limits: Limits,
    ) -> Result<u64, StoreError> {
        if self.meta.rev != expected {
            return Err(StoreError::Conflict {
                expected,
                current: self.meta.rev,
            });
        }
        let rev = expected + 1;
        self.meta.rev = rev;
        self.revisions.push(Revision {
            rev,
            spec: spec.clone(),
            provenance,
            is_rollback,
            converged: false,
        });
        let excess = self.revisions.len().saturating_sub(limits.history.max(1));
        self.revisions.drain(..excess);
        Ok(rev)
    }

    /// A fenced revision CAS (needs Meta and Revisions): the epoch first.
    pub(crate) fn commit_rollback(
        &mut self,
        epoch: Epoch,
        expected: u64,
        spec: &ClusterSpec,
        provenance: Provenance,
        limits: Limits,
    ) -> Result<u64, StoreError> {
        self.fence(epoch)?;
        self.commit(expected, spec, provenance, true, limits)
    }

    /// Epoch fencing (needs Meta). Epoch 0 was never won: always fenced.
    pub(crate) fn fence(&self, mine: Epoch) -> Result<(), StoreError> {
        if mine == 0 || mine != self.meta.epoch {
            return Err(StoreError::Fenced {
                mine,
                current: self.meta.epoch,
            });
        }
        Ok(())
    }

    /// Needs Meta and Revisions.
    pub(crate) fn mark_converged(&mut self, epoch: Epoch, rev: u64) -> Result<(), StoreError> {
        self.fence(epoch)?;
        match self.revisions.iter_mut().find(|r| r.rev == rev) {
            Some(r) => {
                r.converged = true;
                Ok(())
            }
            None => Err(StoreError::Conflict {
                expected: rev,
                current: self.meta.rev,
            }),
        }
    }

    /// A new term (needs Meta).
    pub(crate) fn campaign(&mut self, holder: &str) -> Epoch {
        self.meta.epoch += 1;
        self.meta.holder = Some(holder.to_string());
        self.meta.epoch
    }

    /// Needs Meta.
    pub(crate) fn leader(&self) -> Option<(Epoch, String)> {
        self.meta.holder.clone().map(|h| (self.meta.epoch, h))
    }

    /// A new term only while nobody holds one (needs Meta).
    pub(crate) fn acquire(&mut self, holder: &str) -> Option<Epoch> {
        match self.meta.holder {
            Some(_) => None,
            None => Some(self.campaign(holder)),
        }
    }

    /// Term `epoch` given up (needs Meta): no holder until the next
    /// campaign; a stale epoch changes nothing.
    pub(crate) fn resign(&mut self, epoch: Epoch) -> Result<(), StoreError> {
        self.fence(epoch)?;
        self.meta.holder = None;
        Ok(())
    }

    /// Needs Meta and Journal.
    pub(crate) fn journal_put(&mut self, epoch: Epoch, op: &Operation) -> Result<(), StoreError> {
        self.fence(epoch)?;
        self.journal.insert(op.id.clone(), op.clone());
        Ok(())
    }

    /// Needs Meta and Journal.
    pub(crate) fn journal_remove(&mut self, epoch: Epoch, op: &str) -> Result<(), StoreError> {
        self.fence(epoch)?;
        self.journal.remove(op);
        Ok(())
    }

    /// Applies a controller's batch in order (needs Meta and the sections
    /// [`batch_sections`] names); the first refusal fails the whole batch,
    /// and the backends then write nothing of it.
    pub(crate) fn write_batch(
        &mut self,
        epoch: Epoch,
        writes: &[Write],
        limits: Limits,
    ) -> Result<(), StoreError> {
        for write in writes {
            match write {
                Write::JournalPut(op) => self.journal_put(epoch, op)?,
                Write::JournalRemove(id) => self.journal_remove(epoch, id)?,
                Write::Event(event) => self.append_event(epoch, event, limits)?,
            }
        }
        Ok(())
    }

    /// Needs Meta and Status.
    pub(crate) fn publish_status(
        &mut self,
        epoch: Epoch,
        status: StatusJson,
    ) -> Result<(), StoreError> {
        self.fence(epoch)?;
        self.status = Some(status);
        Ok(())
    }

    /// The status document, parsed (needs Status).
    pub(crate) fn status(&self) -> Result<Option<serde_json::Value>, StoreError> {
        self.status.as_ref().map(StatusJson::to_value).transpose()
    }

    /// Needs Meta and Events.
    pub(crate) fn append_event(
        &mut self,
        epoch: Epoch,
        event: &Event,
        limits: Limits,
    ) -> Result<(), StoreError> {
        self.fence(epoch)?;
        self.events.push_back(event.clone());
        let excess = self.events.len().saturating_sub(limits.events.max(1));
        self.events.drain(..excess);
        Ok(())
    }

    /// Needs Events.
    pub(crate) fn events_since(&self, since_ms: u64) -> Vec<Event> {
        events_since(self.events.iter().cloned(), since_ms)
    }
}

/// Events at or after `since_ms`, in stored (oldest first) order.
pub(crate) fn events_since(events: impl Iterator<Item = Event>, since_ms: u64) -> Vec<Event> {
    events.filter(|e| e.at_ms >= since_ms).collect()
}

/// Any displayable backend failure as a retryable `Unavailable`.
pub(crate) fn unavailable(what: &str, e: impl std::fmt::Display) -> StoreError {
    StoreError::Unavailable(format!("{what}: {e}"))
}

/// The innermost cause of `e`, the one an operator can act on
/// ("Connection refused (os error 111)"), without the layers above it.
pub(crate) fn root_cause(e: &(dyn std::error::Error + 'static)) -> String {
    let mut inner = e;
    while let Some(next) = inner.source() {
        inner = next;
    }
    inner.to_string()
}

/// True when an I/O error (refused, reset, unreachable, DNS) is among the
/// causes of `e`: the server was not reached, whatever the outer layer says.
pub(crate) fn is_transport(e: &(dyn std::error::Error + 'static)) -> bool {
    let mut cur = Some(e);
    while let Some(c) = cur {
        let text = c.to_string();
        if c.is::<std::io::Error>()
            || [
                "transport error",
                "connect error",
                "error trying to connect",
            ]
            .iter()
            .any(|t| text.contains(t))
        {
            return true;
        }
        cur = c.source();
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn epoch_zero_is_always_fenced() {
        let s = State::default();
        assert!(matches!(
            s.fence(0),
            Err(StoreError::Fenced {
                mine: 0,
                current: 0
            })
        ));
    }

    #[test]
    fn sections_round_trip() {
        let mut s = State::default();
        s.campaign("a");
        s.init_cluster("c").unwrap();
        s.status = StatusJson::new(&serde_json::json!({"x": [1, "two", null]})).ok();
        s.heartbeat(&Heartbeat {
            holder: "a".into(),
            format: 2,
            at_ms: 5,
            engine: None,
            seat: None,
            waiting: None,
        });
        for fmt in drover_spi::OLDEST_FORMAT..=drover_spi::FORMAT {
            let mut t = State::default();
            for sec in Section::ALL {
                t.decode(sec, &s.encode(sec, fmt)).unwrap();
            }
            assert_eq!(s, t);
        }
    }
}
