//! Making one machine as a cloud does: its record and engine under the
//! state lock, then its boot — the engine's readiness and the boot script —
//! in a task of its own, as cloud-init runs on a VM whatever becomes of the
//! API call that made it.
//!
//! A provision may be cut short: the controller that asked stood down and
//! dropped it (the bootstrapping CLI does so when the first manager's
//! controller takes over). The planner takes a listed machine as made, so
//! a machine whose boot died with the provision would never join, and the
//! controller would wait out its whole `startup_timeout` before replacing
//! it. The boot task outlives the provision (within the process: a process
//! that dies is a power cut), and the boot script outlives the task
//! (a process of the machine's group: destroying the machine stops it).
//!
//! A provision is idempotent on its operation's link tag: a second one
//! for the same link finds the machine and finishes what was not begun — its
//! engine, its boot — under a fence checked again; a boot is started once,
//! claimed by creating its `boot.log` exclusively (released when the script
//! could not be started, so the next provision starts it).

use crate::{
    BOOT_TIMEOUT, InstanceRecord, LocalProvider, io_err, launcher, now_ms, write_record_in,
};
use drover_spi::{Fence, ProviderError, ProvisionRequest};
use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::PathBuf;

/// The boot's log in a machine's directory; its existence says the boot
/// was started.
pub(crate) const BOOT_LOG: &str = "boot.log";

impl LocalProvider {
    /// Makes the machine `req` asks for, or finishes the one an earlier
    /// provision of the same operation began; returns its id once its boot
    /// ended (a boot already claimed by another provision is left to it).
    pub(crate) async fn make(
        &self,
        req: ProvisionRequest,
        fence: &dyn Fence,
    ) -> Result<String, ProviderError> {
        let rec = self.claim(&req, fence).await?;
        let mut ctx = req.boot_context.clone();
        ctx.address = rec.address.clone();
        let script = drover_core::template::render(&req.boot_template, &ctx)
            .map_err(|e| ProviderError::Permanent(format!("boot template: {e}")))?;
        let Some(boot) = self.boot(&rec, &script, &req)? else {
            return Ok(rec.id);
        };
        tokio::spawn(boot.run())
            .await
            .map_err(|e| ProviderError::Transient(format!("instance {}: boot: {e}", rec.id)))??;
        tracing::info!(id = %rec.id, address = %rec.address, "instance provisioned");
        Ok(rec.id)
    }

    /// Under the allocation lock (this process's and the state directory's
    /// file lock: a bootstrapping CLI and the managers' controllers may
    /// share it): the machine this operation already has, its engine
    /// started if it was not, or a new record and engine. The fence is
    /// checked right before either: nothing is made or started, and no boot
    /// begun, under a term that ended.
    async fn claim(
        &self,
        req: &ProvisionRequest,
        fence: &dyn Fence,
    ) -> Result<InstanceRecord, ProviderError> {
        let _g = self.alloc.lock().await;
        let _file_lock = self
            .lock_state()
            .map_err(|e| io_err("locking state dir", e))?;
        let taken = self.records().map_err(|e| io_err("reading state dir", e))?;
        let link = req.tags.get(drover_core::model::tags::LINK);
        let found = taken
            .iter()
            .find(|r| link.is_some() && r.tags.get(drover_core::model::tags::LINK) == link);
        let mut rec = match found {
            Some(existing) => {
                // What this provision goes on with (an engine, a boot) is
                // a side effect of its own.
                fence.check()?;
                existing.clone()
            }
            None => {
                let addr = self.choose_address(req, &taken)?;
                fence.check()?;
                self.new_record(req, addr.to_string())?
            }
        };
        if rec.pgid.is_none() {
            self.start_engine(&mut rec, req)?;
        }
        Ok(rec)
    }

    /// A new machine's directory and record (written before its engine
    /// starts, so the listing never misses a machine that runs).
    fn new_record(
        &self,
        req: &ProvisionRequest,
        address: String,
    ) -> Result<InstanceRecord, ProviderError> {
        let id = format!("i{}", &uuid::Uuid::new_v4().simple().to_string()[..8]);
        let dir = self.dir_of(&id);
        std::fs::create_dir_all(&dir).map_err(|e| io_err("creating instance dir", e))?;
        let paths = launcher::EnginePaths::new(&dir);
        let rec = InstanceRecord {
            id,
            tags: req.tags.clone(),
            logical_id: req.logical_id.clone(),
            address,
            socket: paths.sock.clone(),
            pid: None,
            pgid: None,
            supervisor: None,
            created_ms: now_ms(),
            engine_dir: None,
            marked: true,
        };
        self.write_record(&rec)
            .map_err(|e| io_err("writing instance record", e))?;
        Ok(rec)
    }

