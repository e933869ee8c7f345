//! Operator controls and the audit trail: `pause`, `resume`, `events`, `history`.

use crate::cli::{Output, StoreArgs};
use crate::error::MainError;
use crate::wiring;
use drover_controller::wall_ms;
use std::process::ExitCode;
use std::time::Duration;

/// Pauses or resumes `group` (a group the desired state declares).
pub async fn set_paused(
    group: &str,
    paused: bool,
    store: &StoreArgs,
) -> Result<ExitCode, MainError> {
    let store = wiring::store(store).await?;
    let desired = store.desired().await.map_err(anyhow::Error::from)?;
    let known: Vec<String> = desired
        .iter()
        .flat_map(|r| r.spec.groups.iter().map(|g| g.name.clone()))
        .collect();
    if !known.iter().any(|g| g == group) {
        return Err(MainError::BadInput(format!(
            "no group named {group} in the desired state (groups: {})",
            known.join(", ")
        )));
    }
    let mut controls = store.controls().await.map_err(anyhow::Error::from)?;
    let changed = if paused {
        controls.paused.insert(group.to_string())
    } else {
        controls.paused.remove(group)
    };
    store
        .set_controls(&controls)
        .await
        .map_err(anyhow::Error::from)?;
    let state = if paused {
        "paused: no new operation starts; those in flight finish"
    } else {
        "resumed"
    };
    println!(
        "{group} {state}{}",
        if changed { "" } else { " (it already was)" }
    );
    Ok(ExitCode::SUCCESS)
}

/// Prints the audit log since `since` ago.
pub async fn events(
    since: Duration,
    store: &StoreArgs,
    output: Output,
) -> Result<ExitCode, MainError> {
    let store = wiring::store(store).await?;
    let from = wall_ms().saturating_sub(since.as_millis() as u64);
    let events = store.events(from).await.map_err(anyhow::Error::from)?;
    if output == Output::Json {
        println!(
            "{}",
            serde_json::to_string_pretty(&events).map_err(anyhow::Error::from)?
        );
        return Ok(ExitCode::SUCCESS);
    }
    println!(
        "{:<9} {:<10} {:<28} {:<7} {:<40} OUTCOME",
        "AGO", "GROUP", "OPERATION", "ACTION", "WHAT"
    );
    for e in &events {
        let ago = humantime::format_duration(Duration::from_secs(
            wall_ms().saturating_sub(e.at_ms) / 1000,
        ))
        .to_string();
        println!(
            "{:<9} {:<10} {:<28} {:<7} {:<40} {}",
            ago,
            e.group.as_deref().unwrap_or("-"),
            e.op.as_deref().unwrap_or("-"),
            e.action,
            e.reason,
            e.outcome
        );
    }
    Ok(ExitCode::SUCCESS)
}

/// Prints the desired-state revisions, newest last.
pub async fn history(store: &StoreArgs, output: Output) -> Result<ExitCode, MainError> {
    let store = wiring::store(store).await?;
    let revisions = store.history().await.map_err(anyhow::Error::from)?;
    if output == Output::Json {
        println!(
            "{}",
            serde_json::to_string_pretty(&revisions).map_err(anyhow::Error::from)?
        );
        return Ok(ExitCode::SUCCESS);
    }
    println!(
        "{:<5} {:<10} {:<9} {:<24} {:<22} MESSAGE",
        "REV", "CONVERGED", "ROLLBACK", "WHO", "AGO"
    );
    for r in &revisions {
        let ago = humantime::format_duration(Duration::from_secs(
            wall_ms().saturating_sub(r.provenance.at_ms) / 1000,
        ))
        .to_string();
        println!(
            "{:<5} {:<10} {:<9} {:<24} {:<22} {}",
            r.rev,
            if r.converged { "yes" } else { "no" },
            if r.is_rollback { "yes" } else { "" },
            r.provenance.who,
            ago,
            r.provenance.message
        );
    }
    Ok(ExitCode::SUCCESS)
}
