//! Explicit wiring of concrete backends: the only place that names them.
//! Commands get stores, providers, contexts and the procedures' seams from
//! here; what a backend is made of (the local provider's machines, the
//! swarm adapter over them, the engine client) stays below this module.
//! Two exceptions, on purpose: the simulator (`drover-sim`), which `plan`
//! and `sim` run as a dry-run engine rather than as a backend, and the
//! engine client's types that `adopt` reads a swarm through.

pub mod adopt;
mod demo;
pub mod etcd;
mod external;
mod manager;
mod plugins;
mod provider_swarm;
pub mod recover;
mod ssh;

pub use demo::{demo_machines, remove_demo};
pub use drover_engine::{Engine, EngineError};
pub use drover_store::{BACKENDS as STORE_BACKENDS, DEFAULT_OPEN_TIMEOUT};
pub use external::external;
pub use manager::{forward_node_events, on_manager};
pub use plugins::{bind_plugin_socket, serve_plugin, served_provider};
pub use ssh::ssh_files;

use crate::cli::{LocalArgs, StoreArgs};
use crate::error::MainError;
use async_trait::async_trait;
use drover_controller::Providers;
use drover_controller::procedure::recover::diagnose::{Diagnosis, Published, diagnose};
use drover_ec2::Ec2Provider;
use drover_engine::PeerEndpoints;
use drover_incus::IncusProvider;
use drover_local::LocalProvider;
use provider_swarm::ProviderSwarm;

use drover_spi::{InstanceProvider, Store, StoreError, SwarmStores};
use std::sync::Arc;

/// The providers whose machines' engines this process can reach: the
/// local provider's (`--local-dir`), the incus provider's
/// (`--incus-engines`). The off-cluster swarm, the swarm store before
/// the cluster's own controllers run, and the leader's leave are all
/// found through them.
#[derive(Clone, Default)]
pub struct Machines {
    /// The local provider, when `--local-dir` is given.
    pub local: Option<Arc<LocalProvider>>,
    /// The incus provider, when `--incus-engines` is given.
    pub incus: Option<Arc<IncusProvider>>,
    /// InfraKit plugins (`--plugin`), by provider key: machines drover
    /// cannot reach the engines of, so only groups use them.
    pub plugins: Providers,
    /// The ec2 provider, when `--ec2` is given. Its instances' engines are
    /// not reachable from here (no socket on this host): it provides
    /// machines to groups, but no swarm, store or leave is found through it.
    pub ec2: Option<Arc<Ec2Provider>>,
    /// The ssh provider's connections, when `--ssh-dir` is given. Its
    /// inventories are the cluster's (in its store), so it is made for a
    /// store ([`providers`]); its engines are reached only through the
    /// sockets it forwards, so, like EC2's, no swarm, store or leave is
    /// found through it from off the cluster.
    pub ssh: Option<Arc<drover_ssh::link::Links>>,
    /// Engines given directly (the swarm store's `swarm:ENDPOINT`): the
    /// swarm is looked at through them too, so a command given one
    /// manager's engine and no provider still sees the swarm.
    pub engines: Vec<String>,
}

impl Machines {
    /// True when some provider of machines whose engines this process
    /// reaches is configured (the ec2 provider's it does not).
    pub fn any(&self) -> bool {
        self.local.is_some() || self.incus.is_some()
    }

    /// True when some machine may be running (an off-cluster process then
    /// reads "no manager answers" as unavailable, not as no swarm). A
    /// stopped Incus machine counts: it may be started again.
    pub async fn may_run(&self) -> bool {
        let local = self.local.as_ref().is_some_and(|l| {
            l.records()
                .map(|r| r.iter().any(|r| l.is_running(r)))
                .unwrap_or(true)
        });
        let incus = match &self.incus {
            Some(i) => i.holds_machines().await,
            None => false,
        };
        local || incus
    }

    /// These machines, and the engine the swarm store `store` names
    /// (`swarm:ENDPOINT`), through which the swarm is looked at first.
    pub fn seeing(mut self, store: &StoreArgs) -> Machines {
        self.engines = given_engine(store).into_iter().collect();
        self
    }

