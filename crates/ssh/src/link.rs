//! The connections to the hosts: one OpenSSH ControlMaster per host,
//! started with the host's own configuration file ([`Login::ssh_config`])
//! and kept open; commands run over it through the multiplexing protocol,
//! spoken natively (no local process per command, so no local command line
//! shows what runs). Each connection also forwards a local socket,
//! `DIR/engines/HASH.sock` (this user's only), to the host's engine
//! socket: how the controller reaches the engines.
//!
//! A connection that dropped (the host rebooted, the network failed) is
//! found dead at its next use and opened again, its forward with it.

use crate::config::{Login, LoginError};
use crate::inventory::Target;
use crate::script;
use openssh::{ControlPersist, ForwardType, KnownHosts, Session, SessionBuilder, Stdio};
use sha2::{Digest, Sha256};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;
use tokio::io::AsyncWriteExt;

/// How long a master stays up with no command using it. A controller
/// uses its connections every pass; a master left behind by a process
/// that was killed goes away after this long.
const PERSIST_S: usize = 600;
/// The bound on a login, beyond ssh's own `ConnectTimeout`.
const LOGIN_WITHIN: Duration = Duration::from_secs(crate::config::CONNECT_TIMEOUT_S as u64 + 5);

/// What a command run on a host ended with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ran {
    /// Its exit status (`None`: ended by a signal).
    pub status: Option<i32>,
    /// Its standard output.
    pub stdout: String,
    /// Its standard error.
    pub stderr: String,
}

impl Ran {
    /// True when it exited with status 0.
    pub fn ok(&self) -> bool {
        self.status == Some(0)
    }
}

/// Why a command could not be run to its end.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RunError {
    /// The login failed.
    #[error(transparent)]
    Login(#[from] LoginError),
    /// The connection dropped while the command ran: whether it ran is
    /// unknown (every script drover runs may run again).
    #[error("the connection to host {host} dropped during the command: {why}")]
    Lost {
        /// The host.
        host: String,
        /// What failed.
        why: String,
    },
    /// The command did not end within its bound.
    #[error("host {host} did not finish the command within {secs}s")]
    TimedOut {
        /// The host.
        host: String,
        /// The bound.
        secs: u64,
    },
}

impl RunError {
    /// True when the same call may succeed later.
    pub fn is_transient(&self) -> bool {
        match self {
            RunError::Login(e) => e.is_transient(),
            RunError::Lost { .. } | RunError::TimedOut { .. } => true,
        }
    }
}

/// One host's open connection.
struct Open {
    /// The configuration it was opened with: another one (a key rotated in
    /// the spec) opens a new connection.
    config: String,
    session: Arc<Session>,
}

/// The connections, one per host name.
pub struct Links {
    dir: PathBuf,
    open: std::sync::Mutex<HashMap<String, Arc<tokio::sync::Mutex<Option<Open>>>>>,
    /// Hosts whose last login found them unreachable: not tried again
    /// before their back-off ends (a host that times out would otherwise
    /// hold every describe for the whole login timeout).
    resting: std::sync::Mutex<HashMap<String, Rest>>,
}

/// A host not tried again until `until`.
#[derive(Debug, Clone)]
struct Rest {
    until: std::time::Instant,
    /// The back-off this rest took (doubled by the next failure).
    backoff: Duration,
    /// Why its last login failed.
    error: LoginError,
}

/// The first back-off of an unreachable host, doubled at each failure up
/// to [`MAX_BACKOFF`].
const FIRST_BACKOFF: Duration = Duration::from_secs(5);
/// See [`FIRST_BACKOFF`].
const MAX_BACKOFF: Duration = Duration::from_secs(60);

impl Links {
    /// Connections kept under `dir` (control sockets, configuration
    /// files, forwarded engine sockets), made if missing, this user's only.
    pub fn new(dir: &Path) -> std::io::Result<Links> {
        for sub in ["", "ctl", "hosts", "engines"] {
            let d = dir.join(sub);
            std::fs::create_dir_all(&d)?;
            std::fs::set_permissions(&d, std::os::unix::fs::PermissionsExt::from_mode(0o700))?;
        }
        Ok(Links {
            dir: dir.to_path_buf(),
            open: std::sync::Mutex::new(HashMap::new()),
            resting: std::sync::Mutex::new(HashMap::new()),
        })
    }

    /// Where host `name`'s engine is forwarded to on this host.
    pub fn engine_socket(&self, name: &str) -> PathBuf {
        self.dir
            .join("engines")
            .join(format!("{}.sock", short_hash(name)))
    }

