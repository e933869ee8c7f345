//! Helpers for tests that run real engines (used by this crate's and
//! `drover-swarm`'s integration tests; no effect on the provider).
//!
//! - [`busybox_tar`] / [`import_busybox`]: a tiny image (static busybox with
//!   `sh` and `sleep` links) for engines without a registry;
//! - [`write_drover_shim`] / [`run_shim_from_env`]: a stand-in `drover`
//!   executable for boot scripts (`drover engine join --role R --address A
//!   --remote M[,M…]`) that re-enters the test binary and joins through the
//!   engine API, reading the token from `DROVER_JOIN_TOKEN`, so the token
//!   never reaches any command line;
//! - [`crash_engine`] / [`kill_machine`]: the two faults of a machine, "the
//!   engine crashed" (a supervised machine restarts it) and "the machine
//!   died for good" (nothing restarts it).

use drover_engine::Engine;
use drover_spi::Secret;
use std::io::Write;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::{Command, Stdio};

/// The image [`import_busybox`] creates.
pub const BUSYBOX_IMAGE: &str = "drover-busybox:1";

/// A rootfs tarball: `/bin/busybox` (static) plus `sh` and `sleep` links.
pub fn busybox_tar() -> std::io::Result<Vec<u8>> {
    let dir = tempfile_dir()?;
    let bin = dir.join("bin");
    std::fs::create_dir_all(&bin)?;
    std::fs::copy("/usr/bin/busybox", bin.join("busybox"))?;
    for l in ["sh", "sleep", "echo"] {
        std::os::unix::fs::symlink("busybox", bin.join(l))?;
    }
    let out = Command::new("tar")
        .arg("-C")
        .arg(&dir)
        .args(["-cf", "-", "."])
        .output()?;
    let _ = std::fs::remove_dir_all(&dir);
    if !out.status.success() {
        return Err(std::io::Error::other("tar failed"));
    }
    Ok(out.stdout)
}

fn tempfile_dir() -> std::io::Result<std::path::PathBuf> {
    let d = std::env::temp_dir().join(format!(
        "drover-rootfs-{}-{}",
        std::process::id(),
        uuid::Uuid::new_v4().simple()
    ));
    std::fs::create_dir_all(&d)?;
    Ok(d)
}

/// Imports [`BUSYBOX_IMAGE`] into the engine at `endpoint` (`docker import`).
pub fn import_busybox(endpoint: &str, tar: &[u8]) -> std::io::Result<()> {
    let mut child = Command::new("docker")
        .args(["-H", endpoint, "import", "-", BUSYBOX_IMAGE])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .spawn()?;
    child
        .stdin
        .take()
        .ok_or_else(|| std::io::Error::other("no stdin"))?
        .write_all(tar)?;
    let st = child.wait()?;
    if !st.success() {
        return Err(std::io::Error::other(format!("docker import: {st}")));
    }
    Ok(())
}

/// Writes `bin_dir/drover`, a shell stand-in that re-runs the test binary
/// `exe` with only test `test_name` selected, passing its own arguments in
/// `DROVER_SHIM_ARGS` (no secret is ever an argument).
pub fn write_drover_shim(bin_dir: &Path, exe: &Path, test_name: &str) -> std::io::Result<()> {
    std::fs::create_dir_all(bin_dir)?;
    let f = bin_dir.join("drover");
    std::fs::write(
        &f,
        format!(
            "#!/bin/sh\nDROVER_SHIM_ARGS=\"$*\"\nexport DROVER_SHIM_ARGS\nexec '{}' --exact {} --nocapture --test-threads=1 -q\n",
            exe.display(),
            test_name
        ),
    )?;
    std::fs::set_permissions(&f, std::fs::Permissions::from_mode(0o755))
}

/// The body of the shim test: when `DROVER_SHIM_ARGS` is set, performs
/// `drover engine join --role R --address A --remote M` against
/// `DOCKER_HOST` with the token from `DROVER_JOIN_TOKEN`. Returns false
/// (doing nothing) when not running as the shim.
pub async fn run_shim_from_env() -> bool {
    let Ok(args) = std::env::var("DROVER_SHIM_ARGS") else {
        return false;
    };
    let words: Vec<&str> = args.split_whitespace().collect();
    let opt = |name: &str| {
        words
            .iter()
            .position(|w| *w == name)
            .and_then(|i| words.get(i + 1))
            .map(|s| s.to_string())
    };
    assert_eq!(words.get(..2), Some(&["engine", "join"][..]), "{args}");
    let address = opt("--address").expect("--address");
    let remote = opt("--remote").expect("--remote");
    let token = Secret::new(std::env::var("DROVER_JOIN_TOKEN").expect("DROVER_JOIN_TOKEN"));
    let host = std::env::var("DOCKER_HOST").expect("DOCKER_HOST");
    let engine = Engine::connect(&host).await.expect("connect");
    // As `drover engine join` does: every manager given, tried in turn.
    let remotes: Vec<String> = remote.split(',').map(str::to_string).collect();
    let tried = |a: &drover_engine::JoinAttempt| {
        eprintln!("drover: joining through {} failed: {}", a.remote, a.error);
    };
    let addr = format!("{address}:2377");
    if let Err(failed) = engine.join_any(&token, &remotes, &addr, &tried).await {
        // As the binary ends: a line, no backtrace (a boot log's tail shows
        // its last lines).
        eprintln!("drover: no manager took the join ({} tried)", failed.len());
        #[allow(
            clippy::exit,
            reason = "this process stands in for the `drover` binary, which exits 1 here"
        )]
        std::process::exit(1);
    }
    true
}

