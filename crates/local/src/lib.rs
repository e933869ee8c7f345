//! # drover-local
//!
//! The `local` provider: every instance is a real `dockerd` process with its
//! own data-root, exec-root, API socket and loopback address (127.0.0.0/8),
//! booted by running the rendered boot script against it, as cloud-init
//! would on a VM. See `README.md` for the measured footprint.
//!
//! Each engine runs under a supervisor that restarts it when it exits, as
//! systemd restarts a VM's dockerd ([`EngineProcess::start_supervised`],
//! [`LocalProvider::with_supervision`], on by default): a crashed engine is
//! not a dead machine. Tests choose between the two faults with
//! `testkit::crash_engine` and `testkit::kill_machine`.
//!
//! State lives under `state_dir/instances/<id>/`:
//! `instance.json` (the record), `root/`, `exec/`, `sock`, `pid`, `log`,
//! `boot.log`. Ids are short (`i` + 8 hex) because unix socket paths are
//! limited to 108 bytes.

// Production functions stay short enough to read at once (clippy.toml:
// 80 lines); tests may be long scenarios.
#![cfg_attr(not(test), deny(clippy::too_many_lines))]

mod adopt;
mod boot_log;
pub mod launcher;
mod make;
mod probe;
pub mod procs;
mod teardown;
#[cfg(feature = "testkit")]
pub mod testkit;
mod update;

pub use teardown::teardown;

pub use launcher::{EnginePaths, EngineProcess};

use async_trait::async_trait;
use drover_core::model::Instance;
use drover_spi::{EngineReport, Fence, Foreign, InstanceProvider, ProviderError, ProvisionRequest};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::net::Ipv4Addr;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// The directory under a local provider's state directory that holds one
/// directory per machine: what makes a directory a local provider's.
pub const INSTANCES_DIR: &str = "instances";

/// How long a boot script may run.
pub const BOOT_TIMEOUT: Duration = Duration::from_secs(180);

/// Why the provider could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum LocalError {
    /// Only 127.0.0.0/8 may be used.
    #[error("{0} is not a loopback address (127.0.0.0/8): the local provider uses loopback only")]
    NotLoopback(String),
    /// A pool entry could not be parsed.
    #[error("bad address pool entry {0:?}: expected A.B.C.D or A.B.C.D-A.B.C.D")]
    BadPool(String),
    /// The state directory could not be prepared.
    #[error("state dir {0}: {1}")]
    Io(PathBuf, std::io::Error),
}

/// Parses `127.0.5.10-127.0.5.20` (inclusive) or a single address; loopback only.
pub fn parse_pool(s: &str) -> Result<Vec<Ipv4Addr>, LocalError> {
    let parse = |a: &str| -> Result<Ipv4Addr, LocalError> {
        let ip: Ipv4Addr = a
            .trim()
            .parse()
            .map_err(|_| LocalError::BadPool(s.to_string()))?;
        if !ip.is_loopback() {
            return Err(LocalError::NotLoopback(ip.to_string()));
        }
        Ok(ip)
    };
    let (a, b) = match s.split_once('-') {
        Some((a, b)) => (parse(a)?, parse(b)?),
        None => {
            let a = parse(s)?;
            (a, a)
        }
    };
    let (a, b) = (u32::from(a), u32::from(b));
    if b < a {
        return Err(LocalError::BadPool(s.to_string()));
    }
    Ok((a..=b).map(Ipv4Addr::from).collect())
}

/// What the provider remembers about one instance (`instance.json`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct InstanceRecord {
    /// The instance id (also its directory name).
    pub id: String,
    /// Its tags.
    pub tags: BTreeMap<String, String>,
    /// The slot's logical id, if any.
    pub logical_id: Option<String>,
    /// The loopback address its engine advertises.
    pub address: String,
    /// The engine's API socket.
    pub socket: PathBuf,
    /// The dockerd PID, once started (an engine its supervisor restarted
    /// has a new one, in its pidfile: see [`launcher::running_engine_pid`]).
    pub pid: Option<i32>,
    /// Its process group: the supervisor's PID when supervised, else the
    /// dockerd PID.
    pub pgid: Option<i32>,
    /// The supervisor that restarts the engine when it exits
    /// ([`EngineProcess::start_supervised`]); `None` when the machine was
    /// made without supervision (or adopted, or by a build before it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub supervisor: Option<i32>,
    /// Creation time, ms since the Unix epoch.
    pub created_ms: u64,
    /// Where the engine's files live when not in the instance's own
    /// directory: an adopted engine's directory (see `adopt.rs`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub engine_dir: Option<PathBuf>,
    /// Everything started for it carries [`procs::MACHINE_ENV`]: false for
    /// adopted engines and for machines made by builds before the mark, whose
    /// processes are then recognised by command line alone.
    #[serde(default)]
    pub marked: bool,
}