    /// Starts the machine's engine (supervised or not) and records its
    /// process group.
    fn start_engine(
        &self,
        rec: &mut InstanceRecord,
        req: &ProvisionRequest,
    ) -> Result<(), ProviderError> {
        let start = if self.supervise {
            launcher::EngineProcess::start_supervised
        } else {
            launcher::EngineProcess::start
        };
        let engine = start(&self.dir_of(&rec.id), &req.engine_labels).map_err(|e| {
            ProviderError::Transient(format!("starting dockerd for {}: {e}", rec.id))
        })?;
        let (_, leader) = engine.detach();
        rec.pgid = Some(leader);
        if self.supervise {
            rec.supervisor = Some(leader);
        } else {
            rec.pid = Some(leader);
        }
        self.write_record(rec)
            .map_err(|e| io_err("writing instance record", e))
    }

    /// The machine's boot, ready to run in a task of its own; `None` when
    /// its boot was already claimed (by a provision cut short, or by
    /// another process asking for the same operation): it is left to that.
    fn boot(
        &self,
        rec: &InstanceRecord,
        script: &str,
        req: &ProvisionRequest,
    ) -> Result<Option<Boot>, ProviderError> {
        let paths = self.engine_paths(rec);
        let leader = rec.pgid.ok_or_else(|| {
            ProviderError::Transient(format!("instance {}: no engine process recorded", rec.id))
        })?;
        let log_path = paths.dir.join(BOOT_LOG);
        let log = match std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&log_path)
        {
            Ok(log) => log,
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => return Ok(None),
            Err(e) => return Err(io_err("opening boot.log", e)),
        };
        // Written once the boot is this provision's: a script another
        // boot runs is never rewritten under it.
        let file = paths.dir.join("boot.sh");
        let written = std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(0o700)
            .open(&file)
            .and_then(|mut f| f.write_all(script.as_bytes()));
        if let Err(e) = written {
            let _ = std::fs::remove_file(&log_path);
            return Err(io_err("writing boot script", e));
        }
        let command = match self.boot_command(rec, &file, log, req) {
            Ok(command) => command,
            Err(e) => {
                let _ = std::fs::remove_file(&log_path);
                return Err(e);
            }
        };
        Ok(Some(Boot {
            rec: rec.clone(),
            record_dir: self.dir_of(&rec.id),
            paths,
            leader,
            supervised: self.supervise,
            command,
            file,
            log_path,
        }))
    }
}

/// One machine's boot, owned by the task that runs it.
struct Boot {
    rec: InstanceRecord,
    /// Where its record lives.
    record_dir: PathBuf,
    /// Its engine's files ([`LocalProvider::engine_paths`]).
    paths: launcher::EnginePaths,
    /// Its engine's process group leader.
    leader: i32,
    supervised: bool,
    /// The boot script's command, not yet started.
    command: tokio::process::Command,
    /// The script (`boot.sh`), removed when it ends.
    file: PathBuf,
    /// Its claim and log (`boot.log`).
    log_path: PathBuf,
}

impl Boot {
    /// Waits for the engine, then runs the script within [`BOOT_TIMEOUT`].
    /// A script that never started releases the claim.
    async fn run(mut self) -> Result<(), ProviderError> {
        let started = self.start().await;
        let mut child = match started {
            Ok(Some(child)) => child,
            Ok(None) => return Ok(()),
            Err(e) => {
                let _ = std::fs::remove_file(&self.log_path);
                return Err(e);
            }
        };
        let id = &self.rec.id;
        let ended = match tokio::time::timeout(BOOT_TIMEOUT, child.wait()).await {
            Ok(Ok(st)) if st.success() => Ok(()),
            Ok(Ok(st)) => Err(ProviderError::Permanent(format!(
                "boot script of {id} failed ({st}); see {}",
                self.log_path.display()
            ))),
            Ok(Err(e)) => Err(ProviderError::Transient(format!("boot script: {e}"))),
            Err(_) => {
                let _ = child.kill().await;
                Err(ProviderError::Permanent(format!(
                    "boot script of {id} did not finish within {BOOT_TIMEOUT:?}"
                )))
            }
        };
        let _ = std::fs::remove_file(&self.file);
        ended
    }

    /// The engine ready (its PID recorded when supervised), the script
    /// started; `None` when the engine died before it answered. The machine
    /// was made, and a machine that dies while it boots is the world's to
    /// judge, as a VM's crash is (the controller reads it stopped and
    /// replaces it): answered as made, never retried as a call — a retry
    /// would make a second machine for the operation if the first was
    /// collected meanwhile.
    async fn start(&mut self) -> Result<Option<tokio::process::Child>, ProviderError> {
        let id = self.rec.id.clone();
        let paths = &self.paths;
        match launcher::wait_ready(paths, self.leader, launcher::READY_TIMEOUT).await {
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::TimedOut => {
                return Err(ProviderError::Transient(format!("instance {id}: {e}")));
            }
            Err(e) => {
                tracing::warn!(id = %id, error = %e, "its engine died before it answered: the machine is left as it is");
                return Ok(None);
            }
        }
        if self.supervised && self.rec.pid.is_none() {
            // dockerd wrote its pidfile before it answered.
            self.rec.pid = launcher::running_engine_pid(paths, None);
            write_record_in(&self.record_dir, &self.rec)
                .map_err(|e| io_err("writing instance record", e))?;
        }
        self.command
            .spawn()
            .map(Some)
            .map_err(|e| ProviderError::Transient(format!("starting boot script: {e}")))
    }
}