/// Stops every engine recorded under `state_dir` (by PID, verified by
/// command line) and removes their directories when dropped: tests hold
/// one so that a failing test still cleans up.
#[derive(Debug)]
pub struct StateGuard {
    /// The provider's state directory.
    pub state_dir: std::path::PathBuf,
}

impl Drop for StateGuard {
    fn drop(&mut self) {
        crate::teardown(&self.state_dir);
    }
}

/// A provision request for a test: tags and engine labels carry the
/// cluster id, group and a fresh link; `env` goes to the boot script's
/// environment only.
pub fn request(
    cluster: &str,
    group: &str,
    role: drover_core::spec::Role,
    template: &str,
    join_addr: &str,
    init: bool,
    env: Vec<(String, Secret)>,
) -> drover_spi::ProvisionRequest {
    use drover_core::model::tags;
    let link = format!("l{}", uuid::Uuid::new_v4().simple());
    let labels: std::collections::BTreeMap<String, String> = [
        (tags::CLUSTER.to_string(), cluster.to_string()),
        (tags::GROUP.to_string(), group.to_string()),
        (tags::LINK.to_string(), link.clone()),
    ]
    .into();
    let mut ctx = drover_core::template::BootContext::example(role);
    ctx.cluster_id = cluster.into();
    ctx.group = group.into();
    ctx.link = link;
    ctx.logical_id = String::new();
    ctx.address = String::new();
    ctx.join_addr = join_addr.into();
    ctx.join_addrs = join_addr.into();
    ctx.init = init;
    ctx.engine_labels = labels.clone();
    drover_spi::ProvisionRequest {
        tags: labels.clone(),
        logical_id: None,
        properties: serde_json::Value::Null,
        engine_labels: labels,
        boot_template: template.to_string(),
        boot_context: ctx,
        boot_env: env,
    }
}

/// A lease that ran out (a controller stopped between the store's
/// confirmation and the act, then resumed after another took over).
pub struct Expired;

impl drover_spi::Fence for Expired {
    fn check(&self) -> Result<(), drover_spi::LeaseExpired> {
        Err(drover_spi::LeaseExpired("expired in the test".into()))
    }
}

/// A short-pathed temporary state dir under /tmp (unix socket paths are
/// limited to 108 bytes).
pub fn short_tempdir(prefix: &str) -> std::io::Result<std::path::PathBuf> {
    let d = std::path::PathBuf::from(format!(
        "/tmp/{prefix}{}",
        &uuid::Uuid::new_v4().simple().to_string()[..6]
    ));
    std::fs::create_dir_all(&d)?;
    Ok(d)
}

/// A provider over `state` whose boot scripts find the test binary's
/// `drover` stand-in (see [`write_drover_shim`]) first on their PATH; its
/// engines are supervised (the default).
pub fn shimmed_provider(state: &Path, pool: &str) -> std::sync::Arc<crate::LocalProvider> {
    shimmed_provider_with(state, pool, true)
}

/// [`shimmed_provider`], with engines supervised or not
/// ([`crate::LocalProvider::with_supervision`]).
pub fn shimmed_provider_with(
    state: &Path,
    pool: &str,
    supervise: bool,
) -> std::sync::Arc<crate::LocalProvider> {
    let bin = state.join("bin");
    let exe = std::env::current_exe().expect("test binary path");
    write_drover_shim(&bin, &exe, "drover_shim").expect("write drover shim");
    let pool = crate::parse_pool(pool).expect("test pool");
    std::sync::Arc::new(
        crate::LocalProvider::new(state, pool)
            .expect("provider")
            .with_bin_dir(Some(bin))
            .with_supervision(supervise),
    )
}