    /// The engines, for the leader's leave watched from another manager.
    pub fn peers(&self) -> Option<Arc<dyn PeerEndpoints>> {
        self.any()
            .then(|| Arc::new(self.clone()) as Arc<dyn PeerEndpoints>)
    }
}

impl PeerEndpoints for Machines {
    fn peer_endpoints(&self) -> Vec<String> {
        let mut out = self.engines.clone();
        if let Some(l) = &self.local {
            out.extend(l.peer_endpoints());
        }
        if let Some(i) = &self.incus {
            out.extend(i.peer_endpoints());
        }
        out
    }
}

/// Whether a command may create the store it opens.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Open {
    /// The store must exist (every command that reads or changes a
    /// cluster): a missing one is bad input, and none is created.
    Existing,
    /// A missing file store is created (commands that start a cluster).
    OrCreate,
    /// A missing file store reads as an empty one, and none is created
    /// (dry runs, and commands that will refuse before they write).
    OrEmpty,
    /// The store must exist and is only read (`status`, `events`,
    /// `history`, `plan --store`, `diff`, `export`): a file store is opened
    /// read-only, so these work beside the controller that writes it.
    ToRead,
}

/// Opens the existing store named by `--store`.
pub async fn store(args: &StoreArgs) -> Result<Arc<dyn Store>, MainError> {
    store_with(args, Open::Existing).await
}

/// Opens the existing store named by `--store` only to read it.
pub async fn store_to_read(args: &StoreArgs) -> Result<Arc<dyn Store>, MainError> {
    store_with(args, Open::ToRead).await
}

/// The store a command that wrote `store` goes on to follow (`apply
/// --wait`): a file store is closed and opened again read-only, so the
/// controller that acts on the revision can open it for writing; any other
/// store is `store` itself.
pub async fn to_follow(
    args: &StoreArgs,
    store: Arc<dyn Store>,
) -> Result<Arc<dyn Store>, MainError> {
    if !drover_store::is_file_store(&args.url) {
        return Ok(store);
    }
    drop(store);
    store_to_read(args).await
}

/// Opens the store named by `--store`, creating it or not as `open` says.
/// A swarm store follows the swarm ([`drover_store::FollowingStore`]):
/// when the manager it is read through leaves, it is read through another
/// the swarm lists.
pub async fn store_with(args: &StoreArgs, open: Open) -> Result<Arc<dyn Store>, MainError> {
    opened(args, open, None).await
}

/// [`store_with`] for a command that has the provider's machines: a swarm
/// store is found again through their engines too (after the managers the
/// swarm lists), also when the engine `--store` names is no manager.
pub async fn store_seen_from(
    args: &StoreArgs,
    open: Open,
    machines: &Machines,
) -> Result<Arc<dyn Store>, MainError> {
    opened(args, open, machines.peers()).await
}

/// The store a manager's own controller uses: its own engine's, never
/// another manager's (it acts only while its node leads).
pub async fn own_store(args: &StoreArgs) -> Result<Arc<dyn Store>, MainError> {
    let options = drover_store::OpenOptions {
        create: true,
        read_only: false,
        timeout: args.store_timeout,
    };
    match drover_store::open_with(&args.url, options).await {
        Ok(store) => Ok(Arc::from(store)),
        Err(e) => Err(opening_failed(&args.url, e)),
    }
}

/// The engine `--store swarm:ENDPOINT` names.
pub fn given_engine(args: &StoreArgs) -> Option<String> {
    args.url
        .strip_prefix("swarm:")
        .filter(|e| !e.is_empty())
        .map(str::to_string)
}

async fn opened(
    args: &StoreArgs,
    open: Open,
    machines: Option<Arc<dyn PeerEndpoints>>,
) -> Result<Arc<dyn Store>, MainError> {
    let options = drover_store::OpenOptions {
        create: open == Open::OrCreate,
        read_only: open == Open::ToRead,
        timeout: args.store_timeout,
    };
    match drover_store::open_following(&args.url, options, machines).await {
        Ok(store) => Ok(Arc::from(store)),
        Err(StoreError::NotFound(_)) if open == Open::OrEmpty => {
            Ok(Arc::new(drover_store::MemStore::default()))
        }
        Err(e) => Err(opening_failed(&args.url, e)),
    }
}

