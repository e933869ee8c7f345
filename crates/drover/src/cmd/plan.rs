//! `drover plan -f FILE --sim`: the ordered steps and the FT timeline.

use crate::cli::{LocalArgs, Output, StoreArgs};
use crate::cmd::commit::validated;
use crate::cmd::sim::{simulate, target};
use crate::error::MainError;
use crate::{spec_file, wiring};
use drover_core::plan::{Phase, SwarmProblem};
use drover_core::quorum::tolerance_when_whole;
use drover_core::retire::with_file;
use drover_core::spec::{ClusterSpec, Role};
use drover_sim::{Faults, Outcome, Runner, WindowWait};
use std::path::Path;
use std::process::ExitCode;
use std::time::Duration;

/// The manager group's roll floor and converged fault tolerance (0 and 0
/// without a manager group).
fn floors(desired: &ClusterSpec) -> (i64, i64) {
    desired
        .groups
        .iter()
        .find(|g| g.role == Role::Manager)
        .map_or((0, 0), |g| {
            let n = g.allocation.size();
            (
                i64::from(g.roll_floor()),
                i64::from(tolerance_when_whole(n)),
            )
        })
}

/// The whole change against a simulated cluster, with the FT timeline, the
/// waits for maintenance windows, and, when the roll did not finish, why
/// (exit 3 blocked or stuck, 4 past the simulation's horizon).
pub fn run(file: &Path, from: Option<&Path>, output: Output) -> Result<ExitCode, MainError> {
    let desired = spec_file::load(file)?;
    let current = match from {
        Some(p) => spec_file::load(p)?,
        None => desired.clone(),
    };
    // Without --from, show a full roll of the file against itself.
    let desired = if from.is_none() {
        target(&desired, None)?
    } else {
        desired
    };
    let (runner, outcome) = simulate(&current, &desired, 1, Faults::default())?;
    let code = match outcome {
        Outcome::Converged => ExitCode::SUCCESS,
        Outcome::Blocked(_) | Outcome::Stuck(_) => ExitCode::from(3),
        Outcome::TimedOut(_) => ExitCode::from(4),
    };
    let horizon = Duration::from_millis(drover_sim::horizon(&desired));
    if output == Output::Json {
        let doc = serde_json::json!({
            "outcome": outcome,
            "horizon_ms": horizon.as_millis() as u64,
            "waits": runner.window_waits,
            "groups": runner.last_plan.as_ref().map(|p| &p.groups),
            "steps": runner.trace,
        });
        println!(
            "{}",
            serde_json::to_string_pretty(&doc).map_err(anyhow::Error::from)?
        );
        return Ok(code);
    }
    let finished = outcome == Outcome::Converged;
    // No step, no change: the tolerance is the cluster's, not a default 0.
    let min = runner
        .trace
        .iter()
        .flat_map(|t| [t.ft_before, t.ft_after])
        .min();
    let swarm = has_managers(&desired);
    match min {
        None if finished && runner.window_waits.is_empty() && !swarm => {
            println!("no change: nothing to do (plain groups only: no swarm)")
        }
        None if finished && runner.window_waits.is_empty() => println!(
            "no change: nothing to do; manager fault tolerance stays {}",
            runner.world.settled_fault_tolerance()
        ),
        None => println!("no step was taken"),
        Some(min) => timeline(&runner, &desired, min, finished),
    }
    if !finished {
        cut_short(&runner, &outcome, horizon);
    }
    Ok(code)
}

/// Whether the cluster has a swarm whose managers' fault tolerance a plan
/// keeps: a cluster of plain groups only has none to show.
fn has_managers(desired: &ClusterSpec) -> bool {
    desired.groups.iter().any(|g| g.role == Role::Manager)
}

/// One wait for a window, as a `-` line among the steps.
fn print_wait(runner: &Runner, w: &WindowWait) {
    println!(
        "{:>4}  {:<10} {:<9} {}",
        "-",
        w.group,
        "",
        waited(runner, w)
    );
}