/// Polls `f` until it yields a value or `limit` passes.
pub async fn wait_for<T, F, Fut>(limit: std::time::Duration, mut f: F) -> Option<T>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let deadline = std::time::Instant::now() + limit;
    while std::time::Instant::now() < deadline {
        if let Some(v) = f().await {
            return Some(v);
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    None
}

/// Provisions the first manager of a new swarm: the default manager boot
/// script with `init`, so the machine runs `swarm init`.
pub async fn first_manager(p: &crate::LocalProvider, cluster: &str) -> String {
    use drover_core::spec::Role;
    use drover_spi::InstanceProvider;
    let template = drover_core::template::default_boot_script(
        drover_core::spec::LOCAL_PROVIDER,
        Role::Manager,
    );
    p.provision(
        request(cluster, "m", Role::Manager, template, "", true, vec![]),
        &drover_spi::Unfenced,
    )
    .await
    .expect("first manager")
}

/// Provisions a member of `group` that joins the swarm `swarm` sees, with
/// the default boot script for `role` and fresh join material.
pub async fn joined_member(
    p: &crate::LocalProvider,
    swarm: &dyn drover_spi::Cluster,
    cluster: &str,
    group: &str,
    role: drover_core::spec::Role,
) -> String {
    use drover_spi::InstanceProvider;
    let jm = swarm
        .join_material(role)
        .await
        .expect("join material")
        .expect("a swarm exists");
    p.provision(
        request(
            cluster,
            group,
            role,
            drover_core::template::default_boot_script(drover_core::spec::LOCAL_PROVIDER, role),
            &jm.addr,
            false,
            vec![("DROVER_JOIN_TOKEN".into(), jm.token.clone())],
        ),
        &drover_spi::Unfenced,
    )
    .await
    .expect("member joins")
}

/// The files of machine `r`'s engine (its socket's directory).
fn paths_of(r: &crate::InstanceRecord) -> crate::EnginePaths {
    crate::EnginePaths::new(
        r.socket
            .parent()
            .unwrap_or(std::path::Path::new("/nonexistent")),
    )
}

/// Waits (≤ 10 s) until `pid` is gone, reaped too if it can be: a dockerd
/// started on the same data refuses to while its predecessor's PID exists,
/// even as a zombie (its parent, a supervisor killed with it, leaves the
/// reaping to init). True when it is dead.
fn gone(pid: i32) -> bool {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while std::path::Path::new(&format!("/proc/{pid}")).exists() {
        if std::time::Instant::now() > deadline {
            return !crate::procs::is_alive(pid);
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    true
}

/// Fault "the engine crashed": `kill -9` of machine `r`'s running dockerd
/// alone (the PID in its pidfile or the recorded one, verified by command
/// line; never its supervisor). A supervised machine's supervisor starts
/// the engine again on the same data after its restart delay
/// ([`crate::launcher::RESTART_DELAYS_MS`]) and the machine reads as
/// running throughout; an unsupervised machine's engine stays dead and the
/// machine reads as stopped. Returns the PID killed (gone when this
/// returns). Panics when no engine of `r` runs.
pub fn crash_engine(r: &crate::InstanceRecord) -> i32 {
    use nix::sys::signal::{Signal, kill};
    let paths = paths_of(r);
    let pid = crate::launcher::running_engine_pid(&paths, r.pid)
        .unwrap_or_else(|| panic!("no running engine for machine {}", r.id));
    kill(nix::unistd::Pid::from_raw(pid), Signal::SIGKILL).expect("kill -9 dockerd");
    assert!(gone(pid), "dockerd {pid} of {} survived SIGKILL", r.id);
    pid
}

/// Fault "the machine died for good", as a VM that loses power: SIGKILL to
/// machine `r`'s whole process group (its supervisor, its dockerd, and what
/// its boot script started, such as a controller; only when the group's
/// leader is verified by its command line), and to its supervisor and its
/// dockerd by PID (verified; for a machine not leading a group of its
/// own). Nothing starts the engine again. Returns once supervisor and
/// engine are gone (reaped); the provider then describes the machine as not
/// running. Never matches processes by pattern: only recorded and pidfile
/// PIDs, each checked.
pub fn kill_machine(r: &crate::InstanceRecord) {
    kill_machines(&[r]);
}

/// [`kill_machine`] for several machines at once, as a power cut: every
/// machine is signalled before any is waited for, so none is seen dead
/// alone (a controller would start healing it in between).
pub fn kill_machines(rs: &[&crate::InstanceRecord]) {
    use nix::sys::signal::{Signal, kill, killpg};
    use nix::unistd::Pid;
    let found: Vec<_> = rs
        .iter()
        .map(|r| {
            let paths = paths_of(r);
            let supervisor = r
                .supervisor
                .filter(|s| crate::launcher::is_supervisor(*s, &paths));
            let engine = crate::launcher::running_engine_pid(&paths, r.pid);
            (r, paths, supervisor, engine)
        })
        .collect();
    for (r, _, supervisor, engine) in &found {
        if let (Some(leader), Some(pgid)) = (supervisor.or(*engine), r.pgid)
            && crate::procs::pgid_of(leader) == Some(pgid)
        {
            let _ = killpg(Pid::from_raw(pgid), Signal::SIGKILL);
        }
        for pid in supervisor.iter().chain(engine) {
            let _ = kill(Pid::from_raw(*pid), Signal::SIGKILL);
        }
    }
    for (r, paths, supervisor, engine) in &found {
        if let Some(s) = supervisor {
            assert!(gone(*s), "supervisor {s} of {} survived SIGKILL", r.id);
        }
        // The engine found before (killed, perhaps not yet reaped), and one
        // the supervisor may have started before it died.
        for pid in engine
            .iter()
            .copied()
            .chain(crate::launcher::running_engine_pid(paths, r.pid))
        {
            let _ = kill(Pid::from_raw(pid), Signal::SIGKILL);
            assert!(gone(pid), "dockerd {pid} of {} survived SIGKILL", r.id);
        }
        assert_eq!(crate::launcher::running_engine_pid(paths, r.pid), None);
    }
}