/// Whom the store `args` names can serve (before opening it).
pub fn reach(args: &StoreArgs) -> Result<drover_spi::Reach, MainError> {
    drover_store::reach_of(&args.url).map_err(|e| opening_failed(&args.url, e))
}

/// The error of a store that could not be opened, as the user reads it:
/// a wrong or missing address, or credentials the store refuses, is bad
/// input (exit 2: retrying cannot help); an unreachable store is one
/// sentence naming it and what to check (exit 1).
fn opening_failed(url: &str, e: StoreError) -> MainError {
    match e {
        StoreError::BadAddress(m)
        | StoreError::NotFound(m)
        | StoreError::Held(m)
        | StoreError::Refused(m) => MainError::BadInput(m),
        StoreError::Unavailable(m) => MainError::Failed(anyhow::anyhow!(m)),
        other => MainError::Failed(anyhow::anyhow!("cannot open the store {url}: {other}")),
    }
}

/// This machine's host name (`/proc/sys/kernel/hostname`).
fn own_host_name() -> Option<String> {
    let name = std::fs::read_to_string("/proc/sys/kernel/hostname").ok()?;
    Some(name.trim().to_string()).filter(|n| !n.is_empty())
}

/// The providers of machines the arguments configure.
pub fn machines(args: &LocalArgs) -> Result<Machines, MainError> {
    Ok(Machines {
        local: local(args)?,
        incus: args.incus_engines.as_ref().map(|host| {
            let seen = args.incus_engines_mount.as_deref().unwrap_or(host);
            let provider = IncusProvider::new(&args.incus_socket, &args.incus_project, seen)
                .with_host_socket(&args.incus_host_socket)
                .with_host_engines(host);
            // Mounted: this process runs in one of the machines, whose
            // name Incus gave it as its host name.
            Arc::new(match (&args.incus_engines_mount, own_host_name()) {
                (Some(_), Some(name)) => provider.with_own_machine(&name),
                _ => provider,
            })
        }),
        plugins: plugins::plugins(args)?,
        ec2: ec2(args)?,
        ssh: ssh::links(args)?,
        engines: Vec::new(),
    })
}

/// [`machines`] for a command that only looks (`status`, `gc`, `plan
/// --store`, `recover`): a `--local-dir` must already be a local
/// provider's directory, so a mistyped one is refused (exit 2) instead of
/// created. Commands that may make machines (`apply`, `bootstrap`, the
/// controller, `adopt`) create it.
pub fn existing_machines(args: &LocalArgs) -> Result<Machines, MainError> {
    if let Some(dir) = &args.local_dir
        && !dir.join(drover_local::INSTANCES_DIR).is_dir()
    {
        return Err(MainError::BadInput(format!(
            "--local-dir {}: not a local provider's directory (no {}/ in it), and this command creates nothing; check the path (or DROVER_LOCAL_DIR)",
            dir.display(),
            drover_local::INSTANCES_DIR
        )));
    }
    machines(args)
}

/// The ec2 provider, when `--ec2` is given: it needs a region.
fn ec2(args: &LocalArgs) -> Result<Option<Arc<Ec2Provider>>, MainError> {
    if !args.ec2 {
        return Ok(None);
    }
    let region = args.ec2_region.as_deref().ok_or_else(|| {
        MainError::BadInput("--ec2 needs a region: give --ec2-region or set AWS_REGION".into())
    })?;
    if let Some(e) = &args.ec2_endpoint
        && !(e.starts_with("https://") || loopback_http(e))
    {
        return Err(MainError::BadInput(format!(
            "--ec2-endpoint {e}: expected https://HOST[:PORT] (plain http:// only to a loopback address: signed requests carry a session token)"
        )));
    }
    let settings = drover_ec2::Settings::new(region, args.ec2_endpoint.as_deref());
    Ok(Some(Arc::new(Ec2Provider::new(settings))))
}

