//! # drover-incus
//!
//! The `incus` provider: each machine is an Incus system container that
//! boots Debian with systemd, gets `docker.io` from the distribution and
//! runs its boot script through cloud-init. drover talks to Incus over its
//! REST API on the unix socket ([`api`]); the translations between
//! drover's requests and Incus's JSON are pure ([`machine`]).
//!
//! - Tags are `user.drover.*` configuration keys; one describe per pass
//!   lists a cluster's machines with Incus's server-side filter.
//! - Provision creates the machine stopped, pushes its secret boot
//!   environment (join token, store URL) into a root-only file on its disk,
//!   then starts it: secrets never enter the instance's configuration,
//!   which stays readable for the machine's life. It is idempotent on the
//!   operation's link tag: a retry finds the machine made before.
//! - Destroy is a forced stop and a delete; an absent machine is success.
//! - Each machine's engine is reachable from the Incus host through a
//!   proxy device: a root-only socket `ENGINE_DIR/NAME.sock`.

// Production functions stay short enough to read at once (clippy.toml:
// 80 lines); tests may be long scenarios.
#![cfg_attr(not(test), deny(clippy::too_many_lines))]

pub mod api;
mod boot_log;
pub mod machine;
mod probe;
pub mod properties;

use api::{Api, ApiError, Body};
use async_trait::async_trait;
use drover_core::model::{Instance, tags};
use drover_engine::PeerEndpoints;
use drover_spi::{EngineReport, Fence, InstanceProvider, ProviderError, ProvisionRequest, Secret};
use hyper::Method;
use machine::Listed;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// The Incus API socket when none is given (Debian's `incus` package).
pub const DEFAULT_SOCKET: &str = "/var/lib/incus/unix.socket";

/// The `incus` provider.
#[derive(Debug, Clone)]
pub struct IncusProvider {
    api: Api,
    project: String,
    engine_dir: PathBuf,
    host_engines: PathBuf,
    host_socket: PathBuf,
    /// The machine this process runs in, if one of this provider's.
    own_machine: Option<String>,
}

impl IncusProvider {
    /// Machines of the Incus server on `socket`, in `project`; their
    /// engines' sockets appear in `engine_dir` (as this process sees it).
    pub fn new(socket: &Path, project: &str, engine_dir: &Path) -> IncusProvider {
        IncusProvider {
            api: Api::new(socket, project),
            project: project.to_string(),
            engine_dir: engine_dir.to_path_buf(),
            host_engines: engine_dir.to_path_buf(),
            host_socket: PathBuf::from(DEFAULT_SOCKET),
            own_machine: None,
        }
    }

    /// The machine this process runs in (a manager's controller): its own
    /// engine is never one of its peers. Asked through the mounted socket
    /// while it shuts its manager down (the leader's hand-over), that
    /// engine answers only once the shutdown is over, and the question
    /// stretches the shutdown (swarm-facts).
    pub fn with_own_machine(mut self, name: &str) -> IncusProvider {
        self.own_machine = Some(name.to_string());
        self
    }

    /// Where the engines' sockets are on the Incus host, when this process
    /// sees them elsewhere (a manager's controller sees them mounted at
    /// [`machine::ENGINES_PATH`]): new machines' devices name host paths.
    pub fn with_host_engines(mut self, host_engines: &Path) -> IncusProvider {
        self.host_engines = host_engines.to_path_buf();
        self
    }

    /// Where the Incus API socket is on the Incus host (when this process
    /// reaches it elsewhere, e.g. from inside a manager machine): the
    /// managers' controllers reach it through a proxy device to this path.
    pub fn with_host_socket(mut self, host_socket: &Path) -> IncusProvider {
        self.host_socket = host_socket.to_path_buf();
        self
    }

    /// What a manager's controller needs to drive this provider, for its
    /// boot environment: the machine's "instance metadata", as the local
    /// provider's `DROVER_LOCAL_DIR` is for its machines.
    fn settings_for_managers(&self) -> Vec<(String, Secret)> {
        let pairs = [
            // The host path, as releases before the mount read it (a
            // rollback to one must still find its engines).
            (
                "DROVER_INCUS_ENGINES",
                self.host_engines.display().to_string(),
            ),
            (
                "DROVER_INCUS_ENGINES_MOUNT",
                machine::ENGINES_PATH.to_string(),
            ),
            ("DROVER_INCUS_PROJECT", self.project.clone()),
            (
                "DROVER_INCUS_HOST_SOCKET",
                self.host_socket.display().to_string(),
            ),
            ("INCUS_SOCKET", machine::API_SOCKET.to_string()),
        ];
        pairs
            .into_iter()
            .map(|(k, v)| (k.to_string(), Secret::new(v)))
            .collect()
    }

