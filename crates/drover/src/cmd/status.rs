//! `drover status`: the status the acting controller publishes, and — when
//! it is stale or the store cannot be read — the managers' engines asked
//! directly, so a lost quorum is said plainly (exit 3).

use crate::cli::{LocalArgs, Output, StoreArgs};
use crate::cmd::ago::ago;
use crate::cmd::progress::fault_tolerance;
use crate::error::MainError;
use crate::wiring::{self, Look};
use drover_controller::procedure::recover::diagnose::{BeatRow, Heard, LostQuorum};
use drover_controller::{StatusDoc, wall_ms};
use drover_core::control::Seat;
use drover_core::model::SwarmView;
use drover_core::quorum_probe::EngineAnswer;
use drover_spi::Heartbeat;
use std::process::ExitCode;
use std::time::{Duration, UNIX_EPOCH};

pub async fn run(
    group: Option<&str>,
    store: &StoreArgs,
    local: &LocalArgs,
    output: Output,
) -> Result<ExitCode, MainError> {
    let look = wiring::look(store, local).await?;
    print(look, group, output)
}

/// Prints what `status` found; the exit code: 3 for a lost quorum, 1
/// when no status was published yet.
fn print(look: Look, group: Option<&str>, output: Output) -> Result<ExitCode, MainError> {
    if let Some(lost) = &look.diagnosis.lost {
        print_lost(lost, output)?;
        return Ok(ExitCode::from(3));
    }
    let Some(mut doc) = look.read? else {
        none_yet(output);
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
    print_table(
        &doc,
        &look.diagnosis.heard,
        &look.waiting,
        look.live.as_ref(),
    );
    Ok(ExitCode::SUCCESS)
}

/// No status published yet. A script reads JSON on stdout whatever
/// happened: `null`, the sentence on stderr, and the same exit code as the
/// table.
fn none_yet(output: Output) {
    const NONE_YET: &str =
        "no controller has published a status yet (is a controller running on the managers?)";
    if output == Output::Json {
        println!("null");
        eprintln!("drover: {NONE_YET}");
    } else {
        println!("{NONE_YET}");
    }
}

/// The published status as a table.
fn print_table(doc: &StatusDoc, heard: &Heard, waiting: &[Heartbeat], live: Option<&SwarmView>) {
    let now = wall_ms();
    if live.is_some() {
        println!(
            "NOTE: this status was published {} ago, over two controller passes: the swarm line is a live manager's own view, asked now",
            ago(doc.observed_at_ms, now)
        );
    }
    println!(
        "observed {} ago by {} (epoch {}), desired revision {}",
        ago(doc.observed_at_ms, now),
        doc.controller,
        doc.epoch,
        doc.revision
    );
    if wiring::status_age(doc) > wiring::STALE_AFTER {
        println!(
            "WARNING: no controller has published for {}: the leader's controller may be dead; this status may be stale",
            ago(doc.observed_at_ms, now)
        );
        print_rows(heard);
    }
    control_lines(doc, waiting);
    match live {
        Some(view) if doc.has_swarm() => live_swarm_line(view),
        _ => swarm_line(doc),
    }
    groups(doc);
    instances(doc);
}

/// Which controllers may act, and each one that does not, with why.
fn control_lines(doc: &StatusDoc, waiting: &[Heartbeat]) {
    println!("control: {}", doc.control.as_str());
    for beat in waiting {
        let seat = beat.seat.map_or("controller", |s| match s {
            Seat::Manager => "manager's controller",
            Seat::External => "external controller",
        });
        let why = beat.waiting.as_deref().unwrap_or_default();
        println!("  waiting: {} ({seat}): {why}", beat.holder);
    }
}

/// The swarm's line: a lost quorum with the runbook, another problem, or
/// its managers and fault tolerance. The one place the published problem
/// is read.
fn swarm_line(doc: &StatusDoc) {
    if !doc.has_swarm() {
        println!("swarm: none (plain groups only)");
        return;
    }
    let swarm = &doc.swarm;
    match &swarm.problem {
        Some(p @ drover_core::plan::SwarmProblem::QuorumLost(_)) => {
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
    for ghost in &swarm.ghosts {
        println!("  {ghost}");
    }
}

/// The swarm's line from a live manager's view, asked now (the published
/// one is old): its raft as that manager lists it, or why none answered.
fn live_swarm_line(view: &SwarmView) {
    match view {
        SwarmView::Ok(nodes) => {
            let members = nodes.iter().filter(|n| n.raft.is_some()).count();
            let reachable = nodes
                .iter()
                .filter(|n| n.raft.as_ref().is_some_and(|r| r.reachable))
                .count();
            println!(
                "swarm (live): {members} managers, {reachable} reachable, fault tolerance {}",
                drover_core::quorum::fault_tolerance(members, reachable)
            );
        }
        SwarmView::NoQuorum(why) => println!("swarm (live): no leader: {why}"),
        SwarmView::Unavailable(why) => println!(
            "swarm (live): cannot be seen from here ({why}): give --local-dir (the machines) or --store swarm:ENDPOINT of a running manager"
        ),
        SwarmView::Absent => println!(
            "swarm (live): cannot be seen from here: give --local-dir (the machines) or --store swarm:ENDPOINT of a running manager"
        ),
    }
}

/// The groups' table and their windows.
fn groups(doc: &StatusDoc) {
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
    for g in doc.groups.iter() {
        if let Some(w) = &g.window {
            println!("{:<14} {w}", g.name);
        }
    }
}

/// One line per controller: what its engine said, and how long ago.
fn print_rows(heard: &Heard) {
    if heard.rows.is_empty() {
        return;
    }
    println!("what each controller's engine last said (its heartbeat):");
    print_beats(&heard.rows);
}

fn print_beats(rows: &[BeatRow]) {
    for r in rows {
        let e = &r.engine;
        let said = match &e.answer {
            EngineAnswer::Led => match (&e.leader, e.members) {
                (Some(l), Some((m, reach))) => format!(
                    "leader {}, {m} managers, {reach} reachable",
                    l.link.as_deref().unwrap_or(&l.node)
                ),
                _ => "knows a leader".into(),
            },
            EngineAnswer::NoLeader(why) => format!("no leader: {why}"),
            EngineAnswer::NotAManager if e.left.is_some() => "left the swarm".into(),
            EngineAnswer::NotAManager => "in no swarm, or no manager".into(),
            EngineAnswer::Down(why) | EngineAnswer::Busy(why) => format!("cannot be asked: {why}"),
        };
        let judged = if r.judged { "" } else { ", too old to judge" };
        println!(
            "  {} ({}s ago{judged}): {said}",
            r.controller,
            r.age_ms / 1000
        );
    }
}

/// A lost quorum with its evidence, and the runbook.
fn print_lost(lost: &LostQuorum, output: Output) -> Result<(), MainError> {
    if output == Output::Json {
        let text = serde_json::to_string_pretty(lost).map_err(anyhow::Error::from)?;
        println!("{text}");
        return Ok(());
    }
    let rfc3339 = |ms| humantime::format_rfc3339_seconds(UNIX_EPOCH + Duration::from_millis(ms));
    let since = match (lost.leader_seen_ms, lost.last_status_ms, &lost.store_error) {
        (Some(ms), _, _) => format!(
            "no leader since {} (the last time a controller's engine knew one)",
            rfc3339(ms)
        ),
        (None, Some(ms), _) => format!(
            "no leader since {} at the latest (the last published status)",
            rfc3339(ms)
        ),
        (None, None, Some(e)) => format!("no leader; the store cannot be read: {e}"),
        (None, None, None) => "no leader".into(),
    };
    println!(
        "QUORUM LOST: {} of {} managers reachable, {since}",
        lost.reachable, lost.managers
    );
    println!("  an answering manager's engine says: {}", lost.engine_says);
    for u in &lost.unreachable {
        println!("  unreachable: machine {} ({})", u.machine, u.why);
    }
    if lost.unlisted > 0 {
        println!(
            "  unreachable: {} raft member(s) on no machine the provider lists (destroyed?)",
            lost.unlisted
        );
    }
    if !lost.heartbeats.is_empty() {
        println!("  what each controller's engine last said (its heartbeat):");
        print_beats(&lost.heartbeats);
    }
    println!("\n{RUNBOOK}");
    Ok(())
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
        if let Some(boot) = &i.boot {
            not_joined(&i.id, boot);
        }
    }
}

/// What a machine that has not joined shows of its boot, under its row:
/// its engine's failed join and its boot log's last lines (redacted by
/// its provider's adapter).
fn not_joined(id: &str, boot: &drover_core::boot::BootFacts) {
    if let Some(failed) = &boot.join_failed {
        println!("  {id} has not joined: {failed}");
    }
    if let Some(log) = boot.log.as_ref().filter(|l| !l.is_empty()) {
        println!("  {id}'s boot log ends:");
        let lines = log.lines();
        for l in &lines[lines.len().saturating_sub(BOOT_LINES)..] {
            println!("    {l}");
        }
    }
}

/// How many of a boot log's last lines `status` prints.
const BOOT_LINES: usize = 5;

/// What to do when quorum is lost (printed by `status`).
const RUNBOOK: &str = "drover takes no voluntary action without quorum. To recover:
  1. Bring back the failed managers if you can (restart their machines/engines):
     they rejoin by themselves and quorum returns.
  2. If they are gone for good: drover recover --dry-run (same --local-dir) shows the
     evidence and the plan; drover recover then runs docker swarm init
     --force-new-cluster on the surviving manager (keeps the cluster id, services,
     workers and join tokens; 1-25 s). It refuses while a lost manager's machine may
     still run (a new cluster beside a live majority makes two swarms): destroy it,
     or name it with --gone MACHINE if you know it is gone for good.
  3. drover then heals the group back to its declared size: the lost members' nodes
     are removed, replacements are provisioned.";
