//! `drover destroy GROUP`: retire every member of a group.
//!
//! A worker group is committed at size 0 and the leader's controller
//! retires its members (drained first) with the usual budgets. A manager
//! group ends the swarm, so it goes last: every other group must already be
//! committed at size 0, and its retirement is committed only once their
//! machines are gone. Its members are retired by the controller one at a
//! time through the manager gate, the leader (the machine the acting
//! controller runs on) last; that last machine cannot remove itself, so this
//! command follows until it is the only thing left in the cluster
//! ([`drover_core::teardown`] decides) and then destroys it through the
//! provider from outside the swarm, as `bootstrap` created the first one.
//! Running it again resumes where it stopped.

use crate::cli::{LocalArgs, StoreArgs};
use crate::cmd::commit::{commit, validated};
use crate::cmd::revisions::{current, declared, history};
use crate::error::MainError;
use crate::wiring;
use drover_controller::{Context, StatusDoc, snapshot, status_json, wall_ms};
use drover_core::journal::Operation;
use drover_core::model::{Instance, Observed, tags};
use drover_core::plan::Desired;
use drover_core::plan::{Memory, PlanInput, member_status, plan};
use drover_core::revision::with_group;
use drover_core::spec::{Allocation, ClusterSpec, GroupSpec, Role};
use drover_core::teardown::{LastManager, last_manager, others_remaining};
use drover_spi::{Epoch, Event};
use std::io::{BufRead, IsTerminal};
use std::process::ExitCode;
use std::time::{Duration, Instant};

/// How often the follower looks again.
const POLL: Duration = Duration::from_secs(2);

/// Who the final step's events and status name.
const IDENTITY: &str = "drover destroy";