impl InstanceRecord {
    /// `unix://…/sock`.
    pub fn endpoint(&self) -> String {
        format!("unix://{}", self.socket.display())
    }
}

/// The `local` provider.
#[derive(Debug)]
pub struct LocalProvider {
    state_dir: PathBuf,
    pool: Vec<Ipv4Addr>,
    bin_dir: Option<PathBuf>,
    supervise: bool,
    alloc: tokio::sync::Mutex<()>,
}

/// Set in every boot script's environment (the machine's "instance
/// metadata", with `DROVER_LOCAL_DIR` and `DROVER_LOCAL_POOL`): `true` or
/// `false`, whether this provider supervises its engines, so a controller a
/// boot script starts makes its machines the same way (the CLI's
/// `--local-supervise` reads it).
pub const SUPERVISE_ENV: &str = "DROVER_LOCAL_SUPERVISE";

pub(crate) fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

/// Writes `r` as `dir/instance.json`, by an atomic rename.
pub(crate) fn write_record_in(dir: &Path, r: &InstanceRecord) -> std::io::Result<()> {
    let tmp = dir.join("instance.json.tmp");
    std::fs::write(
        &tmp,
        serde_json::to_vec_pretty(r).map_err(std::io::Error::other)?,
    )?;
    std::fs::rename(tmp, dir.join("instance.json"))
}

pub(crate) fn io_err(what: &str, e: impl std::fmt::Display) -> ProviderError {
    ProviderError::Transient(format!("{what}: {e}"))
}

impl LocalProvider {
    /// A provider keeping its state in `state_dir`, allocating addresses
    /// from `pool` (127.0.0.0/8 only). `DROVER_BIN_DIR`, if set, is put in
    /// front of the boot scripts' `PATH`.
    pub fn new(
        state_dir: impl Into<PathBuf>,
        pool: impl IntoIterator<Item = Ipv4Addr>,
    ) -> Result<Self, LocalError> {
        let state_dir: PathBuf = state_dir.into();
        let pool: Vec<Ipv4Addr> = pool.into_iter().collect();
        if let Some(bad) = pool.iter().find(|a| !a.is_loopback()) {
            return Err(LocalError::NotLoopback(bad.to_string()));
        }
        let inst = state_dir.join(INSTANCES_DIR);
        std::fs::create_dir_all(&inst).map_err(|e| LocalError::Io(inst.clone(), e))?;
        let state_dir = state_dir
            .canonicalize()
            .map_err(|e| LocalError::Io(state_dir.clone(), e))?;
        Ok(LocalProvider {
            state_dir,
            pool,
            bin_dir: std::env::var_os("DROVER_BIN_DIR").map(PathBuf::from),
            supervise: true,
            alloc: tokio::sync::Mutex::new(()),
        })
    }

    /// Holds an exclusive lock on the state dir until the file is dropped.
    fn lock_state(&self) -> std::io::Result<std::fs::File> {
        let f = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .mode(0o600)
            .open(self.state_dir.join("alloc.lock"))?;
        f.lock()?;
        Ok(f)
    }

    /// Overrides the directory put in front of the boot scripts' `PATH`.
    pub fn with_bin_dir(mut self, dir: Option<PathBuf>) -> Self {
        self.bin_dir = dir;
        self
    }

    /// Whether engines of new machines run under a supervisor that
    /// restarts them when they exit, as systemd's `Restart=always` restarts
    /// a VM's dockerd (on by default; see
    /// [`EngineProcess::start_supervised`]). Off, a machine is its dockerd:
    /// an engine that exits stays down and the machine reads as stopped.
    /// Machines already made keep how they were made.
    pub fn with_supervision(mut self, on: bool) -> Self {
        self.supervise = on;
        self
    }

