//! The `file` store: one redb file on one host.
//!
//! Leadership is the file lock: redb locks its file, so exactly one process
//! (one controller) can open it; a second opener gets
//! [`StoreError::Unavailable`] saying so. Every write is one redb write
//! transaction that reads the sections it needs, applies the contract's
//! checks (revision CAS, epoch fence) and writes back, so check and write
//! are atomic, and durable when it returns — but for a controller's
//! heartbeat and status document, rewritten every pass, which the next
//! durable commit persists. The file is created with mode 0600.

use crate::format::WriteFormat;
use crate::model::{Limits, Section, State, batch_sections, unavailable};
use async_trait::async_trait;
use drover_core::journal::Operation;
use drover_core::spec::ClusterSpec;
use drover_spi::{
    Controls, Epoch, Event, Heartbeat, Imported, Provenance, Revision, StatusJson, Store,
    StoreError, Write,
};
use redb::{Database, Durability, ReadableDatabase, ReadableTable, TableDefinition};
use std::fs::OpenOptions;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Section name → JSON.
const TABLE: TableDefinition<&str, &[u8]> = TableDefinition::new("drover");

/// The embedded single-host store.
#[derive(Clone)]
pub struct FileStore {
    db: Arc<Database>,
    path: PathBuf,
    limits: Limits,
    format: Arc<WriteFormat>,
    /// Wakes [`Store::changed`] in this process: the only one that can
    /// open the file, so the only writer there is.
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
    /// Opens (creating, mode 0600) the store at `path` with default limits.
    ///
    /// # Errors
    /// [`StoreError::Unavailable`] when another process (or another handle
    /// in this one) has the file open: a file store serves one controller.
    pub fn open(path: impl AsRef<Path>) -> Result<FileStore, StoreError> {
        FileStore::open_with(path, Limits::default())
    }

    /// Opens with explicit history/event limits.
    pub fn open_with(path: impl AsRef<Path>, limits: Limits) -> Result<FileStore, StoreError> {
        let path = path.as_ref().to_path_buf();
        let shown = path.display();
        // Create it ourselves so it is never world-readable, not even for a
        // moment; tighten an existing file too.
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .mode(0o600)
            .open(&path)
            .map_err(|e| unavailable(&format!("cannot open file store {shown}"), e))?;
        file.set_permissions(std::fs::Permissions::from_mode(0o600))
            .map_err(|e| unavailable(&format!("cannot chmod 0600 {shown}"), e))?;
        drop(file);
        let db = Database::create(&path).map_err(|e| match e {
            redb::DatabaseError::DatabaseAlreadyOpen => StoreError::Unavailable(format!(
                "file store {shown} is already open by another controller: a file store \
                 serves exactly one controller (it is the leader); stop the other one, or \
                 use an etcd or swarm store to run several controllers"
            )),
            e => unavailable(&format!("cannot open file store {shown}"), e),
        })?;
        let txn = db.begin_write().map_err(|e| unavailable("redb", e))?;
        txn.open_table(TABLE).map_err(|e| unavailable("redb", e))?;
        txn.commit().map_err(|e| unavailable("redb", e))?;
        Ok(FileStore {
            db: Arc::new(db),
            path,
            limits,
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
            let txn = db.begin_read().map_err(|e| unavailable("redb", e))?;
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
    /// restart rewrites at once (its heartbeat, the status document): seen
    /// by every read at once, made durable by the next durable commit, and
    /// after a crash the previous one is read. An fsync each (about 4 ms
    /// here) was a third of a pass on instant machines.
    async fn write_soft<T: Send + 'static>(
        &self,
        sections: &'static [Section],
        f: impl FnOnce(&mut State) -> Result<T, StoreError> + Send + 'static,
    ) -> Result<T, StoreError> {
        self.write_as(Durability::None, sections, f).await
    }

    async fn write_as<T: Send + 'static>(
        &self,
        durability: Durability,
        sections: &'static [Section],
        f: impl FnOnce(&mut State) -> Result<T, StoreError> + Send + 'static,
    ) -> Result<T, StoreError> {
        let (db, format) = (self.db.clone(), self.format.get());
        blocking(move || {
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
