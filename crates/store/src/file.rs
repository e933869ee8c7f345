//! The `file` store: one redb file on one host.
//!
//! Leadership is the file lock: redb lets one process at a time open the
//! file for writing, so exactly one controller (or one changing command)
//! writes it. Every write is one redb write transaction that reads the
//! sections it needs, applies the contract's checks (revision CAS, epoch
//! fence) and writes back, so check and write are atomic and durable when
//! it returns. The file is created with mode 0600.
//!
//! How processes share the file ([`Access`]): the CLI opens it
//! [`Access::Shared`] to change it, in redb's `SingleWriter` mode, and
//! [`Access::ReadOnly`] to read it (`status`, `events`, `history`,
//! `plan --store`), so reads work beside a running controller and follow
//! its commits. A second writer is refused at once with
//! [`StoreError::Held`], naming the holder from the record beside the file
//! ([`crate::holder`]). redb's `MultiWriter` mode would let `apply` write
//! beside a controller, but then the file lock is no longer the
//! leadership and a controller would not hear another process's commits;
//! so `apply` is refused while a controller runs, and says so.
//!
//! The price of sharing: redb refuses commits without an fsync
//! (`Durability::None`) in a shared mode, since another process could not
//! see them. A controller's heartbeat and status document, rewritten every
//! pass, are then synced each (a few ms a pass on a disk). A process that
//! keeps the file to itself ([`Access::Exclusive`], [`FileStore::open`]:
//! tests, benchmarks, an embedding program) still writes them unsynced,
//! made durable by the next durable commit.

use crate::format::WriteFormat;
use crate::holder::{self, Holder, Record};
use crate::model::{Limits, Section, State, batch_sections, unavailable};
use async_trait::async_trait;
use drover_core::journal::Operation;
use drover_core::spec::ClusterSpec;
use drover_spi::{
    Controls, Epoch, Event, Heartbeat, Imported, Provenance, Revision, StatusJson, Store,
    StoreError, Write,
};
use redb::{
    Builder, ConcurrencyMode, Database, DatabaseError, Durability, ReadOnlyDatabase,
    ReadTransaction, ReadableDatabase, ReadableTable, TableDefinition,
};
use std::fs::OpenOptions;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Section name → JSON.
const TABLE: TableDefinition<&str, &[u8]> = TableDefinition::new("drover");

/// How a process opens the file, and whom it shares it with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    /// Reads and writes; no other process may open the file meanwhile.
    /// The fastest: a controller's per-pass records are written unsynced.
    Exclusive,
    /// Reads and writes; other processes may read the file meanwhile
    /// ([`Access::ReadOnly`]), but not write it. Every commit is synced.
    Shared,
    /// Reads only, beside a [`Access::Shared`] writer or none; writes are
    /// refused. The file must exist and have been written once.
    ReadOnly,
}

/// The open file, as its [`Access`] allows.
enum Db {
    Write(Database),
    Read(ReadOnlyDatabase),
}

/// One open of the file and, for a writer, its holder record (removed
/// when the last clone of the store drops).
struct Opened {
    db: Db,
    _record: Option<Record>,
}

impl Opened {
    fn begin_read(&self) -> Result<ReadTransaction, StoreError> {
        match &self.db {
            Db::Write(db) => db.begin_read(),
            Db::Read(db) => db.begin_read(),
        }
        .map_err(|e| unavailable("redb", e))
    }
}

/// The embedded single-host store.
#[derive(Clone)]
pub struct FileStore {
    db: Arc<Opened>,
    path: PathBuf,
    limits: Limits,
    /// How a controller's per-pass records are committed: unsynced when
    /// the file is not shared, synced when it is (redb refuses otherwise).
    soft: Durability,
    format: Arc<WriteFormat>,
    /// Wakes [`Store::changed`] in this process: the only one that can
    /// write the file, so the only writer there is.
    changes: Arc<tokio::sync::Notify>,
}

impl std::fmt::Debug for FileStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FileStore")
            .field("path", &self.path)
            .finish()
    }
}

impl FileStore {
    /// Opens (creating, mode 0600) the store at `path` with default limits,
    /// [`Access::Exclusive`].
    ///
    /// # Errors
    /// [`StoreError::Held`] when another process (or another handle in
    /// this one) has the file open: a file store serves one controller.
    pub fn open(path: impl AsRef<Path>) -> Result<FileStore, StoreError> {
        FileStore::open_with(path, Limits::default())
    }