pub async fn run(
    group: &str,
    yes: bool,
    timeout: Duration,
    store_args: &StoreArgs,
    local: &LocalArgs,
) -> Result<ExitCode, MainError> {
    let store = wiring::store(store_args).await?;
    let history = history(store.as_ref()).await?;
    let current = current(&history)?;
    let g = declared(current, group)?;
    let retired = g.allocation.size() == 0;
    // What is committed is checked before anything else: a refusal changes nothing.
    let what = format!("destroy {group}");
    let gone = (!retired)
        .then(|| {
            let mut gone = g.clone();
            gone.allocation = Allocation::Size {
                size: 0,
                zones: Vec::new(),
            };
            validated(Some(&current.spec), with_group(&current.spec, gone), &what)
        })
        .transpose()?;
    // A manager group's last machine is removed from here: everything that
    // needs is checked before anything is committed.
    let mut managers = None;
    let cluster = store
        .cluster_id()
        .await
        .map_err(failed)?
        .unwrap_or_default();
    if g.role == Role::Manager {
        let others: Vec<&str> = current
            .spec
            .groups
            .iter()
            .filter(|o| o.name != group && o.allocation.size() > 0)
            .map(|o| o.name.as_str())
            .collect();
        if !others.is_empty() {
            return Err(MainError::BadInput(format!(
                "{group} is a manager group and goes last (it carries the swarm and the controllers): destroy {} first (drover destroy NAME), then {group}",
                others.join(", ")
            )));
        }
        let ctx = wiring::observer_on(store.clone(), local, IDENTITY)?;
        if !ctx.providers.contains_key(&g.instance.provider) {
            return Err(MainError::BadInput(format!(
                "--local-dir (or DROVER_LOCAL_DIR): the last manager of {group} is removed from here through provider {}, which is not configured here",
                g.instance.provider
            )));
        }
        managers = Some(ctx);
    }
    if !retired && !yes && !confirmed(g)? {
        println!("nothing changed");
        return Ok(ExitCode::SUCCESS);
    }
    let start = Instant::now();
    if let (Some(ctx), false) = (managers.as_mut(), retired) {
        // Manager groups last: their retirement begins once the other
        // groups' machines are gone, not while they still drain.
        let mut follow = Follow::new(ctx, None, &cluster, group, timeout, start);
        let others = follow
            .until(
                &current.spec,
                current.rev,
                |_, observed, _| match others_remaining(observed, group) {
                    None => Seen::Done(()),
                    Some(why) => Seen::Wait(why),
                },
            )
            .await?;
        if let Err(code) = others {
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
    let Some(mut ctx) = managers else {
        println!("committed revision {rev}: every member of {group} is retired (drained first)");
        return Ok(ExitCode::SUCCESS);
    };
    println!(
        "revision {rev}: the controller retires the managers of {group} one at a time, the leader last; the last one is removed from here"
    );
    // Only the swarm store can vanish with a retired manager.
    let machines = wiring::local(local)?.filter(|_| store_args.url.starts_with("swarm"));
    let mut follow = Follow::new(
        &mut ctx,
        machines.as_deref(),
        &cluster,
        group,
        timeout,
        start,
    );
    let last = follow
        .until(&spec, rev, |desired, observed, journal| match last_manager(
            desired, observed, journal, group,
        ) {
            LastManager::Gone => Seen::Done(None),
            LastManager::Ready(inst) => Seen::Done(Some(inst.clone())),
            LastManager::Wait(why) => Seen::Wait(why),
        })
        .await?;
    match last {
        Err(code) => Ok(code),
        Ok(None) => {
            println!("{group} has no machine left: the swarm is gone");
            Ok(ExitCode::SUCCESS)
        }
        Ok(Some(last)) => remove_last(&ctx, &spec, g, rev, &last, start).await,
    }
}

/// What one look at the cluster found.
enum Seen<T> {
    /// Done waiting, with this.
    Done(T),
    /// Not yet, and why.
    Wait(String),
}

/// Follows the cluster (a line each time the reason to wait changes) until
/// a check is done, a group blocks (exit 3) or the timeout passes (exit 4).
struct Follow<'a> {
    ctx: &'a mut Context,
    /// With a swarm store: the machines to find the store on again.
    machines: Option<&'a drover_local::LocalProvider>,
    /// The cluster id: a store found again must be this cluster's.
    cluster: String,
    group: &'a str,
    timeout: Duration,
    start: Instant,
    said: String,
}

impl<'a> Follow<'a> {
    fn new(
        ctx: &'a mut Context,
        machines: Option<&'a drover_local::LocalProvider>,
        cluster: &str,
        group: &'a str,
        timeout: Duration,
        start: Instant,
    ) -> Self {
        Follow {
            ctx,
            machines,
            cluster: cluster.to_string(),
            group,
            timeout,
            start,
            said: String::new(),
        }
    }

    /// Looks until `check` is done against revision `rev` of `spec`; fails
    /// if someone commits another revision meanwhile (what was checked
    /// would no longer be what the controller carries out).
    async fn until<T>(
        &mut self,
        spec: &ClusterSpec,
        rev: u64,
        check: impl Fn(&Desired, &Observed, &[Operation]) -> Seen<T>,
    ) -> Result<Result<T, ExitCode>, MainError> {
        loop {
            let looked = async {
                still_at(self.ctx, rev).await?;
                snapshot(self.ctx, spec).await.map_err(failed)
            };
            let why = match looked.await {
                Ok((desired, observed, journal)) => match check(&desired, &observed, &journal) {
                    Seen::Done(t) => return Ok(Ok(t)),
                    Seen::Wait(why) => why,
                },
                Err(MainError::Failed(e))
                    if e.downcast_ref::<drover_spi::StoreError>()
                        .is_some_and(drover_spi::StoreError::is_transient)
                        && reopen_on_a_manager(self.ctx, self.machines, &self.cluster, self.group)
                            .await =>
                {
                    "the engine the store was read through is gone: reading it through another manager"
                        .into()
                }
                Err(e) => return Err(e),
            };
            if why != self.said {
                println!(
                    "[{:>4.0}s] waiting: {why}",
                    self.start.elapsed().as_secs_f64()
                );
                self.said = why;
            }
            if let Some((group, why)) = blocked(self.ctx).await {
                eprintln!("group {group} is blocked: {why}");
                return Ok(Err(ExitCode::from(3)));
            }
            if self.start.elapsed() >= self.timeout {
                eprintln!(
                    "timed out after {}: {}; run drover destroy {} again to go on",
                    humantime::format_duration(self.timeout),
                    self.said,
                    self.group
                );
                return Ok(Err(ExitCode::from(4)));
            }
            tokio::time::sleep(POLL).await;
        }
    }
}

/// The swarm store lives in the raft, read through one manager's engine,
/// and this command retires managers: when the one it reads through goes,
/// open the store again on another running manager of this cluster's
/// `group` — and only if that store is this cluster's.
async fn reopen_on_a_manager(
    ctx: &mut Context,
    machines: Option<&drover_local::LocalProvider>,
    cluster: &str,
    group: &str,
) -> bool {
    let Some(machines) = machines else {
        return false;
    };
    let records = machines.records().unwrap_or_default();
    let ours = |r: &&drover_local::InstanceRecord| {
        r.tags.get(tags::CLUSTER).map(String::as_str) == Some(cluster)
            && r.tags.get(tags::GROUP).map(String::as_str) == Some(group)
            && machines.is_running(r)
    };
    for r in records.iter().filter(ours) {
        let Ok(store) = drover_store::open(&format!("swarm:{}", r.endpoint())).await else {
            continue;
        };
        if store.cluster_id().await.ok().flatten().as_deref() == Some(cluster) {
            tracing::info!(machine = %r.id, "the store's engine was retired: reading the swarm store through another manager");
            ctx.store = store.into();
            return true;
        }
    }
    false
}

/// Fails when the store's current revision is no longer `rev`.
async fn still_at(ctx: &Context, rev: u64) -> Result<(), MainError> {
    let current = ctx.store.desired().await.map_err(failed)?.map(|r| r.rev);
    if current != Some(rev) {
        return Err(MainError::Failed(anyhow::anyhow!(
            "the desired state changed meanwhile (revision {} now, {rev} expected): nothing more is done here; see drover history, then run drover destroy again if you still mean it",
            current.unwrap_or(0)
        )));
    }
    Ok(())
}

/// Removes the swarm's last manager from here, recording it.
async fn remove_last(
    ctx: &Context,
    spec: &ClusterSpec,
    g: &GroupSpec,
    rev: u64,
    last: &Instance,
    start: Instant,
) -> Result<ExitCode, MainError> {
    // Taking the store's epoch stops the last controller from writing while
    // its machine goes (it may win it back; it has nothing left to do).
    let epoch = ctx.store.campaign(IDENTITY).await.map_err(failed)?;
    // Look once more, under that epoch: same revision, same last machine.
    still_at(ctx, rev).await?;
    let (desired, observed, journal) = snapshot(ctx, spec).await.map_err(failed)?;
    if !matches!(last_manager(&desired, &observed, &journal, &g.name),
        LastManager::Ready(i) if i.id == last.id)
    {
        return Err(MainError::Failed(anyhow::anyhow!(
            "the cluster changed just before the last step: nothing was destroyed; run drover destroy {} again",
            g.name
        )));
    }
    note(ctx, epoch, g, &last.id, "started").await;
    let provider = &ctx.providers[&g.instance.provider];
    provider.destroy(&last.id).await.map_err(|e| {
        MainError::Failed(anyhow::anyhow!(
            "could not destroy {}, the last manager: {e}; run drover destroy {} again",
            last.id,
            g.name
        ))
    })?;
    // Its controller went with it, but may have taken the epoch back just
    // before: take it again to record the outcome.
    let epoch = ctx.store.campaign(IDENTITY).await.unwrap_or(epoch);
    note(ctx, epoch, g, &last.id, "ok").await;
    settle(ctx, spec, rev, epoch).await;
    println!(
        "destroyed {}, the last manager of {}, after {:.0}s: the swarm is gone",
        last.id,
        g.name,
        start.elapsed().as_secs_f64()
    );
    Ok(ExitCode::SUCCESS)
}

/// A group the acting controller published as blocked, with its reason.
async fn blocked(ctx: &Context) -> Option<(String, String)> {
    let doc = StatusDoc::read(ctx.store.as_ref()).await.ok()??;
    let g = doc.blocked()?;
    Some((g.name.clone(), g.reason.clone().unwrap_or_default()))
}

/// Records the final step in the audit log. A store kept in the swarm
/// itself is gone with its last manager: nothing can be written then.
async fn note(ctx: &Context, epoch: Epoch, g: &GroupSpec, instance: &str, outcome: &str) {
    let event = Event {
        at_ms: wall_ms(),
        controller: IDENTITY.into(),
        group: Some(g.name.clone()),
        op: None,
        action: "destroy instance".into(),
        target: Some(instance.into()),
        outcome: outcome.into(),
        reason: "the swarm's last manager, removed from outside the swarm".into(),
    };
    if let Err(e) = ctx.store.append_event(epoch, &event).await {
        tracing::info!(error = %e, "the final destroy is not in the event log");
    }
}

/// Marks the revision converged and publishes a status showing the empty
/// cluster, so `drover status` and `drover history` tell the truth after.
async fn settle(ctx: &Context, spec: &ClusterSpec, rev: u64, epoch: Epoch) {
    let Ok((desired, observed, journal)) = snapshot(ctx, spec).await else {
        return;
    };
    let plan = plan(PlanInput {
        desired: &desired,
        observed: &observed,
        journal: &journal,
        memory: &Memory::default(),
        now: 0,
        nonce: 0,
    });
    let members = member_status(&desired, &observed);
    let doc = status_json(IDENTITY, epoch, rev, &plan, &members, journal.len());
    let written = async {
        ctx.store.mark_converged(epoch, rev).await?;
        ctx.store.publish_status(epoch, doc).await
    };
    if let Err(e) = written.await {
        tracing::info!(error = %e, "no final status written (the store may have gone with the swarm)");
    }
}

fn confirmed(g: &GroupSpec) -> Result<bool, MainError> {
    let group = &g.name;
    if !std::io::stdin().is_terminal() {
        return Err(MainError::BadInput(format!(
            "destroy {group} needs confirmation and stdin is not a terminal: pass --yes"
        )));
    }
    if g.role == Role::Manager {
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

fn failed(e: drover_spi::StoreError) -> MainError {
    MainError::Failed(e.into())
}
