//! Operator controls and the audit trail: `pause`, `resume`, `events`, `history`.

use crate::cli::{Output, StoreArgs};
use crate::cmd::ago::ago;
use crate::error::MainError;
use crate::wiring;
use drover_controller::{StatusDoc, wall_ms};
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
    if known.is_empty() {
        return Err(MainError::BadInput(format!(
            "no group named {group}: the store holds no desired state yet; apply a cluster \
             file first (drover apply -f FILE)"
        )));
    }
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

/// Holds (or releases) an instance: while held, drover neither heals,
/// retires nor rolls it, so an operator can debug it in place.
pub async fn set_held(
    instance: &str,
    held: bool,
    store: &StoreArgs,
) -> Result<ExitCode, MainError> {
    let store = wiring::store(store).await?;
    if held {
        listed(store.as_ref(), instance).await?;
    }
    let mut controls = store.controls().await.map_err(anyhow::Error::from)?;
    let changed = if held {
        controls.held.insert(instance.to_string())
    } else {
        controls.held.remove(instance)
    };
    store
        .set_controls(&controls)
        .await
        .map_err(anyhow::Error::from)?;
    let state = if held {
        "held: no heal, retire or roll touches it until drover hold --release (operations in flight finish)"
    } else {
        "released"
    };
    println!(
        "{instance} {state}{}",
        if changed { "" } else { " (it already was)" }
    );
    Ok(ExitCode::SUCCESS)
}

/// Asks the acting controller to replace an instance, with the safety rules
/// of a roll (a manager waits for fault tolerance, the leader goes last).
pub async fn request_replace(
    instance: &str,
    skip_drain: bool,
    store: &StoreArgs,
) -> Result<ExitCode, MainError> {
    let store = wiring::store(store).await?;
    let known = listed(store.as_ref(), instance).await?;
    let mut controls = store.controls().await.map_err(anyhow::Error::from)?;
    // Requests for instances that are gone were carried out: forget them.
    controls.replace.retain(|id| known.contains(id));
    controls.skip_drain.retain(|id| known.contains(id));
    controls.replace.insert(instance.to_string());
    if skip_drain {
        controls.skip_drain.insert(instance.to_string());
    }
    store
        .set_controls(&controls)
        .await
        .map_err(anyhow::Error::from)?;
    println!("{instance} will be replaced (follow with drover status / drover events)");
    Ok(ExitCode::SUCCESS)
}

/// The instance ids the published status lists; bad input unless `instance` is one.
async fn listed(store: &dyn drover_spi::Store, instance: &str) -> Result<Vec<String>, MainError> {
    let status = StatusDoc::read(store).await.map_err(anyhow::Error::from)?;
    let known: Vec<String> = status
        .iter()
        .flat_map(|s| s.instances.iter())
        .map(|i| i.id.clone())
        .collect();
    if known.is_empty() {
        return Err(MainError::BadInput(format!(
            "no instance {instance}: the published status lists no instance (no controller \
             has published one yet, or the cluster has none); see drover status"
        )));
    }
    if !known.iter().any(|k| k == instance) {
        return Err(MainError::BadInput(format!(
            "no instance {instance} in the published status (instances: {}); see drover status",
            known.join(", ")
        )));
    }
    Ok(known)
}

/// Prints the audit log since `since` ago; with `follow`, keeps printing
/// new events (as JSON lines with `--output json`).
pub async fn events(
    since: Duration,
    follow: bool,
    store: &StoreArgs,
    output: Output,
) -> Result<ExitCode, MainError> {
    let store = wiring::store_to_read(store).await?;
    let mut from = wall_ms().saturating_sub(since.as_millis() as u64);
    let events = store.events(from).await.map_err(anyhow::Error::from)?;
    if output == Output::Json && !follow {
        println!(
            "{}",
            serde_json::to_string_pretty(&events).map_err(anyhow::Error::from)?
        );
        return Ok(ExitCode::SUCCESS);
    }
    if output == Output::Table {
        println!(
            "{:<9} {:<10} {:<28} {:<9} {:<40} OUTCOME",
            "AGO", "GROUP", "OPERATION", "ACTION", "WHAT"
        );
    }
    let mut seen = Vec::new();
    let mut batch = events;
    loop {
        for e in batch.iter().filter(|e| !seen.contains(*e)) {
            print_event(e, output)?;
        }
        // Events of the newest millisecond may still grow: keep them to skip repeats.
        if let Some(last) = batch.iter().map(|e| e.at_ms).max() {
            from = last;
            seen = batch.into_iter().filter(|e| e.at_ms == last).collect();
        }
        if !follow {
            return Ok(ExitCode::SUCCESS);
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
        batch = store.events(from).await.map_err(anyhow::Error::from)?;
    }
}

fn print_event(e: &drover_spi::Event, output: Output) -> Result<(), MainError> {
    if output == Output::Json {
        println!("{}", serde_json::to_string(e).map_err(anyhow::Error::from)?);
        return Ok(());
    }
    let ago = ago(e.at_ms, wall_ms());
    println!(
        "{:<9} {:<10} {:<28} {:<9} {:<40} {}",
        ago,
        e.group.as_deref().unwrap_or("-"),
        e.op.as_deref().unwrap_or("-"),
        e.action.as_str(),
        e.reason,
        e.outcome
    );
    Ok(())
}

/// Prints the desired-state revisions, newest last.
pub async fn history(store: &StoreArgs, output: Output) -> Result<ExitCode, MainError> {
    let store = wiring::store_to_read(store).await?;
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
    let now = wall_ms();
    for r in &revisions {
        let ago = ago(r.provenance.at_ms, now);
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
