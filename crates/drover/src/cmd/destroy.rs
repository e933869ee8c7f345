//! `drover destroy GROUP`: retire every member of a group.
//!
//! A worker group is committed at size 0 and the leader's controller
//! retires its members (drained first) with the usual budgets. A manager
//! group ends the swarm, so it goes last: every other group must already be
//! committed at size 0, and its retirement is committed only once their
//! machines are gone. Its members are retired by the controller one at a
//! time through the manager gate, the leader last; the last machine is
//! destroyed from here ([`Teardown`]), as `bootstrap` created the first
//! one. Running it again resumes where it stopped.
//!
//! A group whose provider cannot be described is refused: its machines
//! could never be retired. `--forget-machines` takes it out of the desired
//! state instead ([`crate::cmd::forget`]), only then.

use crate::cli::{LocalArgs, StoreArgs};
use crate::cmd::commit::{commit, validated};
use crate::cmd::revisions::{current, declared, history};
use crate::error::MainError;
use crate::wiring;
use drover_controller::Context;
use drover_controller::procedure::forget;
use drover_controller::procedure::teardown::{IDENTITY, Teardown, Waited};
use drover_core::retire::{before_managers, is_retired, retired};
use drover_core::revision::with_group;
use drover_core::spec::{ClusterSpec, GroupSpec, Role};
use drover_spi::Store;
use std::io::{BufRead, IsTerminal};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

pub async fn run(
    group: &str,
    (yes, forget_machines): (bool, bool),
    timeout: Duration,
    store_args: &StoreArgs,
    local: &LocalArgs,
) -> Result<ExitCode, MainError> {
    // With a swarm store: read through whichever manager answers, the
    // engine given first (a follower's is retired before the leader).
    let machines = wiring::existing_machines(local)?.seeing(store_args);
    let store = wiring::store_seen_from(store_args, wiring::Open::Existing, &machines).await?;
    let history = history(store.as_ref()).await?;
    let current = current(&history)?;
    let g = declared(current, group)?;
    let cluster = store
        .cluster_id()
        .await
        .map_err(failed)?
        .unwrap_or_default();
    // Whether its provider answers, before anything else: a refusal
    // changes nothing.
    let ctx = wiring::observer_over(store.clone(), machines.clone(), forget::IDENTITY);
    let survey = forget::survey(&ctx, g, &cluster).await.map_err(failed)?;
    if crate::cmd::forget::decide(g, &survey, forget_machines)? {
        if !yes && !confirmed(g, true)? {
            println!("nothing changed");
            return Ok(ExitCode::SUCCESS);
        }
        let current = (current.rev, &current.spec);
        return crate::cmd::forget::run(&ctx, &survey, g, current).await;
    }
    let already = is_retired(g);
    // What is committed is checked before anything else: a refusal changes nothing.
    let what = format!("destroy {group}");
    let gone = (!already)
        .then(|| {
            validated(
                Some(&current.spec),
                with_group(&current.spec, retired(g)),
                &what,
            )
        })
        .transpose()?;
    // A manager group's last machine is removed from here: everything that
    // needs is checked before anything is committed.
    let mut managers = (g.role == Role::Manager)
        .then(|| manager_context(store.clone(), &current.spec, g, &machines))
        .transpose()?;
    if !already && !yes && !confirmed(g, false)? {
        println!("nothing changed");
        return Ok(ExitCode::SUCCESS);
    }
    // Only the swarm store can vanish with a retired manager.
    let stores = wiring::swarm_stores(&wiring::machines(local)?)
        .filter(|_| store_args.url.starts_with("swarm"));
    let mut teardown = managers
        .as_mut()
        .map(|ctx| Teardown::new(ctx, stores, &cluster, group, timeout));
    if let (Some(teardown), false) = (teardown.as_mut(), already) {
        // Manager groups last: their retirement begins once the other
        // groups' machines are gone, not while they still drain.
        let others = teardown
            .others_gone(&current.spec, current.rev, say_waiting)
            .await
            .map_err(failed)?;
        if let Err(code) = waited(others, timeout, group) {
            return Ok(code);
        }
    }
    let (rev, spec) = match gone {
        None => (current.rev, current.spec.clone()),
        Some(gone) => {
            let rev = commit(store.as_ref(), current.rev, &gone, &what, false).await?;
            (rev, gone.spec().clone())
        }
    };
    let Some(mut teardown) = teardown else {
        println!("committed revision {rev}: every member of {group} is retired (drained first)");
        return Ok(ExitCode::SUCCESS);
    };
    println!(
        "revision {rev}: the controller retires the managers of {group} one at a time, the leader last; the last one is removed from here"
    );
    remove_last(&mut teardown, &spec, g, rev, timeout).await
}