    /// Where the engines' sockets are, as this process sees them: a
    /// directory of drover's on the engines' host.
    pub fn engine_dir(&self) -> &Path {
        &self.engine_dir
    }

    /// Machine `name`'s engine, as a docker endpoint (on the Incus host).
    pub fn endpoint(&self, name: &str) -> String {
        format!(
            "unix://{}",
            machine::engine_socket(&self.engine_dir, name).display()
        )
    }

    /// True when Incus lists any machine of any drover cluster (running or
    /// not). An unreachable Incus counts as yes: "no machine" must be known.
    pub async fn holds_machines(&self) -> bool {
        match self.list(&BTreeMap::new()).await {
            Ok(listed) => listed.iter().any(|l| l.tags().contains_key(tags::CLUSTER)),
            Err(_) => true,
        }
    }

    /// Every machine carrying all of `tags`, as Incus lists them.
    pub async fn list(&self, tags: &BTreeMap<String, String>) -> Result<Vec<Listed>, ApiError> {
        let filter = server_filter(tags);
        let mut query = vec![("recursion", "1")];
        if let Some(f) = &filter {
            query.push(("filter", f));
        }
        let listed: Vec<Listed> = self.api.get("/1.0/instances", &query).await?;
        Ok(listed
            .into_iter()
            .filter(|l| {
                let have = l.tags();
                tags.iter().all(|(k, v)| have.get(k) == Some(v))
            })
            .collect())
    }

    /// Pushes the boot environment, starts machine `name` (unless it
    /// already runs: `running`) and marks it started.
    async fn boot(
        &self,
        name: &str,
        req: &ProvisionRequest,
        running: bool,
    ) -> Result<(), ApiError> {
        if !running {
            self.push_env(name, req).await?;
            self.state(name, "start").await?;
        }
        let mark = BTreeMap::from([(machine::STARTED.to_string(), "true".to_string())]);
        self.patch_config(name, &mark).await
    }

    /// Adds or changes configuration keys of machine `name` (`PATCH`
    /// merges them into what it has).
    async fn patch_config(
        &self,
        name: &str,
        config: &BTreeMap<String, String>,
    ) -> Result<(), ApiError> {
        let body = serde_json::json!({ "config": config });
        self.api
            .change(
                Method::PATCH,
                &format!("/1.0/instances/{name}"),
                &[],
                Body::Json(&body),
            )
            .await
    }

    /// Pushes the secret boot environment into the stopped machine.
    async fn push_env(&self, name: &str, req: &ProvisionRequest) -> Result<(), ApiError> {
        if !req.boot_env.is_empty() {
            let files = format!("/1.0/instances/{name}/files");
            let dir = Path::new(machine::BOOT_ENV)
                .parent()
                .and_then(Path::to_str)
                .unwrap_or("/");
            self.api
                .change(
                    Method::POST,
                    &files,
                    &[("path", dir)],
                    Body::Directory { mode: 0o700 },
                )
                .await?;
            let bytes = machine::boot_env(&req.boot_env);
            self.api
                .change(
                    Method::POST,
                    &files,
                    &[("path", machine::BOOT_ENV)],
                    Body::File {
                        bytes: &bytes,
                        mode: 0o600,
                    },
                )
                .await?;
        }
        Ok(())
    }

    /// Refuses an image Incus does not have (Incus itself answers a
    /// missing alias with a server error, which would read as transient).
    async fn check_image(&self, image: &str) -> Result<(), ProviderError> {
        let path = if machine::is_fingerprint(image) {
            format!("/1.0/images/{image}")
        } else {
            format!("/1.0/images/aliases/{image}")
        };
        match self.api.get::<serde::de::IgnoredAny>(&path, &[]).await {
            Ok(_) => Ok(()),
            Err(e) if e.is_not_found() => Err(ProviderError::Permanent(format!(
                "instance.properties.image: Incus has no image {image:?}; import it or name another"
            ))),
            Err(e) => Err(provider_error("reading the image", e)),
        }
    }

    /// `PUT /1.0/instances/NAME/state` with `action` (forced, for stop).
    async fn state(&self, name: &str, action: &str) -> Result<(), ApiError> {
        let body = serde_json::json!({"action": action, "force": true, "timeout": -1});
        self.api
            .change(
                Method::PUT,
                &format!("/1.0/instances/{name}/state"),
                &[],
                Body::Json(&body),
            )
            .await
    }
}

/// Incus's filter for the cluster tag, when its value is plain enough to
/// need no quoting (drover's cluster ids are); the other tags are matched
/// here. None: every machine of the project is listed and matched here.
fn server_filter(tags: &BTreeMap<String, String>) -> Option<String> {
    let v = tags.get(tags::CLUSTER)?;
    let plain = !v.is_empty()
        && v.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_' || b == b'.');
    plain.then(|| format!("config.user.{} eq {v}", tags::CLUSTER))
}

