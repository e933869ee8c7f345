//! `drover plan -f FILE --sim`: the ordered steps and the FT timeline.

use crate::cli::{LocalArgs, Output, StoreArgs};
use crate::cmd::commit::validated;
use crate::cmd::sim::{simulate, target};
use crate::error::MainError;
use crate::{spec_file, wiring};
use drover_core::quorum::tolerance_when_whole;
use drover_core::retire::with_file;
use drover_core::spec::{ClusterSpec, Role};
use drover_sim::Faults;
use std::path::Path;
use std::process::ExitCode;

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

/// The whole change against a simulated cluster, with the FT timeline.
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
    let steps: Vec<&drover_sim::TraceLine> = runner.trace.iter().collect();
    if output == Output::Json {
        let doc = serde_json::json!({ "outcome": outcome, "steps": steps });
        println!(
            "{}",
            serde_json::to_string_pretty(&doc).map_err(anyhow::Error::from)?
        );
        return Ok(ExitCode::SUCCESS);
    }
    // No step, no change: the tolerance is the cluster's, not a default 0.
    let Some(min) = steps.iter().flat_map(|t| [t.ft_before, t.ft_after]).min() else {
        println!(
            "no change: nothing to do; manager fault tolerance stays {}",
            runner.world.settled_fault_tolerance()
        );
        return Ok(ExitCode::SUCCESS);
    };
    let (floor, converged) = floors(&desired);
    println!("{:>4}  {:<10} {:<9} STEP", "#", "GROUP", "FT");
    let mut leader = steps.first().and_then(|t| t.leader.clone());
    for (i, t) in steps.iter().enumerate() {
        // A step that leaves the raft below the group's converged fault
        // tolerance says so (pets replaced in place, or a floor given lower).
        let below = if t.ft_after < converged {
            format!("  [below the converged {converged}]")
        } else {
            String::new()
        };
        println!(
            "{:>4}  {:<10} {:<9} {}{below}",
            i + 1,
            t.group.as_deref().unwrap_or("-"),
            format!("{} → {}", t.ft_before, t.ft_after),
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
    let held = if min >= floor { "held" } else { "NOT held" };
    println!(
        "\n{} steps; minimum manager fault tolerance during the change: {min} (the roll's floor {floor}: {held})",
        steps.len()
    );
    Ok(ExitCode::SUCCESS)
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
    let ctx = wiring::observer(store, local, "plan").await?;
    // What `apply` of this file would commit must be valid, or there is no
    // plan to show: refused here as `apply` refuses it.
    let current = ctx.store.desired().await.map_err(anyhow::Error::from)?;
    let previous = current.as_ref().map(|r| &r.spec);
    validated(
        previous,
        with_file(previous, &spec, false),
        "apply of this file",
    )?;
    let plan = drover_controller::preview(&ctx, &spec)
        .await
        .map_err(anyhow::Error::from)?;
    if output == Output::Json {
        println!(
            "{}",
            serde_json::to_string_pretty(&plan).map_err(anyhow::Error::from)?
        );
        return Ok(ExitCode::SUCCESS);
    }
    println!(
        "swarm: {} managers, {} reachable, fault tolerance {}{}",
        plan.swarm.members,
        plan.swarm.reachable,
        plan.swarm
            .fault_tolerance
            .map_or_else(|| "unknown".to_string(), |ft| ft.to_string()),
        plan.swarm
            .problem
            .as_ref()
            .map(|p| format!(" ({p})"))
            .unwrap_or_default()
    );
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
    println!(
        "(the next steps only; `drover plan --sim` shows a whole rollout with its fault-tolerance timeline)"
    );
    Ok(ExitCode::SUCCESS)
}

/// A phase as `status` and the JSON spell it (`unobservable`), not as Rust does.
fn phase_name(phase: drover_core::plan::Phase) -> String {
    serde_json::to_value(phase)
        .ok()
        .and_then(|v| v.as_str().map(str::to_string))
        .unwrap_or_default()
}