    /// Whether new machines are supervised.
    pub fn supervises(&self) -> bool {
        self.supervise
    }

    /// The state directory.
    pub fn state_dir(&self) -> &Path {
        &self.state_dir
    }

    fn instances_dir(&self) -> PathBuf {
        self.state_dir.join(INSTANCES_DIR)
    }

    fn dir_of(&self, id: &str) -> PathBuf {
        self.instances_dir().join(id)
    }

    /// The files of an instance's engine.
    fn engine_paths(&self, r: &InstanceRecord) -> EnginePaths {
        EnginePaths::new(r.engine_dir.as_deref().unwrap_or(&self.dir_of(&r.id)))
    }

    /// Every instance record. An unreadable state dir or record is an error.
    pub fn records(&self) -> std::io::Result<Vec<InstanceRecord>> {
        let mut out = Vec::new();
        for e in std::fs::read_dir(self.instances_dir())? {
            let e = e?;
            let f = e.path().join("instance.json");
            let text = match std::fs::read_to_string(&f) {
                Ok(t) => t,
                // A directory without a record never got an engine.
                Err(err) if err.kind() == std::io::ErrorKind::NotFound => continue,
                Err(err) => return Err(err),
            };
            let r: InstanceRecord = serde_json::from_str(&text)
                .map_err(|err| std::io::Error::other(format!("{}: {err}", f.display())))?;
            out.push(r);
        }
        out.sort_by(|a, b| a.id.cmp(&b.id));
        Ok(out)
    }

    /// One instance's record.
    pub fn record(&self, id: &str) -> std::io::Result<Option<InstanceRecord>> {
        if !valid_id(id) {
            return Ok(None);
        }
        match std::fs::read_to_string(self.dir_of(id).join("instance.json")) {
            Ok(t) => serde_json::from_str(&t)
                .map(Some)
                .map_err(std::io::Error::other),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(e),
        }
    }

    fn write_record(&self, r: &InstanceRecord) -> std::io::Result<()> {
        write_record_in(&self.dir_of(&r.id), r)
    }

    /// The engine endpoint of an instance.
    pub fn endpoint(&self, id: &str) -> Option<String> {
        self.record(id).ok().flatten().map(|r| r.endpoint())
    }

    /// True when the machine is up: its supervisor lives (its engine may be
    /// down for the moment between a crash and its restart, as a VM whose
    /// dockerd systemd is restarting is still a running VM), or its dockerd
    /// does (the recorded PID, or the one dockerd wrote to its pidfile: an
    /// engine restarted in place has a new PID). Every PID counts only when
    /// its command line carries the instance's pidfile path: a recycled PID
    /// never counts. The socket is not asked (describe stays fast and never
    /// blocks on a busy engine); swarm health is the flavor's job.
    pub fn is_running(&self, r: &InstanceRecord) -> bool {
        let paths = self.engine_paths(r);
        r.supervisor
            .is_some_and(|s| launcher::is_supervisor(s, &paths))
            || launcher::running_engine_pid(&paths, r.pid).is_some()
    }

    fn choose_address(
        &self,
        req: &ProvisionRequest,
        taken: &[InstanceRecord],
    ) -> Result<Ipv4Addr, ProviderError> {
        let used = |a: &Ipv4Addr| taken.iter().any(|r| r.address == a.to_string());
        if let Some(lid) = &req.logical_id
            && let Ok(ip) = lid.parse::<Ipv4Addr>()
        {
            if !ip.is_loopback() {
                return Err(ProviderError::Permanent(format!(
                    "logical id {ip} is not a loopback address (127.0.0.0/8)"
                )));
            }
            if let Some(r) = taken.iter().find(|r| r.address == ip.to_string()) {
                return Err(ProviderError::Permanent(format!(
                    "address {ip} is already used by instance {}",
                    r.id
                )));
            }
            return Ok(ip);
        }
        self.pool
            .iter()
            .find(|a| !used(a))
            .copied()
            .ok_or_else(|| ProviderError::Permanent("the address pool is exhausted".into()))
    }

