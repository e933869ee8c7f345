//! `drover status`: the status the acting controller publishes, and — when
//! it is stale or the store cannot be read — the managers' engines asked
//! directly, so a lost quorum is said plainly (exit 3).

use crate::cli::{LocalArgs, Output, StoreArgs};
use crate::cmd::ago::ago;
use crate::cmd::progress::fault_tolerance;
use crate::error::MainError;
use crate::wiring;
use drover_controller::{StatusDoc, wall_ms};
use drover_core::quorum_probe::{
    Beat, EngineAnswer, EngineView, HeartbeatVerdict, judge_heartbeats,
};
use drover_core::verdict::quorum::{self, QuorumVerdict};
use std::process::ExitCode;
use std::time::{Duration, UNIX_EPOCH};

/// A status older than this means no controller acts: warn loudly.
const STALE_AFTER: Duration = Duration::from_secs(30);

pub async fn run(
    group: Option<&str>,
    store: &StoreArgs,
    local: &LocalArgs,
    output: Output,
) -> Result<ExitCode, MainError> {
    let (opened, read) = match wiring::store(store).await {
        Ok(store) => {
            let doc = read(store.as_ref()).await;
            (Some(store), doc)
        }
        Err(e) => (None, Err(e)),
    };
    // Nobody says a quorum is lost (no controller acts without one, and a
    // store kept in the raft cannot be read): ask the managers' engines,
    // and read what each controller's engine last said (its heartbeat,
    // where the store lives outside the raft and answers).
    let in_doubt = match &read {
        Ok(Some(doc)) => age(doc) > STALE_AFTER,
        Ok(None) | Err(MainError::Failed(_)) => true,
        Err(_) => false,
    };
    let beats = match (&opened, in_doubt) {
        (Some(store), true) if store.outside_raft() => store.heartbeats().await.unwrap_or_default(),
        _ => Vec::new(),
    };
    let now = wall_ms();
    let heard = Heard::of(&beats, now);
    if in_doubt {
        let probes = wiring::ask_engines(&wiring::machines(local)?).await;
        let (verdict, evidence) = quorum::of_both(quorum::judge(&probes), &heard.verdict.verdict);
        if let QuorumVerdict::Lost {
            reachable,
            managers,
            unlisted,
            silent,
            engine_says,
        } = verdict
        {
            let lost = Lost {
                quorum: "lost",
                evidence: evidence.as_str(),
                reachable,
                managers,
                unlisted,
                unreachable: silent
                    .into_iter()
                    .map(|(machine, why)| Unreachable { machine, why })
                    .collect(),
                engine_says,
                leader_seen_ms: heard.verdict.leader_seen_ms,
                last_status_ms: read
                    .as_ref()
                    .ok()
                    .and_then(Option::as_ref)
                    .map(|d| d.observed_at_ms),
                store_error: read.as_ref().err().map(ToString::to_string),
                heartbeats: heard.rows,
            };
            lost.print(output)?;
            return Ok(ExitCode::from(3));
        }
    }
    let Some(mut doc) = read? else {
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
    println!(
        "observed {} ago by {} (epoch {}), desired revision {}",
        ago(doc.observed_at_ms, now),
        doc.controller,
        doc.epoch,
        doc.revision
    );
    if age(&doc) > STALE_AFTER {
        println!(
            "WARNING: no controller has published for {}: the leader's controller may be dead; this status may be stale",
            ago(doc.observed_at_ms, now)
        );
        heard.print_rows();
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
    for g in doc.groups.iter() {
        if let Some(w) = &g.window {
            println!("{:<14} {w}", g.name);
        }
    }
    instances(&doc);
    Ok(ExitCode::SUCCESS)
}

/// The published status, if any.
async fn read(store: &dyn drover_spi::Store) -> Result<Option<StatusDoc<'static>>, MainError> {
    Ok(StatusDoc::read(store).await.map_err(anyhow::Error::from)?)
}

/// What each controller's engine last said, from the heartbeats, judged.
struct Heard {
    verdict: HeartbeatVerdict,
    rows: Vec<BeatRow>,
}

/// One controller's heartbeat as `status` shows it.
#[derive(serde::Serialize)]
struct BeatRow {
    controller: String,
    /// How old the beat is, ms.
    age_ms: u64,
    /// Young enough to be judged ([`HEARTBEAT_FRESH_MS`]).
    judged: bool,
    engine: EngineView,
}

impl Heard {
    fn of(beats: &[drover_spi::Heartbeat], now: u64) -> Heard {
        let views: Vec<Beat<'_>> = beats
            .iter()
            .filter_map(|b| {
                Some(Beat {
                    holder: &b.holder,
                    at_ms: b.at_ms,
                    view: b.engine.as_ref()?,
                })
            })
            .collect();
        let verdict = judge_heartbeats(&views, now);
        let rows = views
            .iter()
            .zip(&verdict.ages)
            .map(|(b, (_, age_ms, judged))| BeatRow {
                controller: b.holder.to_string(),
                age_ms: *age_ms,
                judged: *judged,
                engine: b.view.clone(),
            })
            .collect();
        Heard { verdict, rows }
    }

    /// One line per controller: what its engine said, and how long ago.
    fn print_rows(&self) {
        if self.rows.is_empty() {
            return;
        }
        println!("what each controller's engine last said (its heartbeat):");
        print_beats(&self.rows);
    }
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

/// How old a published status is.
fn age(doc: &StatusDoc) -> Duration {
    Duration::from_millis(wall_ms().saturating_sub(doc.observed_at_ms))
}

/// A quorum lost, as the managers' own engines tell it (asked now, or
/// through their controllers' heartbeats).
#[derive(serde::Serialize)]
struct Lost {
    quorum: &'static str,
    /// `engines` (asked directly) or `heartbeats` (what each controller's
    /// engine last said).
    evidence: &'static str,
    reachable: usize,
    managers: usize,
    /// Raft members no machine of the provider stands for (destroyed).
    unlisted: usize,
    unreachable: Vec<Unreachable>,
    engine_says: String,
    /// When an engine last knew a leader, by the heartbeats (ms since the epoch).
    leader_seen_ms: Option<u64>,
    /// When the last status was published (ms since the epoch), if one can be read.
    last_status_ms: Option<u64>,
    /// Why the store could not be read, if it could not.
    store_error: Option<String>,
    /// Every controller's heartbeat, with its age (etcd and file stores).
    heartbeats: Vec<BeatRow>,
}

/// A manager machine whose engine does not answer.
#[derive(serde::Serialize)]
struct Unreachable {
    machine: String,
    why: String,
}

impl Lost {
    fn print(&self, output: Output) -> Result<(), MainError> {
        if output == Output::Json {
            let text = serde_json::to_string_pretty(self).map_err(anyhow::Error::from)?;
            println!("{text}");
            return Ok(());
        }
        let since = match (self.leader_seen_ms, self.last_status_ms, &self.store_error) {
            (Some(ms), _, _) => format!(
                "no leader since {} (the last time a controller's engine knew one)",
                humantime::format_rfc3339_seconds(UNIX_EPOCH + Duration::from_millis(ms))
            ),
            (None, Some(ms), _) => format!(
                "no leader since {} at the latest (the last published status)",
                humantime::format_rfc3339_seconds(UNIX_EPOCH + Duration::from_millis(ms))
            ),
            (None, None, Some(e)) => format!("no leader; the store cannot be read: {e}"),
            (None, None, None) => "no leader".into(),
        };
        println!(
            "QUORUM LOST: {} of {} managers reachable, {since}",
            self.reachable, self.managers
        );
        println!("  an answering manager's engine says: {}", self.engine_says);
        for u in &self.unreachable {
            println!("  unreachable: machine {} ({})", u.machine, u.why);
        }
        if self.unlisted > 0 {
            println!(
                "  unreachable: {} raft member(s) on no machine the provider lists (destroyed?)",
                self.unlisted
            );
        }
        if !self.heartbeats.is_empty() {
            println!("  what each controller's engine last said (its heartbeat):");
            print_beats(&self.heartbeats);
        }
        println!("\n{RUNBOOK}");
        Ok(())
    }
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
  2. If they are gone for good: drover recover --dry-run (same --local-dir) shows the
     evidence and the plan; drover recover then runs docker swarm init
     --force-new-cluster on the surviving manager (keeps the cluster id, services,
     workers and join tokens; 1-25 s). It refuses while a lost manager's machine may
     still run (a new cluster beside a live majority makes two swarms): destroy it,
     or name it with --gone MACHINE if you know it is gone for good.
  3. drover then heals the group back to its declared size: the lost members' nodes
     are removed, replacements are provisioned.";
