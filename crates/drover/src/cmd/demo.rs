//! `drover demo up|down`: a real local swarm to try drover on one machine.
//!
//! Everything lives in one directory: `etcd/` (the store: a single-member
//! etcd on loopback — the one store that exists before the swarm does, so
//! `apply` can bootstrap the first manager), `machines/` (the local
//! provider's dockerd engines, each on its own loopback address, with a
//! controller next to every manager), the cluster files, and `demo.json`,
//! the marker `down` insists on before it removes anything.

use crate::cli::demo::{DemoCommand, DemoUp};
use crate::cli::{ApplyArgs, LocalArgs, StoreArgs};
use crate::cmd::apply;
use crate::error::MainError;
use crate::metrics_server::DEFAULT_PORT;
use drover_controller::procedure::store_start::{self, Started};
use serde::{Deserialize, Serialize};
use std::net::Ipv4Addr;
use std::path::Path;
use std::process::ExitCode;
use std::time::Duration;

const MARKER: &str = "demo.json";

/// How long a started etcd has to answer.
const ETCD_BOUND: Duration = Duration::from_secs(20);

/// What `demo up` made, kept in `DIR/demo.json`.
#[derive(Debug, Serialize, Deserialize)]
struct Marker {
    store: String,
    etcd_pid: Option<i32>,
    managers: Vec<String>,
    pool: String,
}

/// Runs a demo command.
pub async fn run(cmd: &DemoCommand) -> Result<ExitCode, MainError> {
    match cmd {
        DemoCommand::Up(args) => up(args).await,
        DemoCommand::Down { dir } => down(dir),
    }
}

async fn up(args: &DemoUp) -> Result<ExitCode, MainError> {
    preflight()?;
    let addresses = crate::wiring::pool(&args.pool, "--pool")?;
    if args.managers == 0 {
        return Err(MainError::BadInput(
            "--managers 0: a swarm needs at least one manager; give --managers 1 or more".into(),
        ));
    }
    if addresses.len() < args.managers + args.workers + 2 {
        return Err(MainError::BadInput(format!(
            "--pool {}: {} addresses are too few for {} managers, their spare slot and {} workers plus one for rolling; give a larger range",
            args.pool,
            addresses.len(),
            args.managers,
            args.workers
        )));
    }
    std::fs::create_dir_all(&args.dir)
        .map_err(|e| MainError::BadInput(format!("--dir {}: {e}", args.dir.display())))?;
    let dir = args.dir.canonicalize().map_err(anyhow::Error::from)?;
    let managers: Vec<String> = addresses[..args.managers]
        .iter()
        .map(Ipv4Addr::to_string)
        .collect();
    // The address after the managers' is their spare slot (a temporary
    // manager while they roll); the workers take the rest.
    let spare = addresses[args.managers].to_string();
    let workers_pool = ranges(&addresses[args.managers + 1..]);
    let store = format!("etcd://127.0.0.1:{}", args.etcd_port);
    let etcd_pid = ensure_etcd(&dir, args.etcd_port).await?;
    let marker = Marker {
        store: store.clone(),
        etcd_pid: etcd_pid.or_else(|| read_marker(&dir).and_then(|m| m.etcd_pid)),
        managers: managers.clone(),
        pool: args.pool.clone(),
    };
    write_private(
        &dir.join(MARKER),
        &serde_json::to_string_pretty(&marker).map_err(anyhow::Error::from)?,
    )?;
    let v1 = dir.join("cluster.yaml");
    let v2 = dir.join("cluster-v2.yaml");
    write_private(&v1, &spec(&managers, &spare, args.workers, "v1"))?;
    write_private(&v2, &spec(&managers, &spare, args.workers, "v2"))?;

    let apply_args = apply_args(&dir, &store, v1, workers_pool, args.timeout);
    // A demo that exists is left as it is: a second `up` must not undo the
    // changes the operator applied since (e.g. roll v2 back to v1).
    let existing = crate::wiring::store_with(&apply_args.store, crate::wiring::Open::OrCreate)
        .await?
        .desired()
        .await
        .map_err(anyhow::Error::from)?;
    if let Some(r) = existing {
        println!(
            "the demo is already up in {} (desired revision {}{}): nothing changed",
            dir.display(),
            r.rev,
            if r.converged {
                ", converged"
            } else {
                ", not converged yet: see drover status"
            }
        );
    } else {
        let code = apply::run(&apply_args, apply::Mode::Apply).await?;
        if code != ExitCode::SUCCESS {
            return Ok(code);
        }
    }
    summary(&dir, &store, &apply_args.local.local_pool);
    Ok(ExitCode::SUCCESS)
}

