//! # drover-ssh
//!
//! The `ssh` provider: machines the operator already has. A group's
//! `instance.properties` hold a static inventory of hosts
//! ([`drover_core::spec::ssh`], docs/ssh.md); drover never makes or powers
//! off a machine, it enrolls a free host and returns it to the pool.
//!
//! ## Layout
//! - [`record`]: the enrollment record kept on a host (the truth of who
//!   holds it), instance ids, the choice of a free host. Pure.
//! - [`script`]: the shell scripts run on a host, one per verb. Pure.
//! - [`config`]: the OpenSSH configuration each host is logged in to with,
//!   and what a failed login means. Pure.
//! - [`inventory`]: which hosts are asked (what the cluster declares).
//! - [`link`]: the connections (one OpenSSH ControlMaster per host) and
//!   the engines' sockets forwarded over them.
//! - `listing`, `enroll`, `verbs`, `engines`: the provider's verbs.
//!
//! ## Start here
//! [`SshProvider::new`], then [`InstanceProvider`]'s verbs below.
//!
//! ## Guarantees
//! - Provision enrolls a free host: a record claimed atomically on the
//!   host (two claims of one host: one wins), then the boot script started
//!   there with its environment (the join token) on the connection's
//!   standard input: never on a command line, in no file. Idempotent on the
//!   operation's link: a retry finds the host it enrolled.
//! - Destroy returns the host to the pool: the engine leaves the swarm,
//!   what the group's `cleanup` declares is removed, then the record;
//!   nothing else, and nothing is powered off. Absent is success.
//! - Describe lists what the hosts' records say. A host that does not
//!   answer is unknown, never gone: it is listed from the record last read
//!   from it, and when none was, the listing fails (nothing is concluded).
//! - A free host whose engine is part of a swarm already is never
//!   enrolled: no record is written, the refusal names the host.
//! - An in-place update runs detached on its host (its own session, its
//!   output and status in files there): a dropped connection does not end
//!   it, and the next call finds it running or ended, never runs it twice.
//! - Host keys are checked against the declared known_hosts file only,
//!   strictly; keys come from the declared file or agent only.

// Production functions stay short enough to read at once (clippy.toml:
// 80 lines); tests may be long scenarios.
#![cfg_attr(not(test), deny(clippy::too_many_lines))]

pub mod config;
mod engines;
mod enroll;
pub mod inventory;
pub mod link;
mod listing;
pub mod record;
pub mod script;
mod verbs;

pub use inventory::{Declared, Inventory, StoreInventory};

use async_trait::async_trait;
use drover_core::boot::{BootLog, JoinFailed};
use drover_core::in_place::{UpdateOutcome, UpdateRun};
use drover_core::model::Instance;
use drover_spi::{EngineReport, Fence, InstanceProvider, ProviderError, ProvisionRequest};
use link::Links;
use listing::Seen;
use std::collections::{BTreeMap, HashMap};
use std::path::Path;
use std::sync::Arc;

/// The `ssh` provider.
pub struct SshProvider {
    links: Arc<Links>,
    inventory: Arc<dyn Inventory>,
    /// What each host answered last (its record, or none), by host name:
    /// a host that does not answer is listed from it.
    seen: std::sync::Mutex<HashMap<String, Seen>>,
    /// One enrollment at a time in this process: the choice of a free
    /// host and its claim do not race each other here (on the host, the
    /// claim itself is atomic).
    enrolling: tokio::sync::Mutex<()>,
    /// The directory a manager's controller on a host keeps its
    /// connections in (its boot environment says so).
    host_dir: String,
}

/// Where a manager's controller keeps its connections on its host: under
/// the controller unit's state directory, the one its sandbox lets it write.
pub const HOST_DIR: &str = "/var/lib/drover/ssh";

impl SshProvider {
    /// The provider over the connections `links` (shared by every view of
    /// a process's hosts), asking the hosts `inventory` declares.
    pub fn new(links: Arc<Links>, inventory: Arc<dyn Inventory>) -> SshProvider {
        SshProvider {
            links,
            inventory,
            seen: std::sync::Mutex::new(HashMap::new()),
            enrolling: tokio::sync::Mutex::new(()),
            host_dir: HOST_DIR.to_string(),
        }
    }

    /// [`SshProvider::new`] with connections of its own kept under `dir`
    /// (made if missing, this user's only).
    pub fn open(dir: &Path, inventory: Arc<dyn Inventory>) -> std::io::Result<SshProvider> {
        Ok(SshProvider::new(Arc::new(Links::new(dir)?), inventory))
    }

    /// Machine `id`'s engine as a docker endpoint on this host: the local
    /// end of the socket forwarded over its host's connection.
    pub fn endpoint(&self, id: &str) -> Option<String> {
        let host = record::host_of(id)?;
        Some(format!(
            "unix://{}",
            self.links.engine_socket(host).display()
        ))
    }
}

#[async_trait]
impl InstanceProvider for SshProvider {
    /// Every host answered, or is listed from the record last read from
    /// it; otherwise the describe fails: a successful listing never leaves
    /// an enrolled host out.
    fn listing_is_complete(&self) -> bool {
        true
    }

    async fn provision(
        &self,
        req: ProvisionRequest,
        fence: &dyn Fence,
    ) -> Result<String, ProviderError> {
        self.enroll(req, fence).await
    }

    async fn destroy_fenced(&self, instance: &str, fence: &dyn Fence) -> Result<(), ProviderError> {
        self.release(instance, fence).await
    }

    async fn describe(
        &self,
        tags: &BTreeMap<String, String>,
    ) -> Result<Vec<Instance>, ProviderError> {
        self.instances(tags, false).await
    }

    async fn describe_fresh(
        &self,
        tags: &BTreeMap<String, String>,
    ) -> Result<Vec<Instance>, ProviderError> {
        self.instances(tags, true).await
    }

    async fn label(
        &self,
        instance: &str,
        labels: &BTreeMap<String, String>,
        fence: &dyn Fence,
    ) -> Result<(), ProviderError> {
        self.relabel(instance, labels, fence).await
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

    async fn boot_log(&self, instance: &str) -> Result<Option<BootLog>, ProviderError> {
        self.boot_log_of(instance).await
    }

    async fn join_failed(&self, instance: &str) -> Option<JoinFailed> {
        drover_engine::probe::join_failed(&self.endpoint(instance)?).await
    }

    fn updates_in_place(&self) -> bool {
        true
    }

    async fn run_update(
        &self,
        instance: &str,
        run: &UpdateRun,
        fence: &dyn Fence,
    ) -> Result<UpdateOutcome, ProviderError> {
        self.update(instance, run, fence).await
    }
}

#[cfg(feature = "testkit")]
pub mod testkit;