    /// Opens with explicit history/event limits, [`Access::Exclusive`].
    ///
    /// # Errors
    /// As [`FileStore::open`].
    pub fn open_with(path: impl AsRef<Path>, limits: Limits) -> Result<FileStore, StoreError> {
        FileStore::open_as(path, Access::Exclusive, limits)
    }

    /// Opens the store at `path` as `access` says (a writer creates the
    /// file, mode 0600) and, for a writer, records this process as its
    /// holder beside it.
    ///
    /// # Errors
    /// [`StoreError::Held`], naming the holder and what to do, when another
    /// process has the file open in a way `access` cannot share (at once:
    /// nothing waits); [`StoreError::Unavailable`] when the file cannot be
    /// opened at all.
    pub fn open_as(
        path: impl AsRef<Path>,
        access: Access,
        limits: Limits,
    ) -> Result<FileStore, StoreError> {
        let path = path.as_ref().to_path_buf();
        let (db, record) = match access {
            Access::ReadOnly => (Db::Read(open_read_only(&path)?), None),
            Access::Exclusive | Access::Shared => {
                let db = open_writer(&path, access)?;
                (
                    Db::Write(db),
                    Some(Record::write(&path, &Holder::this_process())),
                )
            }
        };
        let soft = match access {
            Access::Exclusive => Durability::None,
            Access::Shared | Access::ReadOnly => Durability::Immediate,
        };
        Ok(FileStore {
            db: Arc::new(Opened {
                db,
                _record: record,
            }),
            path,
            limits,
            soft,
            format: Arc::default(),
            changes: Arc::default(),
        })
    }

    /// The file's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Reads `sections` in one read transaction.
    async fn read(&self, sections: &'static [Section]) -> Result<State, StoreError> {
        let db = self.db.clone();
        blocking(move || {
            let txn = db.begin_read()?;
            let table = txn.open_table(TABLE).map_err(|e| unavailable("redb", e))?;
            let mut state = State::default();
            for &s in sections {
                if let Some(v) = table.get(s.name()).map_err(|e| unavailable("redb", e))? {
                    state.decode(s, v.value())?;
                }
            }
            Ok(state)
        })
        .await
    }

    /// Loads `sections`, applies `f` and writes them back, all in one write
    /// transaction: redb runs one write transaction at a time, so the checks
    /// `f` makes hold at commit. Nothing is written when `f` fails. Durable
    /// when it returns (an fsync).
    async fn write<T: Send + 'static>(
        &self,
        sections: &'static [Section],
        f: impl FnOnce(&mut State) -> Result<T, StoreError> + Send + 'static,
    ) -> Result<T, StoreError> {
        self.write_as(Durability::Immediate, sections, f).await
    }

    /// [`Self::write`] of what a controller writes again every pass and a
    /// restart rewrites at once (its heartbeat, the status document): in a
    /// file kept to this process, seen by every read at once, made durable
    /// by the next durable commit, and after a crash the previous one is
    /// read. An fsync each (about 4 ms here) was a third of a pass on
    /// instant machines. Synced like any write in a shared file.
    async fn write_soft<T: Send + 'static>(
        &self,
        sections: &'static [Section],
        f: impl FnOnce(&mut State) -> Result<T, StoreError> + Send + 'static,
    ) -> Result<T, StoreError> {
        self.write_as(self.soft, sections, f).await
    }

    async fn write_as<T: Send + 'static>(
        &self,
        durability: Durability,
        sections: &'static [Section],
        f: impl FnOnce(&mut State) -> Result<T, StoreError> + Send + 'static,
    ) -> Result<T, StoreError> {
        let (db, format) = (self.db.clone(), self.format.get());
        let path = self.path.clone();
        blocking(move || {
            let Db::Write(db) = &db.db else {
                return Err(StoreError::Unavailable(format!(
                    "file store {} was opened read-only by a command that only reads it",
                    path.display()
                )));
            };
            let mut txn = db.begin_write().map_err(|e| unavailable("redb", e))?;
            txn.set_durability(durability)
                .map_err(|e| unavailable("redb", e))?;
            let out = {
                let mut table = txn.open_table(TABLE).map_err(|e| unavailable("redb", e))?;
                let mut state = State::default();
                for &s in sections {
                    if let Some(v) = table.get(s.name()).map_err(|e| unavailable("redb", e))? {
                        state.decode(s, v.value())?;
                    }
                }
                let out = f(&mut state)?;
                for &s in sections {
                    table
                        .insert(s.name(), state.encode(s, format).as_slice())
                        .map_err(|e| unavailable("redb", e))?;
                }
                out
            };
            txn.commit().map_err(|e| unavailable("redb commit", e))?;
            Ok(out)
        })
        .await
    }
}

