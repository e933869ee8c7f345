//! `drover gc`: what garbage collection finds, by which rule, on what
//! evidence (docs/gc.md).
//!
//! Only the leader's controller collects (journaled, fenced, through the
//! planner's gates); the CLI never destroys anything. It makes one fresh
//! observation against the committed spec and runs the planner on it, as
//! `drover plan --store` does; `--dry-run` prints that list, and without it
//! the command follows until the controller has collected every listed item.

use crate::cli::{GcArgs, Output};
use crate::error::MainError;
use crate::wiring;
use drover_controller::procedure::acting::acting;
use drover_controller::procedure::follow::{FollowEnd, collection};
use drover_controller::{StatusDoc, wall_ms};
use drover_core::plan::{Garbage, Phase, Plan};
use std::collections::BTreeSet;
use std::process::ExitCode;
use std::time::{Duration, Instant};

pub async fn run(args: &GcArgs) -> Result<ExitCode, MainError> {
    let ctx = wiring::observer(&args.live.store, &args.live.local, "gc").await?;
    let Some(revision) = ctx.store.desired().await.map_err(anyhow::Error::from)? else {
        println!("nothing was applied to this store yet: there is nothing to collect");
        return Ok(ExitCode::SUCCESS);
    };
    let plan = drover_controller::preview(&ctx, &revision.spec)
        .await
        .map_err(|e| MainError::Failed(e.into()))?;
    print(&plan, revision.rev, args.live.output)?;
    if args.dry_run {
        return Ok(ExitCode::SUCCESS);
    }
    let start = Instant::now();
    let mut waiting = awaited(&plan);
    let providers = revision.spec.groups.iter();
    let providers: BTreeSet<String> = providers.map(|g| g.instance.provider_key()).collect();
    let mut said = Said::default();
    let seen = |left: &[String], status: Option<&StatusDoc>| {
        said.progress(start, left, status, &providers);
    };
    let end = collection(
        &ctx,
        &revision.spec,
        &mut waiting,
        awaited,
        args.timeout,
        seen,
    )
    .await
    .map_err(|e| MainError::Failed(e.into()))?;
    Ok(match end {
        FollowEnd::Converged => {
            println!(
                "collected everything listed after {:.0}s",
                start.elapsed().as_secs_f64()
            );
            ExitCode::SUCCESS
        }
        FollowEnd::Blocked { group, reason } => {
            eprintln!("group {group} is blocked: {reason}");
            ExitCode::from(3)
        }
        FollowEnd::TimedOut => {
            eprintln!(
                "timed out after {}: {} item(s) not collected yet: {}",
                humantime::format_duration(args.timeout),
                waiting.len(),
                waiting.join(", ")
            );
            ExitCode::from(4)
        }
    })
}

/// What a collection's follow last said, so it speaks when something
/// changed, and otherwise every half minute.
#[derive(Default)]
struct Said {
    line: String,
    at: Option<Instant>,
}

impl Said {
    /// A line saying what is still awaited and who collects it, or that
    /// no controller acts on the store.
    fn progress(
        &mut self,
        start: Instant,
        left: &[String],
        status: Option<&StatusDoc>,
        providers: &BTreeSet<String>,
    ) {
        if left.is_empty() {
            return;
        }
        let who = match acting(status, wall_ms()) {
            Ok(doc) => format!("the leader's controller ({}) collects them", doc.controller),
            Err(absent) => format!(
                "no controller collects them ({absent}): is one running with provider {}?",
                providers
                    .iter()
                    .map(String::as_str)
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        };
        let line = format!("{} item(s) left: {}; {who}", left.len(), left.join(", "));
        let again = self
            .at
            .is_none_or(|at| at.elapsed() >= Duration::from_secs(30));
        if line != self.line || again {
            println!("[{:>4.0}s] waiting: {line}", start.elapsed().as_secs_f64());
            self.line = line;
            self.at = Some(Instant::now());
        }
    }
}

/// Items the controller will collect without anyone's help (not those kept
/// on purpose, such as an orphan that is a swarm manager).
fn awaited(plan: &Plan) -> Vec<String> {
    plan.garbage
        .iter()
        .filter(|g| !g.state.is_kept())
        .map(|g| g.collection.item.clone())
        .collect()
}

fn print(plan: &Plan, rev: u64, output: Output) -> Result<(), MainError> {
    let blocked: Vec<(&str, &str)> = plan
        .groups
        .iter()
        .filter(|g| g.phase == Phase::Blocked)
        .map(|g| (g.name.as_str(), g.reason.as_deref().unwrap_or("")))
        .collect();
    if output == Output::Json {
        let doc = serde_json::json!({
            "revision": rev,
            "garbage": plan.garbage,
            "blocked": blocked
                .iter()
                .map(|(g, why)| serde_json::json!({"group": g, "reason": why}))
                .collect::<Vec<_>>(),
        });
        println!(
            "{}",
            serde_json::to_string_pretty(&doc).map_err(anyhow::Error::from)?
        );
        return Ok(());
    }
    println!(
        "desired revision {rev}: {} item(s) found (grace periods start at this observation; the leader's controller times them from its own first sighting)",
        plan.garbage.len()
    );
    if !plan.garbage.is_empty() {
        println!("\n{:<14} {:<13} {:<28} STATE", "GROUP", "RULE", "ITEM");
    }
    for Garbage {
        group,
        collection,
        state,
    } in &plan.garbage
    {
        println!(
            "{:<14} {:<13} {:<28} {state}\n{:<14} evidence: {}",
            group,
            collection.rule.as_str(),
            collection.item,
            "",
            collection.evidence
        );
    }
    for (group, why) in &blocked {
        println!("\nBLOCKED {group}: {why}");
    }
    if let Some(problem) = &plan.swarm.problem {
        println!("\nswarm: {problem} (nothing is collected without a swarm that answers)");
    }
    Ok(())
}