/// `apply -f FILE --wait` of the demo's first revision, with its store and
/// machines.
fn apply_args(
    dir: &Path,
    store: &str,
    file: std::path::PathBuf,
    workers_pool: String,
    timeout: Duration,
) -> ApplyArgs {
    ApplyArgs {
        file,
        dry_run: false,
        wait: true,
        timeout,
        prune: false,
        message: "drover demo up".into(),
        store: StoreArgs {
            url: store.to_string(),
            store_timeout: crate::wiring::DEFAULT_OPEN_TIMEOUT,
        },
        local: LocalArgs {
            local_dir: Some(dir.join("machines")),
            local_pool: workers_pool,
            local_supervise: true,
            ..LocalArgs::parsed_defaults()
        },
    }
}

/// The demo needs root and two programs: say exactly how to get them.
fn preflight() -> Result<(), MainError> {
    let missing = |bin: &str| {
        std::env::var_os("PATH")
            .map(|p| std::env::split_paths(&p).all(|d| !d.join(bin).is_file()))
            .unwrap_or(true)
    };
    if missing("dockerd") {
        return Err(MainError::BadInput(
            "dockerd is not installed: install Docker's engine (Debian/Ubuntu: sudo apt-get install docker.io), then run drover demo up again".into(),
        ));
    }
    if missing("etcd") {
        return Err(MainError::BadInput(
            "etcd is not installed (the demo's store): install it (Debian/Ubuntu: sudo apt-get install etcd-server), then run drover demo up again".into(),
        ));
    }
    if !nix::unistd::geteuid().is_root() {
        return Err(MainError::BadInput(
            "the demo starts dockerd engines, which needs root: run it as root (sudo drover demo up)".into(),
        ));
    }
    Ok(())
}

/// Addresses as `A-B` ranges of consecutive ones, comma-separated (the
/// `--local-pool` syntax).
fn ranges(addresses: &[Ipv4Addr]) -> String {
    let mut runs: Vec<(Ipv4Addr, Ipv4Addr)> = Vec::new();
    for &a in addresses {
        match runs.last_mut() {
            Some((_, end)) if u32::from(*end).checked_add(1) == Some(u32::from(a)) => *end = a,
            _ => runs.push((a, a)),
        }
    }
    runs.iter()
        .map(|(a, b)| {
            if a == b {
                a.to_string()
            } else {
                format!("{a}-{b}")
            }
        })
        .collect::<Vec<_>>()
        .join(",")
}

/// Starts etcd unless one answers on the port already (a second `demo up`).
/// Returns the PID of the etcd it started.
async fn ensure_etcd(dir: &Path, port: u16) -> Result<Option<i32>, MainError> {
    let etcd = crate::wiring::etcd::DemoEtcd::new(dir, port);
    let said = |pid| println!("started etcd (the store) on 127.0.0.1:{port}, pid {pid}");
    match store_start::ensure(&etcd, ETCD_BOUND, said).await {
        Ok(Started::Running) => Ok(None),
        Ok(Started::Now(pid)) => Ok(Some(pid as i32)),
        Err(e) => Err(MainError::Failed(e.into())),
    }
}

/// The demo's cluster file: managers as pets on fixed addresses (with a
/// spare slot), workers as cattle.
fn spec(managers: &[String], spare: &str, workers: usize, release: &str) -> String {
    format!(
        "# drover demo cluster ({release}). Edit and apply:  drover apply -f THIS_FILE --wait
groups:
- name: managers
  role: manager
  allocation:
    logical_ids: [{}]
    # Pets are replaced in place; a temporary manager in the spare slot,
    # added first and retired last, keeps the raft's fault tolerance at 1.
    spare_ids: [{spare}]
  instance: {{provider: local}}
  flavor: {{engine_labels: {{release: {release}}}}}
  update: {{watch: 3s}}
  health: {{startup_timeout: 60s}}
- name: workers
  role: worker
  allocation: {{size: {workers}}}
  instance: {{provider: local}}
  flavor: {{engine_labels: {{release: {release}}}}}
  update: {{watch: 2s}}
  health: {{startup_timeout: 60s}}
",
        managers.join(", ")
    )
}