/// The steps and the waits for windows in time order, then the summary.
fn timeline(runner: &Runner, desired: &ClusterSpec, min: i64, finished: bool) {
    let (floor, converged) = floors(desired);
    let swarm = has_managers(desired);
    let steps = &runner.trace;
    let mut waits = runner.window_waits.iter().peekable();
    println!("{:>4}  {:<10} {:<9} STEP", "#", "GROUP", "FT");
    let mut leader = steps.first().and_then(|t| t.leader.clone());
    for (i, t) in steps.iter().enumerate() {
        while let Some(w) = waits.next_if(|w| w.from <= t.at) {
            print_wait(runner, w);
        }
        // A step that leaves the raft below the group's converged fault
        // tolerance says so (pets replaced in place, or a floor given lower).
        let below = if swarm && t.ft_after < converged {
            format!("  [below the converged {converged}]")
        } else {
            String::new()
        };
        println!(
            "{:>4}  {:<10} {:<9} {}{below}",
            i + 1,
            t.group.as_deref().unwrap_or("-"),
            match swarm {
                true => format!("{} → {}", t.ft_before, t.ft_after),
                false => "-".into(),
            },
            t.what
        );
        if t.leader != leader {
            println!(
                "      {:<10} {:<9} leadership moves to {}",
                "",
                "",
                t.leader.as_deref().unwrap_or("(election)")
            );
            leader = t.leader.clone();
        }
    }
    for w in waits {
        print_wait(runner, w);
    }
    let before = if finished {
        ""
    } else {
        " before the roll stopped"
    };
    if !swarm {
        println!(
            "\n{} steps{before}; plain groups only: no swarm, no manager fault tolerance to keep",
            steps.len()
        );
        return;
    }
    let held = if min >= floor { "held" } else { "NOT held" };
    println!(
        "\n{} steps{before}; minimum manager fault tolerance during the change: {min} (the roll's floor {floor}: {held})",
        steps.len()
    );
}

/// One wait for a window, as the timeline shows it: how long, for which
/// window, until when.
fn waited(runner: &Runner, w: &WindowWait) -> String {
    let Some((opens_ms, opens)) = w.opens_ms.zip(w.opens.as_deref()) else {
        return format!(
            "the roll waits: maintenance window {} never opens again",
            w.window
        );
    };
    let wall = i64::try_from(runner.world.wall_origin + w.from).unwrap_or(i64::MAX);
    let wait = Duration::from_secs(u64::try_from((opens_ms - wall) / 60_000).unwrap_or(0) * 60);
    format!(
        "the roll waits {} for maintenance window {}, which opens {opens}",
        humantime::format_duration(wait),
        w.window
    )
}

/// Why the roll did not finish, and where each unfinished group stands.
fn cut_short(runner: &Runner, outcome: &Outcome, horizon: Duration) {
    let why = match outcome {
        Outcome::Converged => return,
        Outcome::Blocked(why) => format!("a group is blocked: {why}"),
        Outcome::Stuck(why) => format!("nothing left to wait for: {why}"),
        Outcome::TimedOut(_) => format!(
            "the simulation's horizon of {} passed first",
            humantime::format_duration(horizon)
        ),
    };
    println!("the roll did NOT finish: {why}");
    let groups = runner.last_plan.iter().flat_map(|p| &p.groups);
    for g in groups.filter(|g| g.phase != Phase::Converged) {
        let waiting = runner.waiting_for_windows().find(|w| w.group == g.name);
        let state = match (waiting, &g.reason) {
            (Some(w), _) => match &w.opens {
                Some(at) => format!(
                    "waiting for maintenance window {}, next open {at}",
                    w.window
                ),
                None => format!("maintenance window {} never opens again", w.window),
            },
            (None, Some(reason)) => reason.clone(),
            (None, None) => phase_name(g.phase),
        };
        println!(
            "  {}: {}/{} members on the new config; {state}",
            g.name, g.current, g.members
        );
    }
}

