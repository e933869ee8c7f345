//! `drover apply`: validate, show the change, commit it (CAS), bootstrap
//! the first manager when no swarm exists, and optionally follow the rollout.

use crate::cli::ApplyArgs;
use crate::cmd::commit::{commit, new_cluster_id, operator, validated};
use crate::cmd::progress::Progress;
use crate::error::MainError;
use crate::spec_file;
use crate::wiring::{self, Machines};
use drover_controller::procedure::acting::{self, Unserved};
use drover_controller::procedure::bootstrap::{self, HandedOver};
use drover_controller::procedure::follow::{FollowEnd, follow, latest};
use drover_controller::wall_ms;
use drover_core::hash::config_hash;
use drover_core::retire::with_file;
use drover_core::spec::{ClusterSpec, Committable, Role};
use drover_spi::{Revision, Store};
use std::collections::BTreeSet;
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
    // "converged after" counts from here: a bootstrap's first manager and
    // its hand-over are part of the time to a cluster.
    let started = std::time::Instant::now();
    let file_spec = spec_file::load(&args.file)?;
    // Before anything is opened or made: the declared control must suit
    // the store (external controllers need one they all reach).
    drover_core::control::spec_fits(&file_spec, wiring::reach(&args.store)?)
        .map_err(|m| MainError::BadInput(m.to_string()))?;
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
    let unserved = unserved(store.as_ref(), current.as_ref(), spec.spec(), &local).await?;
    if args.dry_run {
        match refusal(&unserved) {
            Some(why) => println!("(dry run: nothing committed; apply would refuse it:\n{why})"),
            None => println!("(dry run: nothing committed)"),
        }
        return Ok(ExitCode::SUCCESS);
    }
    admit(&unserved)?;
    wiring::ssh_files(spec.spec(), &local)?;
    // Refuse before writing anything: bad input changes nothing.
    let cluster = wiring::off_cluster_swarm(&local);
    // A cluster of plain groups only has no swarm to make: its external
    // controllers make its machines.
    let swarm = spec.spec().groups.iter().any(|g| g.role == Role::Manager);
    let bootstrap = swarm
        && match local.any() {
            true => matches!(
                drover_spi::Cluster::observe(cluster.as_ref()).await,
                drover_core::model::SwarmView::Absent
            ),
            // No engine reachable from here: a cluster whose swarm has not
            // begun is made through the store.
            false => {
                let providers = wiring::providers(&local, Some(&store));
                bootstrap::unbegun(store.as_ref(), current.is_none(), spec.spec(), &providers)
                    .await
                    .map_err(|e| MainError::Failed(e.into()))?
                    && through_the_store(&args.store)?
            }
        };
    if mode == Mode::Bootstrap && !bootstrap && !made_first_manager {
        return Err(MainError::BadInput(
            "a swarm already runs on the provider's machines: bring it under management with drover adopt".into(),
        ));
    }

    let cluster_id = ensure_cluster_id(store.as_ref()).await?;
    let expected = current.as_ref().map_or(0, |r| r.rev);
    let rev = commit(store.as_ref(), expected, &spec, &args.message, false).await?;
    println!("committed revision {rev} of cluster {cluster_id}");
    let providers = spec.spec().groups.iter();
    let providers: BTreeSet<String> = providers.map(|g| g.instance.provider_key()).collect();
    let mut progress = Progress::new(rev, &providers);
    if bootstrap {
        let url = &args.store.url;
        let handed = bootstrap_first_manager(store.clone(), &local, url, &mut progress).await;
        println!("{handed}");
    }
    if !args.wait {
        return Ok(ExitCode::SUCCESS);
    }
    // Followed read-only: a file store's controller must be able to open
    // it to act on the revision.
    let store = wiring::to_follow(&args.store, store).await?;
    wait(store.as_ref(), progress, started, args.timeout).await
}

/// Whether a swarm can be made from a process that reaches none of its
/// engines: only through a store every machine reaches (etcd), where the
/// first manager's own controller takes over. Else bad input, saying what
/// would do.
fn through_the_store(args: &crate::cli::StoreArgs) -> Result<bool, MainError> {
    match wiring::reach(args)? {
        drover_spi::Reach::Network => Ok(true),
        _ => Err(MainError::BadInput(
            "no swarm exists yet and this command reaches none of its machines' engines: \
             give --store etcd://HOST:PORT (a store the first manager's controller reaches, \
             through which it takes over), or --local-dir (and --local-pool) or \
             --incus-engines to make the first manager from here"
                .into(),
        )),
    }
}