/// An API failure as a provider error: Incus's refusals of a request are
/// permanent (retrying the same request will not help); everything else
/// (an unreachable socket, a failed operation) may succeed later.
pub(crate) fn provider_error(what: &str, e: ApiError) -> ProviderError {
    match e {
        ApiError::Status { status, .. } if (400..500).contains(&status) && status != 404 => {
            ProviderError::Permanent(format!("{what}: {e}"))
        }
        ApiError::Status { status: 404, .. } => ProviderError::NotFound(format!("{what}: {e}")),
        _ => ProviderError::Transient(format!("{what}: {e}")),
    }
}

#[async_trait]
impl InstanceProvider for IncusProvider {
    /// Its listing is Incus's own database, asked directly (an instance
    /// exists there once its creation returned): a machine it made is
    /// never left out.
    fn listing_is_complete(&self) -> bool {
        true
    }

    fn updates_in_place(&self) -> bool {
        true
    }

    /// Through Incus's exec API, bounded on the machine by `timeout`
    /// ([`drover_core::in_place::systemd_argv`]).
    async fn run_update(
        &self,
        instance: &str,
        run: &drover_core::in_place::UpdateRun,
        fence: &dyn Fence,
    ) -> Result<drover_core::in_place::UpdateOutcome, ProviderError> {
        use drover_core::in_place::{UpdateOutcome, systemd_argv, wait_bound};
        fence.check()?;
        let done = self
            .api
            .exec(
                instance,
                &systemd_argv(run, "/var/lib/drover"),
                wait_bound(run),
            )
            .await
            .map_err(|e| provider_error(&format!("updating {instance}"), e))?;
        Ok(UpdateOutcome::of_exit(done.status, &done.output))
    }

    async fn provision(
        &self,
        req: ProvisionRequest,
        fence: &dyn Fence,
    ) -> Result<String, ProviderError> {
        let props = properties::of_request(&req.properties, req.logical_id.as_deref())?;
        let manager = req.boot_context.role == drover_core::spec::Role::Manager.as_str();
        let mut req = req;
        if manager {
            req.boot_env.extend(self.settings_for_managers());
        }
        // Idempotent on the link (the journal's operation): a machine made
        // for it before (a retry, a controller that crashed) is the answer,
        // started if the crash came before its start.
        if let Some(link) = req.tags.get(tags::LINK) {
            let mine = BTreeMap::from([(tags::LINK.to_string(), link.clone())]);
            let found = self
                .list(&mine)
                .await
                .map_err(|e| provider_error("listing machines", e))?;
            if let Some(m) = found.first() {
                if m.provisioning() {
                    fence.check()?;
                    // Marked started only once it runs: a start that timed
                    // out may still be running, or may have failed (then
                    // it is started again, its environment pushed again).
                    self.boot(&m.name, &req, m.status == "Running")
                        .await
                        .map_err(|e| provider_error("starting the machine", e))?;
                }
                return Ok(m.name.clone());
            }
        }
        let unfit = |e: machine::Unfit| ProviderError::Permanent(e.to_string());
        let mut ctx = req.boot_context.clone();
        ctx.address = machine::address(req.logical_id.as_deref()).map_err(unfit)?;
        let user_data = drover_core::template::render(&req.boot_template, &ctx)
            .map_err(|e| ProviderError::Permanent(format!("boot script: {e}")))?;
        self.check_image(&props.image).await?;
        let name = machine::new_name();
        let body = machine::create(
            &name,
            &props,
            &req.tags,
            req.logical_id.as_deref(),
            &user_data,
            &machine::Sockets {
                engine_dir: &self.host_engines,
                api: manager.then_some(self.host_socket.as_path()),
            },
        )
        .map_err(unfit)?;
        let body = serde_json::to_value(&body)
            .map_err(|e| ProviderError::Permanent(format!("creating {name}: {e}")))?;
        fence.check()?;
        self.api
            .change(Method::POST, "/1.0/instances", &[], Body::Json(&body))
            .await
            .map_err(|e| match e {
                // The pool, network or profile named is not there.
                ApiError::Status { status: 404, .. } => {
                    ProviderError::Permanent(format!("creating {name}: {e}"))
                }
                e => provider_error(&format!("creating {name}"), e),
            })?;
        // The create may take minutes (an image unpack): the caller may
        // have lost its term meanwhile. Nothing secret is pushed then.
        fence.check()?;
        self.boot(&name, &req, false)
            .await
            .map_err(|e| provider_error(&format!("starting {name}"), e))?;
        Ok(name)
    }