/// The next steps against the live cluster: one observation, one planning
/// pass with the file as the desired state; nothing is written.
pub async fn live(
    file: &Path,
    store: &StoreArgs,
    local: &LocalArgs,
    output: Output,
) -> Result<ExitCode, MainError> {
    let spec = spec_file::load(file)?;
    let ctx = match wiring::reader(store, local, "plan").await {
        Ok(ctx) => ctx,
        // A swarm store no manager of which answers from here: the swarm
        // may well run; only this command cannot see it.
        Err(MainError::Failed(e)) if store.url.starts_with("swarm") => {
            println!("{}", cannot_see(&e.to_string()));
            return Ok(ExitCode::from(1));
        }
        Err(e) => return Err(e),
    };
    // What `apply` of this file would commit must be valid, or there is no
    // plan to show: refused here as `apply` refuses it.
    let current = ctx.store.desired().await.map_err(anyhow::Error::from)?;
    let previous = current.as_ref().map(|r| &r.spec);
    validated(
        previous,
        with_file(previous, &spec, false),
        "apply of this file",
    )?;
    let preview = drover_controller::preview_with_rollout(&ctx, &spec)
        .await
        .map_err(anyhow::Error::from)?;
    if output == Output::Json {
        println!(
            "{}",
            serde_json::to_string_pretty(&preview).map_err(anyhow::Error::from)?
        );
        return Ok(ExitCode::SUCCESS);
    }
    let plan = &preview.plan;
    if matches!(plan.swarm.problem, Some(SwarmProblem::Absent)) && current.is_some() {
        // A cluster is declared, yet no engine was given to look at it
        // through: say what this command lacks, not "no swarm".
        println!(
            "{}",
            cannot_see("no manager's engine is reachable from what this command was given")
        );
    } else {
        swarm_line(&plan.swarm);
    }
    let steps: Vec<&drover_core::plan::Action> = plan
        .actions
        .iter()
        .filter(|a| !matches!(a, drover_core::plan::Action::MarkDone { .. }))
        .collect();
    if steps.is_empty() {
        println!("no step to take now");
    }
    for (i, a) in steps.iter().enumerate() {
        println!("{:>4}  {}", i + 1, a.describe());
    }
    for g in &plan.groups {
        println!(
            "{:<14} {}{}{}",
            g.name,
            phase_name(g.phase),
            g.reason
                .as_ref()
                .map(|r| format!(": {r}"))
                .unwrap_or_default(),
            g.window
                .as_ref()
                .map(|w| format!(" ({w})"))
                .unwrap_or_default()
        );
    }
    for line in &plan.explanation {
        println!("  why: {line}");
    }
    print_rollout(&preview.rollout);
    println!(
        "(the next steps only; `drover plan --sim` shows a whole rollout with its fault-tolerance timeline)"
    );
    Ok(ExitCode::SUCCESS)
}

/// The rollout's order: each due member, its engine's version now, and
/// what the roll brings it to.
fn print_rollout(rollout: &[drover_core::plan::RollEntry]) {
    if rollout.is_empty() {
        return;
    }
    println!("rollout order (what the roll takes, first to last):");
    println!(
        "{:>4}  {:<12} {:<20} {:<14} {:<10} CHANGE",
        "#", "GROUP", "MACHINE", "NODE", "ENGINE"
    );
    for (i, e) in rollout.iter().enumerate() {
        let how = if e.in_place {
            "updated in place"
        } else {
            "replaced by a new machine"
        };
        println!(
            "{:>4}  {:<12} {:<20} {:<14} {:<10} {how}: config {} → {}{}",
            i + 1,
            e.group,
            e.instance,
            e.node.as_deref().map_or("-", short_id),
            e.engine_version.as_deref().unwrap_or("?"),
            e.from.as_deref().unwrap_or("none"),
            e.to,
            if e.leader { " (the leader: last)" } else { "" }
        );
    }
}

/// A node id's first 12 characters, as `docker node ls` shows it.
fn short_id(id: &str) -> &str {
    &id[..id.len().min(12)]
}

/// The swarm line when the swarm cannot be looked at from here (`why`).
fn cannot_see(why: &str) -> String {
    format!(
        "swarm: cannot be seen from here ({why}): give --local-dir (the machines) or \
         --store swarm:ENDPOINT of a running manager"
    )
}

/// The swarm line of a swarm seen: its managers and fault tolerance.
fn swarm_line(swarm: &drover_core::plan::SwarmStatus) {
    println!(
        "swarm: {} managers, {} reachable, fault tolerance {}{}",
        swarm.members,
        swarm.reachable,
        swarm
            .fault_tolerance
            .map_or_else(|| "unknown".to_string(), |ft| ft.to_string()),
        swarm
            .problem
            .as_ref()
            .map(|p| format!(" ({p})"))
            .unwrap_or_default()
    );
}

/// A phase as `status` and the JSON spell it (`unobservable`), not as Rust does.
fn phase_name(phase: drover_core::plan::Phase) -> String {
    serde_json::to_value(phase)
        .ok()
        .and_then(|v| v.as_str().map(str::to_string))
        .unwrap_or_default()
}