    /// The boot script `file`'s command against the machine, its output
    /// into `log`: in the machine's process group (destroying the machine
    /// stops it; nothing else does, as nothing stops a VM's cloud-init), its
    /// secrets in its environment only.
    fn boot_command(
        &self,
        rec: &InstanceRecord,
        file: &Path,
        log: std::fs::File,
        req: &ProvisionRequest,
    ) -> Result<tokio::process::Command, ProviderError> {
        let paths = self.engine_paths(rec);
        let mut path =
            std::env::var("PATH").unwrap_or_else(|_| "/usr/sbin:/usr/bin:/sbin:/bin".into());
        if let Some(b) = &self.bin_dir {
            path = format!("{}:{path}", b.display());
        }
        let mut cmd = tokio::process::Command::new("/bin/sh");
        cmd.arg(file)
            .current_dir(&paths.dir)
            .env(procs::MACHINE_ENV, paths.dir_needle())
            .env("DOCKER_HOST", paths.endpoint())
            .env("PATH", path)
            // The machine's "instance metadata": where this cloud keeps its
            // state, so a controller started by the boot script can manage
            // machines of the same provider.
            .env("DROVER_LOCAL_DIR", &self.state_dir)
            .env(SUPERVISE_ENV, self.supervise.to_string())
            .env(
                "DROVER_LOCAL_POOL",
                self.pool
                    .iter()
                    .map(Ipv4Addr::to_string)
                    .collect::<Vec<_>>()
                    .join(","),
            )
            .stdin(std::process::Stdio::null())
            .stdout(log.try_clone().map_err(|e| io_err("boot.log", e))?)
            .stderr(log);
        if let Some(g) = rec.pgid {
            cmd.process_group(g);
        }
        for (k, v) in &req.boot_env {
            cmd.env(k, v.expose());
        }
        Ok(cmd)
    }
}

/// Destroys one machine's processes and directories: finds the processes
/// (a `/proc` scan, on a blocking thread), checks `fence` and SIGTERMs them
/// ([`procs::Tree::terminate`]), then waits for them, SIGKILLs stragglers
/// and removes the engine's directory and then `dirs` (blocking thread).
async fn stop_and_remove(
    instance: &str,
    paths: EnginePaths,
    (pid, pgid, owned): (Option<i32>, Option<i32>, procs::Owned),
    dirs: Vec<PathBuf>,
    fence: &dyn Fence,
) -> Result<(), ProviderError> {
    let scan = paths.clone();
    let tree = tokio::task::spawn_blocking(move || launcher::engine_tree(&scan, pid, pgid, owned))
        .await
        .map_err(|e| io_err("destroy", e))?;
    tree.terminate(fence)?;
    tokio::task::spawn_blocking(move || {
        let left = launcher::finish_stop(&paths, &tree);
        if left > 0 {
            return Err(std::io::Error::other(format!(
                "{left} processes survived SIGKILL"
            )));
        }
        procs::remove_instance_dir(&paths.dir)?;
        dirs.iter().try_for_each(|d| procs::remove_instance_dir(d))
    })
    .await
    .map_err(|e| io_err("destroy", e))?
    .map_err(|e| io_err(&format!("destroying {instance}"), e))
}

/// The PID that verifies the machine's process group: its supervisor
/// while that lives (it leads the group even while its engine is down),
/// else the recorded dockerd.
pub(crate) fn group_leader(r: &InstanceRecord, paths: &EnginePaths) -> Option<i32> {
    r.supervisor
        .filter(|s| launcher::is_supervisor(*s, paths))
        .or(r.pid)
}

fn valid_id(id: &str) -> bool {
    !id.is_empty() && id.len() <= 16 && id.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
}

#[async_trait]
impl InstanceProvider for LocalProvider {
    /// Its listing reads its own records (one file per machine, written by
    /// an atomic rename before the machine's engine starts): a machine it
    /// made is never left out.
    fn listing_is_complete(&self) -> bool {
        true
    }

    /// The fence is checked under the allocation lock, right before the
    /// instance's directory and record are made and its engine started;
    /// a provision cut short is finished by the next one of the same
    /// operation (see `make.rs`).
    async fn provision(
        &self,
        req: ProvisionRequest,
        fence: &dyn Fence,
    ) -> Result<String, ProviderError> {
        // The rule `validate` applies (one argument per label): refused
        // before anything is made, never an E2BIG from exec after it.
        if let Some(e) = drover_core::spec::local::label_problems(&req.engine_labels).first() {
            return Err(ProviderError::Permanent(e.to_string()));
        }
        self.make(req, fence).await
    }