/// `http://` to a 127.0.0.0/8 address or `localhost` (a test's moto).
fn loopback_http(endpoint: &str) -> bool {
    let Some(rest) = endpoint.strip_prefix("http://") else {
        return false;
    };
    let host = rest.split(['/', ':']).next().unwrap_or_default();
    host == "localhost"
        || host
            .parse::<std::net::Ipv4Addr>()
            .is_ok_and(|a| a.is_loopback())
}

/// The local provider, when `--local-dir` is given.
fn local(args: &LocalArgs) -> Result<Option<Arc<LocalProvider>>, MainError> {
    let Some(dir) = &args.local_dir else {
        return Ok(None);
    };
    let pool = pool(&args.local_pool, "--local-pool")?;
    // Boot scripts call `drover`: put this very binary first on their PATH.
    let bin_dir = std::env::current_exe()
        .ok()
        .and_then(|p| p.parent().map(std::path::Path::to_path_buf));
    let provider = LocalProvider::new(dir, pool)
        .map_err(|e| MainError::BadInput(format!("--local-dir: {e}")))?
        .with_bin_dir(bin_dir)
        .with_supervision(args.local_supervise);
    Ok(Some(Arc::new(provider)))
}

/// Loopback addresses from `A-B` ranges, comma-separated; `argument`
/// names the flag in the message of a bad one.
pub fn pool(ranges: &str, argument: &str) -> Result<Vec<std::net::Ipv4Addr>, MainError> {
    let mut out = Vec::new();
    for entry in ranges.split(',').filter(|e| !e.trim().is_empty()) {
        out.extend(
            drover_local::parse_pool(entry.trim())
                .map_err(|e| MainError::BadInput(format!("{argument}: {e}")))?,
        );
    }
    Ok(out)
}

/// Whether a store answers at `url` within `within`.
pub async fn store_answers(url: &str, within: std::time::Duration) -> bool {
    match tokio::time::timeout(within, drover_store::open(url)).await {
        Ok(Ok(store)) => store.cluster_id().await.is_ok(),
        _ => false,
    }
}

pub use drover_controller::procedure::acting::STALE_AFTER;

/// How old a published status is.
pub fn status_age(doc: &drover_controller::StatusDoc) -> std::time::Duration {
    let now = drover_controller::wall_ms();
    std::time::Duration::from_millis(now.saturating_sub(doc.observed_at_ms))
}

/// What `drover status` found: the published status (or why it cannot be
/// read) and, when that is stale or unreadable, the quorum diagnosed.
pub struct Look {
    /// The published status, if any.
    pub read: Result<Option<drover_controller::StatusDoc<'static>>, MainError>,
    /// The heartbeats and the lost quorum, if proven.
    pub diagnosis: Diagnosis,
    /// The controllers that do not act and say why (their last beats),
    /// where the store lives outside the raft.
    pub waiting: Vec<drover_spi::Heartbeat>,
    /// The swarm as a live manager sees it now, asked only when the
    /// published status is older than [`PASSES_OLD`].
    pub live: Option<drover_core::model::SwarmView>,
}

/// Two controller passes (a controller publishes every 2 s when idle): a
/// published status older than this no longer shows the present, so
/// `status` asks a live manager for the swarm line.
pub const PASSES_OLD: std::time::Duration = std::time::Duration::from_secs(5);

