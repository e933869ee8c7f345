//! `drover recover`: a lost manager quorum recovered on evidence. One
//! call gathers the evidence, has the core decide and, on a decision to
//! proceed or to finish a recovery a previous run started (and without
//! `--dry-run`), carries it out; this prints it.

use crate::cli::{Output, RecoverArgs};
use crate::error::MainError;
use crate::wiring;
use drover_controller::procedure::recover::{Done, Outcome};
use drover_core::recover::{Decision, Evidence, Finish, Recovery, Refusal, rfc3339, said};
use std::process::ExitCode;

pub async fn run(args: &RecoverArgs) -> Result<ExitCode, MainError> {
    let Outcome {
        evidence,
        decision,
        done,
    } = wiring::recover::recover(args).await?;
    let report = Report {
        dry_run: args.dry_run,
        machines: machines(&evidence),
        decision: &decision,
        done: done.as_ref(),
    };
    report.print(args.live.output)?;
    let forming = |r: &Refusal| matches!(r, Refusal::MayStillBeForming { .. });
    let afresh = match &decision {
        Decision::Finish(_) => false,
        Decision::Refuse { reasons } => !reasons.iter().any(forming),
        Decision::Proceed(_) => true,
    };
    if let Some(s) = &evidence.started
        && afresh
    {
        // No engine knows a leader: the recorded force-new-cluster did not
        // take effect, and the evidence was judged afresh.
        eprintln!(
            "drover: note: a recovery from {} was recorded as started at {} and no engine knows a leader: its force-new-cluster did not take effect; judged afresh",
            s.recovery.survivor,
            rfc3339(s.at_ms)
        );
    }
    Ok(match decision {
        Decision::Proceed(_) | Decision::Finish(_) => ExitCode::SUCCESS,
        Decision::Refuse { .. } => ExitCode::from(2),
    })
}

/// What `recover` prints (`-o json` prints it as is).
#[derive(serde::Serialize)]
struct Report<'a> {
    dry_run: bool,
    machines: Vec<MachineRow>,
    decision: &'a Decision,
    /// What a recovery did (absent for a dry run or a refusal).
    done: Option<&'a Done>,
}

/// One machine of the provider, as the evidence shows it.
#[derive(serde::Serialize)]
struct MachineRow {
    machine: String,
    group: String,
    address: String,
    engine: String,
    /// For a manager without a leader: the raft members it lists.
    raft_members: Option<Vec<String>>,
}

fn machines(e: &Evidence) -> Vec<MachineRow> {
    e.machines
        .iter()
        .map(|m| MachineRow {
            machine: m.id.clone(),
            group: m.group.clone(),
            address: m.address.clone(),
            engine: said(&m.answer),
            raft_members: m
                .raft
                .as_ref()
                .map(|r| r.peers.iter().map(|p| p.addr.clone()).collect()),
        })
        .collect()
}

impl Report<'_> {
    fn print(&self, output: Output) -> Result<(), MainError> {
        if output == Output::Json {
            let text = serde_json::to_string_pretty(self).map_err(anyhow::Error::from)?;
            println!("{text}");
            self.refusals_to_stderr();
            return Ok(());
        }
        println!("{:<11} {:<10} {:<15} ENGINE", "MACHINE", "GROUP", "ADDRESS");
        for m in &self.machines {
            println!(
                "{:<11} {:<10} {:<15} {}",
                m.machine, m.group, m.address, m.engine
            );
            if let Some(members) = &m.raft_members {
                println!("{:<38} raft members it lists: {}", "", members.join(", "));
            }
        }
        println!();
        match (self.decision, self.done) {
            (Decision::Proceed(r), None) => plan(r),
            (Decision::Proceed(r), Some(done)) => report_done(r, done),
            (Decision::Finish(f), None) => plan_finish(f),
            (Decision::Finish(f), Some(done)) => report_finished(f, done),
            (Decision::Refuse { reasons }, _) => {
                for r in reasons {
                    println!("refused: {r}");
                }
                println!("nothing was changed");
                self.refusals_to_stderr();
            }
        }
        Ok(())
    }

    /// A refusal also says so on stderr, as every `drover` error does.
    fn refusals_to_stderr(&self) {
        if let Decision::Refuse { reasons } = self.decision {
            let first = reasons.first().map(ToString::to_string).unwrap_or_default();
            eprintln!("drover: recover refused: {first}");
        }
    }
}