    /// Runs `script` as root on `t`'s host, `stdin` written to it (framed:
    /// [`script::END_OF_INPUT`] after it), within `within`. A connection found dropped is opened again, once.
    pub async fn run(
        &self,
        t: &Target,
        script: &str,
        stdin: &[u8],
        within: Duration,
    ) -> Result<Ran, RunError> {
        let command = script::as_root(&t.login.host.user, script);
        let mut tried_again = false;
        loop {
            let session = self.session(t).await?;
            let run = tokio::time::timeout(within, run_on(&session, &command, stdin)).await;
            match run {
                Err(_) => {
                    return Err(RunError::TimedOut {
                        host: t.name(),
                        secs: within.as_secs(),
                    });
                }
                Ok(Ok(ran)) => return Ok(ran),
                // Not started: the connection was found dead as the
                // command was asked for. Opened again, the command runs
                // once (a command that started is never run twice here).
                Ok(Err(Failed::Start(why))) if !tried_again => {
                    tracing::info!(host = %t.name(), %why, "the connection dropped: opening it again");
                    self.forget(&t.name()).await;
                    tried_again = true;
                }
                Ok(Err(Failed::Start(why) | Failed::During(why))) => {
                    return Err(RunError::Lost {
                        host: t.name(),
                        why,
                    });
                }
            }
        }
    }

    /// Closes host `name`'s connection, if open (its forward goes with it).
    pub async fn forget(&self, name: &str) {
        let slot = self.slot(name);
        let open = slot.lock().await.take();
        if let Some(open) = open
            && let Ok(session) = Arc::try_unwrap(open.session)
        {
            let _ = session.close().await;
        }
        let _ = std::fs::remove_file(self.engine_socket(name));
    }

    fn slot(&self, name: &str) -> Arc<tokio::sync::Mutex<Option<Open>>> {
        let mut open = self
            .open
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        open.entry(name.to_string()).or_default().clone()
    }

    /// `t`'s open connection, or a new one (one login at a time per host).
    async fn session(&self, t: &Target) -> Result<Arc<Session>, LoginError> {
        let config = t.login.ssh_config();
        let slot = self.slot(&t.name());
        let mut open = slot.lock().await;
        if let Some(o) = open.as_ref()
            && o.config == config
            && o.session.check().await.is_ok()
        {
            return Ok(o.session.clone());
        }
        *open = None;
        let session = Arc::new(self.login_or_rest(t, &config).await?);
        self.forward(&session, t).await;
        *open = Some(Open {
            config,
            session: session.clone(),
        });
        Ok(session)
    }

    /// [`Self::login`], unless the host is resting after it was found
    /// unreachable: then its last error, at once.
    async fn login_or_rest(&self, t: &Target, config: &str) -> Result<Session, LoginError> {
        let name = t.name();
        let now = std::time::Instant::now();
        let last = self.resting().get(&name).cloned();
        if let Some(rest) = &last
            && now < rest.until
        {
            return Err(rest.error.clone());
        }
        match self.login(t, config).await {
            Ok(session) => {
                self.resting().remove(&name);
                Ok(session)
            }
            Err(e) if e.is_transient() => {
                let backoff = last.map_or(FIRST_BACKOFF, |r| (r.backoff * 2).min(MAX_BACKOFF));
                let rest = Rest {
                    until: std::time::Instant::now() + backoff,
                    backoff,
                    error: e.clone(),
                };
                self.resting().insert(name, rest);
                Err(e)
            }
            Err(e) => Err(e),
        }
    }

    fn resting(&self) -> std::sync::MutexGuard<'_, HashMap<String, Rest>> {
        self.resting
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Opens a new master connection to `t`'s host.
    async fn login(&self, t: &Target, config: &str) -> Result<Session, LoginError> {
        preflight(&t.login)?;
        let file = self
            .dir
            .join("hosts")
            .join(format!("{}.conf", short_hash(&t.name())));
        write_private(&file, config)
            .map_err(|e| LoginError::Local(format!("writing {}: {e}", file.display())))?;
        let mut b = SessionBuilder::default();
        b.config_file(&file)
            .control_directory(self.dir.join("ctl"))
            .known_hosts_check(KnownHosts::Strict)
            .control_persist(ControlPersist::IdleFor(
                std::num::NonZeroUsize::new(PERSIST_S).unwrap_or(std::num::NonZeroUsize::MIN),
            ));
        // The configuration names the host (HostName): the destination is
        // only the alias it is found under.
        match tokio::time::timeout(LOGIN_WITHIN, b.connect_mux("drover-host")).await {
            Ok(Ok(session)) => Ok(session),
            Ok(Err(e)) => Err(LoginError::from_ssh(&t.login, &error_text(&e))),
            Err(_) => Err(LoginError::Unreachable {
                host: t.name(),
                said: format!("no login within {}s", LOGIN_WITHIN.as_secs()),
            }),
        }
    }

