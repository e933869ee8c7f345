//! The store: desired specs with history, the operation journal, published
//! status, the event log and controller leadership. The store is drover's
//! API: the CLI writes desired state to it and reads status from it.
//!
//! Every write is conditional. Spec commits compare-and-swap on the
//! revision their plan was computed from (two operators cannot silently
//! overwrite each other); controller writes are fenced by the epoch the
//! controller won in [`Store::campaign`] — a deposed controller's write is
//! refused by the store itself ([`StoreError::Fenced`]), and it stops acting.
//!
//! Writing the store is the power to destroy the fleet: guard it like root.

use async_trait::async_trait;
pub use drover_core::control::{Reach, Seat};
use drover_core::journal::Operation;
use drover_core::quorum_probe::EngineView;
use drover_core::revision::Past;
use drover_core::spec::ClusterSpec;
use serde::{Deserialize, Serialize};
use std::collections::BTreeSet;

/// A controller term. Strictly increasing across campaigns.
pub type Epoch = u64;

/// The newest record format this build reads and writes. Format 1 is the
/// bare JSON of session-1 builds; format 2 wraps every record as
/// `{"drover_format": 2, "data": ...}` so a future reader can tell.
pub const FORMAT: u32 = 2;
/// The oldest record format this build still reads and writes.
pub const OLDEST_FORMAT: u32 = 1;
/// A controller heartbeat older than this no longer holds the write format
/// down (a controller that was stopped for good must not pin it forever).
pub const HEARTBEAT_TTL_MS: u64 = 10 * 60 * 1000;

/// What a running controller advertises: the newest format it can read,
/// and what its own engine last said of the swarm.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Heartbeat {
    /// The controller (its link or host).
    pub holder: String,
    /// The newest record format its build reads.
    pub format: u32,
    /// Wall-clock time of the beat, ms since the Unix epoch.
    pub at_ms: u64,
    /// Its own engine's view at that beat (a manager's controller, where
    /// the store lives outside the raft: written every pass, so `drover
    /// status` sees a lost quorum, and the next leader a former leader's
    /// leave, without asking the engines). Absent in beats of older builds
    /// and of off-cluster controllers; older builds ignore it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub engine: Option<EngineView>,
    /// Where it runs: next to a manager, or an external controller (absent
    /// in beats of older builds and of `apply`'s bootstrap).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seat: Option<Seat>,
    /// Why it does not act, in one line, when it may not (the declared
    /// `control:`) or another controller holds the term it waits for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub waiting: Option<String>,
}

impl Heartbeat {
    /// True when `self` reports a leave `before` (the same holder's previous
    /// beat, if any) did not: the news a store's change watch wakes the
    /// acting controller for (one wake per leave, not one per beat).
    pub fn newly_left(&self, before: Option<&Heartbeat>) -> bool {
        let left = |b: &Heartbeat| b.engine.as_ref().and_then(|e| e.left.clone());
        left(self).is_some() && before.and_then(left) != left(self)
    }
}

/// The format every writer uses: the oldest format any live controller
/// advertises (so an old controller mid-upgrade still reads every record),
/// never newer than this build's and never older than it can write. With no
/// live controller, this build's own.
pub fn write_format(beats: &[Heartbeat], now_ms: u64) -> u32 {
    beats
        .iter()
        .filter(|b| now_ms.saturating_sub(b.at_ms) <= HEARTBEAT_TTL_MS)
        .map(|b| b.format)
        .min()
        .unwrap_or(FORMAT)
        .clamp(OLDEST_FORMAT, FORMAT)
}

/// Who committed a revision, when and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Provenance {
    /// Operator (user@host) or `controller` for automatic rollbacks.
    pub who: String,
    /// Wall-clock time, ms since the Unix epoch.
    pub at_ms: u64,
    /// Free-form message.
    pub message: String,
}

/// One desired-state revision.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Revision {
    /// Revision number, from 1.
    pub rev: u64,
    /// The spec.
    pub spec: ClusterSpec,
    /// Who, when, why.
    pub provenance: Provenance,
    /// This revision is an automatic rollback.
    pub is_rollback: bool,
    /// The cluster converged on this revision at some point.
    pub converged: bool,
}

impl Revision {
    /// This revision as the revision rules (`drover_core::revision`) read it.
    pub fn past(&self) -> Past<'_> {
        Past {
            rev: self.rev,
            converged: self.converged,
            spec: &self.spec,
        }
    }
}

