//! `drover destroy GROUP` when the group's provider cannot be described,
//! and `--forget-machines` (issue 38): refused without the flag (naming
//! the machines drover last knew of and where it learnt them), refused
//! with it while the provider answers, and otherwise the group leaves the
//! desired state through
//! [`drover_controller::procedure::forget`]: nothing is destroyed, so
//! what may still run (and cost money) is printed.

use crate::cmd::commit::operator;
use crate::error::MainError;
use drover_controller::Context;
use drover_controller::procedure::commit::CommitError;
use drover_controller::procedure::forget::{self, ForgetError, Forgotten, Survey};
use drover_core::forget::{Known, Reach};
use drover_core::spec::{ClusterSpec, GroupSpec, Role, validate_forget};
use std::process::ExitCode;

/// What destroy does about `survey`'s group: `Ok(false)` go on as usual
/// (its provider answers, or no flag and nothing says it is gone);
/// `Ok(true)` forget it (gone, and the flag given); else the refusal.
pub(crate) fn decide(g: &GroupSpec, survey: &Survey, flag: bool) -> Result<bool, MainError> {
    let group = &g.name;
    match (&survey.reach, flag) {
        (Reach::Gone { why, .. }, false) => Err(MainError::BadInput(format!(
            "cannot destroy {group}: {why}, so its machines cannot be destroyed. {}If its provider is gone for good, run drover destroy {group} --forget-machines to take the group out of the desired state and leave those machines to you; if it is not, configure it here (--plugin, --local-dir, ...) and run this again",
            machines(&survey.known)
        ))),
        (Reach::Gone { .. }, true) if g.role == Role::Manager => Err(MainError::BadInput(format!(
            "--forget-machines: {group} is a manager group: it carries the swarm and its controllers, and is never forgotten; bring its provider back and run drover destroy {group}"
        ))),
        (Reach::Gone { .. }, true) => Ok(true),
        (Reach::Answers(why), true) => Err(MainError::BadInput(format!(
            "--forget-machines: {why}: destroy the group properly, without --forget-machines (its machines are then retired and destroyed)"
        ))),
        (Reach::Unknown(why), true) => Err(MainError::BadInput(format!(
            "--forget-machines: {why}: drover cannot tell whether it is gone; the acting controller says so in its status (the group unobservable) once it cannot describe it: run this again then, with the provider configured here (--plugin, --local-dir, ...)"
        ))),
        (Reach::Answers(_) | Reach::Unknown(_), false) => Ok(false),
    }
}

/// The machines drover last knew of, as a sentence ending in a space.
fn machines(known: &[Known]) -> String {
    if known.is_empty() {
        return "drover knows of no machine of it (no published member, no journaled operation, no swarm node labelled with it). ".into();
    }
    let list: Vec<String> = known.iter().map(ToString::to_string).collect();
    format!("Machines drover last knew of: {}. ", list.join("; "))
}

/// Forgets `g` (checked first: nothing is written when the desired state
/// without it would not be valid) and tells the operator what is left.
pub(crate) async fn run(
    ctx: &Context,
    survey: &Survey,
    g: &GroupSpec,
    (rev, spec): (u64, &ClusterSpec),
) -> Result<ExitCode, MainError> {
    let group = &g.name;
    let without = validate_forget(spec, group).map_err(|refused| MainError::Refused {
        what: format!("destroy {group} --forget-machines"),
        refused,
    })?;
    let done = forget::forget(ctx, survey, g, (rev, &without), &operator())
        .await
        .map_err(|e| match e {
            ForgetError::Commit(c @ CommitError::Conflict { .. }) => {
                MainError::BadInput(c.to_string())
            }
            e => MainError::Failed(e.into()),
        })?;
    say(survey, g, &done);
    Ok(ExitCode::SUCCESS)
}

/// What was forgotten, and what may still run.
fn say(survey: &Survey, g: &GroupSpec, done: &Forgotten) {
    let group = &g.name;
    println!(
        "committed revision {}: {group} left the desired state; nothing was destroyed (provider {} cannot be described)",
        done.rev,
        g.instance.provider_key()
    );
    if survey.known.is_empty() {
        println!("drover knew of no machine of {group}");
    } else {
        println!(
            "these machines may still run, and cost money, until you destroy them where they live (events: action forget):"
        );
        for k in &survey.known {
            println!("  {k}");
        }
    }
    if !done.operations.is_empty() {
        println!(
            "left the journal: {} operation(s) of {group}: {}",
            done.operations.len(),
            done.operations.join(", ")
        );
    }
    for node in &done.removed {
        println!("removed swarm node {node} (down)");
    }
    for (node, why) in &done.left {
        println!("left swarm node {node}: {why}");
    }
}