/// Creates (mode 0600) and opens the file for writing.
fn open_writer(path: &Path, access: Access) -> Result<Database, StoreError> {
    let shown = path.display();
    // Create it ourselves so it is never world-readable, not even for a
    // moment; tighten an existing file too.
    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .mode(0o600)
        .open(path)
        .map_err(|e| unavailable(&format!("cannot open file store {shown}"), e))?;
    file.set_permissions(std::fs::Permissions::from_mode(0o600))
        .map_err(|e| unavailable(&format!("cannot chmod 0600 {shown}"), e))?;
    drop(file);
    let mode = match access {
        Access::Exclusive => ConcurrencyMode::ExclusiveWriter,
        Access::Shared | Access::ReadOnly => ConcurrencyMode::SingleWriter,
    };
    let db = Builder::new()
        .set_concurrency_mode(mode)
        .create(path)
        .map_err(|e| refused(path, e))?;
    let txn = db.begin_write().map_err(|e| unavailable("redb", e))?;
    txn.open_table(TABLE).map_err(|e| unavailable("redb", e))?;
    txn.commit().map_err(|e| unavailable("redb", e))?;
    Ok(db)
}

/// Opens the file to read beside a shared writer (or none).
fn open_read_only(path: &Path) -> Result<ReadOnlyDatabase, StoreError> {
    Builder::new()
        .set_concurrency_mode(ConcurrencyMode::SingleWriter)
        .open_read_only(path)
        .map_err(|e| refused(path, e))
}

/// The error of an open redb refused: [`StoreError::Held`] naming the
/// holder when another process has the file.
fn refused(path: &Path, e: DatabaseError) -> StoreError {
    match e {
        DatabaseError::DatabaseAlreadyOpen => {
            StoreError::Held(holder::refusal(path, holder::read(path).as_ref()))
        }
        e => unavailable(&format!("cannot open file store {}", path.display()), e),
    }
}

async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> Result<T, StoreError> + Send + 'static,
) -> Result<T, StoreError> {
    tokio::task::spawn_blocking(f)
        .await
        .map_err(|e| unavailable("file store task", e))?
}

use Section::{Controllers, Controls as SControls, Events, Journal, Meta, Revisions, Status};

#[async_trait]
impl Store for FileStore {
    async fn cluster_id(&self) -> Result<Option<String>, StoreError> {
        Ok(self.read(&[Meta]).await?.meta.cluster_id)
    }

    async fn init_cluster(&self, id: &str) -> Result<(), StoreError> {
        let id = id.to_string();
        self.write(&[Meta], move |s| s.init_cluster(&id)).await
    }

    async fn import(&self, cluster: &Imported) -> Result<(), StoreError> {
        let (cluster, limits) = (cluster.clone(), self.limits);
        self.write(&[Meta, Revisions, SControls], move |s| {
            s.import(&cluster, limits)
        })
        .await?;
        self.changes.notify_waiters();
        Ok(())
    }

    async fn desired(&self) -> Result<Option<Revision>, StoreError> {
        Ok(self.read(&[Meta, Revisions]).await?.desired())
    }

    async fn history(&self) -> Result<Vec<Revision>, StoreError> {
        Ok(self.read(&[Revisions]).await?.revisions)
    }

    async fn commit(
        &self,
        expected: u64,
        spec: &ClusterSpec,
        provenance: Provenance,
        is_rollback: bool,
    ) -> Result<u64, StoreError> {
        let (spec, limits) = (spec.clone(), self.limits);
        let rev = self
            .write(&[Meta, Revisions], move |s| {
                s.commit(expected, &spec, provenance, is_rollback, limits)
            })
            .await?;
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
        let (spec, limits) = (spec.clone(), self.limits);
        self.write(&[Meta, Revisions], move |s| {
            s.commit_rollback(epoch, expected, &spec, provenance, limits)
        })
        .await
    }