/// A whole cluster as [`Store::import`] writes it.
#[derive(Debug, Clone, PartialEq)]
pub struct Imported {
    /// The cluster id (every machine is tagged with it).
    pub cluster_id: String,
    /// Every revision, oldest first; stored as revisions 1.. in this order.
    pub revisions: Vec<Revision>,
    /// The operator controls.
    pub controls: Controls,
}

/// Operator controls that are not part of the spec.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Controls {
    /// Paused groups.
    pub paused: BTreeSet<String>,
    /// Instances on hold (no healing, collection or roll).
    pub held: BTreeSet<String>,
    /// Instances an operator asked to have replaced (`drover replace`),
    /// rolled like an outdated member; absent in older stores.
    #[serde(default)]
    pub replace: BTreeSet<String>,
    /// Of those, the ones to replace without draining first
    /// (`drover replace --skip-drain`: the node is stuck or its tasks are
    /// expendable); absent in older stores.
    #[serde(default, skip_serializing_if = "BTreeSet::is_empty")]
    pub skip_drain: BTreeSet<String>,
}

/// One audit-log entry.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Event {
    /// Wall-clock time, ms since the Unix epoch.
    pub at_ms: u64,
    /// The controller (its link or host) that acted.
    pub controller: String,
    /// Group concerned.
    pub group: Option<String>,
    /// Operation it belongs to (the parent, as in `bosh events`).
    pub op: Option<String>,
    /// What was done (`begin`, `step`, `rollback`, ...).
    pub action: EventAction,
    /// To what (instance or node id).
    pub target: Option<String>,
    /// `ok`, `failed: ...`, `started`.
    pub outcome: String,
    /// Why (the planner's explanation).
    pub reason: String,
}

/// What an audit-log entry records: every action drover writes, each with
/// the text that names it in the log (the stored form, and what `drover
/// events` shows). Decisions match on the variant, never on an event's text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EventAction {
    /// A controller won a term and starts acting: `took-over`.
    TookOver,
    /// An operation was journaled: `begin`.
    Begin,
    /// An operation's side effect started or ended: `step`.
    Step,
    /// An operation left the journal, done or abandoned: `end`.
    End,
    /// A group became blocked, or its reason changed: `blocked`.
    Blocked,
    /// A garbage collection began: `gc`.
    Gc,
    /// A zone lacked capacity; the slot's next provision goes elsewhere:
    /// `zone-fallback`.
    ZoneFallback,
    /// An automatic rollback was committed: `rollback`.
    Rollback,
    /// A join token left in readable user data was rotated: `rotate-join-token`.
    RotateJoinToken,
    /// A record this build cannot read stops the controller: `refuse`.
    Refuse,
    /// `drover recover` forced a new cluster from a survivor: `recover`.
    Recover,
    /// The swarm's last manager was destroyed from outside it:
    /// `destroy instance`.
    DestroyInstance,
    /// An operator forgot a group whose provider is gone, or one of its
    /// machines, without destroying anything (`drover destroy GROUP
    /// --forget-machines`): `forget`.
    Forget,
    /// An action this build does not know, as an older or newer drover
    /// wrote it: read back as it was, never written by this build.
    Unknown(UnknownAction),
}

/// The text of an action this build does not know; only decoding makes one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnknownAction(String);

impl EventAction {
    /// Every action this build writes.
    pub const KNOWN: [EventAction; 13] = [
        EventAction::TookOver,
        EventAction::Begin,
        EventAction::Step,
        EventAction::End,
        EventAction::Blocked,
        EventAction::Gc,
        EventAction::ZoneFallback,
        EventAction::Rollback,
        EventAction::RotateJoinToken,
        EventAction::Refuse,
        EventAction::Recover,
        EventAction::DestroyInstance,
        EventAction::Forget,
    ];

    /// The text that names it in the log.
    pub fn as_str(&self) -> &str {
        match self {
            EventAction::TookOver => "took-over",
            EventAction::Begin => "begin",
            EventAction::Step => "step",
            EventAction::End => "end",
            EventAction::Blocked => "blocked",
            EventAction::Gc => "gc",
            EventAction::ZoneFallback => "zone-fallback",
            EventAction::Rollback => "rollback",
            EventAction::RotateJoinToken => "rotate-join-token",
            EventAction::Refuse => "refuse",
            EventAction::Recover => "recover",
            EventAction::DestroyInstance => "destroy instance",
            EventAction::Forget => "forget",
            EventAction::Unknown(UnknownAction(text)) => text,
        }
    }

