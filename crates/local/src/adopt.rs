//! Adopting engines that were started by hand.
//!
//! The local provider can take over an engine laid out as it lays out its
//! own (a directory `D` with `root/`, `exec/`, `pid` and the API socket
//! `sock`, i.e. `dockerd --data-root D/root --exec-root D/exec
//! --pidfile D/pid -H unix://D/sock`). The reference naming it is `D`,
//! `D/sock` or `unix://D/sock`. Adopting writes a record pointing at `D`;
//! from then on destroying the instance stops that engine's processes and
//! removes `D`, exactly as for an engine the provider started.

use crate::{InstanceRecord, LocalProvider, io_err, now_ms, procs};
use drover_engine::Engine;
use drover_spi::{Foreign, ProviderError};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// The engine directory a reference names.
fn engine_dir(reference: &str) -> PathBuf {
    let path = Path::new(reference.strip_prefix("unix://").unwrap_or(reference));
    if path.file_name().is_some_and(|n| n == "sock") {
        path.parent().unwrap_or(path).to_path_buf()
    } else {
        path.to_path_buf()
    }
}

/// What is running at `dir`: its verified dockerd PID and what it says.
async fn running_engine(
    dir: &Path,
    reference: &str,
) -> Result<(i32, drover_engine::EngineInfo), ProviderError> {
    let paths = crate::EnginePaths::new(dir);
    let not_ours = |why: String| {
        ProviderError::Permanent(format!(
            "{reference}: {why}; the local provider adopts engines laid out as its own \
             (dockerd --data-root D/root --exec-root D/exec --pidfile D/pid -H unix://D/sock): \
             give D"
        ))
    };
    let pid = std::fs::read_to_string(&paths.pid)
        .ok()
        .and_then(|t| t.trim().parse::<i32>().ok())
        .ok_or_else(|| not_ours(format!("no readable pidfile {}", paths.pid.display())))?;
    if !procs::is_ours(pid, &paths.needle()) {
        return Err(not_ours(format!(
            "process {pid} is not a dockerd with --pidfile {}",
            paths.pid.display()
        )));
    }
    let info = async { Engine::connect(&paths.endpoint()).await?.info().await }
        .await
        .map_err(|e| {
            ProviderError::Transient(format!("{reference}: engine did not answer: {e}"))
        })?;
    Ok((pid, info))
}

impl LocalProvider {
    /// The record already made from the engine in `dir`, if any.
    fn adopted_from(&self, dir: &Path) -> Result<Option<InstanceRecord>, ProviderError> {
        Ok(self
            .records()
            .map_err(|e| io_err("reading state dir", e))?
            .into_iter()
            .find(|r| r.engine_dir.as_deref() == Some(dir)))
    }

    pub(crate) async fn inspect_foreign_engine(
        &self,
        reference: &str,
    ) -> Result<Foreign, ProviderError> {
        let dir = engine_dir(reference);
        let (_, info) = running_engine(&dir, reference).await?;
        let dir = dir.canonicalize().unwrap_or(dir);
        Ok(Foreign {
            reference: dir.display().to_string(),
            node_id: Some(info.node_id).filter(|n| !n.is_empty()),
            address: Some(info.node_addr).filter(|a| !a.is_empty()),
            adopted_as: self.adopted_from(&dir)?.map(|r| r.id),
        })
    }

    pub(crate) async fn adopt_engine(
        &self,
        reference: &str,
        tags: &BTreeMap<String, String>,
    ) -> Result<String, ProviderError> {
        let dir = engine_dir(reference);
        let (pid, info) = running_engine(&dir, reference).await?;
        let dir = dir.canonicalize().unwrap_or(dir);
        let _g = self.alloc.lock().await;
        let _file_lock = self
            .lock_state()
            .map_err(|e| io_err("locking state dir", e))?;
        if let Some(r) = self.adopted_from(&dir)? {
            return Ok(r.id);
        }
        let id = format!("a{}", &uuid::Uuid::new_v4().simple().to_string()[..8]);
        std::fs::create_dir_all(self.dir_of(&id))
            .map_err(|e| io_err("creating instance dir", e))?;
        let rec = InstanceRecord {
            id,
            tags: tags.clone(),
            logical_id: tags.get(drover_core::model::tags::LOGICAL_ID).cloned(),
            address: info.node_addr,
            socket: dir.join("sock"),
            pid: Some(pid),
            // Its process group is ended with it only if the engine leads one
            // (started by hand it may share its starter's group).
            pgid: (procs::pgid_of(pid) == Some(pid)).then_some(pid),
            // Whatever restarts it (a systemd unit, nothing) stays as it was.
            supervisor: None,
            created_ms: now_ms(),
            engine_dir: Some(dir),
            marked: false,
        };
        self.write_record(&rec)
            .map_err(|e| io_err("writing instance record", e))?;
        tracing::info!(id = %rec.id, engine = %reference, "engine adopted");
        Ok(rec.id)
    }
}

#[cfg(test)]
mod tests {
    use super::engine_dir;
    use std::path::PathBuf;

    #[test]
    fn references_name_the_engine_directory() {
        for r in ["/x/e1", "/x/e1/sock", "unix:///x/e1/sock"] {
            assert_eq!(engine_dir(r), PathBuf::from("/x/e1"), "{r}");
        }
    }
}