    /// The fence is checked right before the engine's processes are
    /// signalled, after they were found (nothing is stopped or removed when
    /// it refuses): between the check and the first `kill(2)` only the
    /// other `kill(2)` calls run, no `/proc` scan and no thread hand-off.
    async fn destroy_fenced(&self, instance: &str, fence: &dyn Fence) -> Result<(), ProviderError> {
        let Some(rec) = self
            .record(instance)
            .map_err(|e| io_err("reading instance record", e))?
        else {
            if valid_id(instance) && self.dir_of(instance).exists() {
                // A directory without a record: no engine was recorded;
                // still stop anything naming the directory.
                let paths = EnginePaths::new(&self.dir_of(instance));
                let found = (None, None, procs::Owned::Named);
                stop_and_remove(instance, paths, found, vec![], fence).await?;
            }
            return Ok(());
        };
        // An adopted engine, or one made before the mark: unmarked.
        let owned = if rec.marked {
            procs::Owned::Marked
        } else {
            procs::Owned::Named
        };
        let paths = self.engine_paths(&rec);
        // An adopted engine's directory goes first: the record (in the
        // instance's own directory) is what says the machine existed.
        let own_dir = self.dir_of(&rec.id);
        let found = (group_leader(&rec, &paths), rec.pgid, owned);
        stop_and_remove(instance, paths, found, vec![own_dir], fence).await?;
        tracing::info!(id = %instance, "instance destroyed");
        Ok(())
    }

    async fn describe(
        &self,
        tags: &BTreeMap<String, String>,
    ) -> Result<Vec<Instance>, ProviderError> {
        let recs = self.records().map_err(|e| io_err("reading state dir", e))?;
        Ok(recs
            .iter()
            .filter(|r| tags.iter().all(|(k, v)| r.tags.get(k) == Some(v)))
            .map(|r| self.instance_of(r))
            .collect())
    }

    async fn ask_engines(
        &self,
        tags: &BTreeMap<String, String>,
    ) -> Result<Vec<EngineReport>, ProviderError> {
        self.engines_now(tags).await
    }

    fn engine_endpoint(&self, instance: &str) -> Option<String> {
        self.endpoint(instance)
    }

    async fn boot_log(
        &self,
        instance: &str,
    ) -> Result<Option<drover_core::boot::BootLog>, ProviderError> {
        self.boot_log_of(instance)
    }

    async fn join_failed(&self, instance: &str) -> Option<drover_core::boot::JoinFailed> {
        let r = self.record(instance).ok().flatten()?;
        drover_engine::probe::join_failed(&r.endpoint()).await
    }

    async fn label(
        &self,
        instance: &str,
        labels: &BTreeMap<String, String>,
        fence: &dyn Fence,
    ) -> Result<(), ProviderError> {
        let _g = self.alloc.lock().await;
        let mut rec = self
            .record(instance)
            .map_err(|e| io_err("reading instance record", e))?
            .ok_or_else(|| ProviderError::NotFound(instance.to_string()))?;
        rec.tags
            .extend(labels.iter().map(|(k, v)| (k.clone(), v.clone())));
        fence.check()?;
        self.write_record(&rec)
            .map_err(|e| io_err("writing instance record", e))
    }
    fn updates_in_place(&self) -> bool {
        true
    }

    async fn run_update(
        &self,
        instance: &str,
        run: &drover_core::in_place::UpdateRun,
        fence: &dyn Fence,
    ) -> Result<drover_core::in_place::UpdateOutcome, ProviderError> {
        self.update(instance, run, fence).await
    }

    async fn inspect_foreign(&self, reference: &str) -> Result<Foreign, ProviderError> {
        self.inspect_foreign_engine(reference).await
    }

    async fn adopt(
        &self,
        reference: &str,
        tags: &BTreeMap<String, String>,
    ) -> Result<String, ProviderError> {
        self.adopt_engine(reference, tags).await
    }
}

impl drover_engine::PeerEndpoints for LocalProvider {
    fn peer_endpoints(&self) -> Vec<String> {
        self.records()
            .unwrap_or_default()
            .into_iter()
            .filter(|r| self.is_running(r))
            .map(|r| r.endpoint())
            .collect()
    }
}

#[cfg(test)]
mod tests;