    /// The action `text` names; one this build does not know is kept as
    /// it was written.
    fn parse(text: String) -> Self {
        Self::KNOWN
            .into_iter()
            .find(|a| a.as_str() == text)
            .unwrap_or(EventAction::Unknown(UnknownAction(text)))
    }
}

impl std::fmt::Display for EventAction {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.pad(self.as_str())
    }
}

impl PartialEq<str> for EventAction {
    fn eq(&self, text: &str) -> bool {
        self.as_str() == text
    }
}

impl PartialEq<&str> for EventAction {
    fn eq(&self, text: &&str) -> bool {
        self.as_str() == *text
    }
}

impl Serialize for EventAction {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for EventAction {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        String::deserialize(d).map(EventAction::parse)
    }
}

/// A status document as the acting controller publishes it: its JSON text,
/// valid by construction. Published as text rather than as a
/// `serde_json::Value` tree: a 10 000-member document is a few MB of text
/// but several times that as a tree, and the in-memory store keeps it
/// (the controller's memory grows with the fleet).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StatusJson(Vec<u8>);

impl StatusJson {
    /// `doc`, serialised.
    pub fn new<T: Serialize + ?Sized>(doc: &T) -> Result<Self, serde_json::Error> {
        serde_json::to_vec(doc).map(StatusJson)
    }

    /// The JSON text.
    pub fn as_bytes(&self) -> &[u8] {
        &self.0
    }

    /// The document, parsed (for its readers).
    pub fn to_value(&self) -> Result<serde_json::Value, StoreError> {
        serde_json::from_slice(&self.0)
            .map_err(|e| StoreError::Corrupt(format!("status document: {e}")))
    }
}

/// Why a store call failed.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// A compare-and-swap lost: someone else committed revision `current`.
    #[error("conflict: the store is at revision {current}, not {expected}; re-read and plan again")]
    Conflict {
        /// The revision the caller computed from.
        expected: u64,
        /// The store's current revision.
        current: u64,
    },
    /// The caller's epoch is stale: another controller leads now.
    #[error("fenced: epoch {mine} is stale (current {current}); this controller must stop acting")]
    Fenced {
        /// The caller's epoch.
        mine: Epoch,
        /// The store's epoch.
        current: Epoch,
    },
    /// The store already belongs to another cluster (`init_cluster` with a
    /// different id): point drover at the right store or prefix.
    #[error(
        "the store belongs to cluster {current:?}, not {requested:?}; use the right store address or prefix"
    )]
    ClusterMismatch {
        /// The id the store holds.
        current: String,
        /// The id the caller asked for.
        requested: String,
    },
    /// The store address or its options are wrong (not retryable).
    #[error("bad store address: {0}")]
    BadAddress(String),
    /// The address names no store (a file store whose file does not exist,
    /// opened by a command that never creates one). The message names the
    /// address and what to do; not retryable.
    #[error("{0}")]
    NotFound(String),
    /// Another process holds the store and this one cannot share it (a
    /// file store open for writing elsewhere). The message names the
    /// holder and what to do; not retryable: waiting would be silent.
    #[error("{0}")]
    Held(String),
    /// The store refused this client: its credentials (an etcd user and
    /// password, a TLS certificate either side does not trust, TLS asked of
    /// a server that speaks none or the other way round) or their
    /// permissions on drover's keys. Not retryable: the same request meets
    /// the same refusal until someone changes the credentials or the
    /// store's grants. The message is one sentence naming the endpoints
    /// and what to fix, never a secret.
    #[error("{0}")]
    Refused(String),
    /// The value is too large for the backend (after compression).
    #[error("too large: {0}")]
    TooLarge(String),
    /// The backend could not be reached (retry).
    #[error("store unavailable: {0}")]
    Unavailable(String),
    /// Stored data could not be read. The record is left as it is.
    #[error(
        "corrupt store data: {0}; the record was left untouched and drover will not act on \
         it: restore it from a backup or fix it by hand"
    )]
    Corrupt(String),
    /// A record was written by a newer drover (a format this build does not
    /// know). The record is left as it is.
    #[error(
        "{record} is in record format {found}, newer than this drover reads (up to \
         {supported}); it was left untouched and drover will not act on it: upgrade drover \
         on this host"
    )]
    NewerFormat {
        /// Which record (section or key).
        record: String,
        /// Its format.
        found: u64,
        /// The newest this build reads.
        supported: u32,
    },
}