/// What removing manager group `g`'s last machine from here needs: every
/// other group retired first ([`before_managers`]), and the group's
/// provider configured here.
fn manager_context(
    store: Arc<dyn Store>,
    spec: &ClusterSpec,
    g: &GroupSpec,
    machines: &wiring::Machines,
) -> Result<Context, MainError> {
    let group = &g.name;
    let others = before_managers(spec, group);
    if !others.is_empty() {
        return Err(MainError::BadInput(format!(
            "{group} is a manager group and goes last (it carries the swarm and the controllers): destroy {} first (drover destroy NAME), then {group}",
            others.join(", ")
        )));
    }
    let ctx = wiring::observer_over(store, machines.clone(), IDENTITY);
    if !ctx.providers.contains_key(&g.instance.provider_key()) {
        return Err(MainError::BadInput(format!(
            "--local-dir (or DROVER_LOCAL_DIR), --incus-engines (DROVER_INCUS_ENGINES) or --plugin (DROVER_PLUGINS): the last manager of {group} is removed from here through provider {}, which is not configured here",
            g.instance.provider_key()
        )));
    }
    Ok(ctx)
}

/// Waits until the group's last manager is the only thing left, then
/// removes it from here.
async fn remove_last(
    teardown: &mut Teardown<'_>,
    spec: &ClusterSpec,
    g: &GroupSpec,
    rev: u64,
    timeout: Duration,
) -> Result<ExitCode, MainError> {
    let last = teardown
        .last_one(spec, rev, say_waiting)
        .await
        .map_err(failed)?;
    match waited(last, timeout, &g.name) {
        Err(code) => Ok(code),
        Ok(None) => {
            println!("{} has no machine left: the swarm is gone", g.name);
            Ok(ExitCode::SUCCESS)
        }
        Ok(Some(last)) => {
            teardown
                .remove_last(spec, g, rev, &last)
                .await
                .map_err(failed)?;
            println!(
                "destroyed {}, the last manager of {}, after {:.0}s: the swarm is gone",
                last.id,
                g.name,
                teardown.elapsed().as_secs_f64()
            );
            Ok(ExitCode::SUCCESS)
        }
    }
}

/// A line each time the reason to wait changes.
fn say_waiting(elapsed: Duration, why: &str) {
    println!("[{:>4.0}s] waiting: {why}", elapsed.as_secs_f64());
}

/// What a wait came to: its value, or the exit code of a blocked group (3)
/// or a timeout (4), said on stderr.
fn waited<T>(w: Waited<T>, timeout: Duration, group: &str) -> Result<T, ExitCode> {
    match w {
        Waited::Done(t) => Ok(t),
        Waited::Blocked { group, reason } => {
            eprintln!("group {group} is blocked: {reason}");
            Err(ExitCode::from(3))
        }
        Waited::TimedOut(why) => {
            eprintln!(
                "timed out after {}: {why}; run drover destroy {group} again to go on",
                humantime::format_duration(timeout),
            );
            Err(ExitCode::from(4))
        }
    }
}

/// The operator typed the group's name after being told what happens
/// (`forgetting`: the group leaves the desired state, its machines stay).
fn confirmed(g: &GroupSpec, forgetting: bool) -> Result<bool, MainError> {
    let group = &g.name;
    if !std::io::stdin().is_terminal() {
        return Err(MainError::BadInput(format!(
            "destroy {group} needs confirmation and stdin is not a terminal: pass --yes"
        )));
    }
    if forgetting {
        println!(
            "This takes {group} out of the desired state and destroys nothing: its machines may keep running."
        );
    } else if g.role == Role::Manager {
        println!(
            "This ends the swarm: all {} managers of {group} are retired, the leader last.",
            g.allocation.size()
        );
    } else {
        println!(
            "This retires all {} members of {group}.",
            g.allocation.size()
        );
    }
    println!("Type the group name to confirm:");
    let mut line = String::new();
    std::io::stdin()
        .lock()
        .read_line(&mut line)
        .map_err(anyhow::Error::from)?;
    Ok(line.trim() == group)
}

fn failed(e: impl Into<anyhow::Error>) -> MainError {
    MainError::Failed(e.into())
}