    async fn mark_converged(&self, epoch: Epoch, rev: u64) -> Result<(), StoreError> {
        self.write(&[Meta, Revisions], move |s| s.mark_converged(epoch, rev))
            .await
    }

    async fn controls(&self) -> Result<Controls, StoreError> {
        Ok(self.read(&[SControls]).await?.controls)
    }

    async fn set_controls(&self, controls: &Controls) -> Result<(), StoreError> {
        let c = controls.clone();
        self.write(&[SControls], move |s| {
            s.controls = c;
            Ok(())
        })
        .await?;
        self.changes.notify_waiters();
        Ok(())
    }

    async fn campaign(&self, holder: &str) -> Result<Epoch, StoreError> {
        let h = holder.to_string();
        self.write(&[Meta], move |s| Ok(s.campaign(&h))).await
    }

    async fn leader(&self) -> Result<Option<(Epoch, String)>, StoreError> {
        Ok(self.read(&[Meta]).await?.leader())
    }

    async fn resign(&self, epoch: Epoch) -> Result<(), StoreError> {
        self.write(&[Meta], move |s| s.resign(epoch)).await
    }

    async fn check_epoch(&self, epoch: Epoch) -> Result<(), StoreError> {
        // A read transaction sees every committed campaign.
        self.read(&[Meta]).await?.fence(epoch)
    }

    async fn journal(&self) -> Result<Vec<Operation>, StoreError> {
        Ok(self.read(&[Journal]).await?.journal.into_values().collect())
    }

    async fn journal_put(&self, epoch: Epoch, op: &Operation) -> Result<(), StoreError> {
        let op = op.clone();
        self.write(&[Meta, Journal], move |s| s.journal_put(epoch, &op))
            .await
    }

    async fn journal_remove(&self, epoch: Epoch, op: &str) -> Result<(), StoreError> {
        let op = op.to_string();
        self.write(&[Meta, Journal], move |s| s.journal_remove(epoch, &op))
            .await
    }

    /// One redb transaction, one fsync, for the whole batch.
    async fn write_batch(&self, epoch: Epoch, writes: &[Write]) -> Result<(), StoreError> {
        let (sections, limits) = (batch_sections(writes), self.limits);
        let writes = writes.to_vec();
        self.write(sections, move |s| s.write_batch(epoch, &writes, limits))
            .await
    }

    async fn publish_status(&self, epoch: Epoch, status: StatusJson) -> Result<(), StoreError> {
        self.write_soft(&[Meta, Status], move |s| s.publish_status(epoch, status))
            .await
    }

    async fn status(&self) -> Result<Option<serde_json::Value>, StoreError> {
        self.read(&[Status]).await?.status()
    }

    async fn append_event(&self, epoch: Epoch, event: &Event) -> Result<(), StoreError> {
        let (ev, limits) = (event.clone(), self.limits);
        self.write(&[Meta, Events], move |s| s.append_event(epoch, &ev, limits))
            .await
    }

    async fn events(&self, since_ms: u64) -> Result<Vec<Event>, StoreError> {
        Ok(self.read(&[Events]).await?.events_since(since_ms))
    }

    async fn heartbeat(&self, beat: &Heartbeat) -> Result<(), StoreError> {
        let beat = beat.clone();
        if self
            .write_soft(&[Controllers], move |s| Ok(s.heartbeat(&beat)))
            .await?
        {
            self.changes.notify_waiters();
        }
        Ok(())
    }

    /// Resolves on a commit, an import or new controls written through
    /// this handle, and when a controller in this process reports its
    /// engine's leave ([`Heartbeat::newly_left`]): the file serves one
    /// process, so no other writer can change it unseen. (A controller's own
    /// rollback commit wakes nobody: it plans on it in the same pass.)
    async fn changed(&self) -> Result<(), StoreError> {
        self.changes.notified().await;
        Ok(())
    }

    async fn heartbeats(&self) -> Result<Vec<Heartbeat>, StoreError> {
        Ok(self
            .read(&[Controllers])
            .await?
            .heartbeats
            .into_values()
            .collect())
    }

    fn write_format(&self) -> u32 {
        self.format.get()
    }

    fn set_write_format(&self, format: u32) {
        self.format.set(format);
    }
}