impl StoreError {
    /// True when the same call may succeed later.
    pub fn is_transient(&self) -> bool {
        matches!(self, StoreError::Unavailable(_))
    }

    /// True when a stored record cannot be read by this build: nothing may
    /// act on the store until a person looks.
    pub fn is_unreadable_record(&self) -> bool {
        matches!(
            self,
            StoreError::Corrupt(_) | StoreError::NewerFormat { .. }
        )
    }
}

/// One write of a batch a controller makes under its term
/// ([`Store::write_batch`]).
#[derive(Debug, Clone, PartialEq)]
pub enum Write {
    /// Writes (or replaces) an operation in the journal.
    JournalPut(Box<Operation>),
    /// Removes a finished operation (by id) from the journal.
    JournalRemove(String),
    /// Appends to the event log.
    Event(Event),
}

/// Durable state shared by the CLI and the controllers.
#[async_trait]
pub trait Store: Send + Sync {
    /// The cluster id, if bootstrapped.
    async fn cluster_id(&self) -> Result<Option<String>, StoreError>;
    /// Records the cluster id; a second call with another id is a conflict.
    async fn init_cluster(&self, id: &str) -> Result<(), StoreError>;
    /// Recreates an exported cluster in an empty store (`drover import`)
    /// in one atomic write: the cluster id, every revision (renumbered
    /// 1.. in order, its converged flag kept) and the controls, or
    /// nothing at all, so an import cut short leaves no cluster behind and
    /// can be run again. `ClusterMismatch` when the store already holds a
    /// cluster or a revision (even of the same id: an import never merges).
    async fn import(&self, cluster: &Imported) -> Result<(), StoreError>;

    /// The current desired revision.
    async fn desired(&self) -> Result<Option<Revision>, StoreError>;
    /// Revisions, oldest first (bounded: old ones are pruned).
    async fn history(&self) -> Result<Vec<Revision>, StoreError>;
    /// Commits `spec` if the current revision is `expected` (0: none yet).
    async fn commit(
        &self,
        expected: u64,
        spec: &ClusterSpec,
        provenance: Provenance,
        is_rollback: bool,
    ) -> Result<u64, StoreError>;
    /// Commits `spec` as an automatic rollback (`is_rollback`), the one spec
    /// write a controller makes: fenced like every controller write, and a
    /// compare-and-swap on the revision like an operator's commit. Both
    /// checks are made atomically with the write, the epoch first (a deposed
    /// controller learns it is deposed rather than that it lost a race):
    /// a stale epoch is [`StoreError::Fenced`], a stale `expected` is
    /// [`StoreError::Conflict`], and neither changes anything.
    async fn commit_rollback(
        &self,
        epoch: Epoch,
        expected: u64,
        spec: &ClusterSpec,
        provenance: Provenance,
    ) -> Result<u64, StoreError>;
    /// Marks revision `rev` converged (fenced).
    async fn mark_converged(&self, epoch: Epoch, rev: u64) -> Result<(), StoreError>;

    /// Resolves when what a controller acts on may have changed: a revision
    /// committed, the operator's controls (pause, hold, replace) written, or
    /// a controller's heartbeat newly reporting that its engine left the
    /// swarm ([`Heartbeat::newly_left`]: the next leader destroys a former
    /// leader's machine on it), so a controller reacts at once rather than
    /// at its next resync. A backend that cannot watch never resolves (the
    /// resync finds the change); an error means the watch broke.
    async fn changed(&self) -> Result<(), StoreError> {
        std::future::pending().await
    }

    /// Operator controls.
    async fn controls(&self) -> Result<Controls, StoreError>;
    /// Replaces operator controls.
    async fn set_controls(&self, controls: &Controls) -> Result<(), StoreError>;