/// The plan of a dry run.
fn plan(r: &Recovery) {
    println!("plan (--dry-run: nothing was changed):");
    let mut steps = vec![format!(
        "docker swarm init --force-new-cluster on {}, listening and advertising on {}",
        r.survivor, r.addr
    )];
    steps.extend(r.gone.iter().map(|g| {
        format!(
            "docker node rm {} (gone member at {})",
            g.member.node_id, g.member.addr
        )
    }));
    steps.push("record the recovery and its evidence in the audit log (drover events)".into());
    for (i, step) in steps.iter().enumerate() {
        println!("  {}. {step}", i + 1);
    }
    println!(
        "  then the leader's controller provisions managers until the group has its declared size"
    );
    println!("evidence: {}", r.summary());
}

/// The plan of a dry run that would finish a recorded recovery.
fn plan_finish(f: &Finish) {
    let r = &f.started.recovery;
    println!(
        "plan (--dry-run: nothing was changed): finish the recovery started at {} (the swarm has a leader again; no second force-new-cluster):",
        rfc3339(f.started.at_ms)
    );
    let mut steps: Vec<String> = f
        .tail
        .remove
        .iter()
        .map(|p| {
            format!(
                "docker node rm {} (gone member at {}, on {})",
                p.node_id, p.addr, f.through
            )
        })
        .collect();
    steps.push("record the recovery and its evidence in the audit log (drover events), unless the run that started it did".into());
    for (i, step) in steps.iter().enumerate() {
        println!("  {}. {step}", i + 1);
    }
    for p in &f.tail.absent {
        println!("  node entry of gone member {}: already removed", p.node_id);
    }
    for k in &f.tail.kept {
        println!("  node entry of {} kept: {}", k.member.node_id, k.why);
    }
    println!("evidence: {}", r.summary());
}

/// What the rerun that finished a recorded recovery did.
fn report_finished(f: &Finish, done: &Done) {
    println!(
        "finished the recovery started at {} from {} (a previous run stopped before its end; no second force-new-cluster)",
        rfc3339(f.started.at_ms),
        f.started.recovery.survivor
    );
    tail(&f.through, done);
    println!(
        "next: the leader's controller provisions managers until the group has its declared size; follow with drover status"
    );
}

/// The node entries, the audit event and the record, after a recovery or
/// the rerun that finished one.
fn tail(through: &str, done: &Done) {
    for rm in &done.removed {
        match &rm.error {
            None => println!("removed the node entry of gone member {}", rm.node_id),
            Some(e) => println!(
                "WARNING: the node entry of gone member {} was not removed ({e}): docker node rm {} on {}",
                rm.node_id, rm.node_id, through
            ),
        }
    }
    for id in &done.absent {
        println!("the node entry of gone member {id} was already removed");
    }
    for k in &done.kept {
        println!(
            "kept the node entry of {} ({}): {}",
            k.member.node_id, k.member.addr, k.why
        );
    }
    match &done.not_recorded {
        None => println!("recorded in the audit log (drover events)"),
        Some(e) => println!("WARNING: not recorded in the audit log: {e}"),
    }
    if let Some(left) = &done.record_left {
        println!(
            "WARNING: the recovery record {left} is kept: run drover recover again to finish (it never forces a new cluster twice)"
        );
    }
}

/// What a recovery did, and what happens next.
fn report_done(r: &Recovery, done: &Done) {
    let forced = done.forced.as_ref();
    println!(
        "recovered: {} is the only manager of a new raft (force-new-cluster took {:.1}s; leading after {:.1}s); the swarm's services, workers, cluster id and join tokens are kept",
        r.survivor,
        forced.map_or(0.0, |f| f.force_new_cluster_ms as f64 / 1000.0),
        forced.map_or(0.0, |f| f.leads_after_ms as f64 / 1000.0)
    );
    if let Some(said) = forced.and_then(|f| f.engine_said.as_deref()) {
        println!(
            "note: force-new-cluster on {} answered an error ({said}), yet the new cluster formed and {} leads it: the recovery went on",
            r.survivor, r.survivor
        );
    }
    tail(&r.survivor, done);
    println!(
        "next: the leader's controller (on {}) provisions managers until the group has its declared size; follow with drover status. Machines you named with --gone are still listed by the provider: the controller replaces them; destroy them if they could ever start again",
        r.survivor
    );
}