    /// Forwards the host's engine socket to [`Self::engine_socket`]. A
    /// failure is logged, not returned: the host still serves its other
    /// verbs, and its engine reads as not answering.
    async fn forward(&self, session: &Session, t: &Target) {
        let local = self.engine_socket(&t.name());
        let remote = PathBuf::from(&t.docker_socket);
        if let Err(e) = session
            .request_port_forward(ForwardType::Local, local.as_path(), remote.as_path())
            .await
        {
            tracing::warn!(host = %t.name(), error = %e, "the engine socket could not be forwarded");
        }
    }
}

/// Why a command over a connection failed.
enum Failed {
    /// Before it started: the master did not take it.
    Start(String),
    /// While it ran (or it was ended by a signal, which the multiplexing
    /// protocol cannot tell from a dropped connection).
    During(String),
}

/// Runs `command` over `session`: its status and output, or why the
/// connection failed it.
async fn run_on(session: &Session, command: &str, stdin: &[u8]) -> Result<Ran, Failed> {
    let mut child = session
        .raw_command(command)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .await
        .map_err(|e| Failed::Start(error_text(&e)))?;
    if let Some(mut input) = child.stdin().take() {
        // A script that exits before reading all of it closes the pipe: its
        // status says what happened.
        let _ = input.write_all(&script::framed(stdin)).await;
        let _ = input.shutdown().await;
    }
    let out = child
        .wait_with_output()
        .await
        .map_err(|e| Failed::During(error_text(&e)))?;
    Ok(Ran {
        status: out.status.code(),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    })
}

/// An openssh error with its causes (ssh's own words are in the source).
fn error_text(e: &openssh::Error) -> String {
    let mut text = e.to_string();
    let mut cause = std::error::Error::source(e);
    while let Some(c) = cause {
        text.push_str(&format!(": {c}"));
        cause = c.source();
    }
    text
}

/// What must be on the controller's host before a login: the key file (or
/// the agent) and the known_hosts file. Missing, it is bad input, named.
pub fn preflight(login: &Login) -> Result<(), LoginError> {
    use drover_core::spec::ssh::{AGENT_FROM_ENV, Identity};
    let readable = |field: &str, path: &str, what: &str| {
        std::fs::File::open(path).map(|_| ()).map_err(|e| {
            LoginError::Local(format!(
                "instance.properties.{field}: {path} cannot be read on this controller's host ({e}): {what}"
            ))
        })
    };
    match &login.identity {
        Identity::File(path) => readable(
            "identity_file",
            path,
            "install the private key there (root-only), or name the agent with identity_agent",
        )?,
        Identity::Agent(a) if a == AGENT_FROM_ENV => {
            if std::env::var_os(AGENT_FROM_ENV).is_none() {
                return Err(LoginError::Local(format!(
                    "instance.properties.identity_agent: {AGENT_FROM_ENV} names the agent of the controller's environment, and it has none: start the controller with {AGENT_FROM_ENV} set, or name the agent's socket, or use identity_file"
                )));
            }
        }
        Identity::Agent(path) if !Path::new(path).exists() => {
            return Err(LoginError::Local(format!(
                "instance.properties.identity_agent: no agent's socket at {path} on this controller's host: start the agent there, or name another"
            )));
        }
        Identity::Agent(_) => {}
    }
    readable(
        "known_hosts",
        &login.known_hosts,
        "install the hosts' verified keys there (one line per host, as ssh-keyscan prints them)",
    )
}

/// Writes `text` to `path` (mode 0600) unless it holds it already.
fn write_private(path: &Path, text: &str) -> std::io::Result<()> {
    if std::fs::read_to_string(path).is_ok_and(|t| t == text) {
        return Ok(());
    }
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, text)?;
    std::fs::set_permissions(&tmp, std::os::unix::fs::PermissionsExt::from_mode(0o600))?;
    std::fs::rename(&tmp, path)
}

/// A short, stable file name for a host name (names may be long, and
/// unix socket paths are limited to 108 bytes).
fn short_hash(name: &str) -> String {
    hex::encode(&Sha256::digest(name.as_bytes())[..8])
}