    /// Starts a new controller term for `holder`; returns its epoch.
    async fn campaign(&self, holder: &str) -> Result<Epoch, StoreError>;
    /// The current epoch and its holder, while the holder's lease lives
    /// (etcd: the `leader` key under an etcd lease; a store without leases
    /// keeps the last holder until it resigns).
    async fn leader(&self) -> Result<Option<(Epoch, String)>, StoreError>;
    /// Starts a new term for `holder` only while nobody holds the store's
    /// lease: `Some(epoch)` when won, `None` when another controller holds
    /// it. How external controllers take turns: any number stand by and one
    /// acts. Atomic where external controllers may run ([`Reach::Network`]:
    /// of two standbys asking at once, exactly one wins); this default, for
    /// the others, reads then campaigns.
    async fn acquire(&self, holder: &str) -> Result<Option<Epoch>, StoreError> {
        match self.leader().await? {
            Some(_) => Ok(None),
            None => self.campaign(holder).await.map(Some),
        }
    }
    /// Gives term `epoch` up: its lease ends now, not at its expiry, so a
    /// standby may acquire at once. Never another term's: etcd ends only
    /// the lease this handle holds for `epoch` (nothing when it holds none;
    /// its renewals stop first, so the lease lapses within its TTL even if
    /// etcd does not answer); a store without leases clears the holder only
    /// while `epoch` is current (else [`StoreError::Fenced`]). The epoch
    /// itself never goes back.
    async fn resign(&self, epoch: Epoch) -> Result<(), StoreError>;
    /// Whom this store can serve: which `control:` it allows
    /// ([`drover_core::control::fits`]).
    fn reach(&self) -> Reach {
        Reach::OneHost
    }
    /// `Ok` while `epoch` is the current term, else [`StoreError::Fenced`];
    /// writes nothing. A controller asks right before each side effect
    /// starts: a side effect is no store write the store could fence, so
    /// this is the last word the store has on it. Answered from the same
    /// place a fenced write checks (the redb state, etcd's epoch key in a
    /// txn, the swarm object), never from a cache or a lease that may lag.
    async fn check_epoch(&self, epoch: Epoch) -> Result<(), StoreError>;

    /// Operations in flight.
    async fn journal(&self) -> Result<Vec<Operation>, StoreError>;
    /// Writes (or replaces) an operation (fenced).
    async fn journal_put(&self, epoch: Epoch, op: &Operation) -> Result<(), StoreError>;
    /// Removes a finished operation (fenced).
    async fn journal_remove(&self, epoch: Epoch, op: &str) -> Result<(), StoreError>;

    /// Writes `writes` in order, each fenced by `epoch`, in as few durable
    /// commits as the backend allows: a pass journals its intents and
    /// records its events in one commit before it starts their side
    /// effects, not one commit (an fsync, a raft round) per record. The file,
    /// memory and swarm stores write a batch atomically (all or nothing);
    /// etcd in transactions of a bounded number of writes, in order. This default writes one at a time and stops at the first
    /// refusal: a prefix of the batch may be written, as with separate calls.
    async fn write_batch(&self, epoch: Epoch, writes: &[Write]) -> Result<(), StoreError> {
        for write in writes {
            match write {
                Write::JournalPut(op) => self.journal_put(epoch, op).await?,
                Write::JournalRemove(id) => self.journal_remove(epoch, id).await?,
                Write::Event(event) => self.append_event(epoch, event).await?,
            }
        }
        Ok(())
    }

    /// Publishes the controller's status document (fenced).
    async fn publish_status(&self, epoch: Epoch, status: StatusJson) -> Result<(), StoreError>;
    /// The last published status.
    async fn status(&self) -> Result<Option<serde_json::Value>, StoreError>;
    /// Appends to the bounded event log (fenced).
    async fn append_event(&self, epoch: Epoch, event: &Event) -> Result<(), StoreError>;
    /// Events at or after `since_ms`, oldest first.
    async fn events(&self, since_ms: u64) -> Result<Vec<Event>, StoreError>;