fn write_private(path: &Path, text: &str) -> Result<(), MainError> {
    use std::os::unix::fs::OpenOptionsExt;
    let mut f = std::fs::OpenOptions::new()
        .create(true)
        .write(true)
        .truncate(true)
        .mode(0o600)
        .open(path)
        .map_err(|e| MainError::Failed(anyhow::anyhow!("writing {}: {e}", path.display())))?;
    std::io::Write::write_all(&mut f, text.as_bytes())
        .map_err(|e| MainError::Failed(anyhow::anyhow!("writing {}: {e}", path.display())))
}

fn read_marker(dir: &Path) -> Option<Marker> {
    serde_json::from_str(&std::fs::read_to_string(dir.join(MARKER)).ok()?).ok()
}

fn summary(dir: &Path, store: &str, pool: &str) {
    let machines = dir.join("machines");
    let records = crate::wiring::demo_machines(&machines);
    println!("\nThe demo swarm (each machine a dockerd on a loopback address):");
    println!(
        "  {:<10} {:<10} {:<14} ENGINE",
        "MACHINE", "GROUP", "ADDRESS"
    );
    for r in &records {
        println!(
            "  {:<10} {:<10} {:<14} {}",
            r.id,
            r.tags.get("drover.group").map_or("-", String::as_str),
            r.address,
            r.endpoint()
        );
    }
    let bin = std::env::current_exe()
        .map(|p| p.display().to_string())
        .unwrap_or_else(|_| "drover".into());
    let metrics: Vec<String> = records
        .iter()
        .filter(|r| r.tags.get("drover.group").is_some_and(|g| g == "managers"))
        .map(|r| format!("http://{}:{DEFAULT_PORT}/metrics", r.address))
        .collect();
    println!("  store: {store} (etcd, data in {}/etcd)", dir.display());
    println!("  metrics (one controller per manager; the acting one has group metrics):");
    for m in &metrics {
        println!("    {m}");
    }
    println!(
        "\nTry next (in your shell):
  export DROVER_STORE={store} DROVER_LOCAL_DIR={} DROVER_LOCAL_POOL={pool}
  {bin} status
  {bin} apply -f {}/cluster-v2.yaml --wait     # a rolling update, leader last
  {bin} events
  docker -H {} node ls
  {bin} demo down --dir {}",
        machines.display(),
        dir.display(),
        records
            .first()
            .map_or_else(|| "unix:///…/sock".into(), |r| r.endpoint()),
        dir.display()
    );
}

fn down(dir: &Path) -> Result<ExitCode, MainError> {
    if !dir.exists() {
        println!("nothing to tear down ({} does not exist)", dir.display());
        return Ok(ExitCode::SUCCESS);
    }
    let dir = dir.canonicalize().map_err(anyhow::Error::from)?;
    let Some(marker) = read_marker(&dir) else {
        return Err(MainError::BadInput(format!(
            "{} is not a demo directory (it has no {MARKER}): refusing to remove it; give the --dir that demo up used",
            dir.display()
        )));
    };
    if let Err(left) = crate::wiring::remove_demo(&dir, marker.etcd_pid) {
        return Err(MainError::Failed(anyhow::anyhow!(
            "processes naming {} are still running (pids {left:?}); stop them, then run demo down again",
            dir.display()
        )));
    }
    std::fs::remove_dir_all(&dir)
        .map_err(|e| anyhow::anyhow!("removing {}: {e}", dir.display()))?;
    println!(
        "demo removed: no process or file of it is left ({} is gone)",
        dir.display()
    );
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pools_are_written_back_as_ranges() {
        let a = crate::wiring::pool("127.0.85.13-127.0.85.20,127.0.85.30", "--pool").unwrap();
        assert_eq!(ranges(&a), "127.0.85.13-127.0.85.20,127.0.85.30");
        assert!(matches!(
            crate::wiring::pool("10.0.0.1-10.0.0.3", "--pool"),
            Err(MainError::BadInput(_))
        ));
    }
}