/// `drover status`'s one call: the store read and, when in doubt (the
/// status is stale, missing or unreadable), the quorum diagnosed from the
/// heartbeats and every provider's engines
/// ([`diagnose`](drover_controller::procedure::recover::diagnose::diagnose)).
pub async fn look(store: &StoreArgs, local: &LocalArgs) -> Result<Look, MainError> {
    // The machines, if given well, to find a manager through.
    let machines = existing_machines(local).unwrap_or_default().seeing(store);
    let (opened, read) = match store_seen_from(store, Open::ToRead, &machines).await {
        Ok(store) => {
            let doc = drover_controller::StatusDoc::read(store.as_ref()).await;
            let doc = doc.map_err(|e| MainError::Failed(anyhow::Error::from(e)));
            (Some(store), doc)
        }
        Err(e) => (None, Err(e)),
    };
    let in_doubt = match &read {
        Ok(Some(doc)) => status_age(doc) > STALE_AFTER,
        Ok(None) | Err(MainError::Failed(_)) => true,
        Err(_) => false,
    };
    let published = Published {
        last_status_ms: read
            .as_ref()
            .ok()
            .and_then(Option::as_ref)
            .map(|d| d.observed_at_ms),
        store_error: read.as_ref().err().map(ToString::to_string),
    };
    // Only a status in doubt asks the providers' machines.
    let providers = match in_doubt {
        true => providers(&existing_machines(local)?, opened.as_ref()),
        false => Providers::new(),
    };
    let now = drover_controller::wall_ms();
    let diagnosis = diagnose(opened.as_deref(), &providers, in_doubt, published, now).await;
    let waiting = match opened.as_deref() {
        Some(store) if store.outside_raft() => waiting(store, now).await,
        _ => Vec::new(),
    };
    let old = matches!(&read, Ok(Some(doc)) if status_age(doc) > PASSES_OLD);
    let live = match old {
        true => Some(drover_spi::Cluster::observe(off_cluster_swarm(&machines).as_ref()).await),
        false => None,
    };
    Ok(Look {
        read,
        diagnosis,
        waiting,
        live,
    })
}

/// The controllers that beat within the last [`STALE_AFTER`] and say why
/// they do not act (standing by, or not admitted by `control:`).
async fn waiting(store: &dyn Store, now: u64) -> Vec<drover_spi::Heartbeat> {
    let beats = store.heartbeats().await.unwrap_or_default();
    let fresh = |b: &drover_spi::Heartbeat| {
        std::time::Duration::from_millis(now.saturating_sub(b.at_ms)) <= STALE_AFTER
    };
    beats
        .into_iter()
        .filter(|b| b.waiting.is_some() && fresh(b))
        .collect()
}

/// Providers by name, as groups refer to them; the ssh provider's
/// inventories are read from `store`, the cluster's (without one it lists
/// nothing, and says why).
pub fn providers(machines: &Machines, store: Option<&Arc<dyn Store>>) -> Providers {
    let mut out = Providers::new();
    if let Some(l) = &machines.local {
        out.insert(
            drover_core::spec::LOCAL_PROVIDER.into(),
            l.clone() as Arc<dyn InstanceProvider>,
        );
    }
    if let Some(i) = &machines.incus {
        out.insert(
            drover_core::spec::INCUS_PROVIDER.into(),
            i.clone() as Arc<dyn InstanceProvider>,
        );
    }
    out.extend(machines.plugins.clone());
    if let Some(e) = &machines.ec2 {
        out.insert(
            drover_core::spec::EC2_PROVIDER.into(),
            e.clone() as Arc<dyn InstanceProvider>,
        );
    }
    if let Some(links) = &machines.ssh {
        out.insert(
            drover_core::spec::SSH_PROVIDER.into(),
            ssh::provider(links, store),
        );
    }
    out
}

/// The keys of the providers `machines` configures, as groups name them in
/// `instance.provider` (a plugin's as `plugin:NAME[/TYPE]`).
pub fn provider_keys(machines: &Machines) -> std::collections::BTreeSet<String> {
    providers(machines, None).into_keys().collect()
}