/// The groups `next` changes whose provider is configured neither on this
/// command line nor on the controller acting on the store
/// ([`acting::unserved`]).
async fn unserved(
    store: &dyn Store,
    current: Option<&Revision>,
    next: &ClusterSpec,
    local: &Machines,
) -> Result<Vec<Unserved>, MainError> {
    let failed = |e| MainError::Failed(anyhow::Error::from(e));
    let status = latest(store).await.map_err(failed)?;
    let converged_once = store
        .history()
        .await
        .map_err(failed)?
        .iter()
        .any(|r| r.converged);
    let acting = acting::Store {
        status: status.as_ref(),
        converged_once,
    };
    let here = wiring::provider_keys(local);
    let previous = current.map(|r| &r.spec);
    Ok(acting::unserved(previous, next, &here, acting, wall_ms()))
}

/// Refuses a commit (exit 2) that no controller would ever make machines
/// for; warns of one the cluster's controllers, down now, will pick up.
fn admit(unserved: &[Unserved]) -> Result<(), MainError> {
    if let Some(why) = refusal(unserved) {
        return Err(MainError::BadInput(why));
    }
    for u in unserved {
        eprintln!(
            "drover: warning: group {}: its instance.provider {} is not configured on this command line and {}: the revision waits until a controller wired to {} runs",
            u.group, u.provider, u.why, u.provider
        );
    }
    Ok(())
}

/// The refusal of a commit whose `unserved` groups no controller would
/// ever make machines for, one line per group naming its provider and the
/// flag that configures it; `None` when there is none.
pub(crate) fn refusal(unserved: &[Unserved]) -> Option<String> {
    let lines: Vec<String> = unserved
        .iter()
        .filter(|u| u.why.refuses())
        .map(|u| {
            format!(
                "group {}: its instance.provider {} is not configured on this command line (give {}) and no controller elsewhere makes its machines: {}; nothing was committed",
                u.group,
                u.provider,
                wiring::provider_flag(&u.provider),
                u.why
            )
        })
        .collect();
    (!lines.is_empty()).then(|| lines.join("\n"))
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

/// Follows the revision `progress` shows until it converges (printing the
/// time since the command `started`), blocks (exit 3) or `timeout` passes
/// (exit 4).
async fn wait(
    store: &dyn Store,
    mut progress: Progress,
    started: std::time::Instant,
    timeout: Duration,
) -> Result<ExitCode, MainError> {
    let rev = progress.rev();
    let end = follow(store, rev, timeout, |doc| progress.update(doc))
        .await
        .map_err(anyhow::Error::from)?;
    Ok(match end {
        FollowEnd::Converged => {
            progress.finish();
            println!(
                "converged on revision {rev} after {:.1}s",
                started.elapsed().as_secs_f64()
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
/// first manager's own controller takes over (fencing this one) or a bound,
/// showing the status it publishes meanwhile on `progress`.
async fn bootstrap_first_manager(
    store: Arc<dyn Store>,
    local: &Machines,
    store_url: &str,
    progress: &mut Progress,
) -> String {
    println!(
        "no swarm yet: bootstrapping the first manager (this command acts as the controller until the first manager's own takes over, at most {})",
        humantime::format_duration(bootstrap::BOUND)
    );
    let identity = format!("bootstrap:{}", operator());
    let ctx = wiring::off_cluster(store.clone(), local, identity, store_url);
    let rev = progress.rev();
    let shown = async {
        // Shown until the hand-over, whatever the follow comes to.
        let _ = follow(store.as_ref(), rev, bootstrap::BOUND, |d| {
            progress.update(d)
        })
        .await;
        std::future::pending::<()>().await
    };
    let bootstrapping = async {
        match local.any() {
            true => bootstrap::until_taken_over(ctx).await,
            false => bootstrap::through_the_store(ctx).await,
        }
    };
    let handed = tokio::select! {
        handed = bootstrapping => handed,
        () = shown => unreachable!("the progress is shown until the hand-over"),
    };
    match handed {
        HandedOver::TakenOver => "the first manager's controller took over".into(),
        HandedOver::Bound => format!(
            "bootstrap controller stopped after {}; the cluster's own controllers continue",
            humantime::format_duration(bootstrap::BOUND)
        ),
    }
}
