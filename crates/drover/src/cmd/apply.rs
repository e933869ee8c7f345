//! `drover apply`: validate, show the change, commit it (CAS), bootstrap
//! the first manager when no swarm exists, and optionally follow the rollout.

use crate::cli::ApplyArgs;
use crate::cmd::commit::{commit, new_cluster_id, operator, validated};
use crate::cmd::progress::Progress;
use crate::error::MainError;
use crate::spec_file;
use crate::wiring::{self, Machines};
use drover_controller::procedure::bootstrap::{self, HandedOver};
use drover_controller::procedure::follow::{FollowEnd, follow};
use drover_core::hash::config_hash;
use drover_core::retire::with_file;
use drover_core::spec::{ClusterSpec, Committable, Role};
use drover_spi::{Revision, Store};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

/// `apply` changes any cluster; `bootstrap` only creates one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Commit the change; bootstrap too when no swarm exists.
    Apply,
    /// Refuse unless the store holds no cluster yet.
    Bootstrap,
}

pub async fn run(args: &ApplyArgs, mode: Mode) -> Result<ExitCode, MainError> {
    let file_spec = spec_file::load(&args.file)?;
    let local = wiring::machines(&args.local)?;
    let Some((store, made_first_manager)) = crate::cmd::swarm_bootstrap::open_store(
        &args.store,
        &local,
        &file_spec,
        args.dry_run,
        &operator(),
    )
    .await?
    else {
        return Ok(ExitCode::SUCCESS);
    };
    let current = store.desired().await.map_err(anyhow::Error::from)?;
    if mode == Mode::Bootstrap {
        only_the_first(args, current.as_ref(), &local)?;
    }
    let spec = change(current.as_ref(), &file_spec, args.prune)?;
    if args.dry_run {
        println!("(dry run: nothing committed)");
        return Ok(ExitCode::SUCCESS);
    }
    // Refuse before writing anything: bad input changes nothing.
    let cluster = wiring::off_cluster_swarm(&local);
    let bootstrap = local.any()
        && matches!(
            drover_spi::Cluster::observe(cluster.as_ref()).await,
            drover_core::model::SwarmView::Absent
        );
    if mode == Mode::Bootstrap && !bootstrap && !made_first_manager {
        return Err(MainError::BadInput(
            "a swarm already runs on the provider's machines: bring it under management with drover adopt".into(),
        ));
    }
    if current.is_none() && !local.any() {
        return Err(MainError::BadInput("no swarm exists yet and no provider is configured to create its first manager: give --local-dir (and --local-pool) or --incus-engines".into()));
    }
    let cluster_id = ensure_cluster_id(store.as_ref()).await?;
    let expected = current.as_ref().map_or(0, |r| r.rev);
    let rev = commit(store.as_ref(), expected, &spec, &args.message, false).await?;
    println!("committed revision {rev} of cluster {cluster_id}");
    if bootstrap {
        println!(
            "{}",
            bootstrap_first_manager(store.clone(), &local, &args.store.url).await
        );
    }
    if !args.wait {
        return Ok(ExitCode::SUCCESS);
    }
    wait(store.as_ref(), rev, args.timeout).await
}

/// `bootstrap` only creates a cluster: refused when the store holds one,
/// or when no provider is given to create its first manager through.
fn only_the_first(
    args: &ApplyArgs,
    current: Option<&Revision>,
    local: &Machines,
) -> Result<(), MainError> {
    if let Some(r) = current {
        return Err(MainError::BadInput(format!(
            "--store {} already holds a cluster (revision {}): change it with drover apply",
            args.store.url, r.rev
        )));
    }
    if !local.any() {
        return Err(MainError::BadInput(
            "bootstrap creates the first manager through a provider: give --local-dir (and --local-pool) or --incus-engines".into(),
        ));
    }
    Ok(())
}

