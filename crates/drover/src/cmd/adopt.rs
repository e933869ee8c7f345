//! `drover adopt`: bring a swarm built by hand under management without
//! replacing anything ([`drover_controller::procedure::adopt`] decides and
//! writes; this reads the swarm and the arguments, and prints).

use crate::cli::AdoptArgs;
use crate::cmd::apply::ensure_cluster_id;
use crate::cmd::commit::operator;
use crate::error::MainError;
use crate::wiring::{Engine, EngineError};
use crate::{spec_file, wiring};
use drover_controller::procedure::adopt::{self, AdoptError, Match, Named};
use drover_core::model::{Node, SwarmView};
use std::process::ExitCode;

pub async fn run(args: &AdoptArgs) -> Result<ExitCode, MainError> {
    let spec = spec_file::load(&args.file)?;
    let local = wiring::machines(&args.local)?.local.ok_or_else(|| {
        MainError::BadInput(
            "--local-dir is required: adopted machines are handed to the local provider".into(),
        )
    })?;
    let engine = Engine::connect(&args.engine)
        .await
        .map_err(|e| engine_err(args, e))?;
    let nodes = swarm(args, &engine).await?;
    let open = if args.dry_run {
        wiring::Open::OrEmpty
    } else {
        wiring::Open::OrCreate
    };
    let store = wiring::store_with(&args.store, open).await?;
    let named = named(args)?;
    let workers = args.workers.as_deref();
    let matches = adopt::matches(
        &spec,
        &named,
        workers,
        &nodes,
        local.as_ref(),
        store.as_ref(),
    )
    .await
    .map_err(error)?;
    print_table(&matches, &nodes);
    // Refused before any machine or node is touched.
    let change = adopt::change(store.as_ref(), &spec).await.map_err(error)?;
    if args.dry_run {
        println!("(dry run: nothing changed)");
        return Ok(ExitCode::SUCCESS);
    }
    let cluster_id = ensure_cluster_id(store.as_ref()).await?;
    let epoch = store
        .campaign(adopt::IDENTITY)
        .await
        .map_err(anyhow::Error::from)?;
    let adoption = adopt::Adoption { matches, change };
    let adopted = adopt::carry_out(
        &adoption,
        &spec,
        &cluster_id,
        adopt::Writer {
            store: store.clone(),
            epoch,
            who: &operator(),
        },
        &wiring::adopt::EngineLabels(&engine),
        local.as_ref(),
        |m, id| println!("adopted node {} as instance {id} of {}", m.node.id, m.group),
    )
    .await
    .map_err(error)?;
    if let Some(rev) = adopted.revision {
        println!("committed revision {rev}");
    }
    println!(
        "adopted {} machine(s) into cluster {cluster_id}; start `drover controller --engine <its socket>` next to each manager's engine",
        adopted.instances.len()
    );
    Ok(ExitCode::SUCCESS)
}

fn engine_err(args: &AdoptArgs, e: EngineError) -> MainError {
    MainError::BadInput(format!(
        "--engine {}: {e}; point it at one of the swarm's managers",
        args.engine
    ))
}

/// The swarm's nodes, read through `--engine`.
async fn swarm(args: &AdoptArgs, engine: &Engine) -> Result<Vec<Node>, MainError> {
    match engine.observe().await {
        SwarmView::Ok(nodes) => Ok(nodes),
        SwarmView::Absent => Err(MainError::BadInput(format!(
            "--engine {}: this engine is in no swarm, so there is nothing to adopt (drover bootstrap makes a new one)",
            args.engine
        ))),
        SwarmView::NoQuorum(why) | SwarmView::Unavailable(why) => Err(MainError::Failed(
            anyhow::anyhow!("the swarm cannot be read through {}: {why}", args.engine),
        )),
    }
}

/// The machines named by `--machine` and `--map NODE=MACHINE`.
fn named(args: &AdoptArgs) -> Result<Vec<Named>, MainError> {
    let mut named: Vec<Named> = args
        .machines
        .iter()
        .map(|m| Named {
            node: None,
            machine: m.clone(),
        })
        .collect();
    for m in &args.map {
        let (node, machine) = m
            .split_once('=')
            .ok_or_else(|| MainError::BadInput(format!("--map {m}: expected NODE=MACHINE")))?;
        named.push(Named {
            node: Some(node.to_string()),
            machine: machine.to_string(),
        });
    }
    Ok(named)
}

/// An adoption's refusal is bad input (exit 2); a failure while writing is not.
fn error(e: AdoptError) -> MainError {
    match e {
        AdoptError::Refused(refused) => MainError::Refused {
            what: "adopt".into(),
            refused,
        },
        e if e.is_bad_input() => MainError::BadInput(e.to_string()),
        e => MainError::Failed(e.into()),
    }
}

fn print_table(matches: &[Match], nodes: &[Node]) {
    println!(
        "{:<27} {:<8} {:<10} {:<16} ACTION / MACHINE",
        "NODE", "ROLE", "GROUP", "LOGICAL ID"
    );
    for m in matches {
        let action = match &m.foreign.adopted_as {
            Some(id) => format!("already adopted as {id}"),
            None => format!("adopt {}", m.foreign.reference),
        };
        println!(
            "{:<27} {:<8} {:<10} {:<16} {action}",
            m.node.id,
            role(&m.node),
            m.group,
            m.logical_id.as_deref().unwrap_or("-"),
        );
    }
    for n in nodes
        .iter()
        .filter(|n| !matches.iter().any(|m| m.node.id == n.id))
    {
        let action = if n.link.is_some() && n.cluster.is_some() {
            "already managed"
        } else {
            "unmatched: left alone (never destroyed)"
        };
        println!(
            "{:<27} {:<8} {:<10} {:<16} {action}",
            n.id,
            role(n),
            "-",
            "-"
        );
    }
}

fn role(n: &Node) -> &'static str {
    if n.manager_role { "manager" } else { "worker" }
}