    /// Records a controller's heartbeat (not fenced: every controller beats,
    /// leading or not).
    async fn heartbeat(&self, beat: &Heartbeat) -> Result<(), StoreError>;
    /// True when this store lives outside the swarm's raft (etcd, file,
    /// memory): it stays readable when the quorum is lost, and a beat per
    /// controller pass costs the swarm nothing, so every controller writes
    /// its engine's view there each pass. The swarm store (false) is written
    /// through the raft itself, where every controller beating every pass
    /// would race the acting one's fenced writes for the swarm object's
    /// version: there beats stay at one a minute.
    fn outside_raft(&self) -> bool {
        true
    }
    /// The last heartbeat of each controller.
    async fn heartbeats(&self) -> Result<Vec<Heartbeat>, StoreError>;
    /// The record format this handle writes (starts at the previous format,
    /// [`OLDEST_FORMAT`], until [`Store::negotiate_format`] has run).
    fn write_format(&self) -> u32;
    /// Sets the record format this handle writes (clamped to what it can).
    fn set_write_format(&self, format: u32);
    /// Reads the heartbeats and writes from now on in [`write_format`] of
    /// them; returns that format.
    async fn negotiate_format(&self, now_ms: u64) -> Result<u32, StoreError> {
        let format = write_format(&self.heartbeats().await?, now_ms);
        self.set_write_format(format);
        Ok(format)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use drover_core::model::SwarmView;

    /// Older builds' beats read as beats without an engine view, and a beat
    /// without one is written as they wrote it (they ignore the new field
    /// either way: no `deny_unknown_fields`).
    #[test]
    fn heartbeats_of_older_builds_read_and_are_written_alike() {
        let old: Heartbeat =
            serde_json::from_str(r#"{"holder":"a","format":1,"at_ms":5}"#).expect("old beat");
        assert_eq!(old.engine, None);
        assert_eq!(
            serde_json::to_string(&old).expect("serialises"),
            r#"{"holder":"a","format":1,"at_ms":5}"#
        );
        let view = EngineView::next(None, &SwarmView::Absent, Some("l"), 1);
        let new = Heartbeat {
            engine: Some(view),
            ..old.clone()
        };
        let text = serde_json::to_string(&new).expect("serialises");
        assert_eq!(
            serde_json::from_str::<Heartbeat>(&text).expect("reads"),
            new
        );
    }

    #[test]
    fn a_leave_is_news_once() {
        let view = EngineView::next(None, &SwarmView::Absent, Some("l"), 1);
        let beat = |left: Option<u64>| Heartbeat {
            holder: "l".into(),
            format: FORMAT,
            at_ms: 1,
            engine: Some(EngineView {
                left: left.map(|at_ms| drover_core::quorum_probe::Left {
                    node: "n".into(),
                    at_ms,
                }),
                ..view.clone()
            }),
            seat: None,
            waiting: None,
        };
        assert!(beat(Some(7)).newly_left(None));
        assert!(beat(Some(7)).newly_left(Some(&beat(None))));
        assert!(!beat(Some(7)).newly_left(Some(&beat(Some(7)))));
        assert!(!beat(None).newly_left(None));
    }

    /// The texts the event log has always stored, one per action.
    const STORED: [&str; 12] = [
        "took-over",
        "begin",
        "step",
        "end",
        "blocked",
        "gc",
        "zone-fallback",
        "rollback",
        "rotate-join-token",
        "refuse",
        "recover",
        "destroy instance",
    ];

    #[test]
    fn every_action_is_stored_as_the_text_it_always_was() {
        for (action, text) in EventAction::KNOWN.iter().zip(STORED) {
            let json = serde_json::to_string(action).expect("serialises");
            assert_eq!(json, format!("\"{text}\""));
            let read: EventAction = serde_json::from_str(&json).expect("reads");
            assert_eq!(&read, action, "{text} read back as another action");
            assert_eq!(format!("{action:<9}|"), format!("{text:<9}|"));
        }
    }

    #[test]
    fn an_event_of_an_unknown_action_reads_and_is_kept_as_written() {
        let json = r#"{"at_ms":1,"controller":"c","group":null,"op":null,"action":"reticulate","target":null,"outcome":"ok","reason":"r"}"#;
        let event: Event = serde_json::from_str(json).expect("an unknown action failed the read");
        assert!(matches!(event.action, EventAction::Unknown(_)));
        assert_eq!(event.action, "reticulate");
        assert_eq!(serde_json::to_string(&event).expect("serialises"), json);
    }

    #[test]
    fn an_event_is_stored_as_before() {
        let event = Event {
            at_ms: 1,
            controller: "c".into(),
            group: Some("g".into()),
            op: Some("o".into()),
            action: EventAction::ZoneFallback,
            target: None,
            outcome: "zone avoided".into(),
            reason: "r".into(),
        };
        let json = r#"{"at_ms":1,"controller":"c","group":"g","op":"o","action":"zone-fallback","target":null,"outcome":"zone avoided","reason":"r"}"#;
        assert_eq!(serde_json::to_string(&event).expect("serialises"), json);
        assert_eq!(serde_json::from_str::<Event>(json).expect("reads"), event);
    }
}