/// The file merged into the current spec, its lines printed, validated.
fn change(
    current: Option<&Revision>,
    file_spec: &ClusterSpec,
    prune: bool,
) -> Result<Committable, MainError> {
    let (spec, lines) = merge(current.map(|r| &r.spec), file_spec, prune);
    if let Some(m) = spec
        .groups
        .iter()
        .find(|g| g.role == Role::Manager && g.allocation.size() == 0)
    {
        return Err(MainError::BadInput(format!(
            "--prune would retire every manager of group {} and with them the swarm: keep the manager group in the file",
            m.name
        )));
    }
    for l in &lines {
        println!("{l}");
    }
    // Refused as a whole, dry run or not: a merge of valid files can still
    // be an invalid state (a second manager group beside a kept one).
    validated(current.map(|r| &r.spec), spec, "apply")
}

/// Follows revision `rev` until it converges, blocks (exit 3) or `timeout`
/// passes (exit 4).
async fn wait(store: &dyn Store, rev: u64, timeout: Duration) -> Result<ExitCode, MainError> {
    let start = std::time::Instant::now();
    let mut progress = Progress::new();
    let end = follow(store, rev, timeout, |doc| progress.update(doc))
        .await
        .map_err(anyhow::Error::from)?;
    Ok(match end {
        FollowEnd::Converged => {
            progress.finish();
            println!(
                "converged on revision {rev} after {:.1}s",
                start.elapsed().as_secs_f64()
            );
            ExitCode::SUCCESS
        }
        FollowEnd::Blocked { group, reason } => {
            eprintln!("blocked: {group}: {reason}");
            ExitCode::from(3)
        }
        FollowEnd::TimedOut => {
            eprintln!("timed out after {}", humantime::format_duration(timeout));
            ExitCode::from(4)
        }
    })
}

/// The store's cluster id, made (and printed) on first use.
pub(crate) async fn ensure_cluster_id(store: &dyn Store) -> Result<String, MainError> {
    match store.cluster_id().await.map_err(anyhow::Error::from)? {
        Some(id) => Ok(id),
        None => {
            let id = new_cluster_id();
            store.init_cluster(&id).await.map_err(anyhow::Error::from)?;
            println!("new cluster {id}");
            Ok(id)
        }
    }
}

/// The spec to commit ([`with_file`]: apply never deletes a group by
/// omission) and a line per group saying what becomes of it.
pub(crate) fn merge(
    current: Option<&ClusterSpec>,
    file: &ClusterSpec,
    prune: bool,
) -> (ClusterSpec, Vec<String>) {
    let mut lines: Vec<String> = file
        .groups
        .iter()
        .map(|g| match current.and_then(|c| c.group(&g.name)) {
            None => format!(
                "+ {}: new group ({} {}s)",
                g.name,
                g.allocation.size(),
                g.role.as_str()
            ),
            Some(old) if config_hash(old) != config_hash(g) => {
                format!(
                    "~ {}: config {} → {}: every member is rolled",
                    g.name,
                    config_hash(old),
                    config_hash(g)
                )
            }
            Some(old) if old != g => format!(
                "~ {}: size/policy change, no roll ({} → {} members)",
                g.name,
                old.allocation.size(),
                g.allocation.size()
            ),
            Some(_) => format!("= {}: unchanged", g.name),
        })
        .collect();
    for old in current.map(|c| c.groups.as_slice()).unwrap_or_default() {
        if file.group(&old.name).is_none() {
            lines.push(if prune {
                // Scaled to zero rather than forgotten: its members are then
                // retired through the planner, one safe step at a time.
                format!(
                    "- {}: pruned: every member is retired (scaled to 0)",
                    old.name
                )
            } else {
                format!(
                    "= {}: not in the file, kept (use --prune to remove it)",
                    old.name
                )
            });
        }
    }
    (with_file(current, file, prune), lines)
}

/// When no swarm exists yet, acts as an off-cluster controller until the
/// first manager's own controller takes over (fencing this one) or a bound.
async fn bootstrap_first_manager(
    store: Arc<dyn Store>,
    local: &Machines,
    store_url: &str,
) -> String {
    println!("no swarm yet: bootstrapping the first manager");
    let ctx = wiring::off_cluster(store, local, format!("bootstrap:{}", operator()), store_url);
    match bootstrap::until_taken_over(ctx).await {
        HandedOver::TakenOver => "the first manager's controller took over".into(),
        HandedOver::Bound => format!(
            "bootstrap controller stopped after {}; the cluster's own controllers continue",
            humantime::format_duration(bootstrap::BOUND)
        ),
    }
}
