//! `drover status`.

use crate::cli::{Output, StoreArgs};
use crate::cmd::ago::ago;
use crate::cmd::progress::fault_tolerance;
use crate::error::MainError;
use crate::wiring;
use drover_controller::{StatusDoc, wall_ms};
use std::process::ExitCode;
use std::time::Duration;

/// A status older than this means no controller acts: warn loudly.
const STALE_AFTER: Duration = Duration::from_secs(30);

pub async fn run(
    group: Option<&str>,
    store: &StoreArgs,
    output: Output,
) -> Result<ExitCode, MainError> {
    let store = wiring::store(store).await?;
    let Some(mut doc) = StatusDoc::read(store.as_ref())
        .await
        .map_err(anyhow::Error::from)?
    else {
        const NONE_YET: &str =
            "no controller has published a status yet (is a controller running on the managers?)";
        // A script reads JSON on stdout whatever happened: `null`, the
        // sentence on stderr, and the same exit code as the table.
        if output == Output::Json {
            println!("null");
            eprintln!("drover: {NONE_YET}");
        } else {
            println!("{NONE_YET}");
        }
        return Ok(ExitCode::from(1));
    };
    if let Some(want) = group {
        doc.only_group(want);
    }
    if output == Output::Json {
        println!(
            "{}",
            serde_json::to_string_pretty(&doc).map_err(anyhow::Error::from)?
        );
        return Ok(ExitCode::SUCCESS);
    }
    let now = wall_ms();
    let age = Duration::from_millis(now.saturating_sub(doc.observed_at_ms));
    println!(
        "observed {} ago by {} (epoch {}), desired revision {}",
        ago(doc.observed_at_ms, now),
        doc.controller,
        doc.epoch,
        doc.revision
    );
    if age > STALE_AFTER {
        println!(
            "WARNING: no controller has published for {}: the leader's controller may be dead; this status may be stale",
            ago(doc.observed_at_ms, now)
        );
    }
    let swarm = &doc.swarm;
    match swarm.problem.as_deref() {
        Some(p) if p.contains("quorum") => {
            println!("\nQUORUM LOST: {p}\n{RUNBOOK}");
        }
        Some(p) => println!("swarm: {p}"),
        None => println!(
            "swarm: {} managers, {} reachable, fault tolerance {}",
            swarm.members,
            swarm.reachable,
            fault_tolerance(swarm.fault_tolerance)
        ),
    }
    println!(
        "\n{:<14} {:<8} {:<10} {:>7} {:>7} {:>7}  {:<17} REASON",
        "GROUP", "ROLE", "PHASE", "MEMBERS", "CURRENT", "HEALTHY", "CONFIG"
    );
    for g in doc.groups.iter() {
        println!(
            "{:<14} {:<8} {:<10} {:>7} {:>7} {:>7}  {:<17} {}",
            g.name,
            g.role.as_str(),
            g.phase.as_str(),
            format!("{}/{}", g.members, g.desired),
            g.current,
            g.healthy,
            g.desired_hash,
            g.reason.as_deref().unwrap_or("")
        );
    }
    instances(&doc);
    Ok(ExitCode::SUCCESS)
}

/// The per-instance table, like `docker node ls` joined to the machines.
fn instances(doc: &StatusDoc) {
    let rows = &doc.instances;
    if rows.is_empty() {
        return;
    }
    println!(
        "\n{:<11} {:<10} {:<14} {:<26} {:<8} {:<7} {:<10} {:<8} AGE",
        "INSTANCE", "GROUP", "LOGICAL ID", "NODE", "ROLE", "LEADER", "HEALTH", "CURRENT"
    );
    let now = wall_ms();
    for i in rows.iter() {
        let age = ago(i.created_ms, now);
        let mut health = match &i.health_reason {
            Some(why) => format!("{} ({why})", i.health),
            None => i.health.clone(),
        };
        if i.held {
            health.push_str(", held");
        }
        println!(
            "{:<11} {:<10} {:<14} {:<26} {:<8} {:<7} {:<10} {:<8} {}",
            i.id,
            i.group,
            i.logical_id.as_deref().unwrap_or("-"),
            i.node_id.as_deref().unwrap_or("-"),
            i.role,
            if i.leader { "yes" } else { "" },
            health,
            if i.current { "yes" } else { "no" },
            age
        );
    }
}

/// What to do when quorum is lost (printed by `status`).
const RUNBOOK: &str = "drover takes no voluntary action without quorum. To recover:
  1. Bring back the failed managers if you can (restart their machines/engines):
     they rejoin by themselves and quorum returns.
  2. If they are gone for good, on ONE surviving manager run:
     docker swarm init --force-new-cluster --advertise-addr <its address>:2377
     (keeps the cluster id and join tokens; takes ~1-2 s).
  3. drover then heals the group back to its declared size: the dead members
     are demoted and removed, replacements are provisioned.";
