//! The recovery record: a [`Started`] written before force-new-cluster
//! and removed once the recovery's tail is done, so a rerun finishes what
//! a run cut short started (see the module above for why it is a file in
//! the provider's state directory).

use drover_core::recover::Started;
use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

/// The recovery record could not be read or written.
#[derive(Debug, thiserror::Error)]
pub enum RecordError {
    /// It exists and cannot be read.
    #[error("cannot read the recovery record {path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// It is not a record drover wrote.
    #[error(
        "the recovery record {path} cannot be parsed ({source}); check the swarm by hand (docker node ls on a manager) before moving it aside"
    )]
    Corrupt {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: serde_json::Error,
    },
    /// It could not be written or removed.
    #[error("cannot write the recovery record {path}: {source}")]
    Write {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
}

/// Where a recovery is recorded as started: `recovery.json` in a
/// directory of the provider's on the engines' host.
#[derive(Debug, Clone)]
pub struct Record {
    path: PathBuf,
}

impl Record {
    /// The record in `dir`.
    pub fn in_dir(dir: &Path) -> Record {
        Record {
            path: dir.join("recovery.json"),
        }
    }

    /// The file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The recovery a previous run started and did not finish, if any.
    pub fn read(&self) -> Result<Option<Started>, RecordError> {
        let text = match std::fs::read(&self.path) {
            Ok(text) => text,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(source) => {
                return Err(RecordError::Read {
                    path: self.path.clone(),
                    source,
                });
            }
        };
        serde_json::from_slice(&text)
            .map(Some)
            .map_err(|source| RecordError::Corrupt {
                path: self.path.clone(),
                source,
            })
    }

    /// Writes `started` durably (a whole file or none: written aside,
    /// synced, renamed, the directory synced), replacing any record.
    pub fn write(&self, started: &Started) -> Result<(), RecordError> {
        let write = || -> std::io::Result<()> {
            let tmp = self.path.with_extension("json.tmp");
            let mut f = std::fs::OpenOptions::new()
                .write(true)
                .create(true)
                .truncate(true)
                .mode(0o600)
                .open(&tmp)?;
            f.write_all(&serde_json::to_vec_pretty(started)?)?;
            f.sync_all()?;
            std::fs::rename(&tmp, &self.path)?;
            sync_dir(&self.path)
        };
        write().map_err(|source| RecordError::Write {
            path: self.path.clone(),
            source,
        })
    }

    /// Removes the record: the recovery is finished.
    pub fn clear(&self) -> Result<(), RecordError> {
        let remove = || -> std::io::Result<()> {
            match std::fs::remove_file(&self.path) {
                Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(e),
                _ => {}
            }
            sync_dir(&self.path)
        };
        remove().map_err(|source| RecordError::Write {
            path: self.path.clone(),
            source,
        })
    }
}

/// Syncs the directory holding `path` (a rename or removal is durable then).
fn sync_dir(path: &Path) -> std::io::Result<()> {
    match path.parent() {
        Some(dir) => std::fs::File::open(dir)?.sync_all(),
        None => Ok(()),
    }
}