    async fn destroy_fenced(&self, instance: &str, fence: &dyn Fence) -> Result<(), ProviderError> {
        fence.check()?;
        // Incus leaves the proxy's socket file behind: it goes too, also
        // when the machine was gone already (a replayed destroy). A
        // manager's controller sees the directory mounted.
        let socket = machine::engine_socket(&self.engine_dir, instance);
        match self.state(instance, "stop").await {
            Ok(()) => {}
            Err(e) if e.is_not_found() => {
                let _ = std::fs::remove_file(&socket);
                return Ok(());
            }
            // Already stopped: Incus refuses the stop; the delete follows.
            Err(ApiError::Status { status: 400, .. }) => {}
            Err(e) => return Err(provider_error(&format!("stopping {instance}"), e)),
        }
        match self
            .api
            .change(
                Method::DELETE,
                &format!("/1.0/instances/{instance}"),
                &[],
                Body::Empty,
            )
            .await
        {
            Ok(()) => {}
            Err(e) if e.is_not_found() => {}
            Err(e) => return Err(provider_error(&format!("deleting {instance}"), e)),
        }
        let _ = std::fs::remove_file(&socket);
        Ok(())
    }

    async fn describe(
        &self,
        tags: &BTreeMap<String, String>,
    ) -> Result<Vec<Instance>, ProviderError> {
        let listed = self
            .list(tags)
            .await
            .map_err(|e| provider_error("listing machines", e))?;
        Ok(listed.iter().map(Listed::instance).collect())
    }

    async fn label(
        &self,
        instance: &str,
        labels: &BTreeMap<String, String>,
        fence: &dyn Fence,
    ) -> Result<(), ProviderError> {
        let config: BTreeMap<String, String> = labels
            .iter()
            .map(|(k, v)| (format!("user.{k}"), v.clone()))
            .collect();
        fence.check()?;
        self.patch_config(instance, &config)
            .await
            .map_err(|e| provider_error(&format!("labelling {instance}"), e))
    }

    async fn ask_engines(
        &self,
        tags: &BTreeMap<String, String>,
    ) -> Result<Vec<EngineReport>, ProviderError> {
        self.engines_now(tags).await
    }

    fn engine_endpoint(&self, instance: &str) -> Option<String> {
        Some(self.endpoint(instance))
    }

    async fn boot_log(
        &self,
        instance: &str,
    ) -> Result<Option<drover_core::boot::BootLog>, ProviderError> {
        self.boot_log_of(instance).await
    }

    async fn join_failed(&self, instance: &str) -> Option<drover_core::boot::JoinFailed> {
        drover_engine::probe::join_failed(&self.endpoint(instance)).await
    }
}

/// The engines of this provider's machines, as the Incus host reaches
/// them (the leader's leave is watched from another manager).
impl PeerEndpoints for IncusProvider {
    fn peer_endpoints(&self) -> Vec<String> {
        let Ok(dir) = std::fs::read_dir(&self.engine_dir) else {
            return Vec::new();
        };
        let mut out: Vec<String> = dir
            .flatten()
            .filter_map(|e| {
                let name = e.file_name().into_string().ok()?;
                let machine = name.strip_suffix(".sock")?;
                (self.own_machine.as_deref() != Some(machine)).then(|| self.endpoint(machine))
            })
            .collect();
        out.sort();
        out
    }
}

#[cfg(feature = "testkit")]
pub mod testkit;

#[cfg(test)]
mod tests {
    use super::*;

    /// Issue 37: Incus's own database answers the listing, so an empty
    /// pet slot is filled without waiting (`plan::stage::fill`).
    #[test]
    fn its_listing_is_complete() {
        let dir = tempfile::tempdir().unwrap();
        let p = IncusProvider::new(Path::new("/nonexistent"), "default", dir.path());
        assert!(p.listing_is_complete());
    }

    #[test]
    fn a_machines_own_engine_is_not_its_peer() {
        let dir = tempfile::tempdir().unwrap();
        for name in ["drover-a", "drover-b"] {
            std::fs::write(dir.path().join(format!("{name}.sock")), "").unwrap();
        }
        let seen = |p: IncusProvider| -> Vec<String> {
            p.peer_endpoints()
                .iter()
                .map(|e| e.rsplit('/').next().unwrap().to_string())
                .collect()
        };
        let host = IncusProvider::new(Path::new("/nonexistent"), "default", dir.path());
        assert_eq!(seen(host.clone()), ["drover-a.sock", "drover-b.sock"]);
        assert_eq!(seen(host.with_own_machine("drover-a")), ["drover-b.sock"]);
    }
}
