//! Making one machine, in stages a later provision can finish: its record
//! and engine (under the state lock), the engine's readiness, its boot.
//!
//! A provision is idempotent on its operation's link tag, and a provision
//! may be cut short: the controller that asked stood down and dropped it
//! (the bootstrapping CLI does so when the first manager's controller takes
//! over). The next controller asks again with the same link; the machine
//! found is then finished from its first stage not done, rather than
//! answered as it is: a machine whose boot never ran never joins, and the
//! controller would wait out its whole `startup_timeout` before replacing
//! it. A boot, once started, is the machine's own (as cloud-init's is): it
//! runs to its end whatever becomes of the provision, and is started once
//! (its `boot.log`, created exclusively, is the claim).

use crate::{InstanceRecord, LocalProvider, io_err, launcher, now_ms};
use drover_spi::{Fence, ProviderError, ProvisionRequest};
use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;

/// The boot's log in a machine's directory; its existence says the boot
/// was started.
pub(crate) const BOOT_LOG: &str = "boot.log";

impl LocalProvider {
    /// Makes the machine `req` asks for, or finishes the one an earlier
    /// provision of the same operation began; returns its id.
    pub(crate) async fn make(
        &self,
        req: ProvisionRequest,
        fence: &dyn Fence,
    ) -> Result<String, ProviderError> {
        let mut rec = self.claim(&req, fence).await?;
        let paths = self.engine_paths(&rec);
        let leader = rec.pgid.ok_or_else(|| {
            ProviderError::Transient(format!("instance {}: no engine process recorded", rec.id))
        })?;
        launcher::wait_ready(&paths, leader, launcher::READY_TIMEOUT)
            .await
            .map_err(|e| ProviderError::Transient(format!("instance {}: {e}", rec.id)))?;
        if self.supervise && rec.pid.is_none() {
            // dockerd wrote its pidfile before it answered.
            rec.pid = launcher::running_engine_pid(&paths, None);
            self.write_record(&rec)
                .map_err(|e| io_err("writing instance record", e))?;
        }
        let mut ctx = req.boot_context.clone();
        ctx.address = rec.address.clone();
        let script = drover_core::template::render(&req.boot_template, &ctx)
            .map_err(|e| ProviderError::Permanent(format!("boot template: {e}")))?;
        self.boot(&rec, &script, &req).await?;
        tracing::info!(id = %rec.id, address = %rec.address, "instance provisioned");
        Ok(rec.id)
    }

    /// Under the allocation lock (this process's and the state directory's
    /// file lock: a bootstrapping CLI and the managers' controllers may
    /// share it): the machine this operation already has, its engine
    /// started if it was not, or a new record and engine. The fence is
    /// checked right before either.
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
            Some(existing) => existing.clone(),
            None => {
                let addr = self.choose_address(req, &taken)?;
                fence.check()?;
                self.new_record(req, addr.to_string())?
            }
        };
        if rec.pgid.is_none() {
            fence.check()?;
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

    /// Runs the boot script once: a machine whose boot was already started
    /// (by a provision cut short, or by another process asking for the same
    /// operation) is left to it.
    async fn boot(
        &self,
        rec: &InstanceRecord,
        script: &str,
        req: &ProvisionRequest,
    ) -> Result<(), ProviderError> {
        let dir = self.dir_of(&rec.id);
        let log = match std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(dir.join(BOOT_LOG))
        {
            Ok(log) => log,
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => return Ok(()),
            Err(e) => return Err(io_err("opening boot.log", e)),
        };
        let file = dir.join("boot.sh");
        {
            let mut f = std::fs::OpenOptions::new()
                .write(true)
                .create(true)
                .truncate(true)
                .mode(0o700)
                .open(&file)
                .map_err(|e| io_err("writing boot script", e))?;
            f.write_all(script.as_bytes())
                .map_err(|e| io_err("writing boot script", e))?;
        }
        let result = self.run_boot_script(rec, &file, log, req).await;
        let _ = std::fs::remove_file(&file);
        result
    }
}