/// What configures the provider groups name `key` on a command line.
pub fn provider_flag(key: &str) -> String {
    use drover_core::spec::{
        EC2_PROVIDER, INCUS_PROVIDER, LOCAL_PROVIDER, PLUGIN_PROVIDER, SSH_PROVIDER,
    };
    match key {
        LOCAL_PROVIDER => "--local-dir DIR (or DROVER_LOCAL_DIR)".into(),
        INCUS_PROVIDER => "--incus-engines DIR (or DROVER_INCUS_ENGINES)".into(),
        SSH_PROVIDER => "--ssh-dir DIR (or DROVER_SSH_DIR)".into(),
        EC2_PROVIDER => "--ec2 true --ec2-region REGION (or DROVER_EC2, AWS_REGION)".into(),
        _ => match key
            .strip_prefix(PLUGIN_PROVIDER)
            .and_then(|k| k.strip_prefix(':'))
        {
            Some(plugin) => format!("--plugin {plugin} (or DROVER_PLUGINS)"),
            None => "no flag: only the simulator (drover plan --sim, drover sim) has it".into(),
        },
    }
}

/// The swarm as seen from off the cluster (the CLI): through any manager
/// machine of the local provider that answers.
pub fn off_cluster_swarm(local: &Machines) -> Arc<ProviderSwarm> {
    Arc::new(ProviderSwarm::new(local.clone()))
}

/// A controller context acting from outside the cluster over `store`:
/// `identity` names it in events; `store_url` is what the machines it
/// creates are told to use.
pub fn off_cluster(
    store: Arc<dyn Store>,
    local: &Machines,
    identity: String,
    store_url: &str,
) -> drover_controller::Context {
    drover_controller::Context {
        providers: providers(local, Some(&store)),
        cluster: off_cluster_swarm(local),
        store,
        self_link: None,
        identity,
        store_url: Some(store_url.to_string()),
        resync: std::time::Duration::from_secs(1),
    }
}

/// An empty store in memory: where the first manager of a swarm store is
/// planned before the swarm exists.
pub fn scratch_store() -> Arc<dyn Store> {
    Arc::new(drover_store::MemStore::default())
}

/// The swarm store found again through the providers' manager machines
/// (none without a provider of machines).
pub fn swarm_stores(machines: &Machines) -> Option<Arc<dyn SwarmStores>> {
    machines
        .any()
        .then(|| Arc::new(ManagerStores(machines.clone())) as Arc<dyn SwarmStores>)
}

/// [`SwarmStores`] over the providers' machines.
struct ManagerStores(Machines);

#[async_trait]
impl SwarmStores for ManagerStores {
    async fn on_a_manager(&self, cluster: Option<&str>) -> Option<Arc<dyn Store>> {
        for endpoint in self.0.peer_endpoints() {
            let Ok(store) = drover_store::open(&format!("swarm:{endpoint}")).await else {
                continue;
            };
            let ours = match cluster {
                None => true,
                Some(id) => store.cluster_id().await.ok().flatten().as_deref() == Some(id),
            };
            if ours {
                return Some(Arc::from(store));
            }
        }
        None
    }
}

/// A context for one off-cluster observation (`plan --store`, `gc`): it
/// observes and plans, and never acts (it holds no epoch).
pub async fn observer(
    store: &StoreArgs,
    local: &LocalArgs,
    identity: &str,
) -> Result<drover_controller::Context, MainError> {
    let machines = existing_machines(local)?.seeing(store);
    let opened = store_seen_from(store, Open::Existing, &machines).await?;
    Ok(observer_over(opened, machines, identity))
}

/// [`observer`] that only reads the store (`plan --store`): beside a
/// controller holding a file store.
pub async fn reader(
    store: &StoreArgs,
    local: &LocalArgs,
    identity: &str,
) -> Result<drover_controller::Context, MainError> {
    let machines = existing_machines(local)?.seeing(store);
    let opened = store_seen_from(store, Open::ToRead, &machines).await?;
    Ok(observer_over(opened, machines, identity))
}

/// [`observer`] over a store already open and the machines it looks through.
pub fn observer_over(
    store: Arc<dyn Store>,
    machines: Machines,
    identity: &str,
) -> drover_controller::Context {
    drover_controller::Context {
        providers: providers(&machines, Some(&store)),
        cluster: off_cluster_swarm(&machines),
        store,
        self_link: None,
        identity: identity.into(),
        store_url: None,
        resync: std::time::Duration::from_secs(1),
    }
}
