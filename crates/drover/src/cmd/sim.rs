//! `drover sim rollout`: a whole simulated rollout, step by step.

use crate::cli::{Output, SimRollout};
use crate::error::MainError;
use crate::spec_file;
use drover_core::spec::ClusterSpec;
use drover_sim::{Faults, Outcome, Runner, Timings};
use std::path::Path;
use std::process::ExitCode;

/// The spec to roll to: `to`, or `from` with every group forced to roll.
pub fn target(from: &ClusterSpec, to: Option<&Path>) -> Result<ClusterSpec, MainError> {
    match to {
        Some(path) => spec_file::load(path),
        None => {
            let mut forced = from.clone();
            for g in &mut forced.groups {
                // As `rollout.after` would: a new hash, nothing else changed.
                g.rollout_after = Some(g.rollout_after.unwrap_or(0) + 1);
            }
            Ok(forced)
        }
    }
}

/// Brings `from` up and rolls to `to` in the simulator.
pub fn simulate(
    from: &ClusterSpec,
    to: &ClusterSpec,
    seed: u64,
    faults: Faults,
) -> Result<(Runner, Outcome), MainError> {
    // The system clock starts the virtual one: windows open when they would.
    let wall = drover_controller::wall_ms();
    let (runner, up, rolled) =
        drover_sim::rollout(from, to, seed, faults, Timings::default(), wall);
    if up != Outcome::Converged {
        return Err(MainError::Failed(anyhow::anyhow!(
            "the simulated cluster did not come up: {up}"
        )));
    }
    Ok((runner, rolled))
}

/// The fault arguments are rates per minute and probabilities.
fn fault_rates(args: &SimRollout) -> Result<(), MainError> {
    for (name, p) in [
        ("--crashes-per-min", args.crashes_per_min),
        ("--leader-changes-per-min", args.leader_changes_per_min),
    ] {
        if !(0.0..=60.0).contains(&p) {
            return Err(MainError::BadInput(format!(
                "{name} {p} is out of range: give a rate between 0 and 60"
            )));
        }
    }
    for (name, p) in [
        ("--never-join", args.never_join),
        ("--provision-failure", args.provision_failure),
    ] {
        if !(0.0..=1.0).contains(&p) {
            return Err(MainError::BadInput(format!(
                "{name} {p} is not a probability: give a number between 0 and 1"
            )));
        }
    }
    Ok(())
}

pub fn rollout(args: &SimRollout) -> Result<ExitCode, MainError> {
    fault_rates(args)?;
    let from = spec_file::load(&args.file)?;
    let to = target(&from, args.to.as_deref())?;
    let faults = Faults {
        crashes_per_min: args.crashes_per_min,
        never_join: args.never_join,
        provision_failure: args.provision_failure,
        leader_changes_per_min: args.leader_changes_per_min,
        until: args.faults_for.as_millis() as u64,
        ..Faults::default()
    };
    let (runner, outcome) = simulate(&from, &to, args.seed, faults)?;
    let start = runner.trace.first().map_or(0, |t| t.at);
    if args.output == Output::Json {
        let doc = serde_json::json!({
            "outcome": outcome,
            "violations": runner.violations,
            "waits": runner.window_waits,
            "steps": runner.trace,
        });
        println!(
            "{}",
            serde_json::to_string_pretty(&doc).map_err(anyhow::Error::from)?
        );
    } else {
        println!(
            "{:>9}  {:<10} {:<5} {:<18} STEP",
            "TIME", "GROUP", "FT", "LEADER"
        );
        for t in &runner.trace {
            let at = (t.at - start) as f64 / 1000.0;
            let leader = t.leader.as_deref().unwrap_or("(none)");
            let leader = if leader.len() > 18 {
                &leader[leader.len() - 18..]
            } else {
                leader
            };
            println!(
                "{:>8.1}s  {:<10} {:<5} {:<18} {}",
                at,
                t.group.as_deref().unwrap_or("-"),
                format!("{}→{}", t.ft_before, t.ft_after),
                leader,
                t.what
            );
        }
        let total = runner.trace.last().map_or(0, |t| t.at - start) as f64 / 1000.0;
        println!(
            "\n{outcome} after {total:.1}s simulated, {} steps, {} controller passes, {} safety violations",
            runner.trace.len(),
            runner.passes,
            runner.violations.len()
        );
        for w in runner.waiting_for_windows() {
            let opens = w.opens.as_deref().unwrap_or("never again");
            println!(
                "{}: still waiting for maintenance window {}, next open {opens}",
                w.group, w.window
            );
        }
        for v in &runner.violations {
            println!("VIOLATION: {v}");
        }
    }
    Ok(
        if outcome == Outcome::Converged && runner.violations.is_empty() {
            ExitCode::SUCCESS
        } else {
            ExitCode::from(3)
        },
    )
}
