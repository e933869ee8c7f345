//! `drover adopt`: bring a swarm built by hand under management without
//! replacing anything.
//!
//! Machines are matched to swarm nodes by what their own engine says (the
//! provider asks it) or by an explicit `--map NODE=MACHINE` (node addresses
//! are no evidence: every non-leader node may report 127.0.0.1). Each match
//! becomes an instance tagged `drover.adopted=<config hash>` (it counts as
//! built from the spec it was adopted under, so it rolls only when that
//! changes), and its node gets drover's labels (an engine label cannot be
//! added without restarting the engine). Nodes nobody named are reported
//! and never touched.
//!
//! Order, for crash safety: node labels first, then the provider record,
//! then the spec. A crash in between leaves a labelled node without an
//! instance (harmless: the reaper only collects Down nodes; rerunning adopt
//! reuses its link), never an instance without its node (which would read
//! as a machine that never joined) nor a spec whose group looks empty
//! (which would provision a second set of machines).

use crate::cli::AdoptArgs;
use crate::cmd::apply::{ensure_cluster_id, merge};
use crate::cmd::commit::{commit, validated};
use crate::error::MainError;
use crate::wiring::{Engine, EngineError};
use crate::{spec_file, wiring};
use drover_core::hash::config_hash;
use drover_core::model::{Node, SwarmView, tags};
use drover_core::spec::{ClusterSpec, Committable, GroupSpec, Role};
use drover_spi::{Foreign, InstanceProvider, Store};
use std::collections::{BTreeMap, BTreeSet};
use std::process::ExitCode;

/// One machine matched to one node.
struct Match {
    node: Node,
    foreign: Foreign,
    group: String,
    logical_id: Option<String>,
    zone: Option<String>,
}

pub async fn run(args: &AdoptArgs) -> Result<ExitCode, MainError> {
    let spec = spec_file::load(&args.file)?;
    let local = wiring::machines(&args.local)?.local.ok_or_else(|| {
        MainError::BadInput(
            "--local-dir is required: adopted machines are handed to the local provider".into(),
        )
    })?;
    let engine_err = |e: EngineError| {
        MainError::BadInput(format!(
            "--engine {}: {e}; point it at one of the swarm's managers",
            args.engine
        ))
    };
    let engine = Engine::connect(&args.engine).await.map_err(engine_err)?;
    let nodes = match engine.observe().await {
        SwarmView::Ok(nodes) => nodes,
        SwarmView::Absent => {
            return Err(MainError::BadInput(format!(
                "--engine {}: this engine is in no swarm, so there is nothing to adopt (drover bootstrap makes a new one)",
                args.engine
            )));
        }
        SwarmView::NoQuorum(why) | SwarmView::Unavailable(why) => {
            return Err(MainError::Failed(anyhow::anyhow!(
                "the swarm cannot be read through {}: {why}",
                args.engine
            )));
        }
    };
    let open = if args.dry_run {
        wiring::Open::OrEmpty
    } else {
        wiring::Open::OrCreate
    };
    let store = wiring::store_with(&args.store, open).await?;
    let cluster_id = store.cluster_id().await.map_err(anyhow::Error::from)?;
    let matches = match_machines(args, &spec, &nodes, local.as_ref()).await?;
    let matches = assign_slots(&spec, matches, local.as_ref(), cluster_id.as_deref()).await?;
    print_table(&matches, &nodes);
    // Refused before any machine or node is touched.
    let change = to_commit(store.as_ref(), &spec).await?;
    if args.dry_run {
        println!("(dry run: nothing changed)");
        return Ok(ExitCode::SUCCESS);
    }
    let cluster_id = ensure_cluster_id(store.as_ref()).await?;
    for m in &matches {
        adopt_one(m, &spec, &cluster_id, &engine, local.as_ref()).await?;
    }
    if let Some((expected, spec)) = change {
        let rev = commit(store.as_ref(), expected, &spec, "adopt", false).await?;
        println!("committed revision {rev}");
    }
    println!(
        "adopted {} machine(s) into cluster {cluster_id}; start `drover controller --engine <its socket>` next to each manager's engine",
        matches
            .iter()
            .filter(|m| m.foreign.adopted_as.is_none())
            .count()
    );
    Ok(ExitCode::SUCCESS)
}

/// Asks the provider about every named machine and finds its node.
async fn match_machines(
    args: &AdoptArgs,
    spec: &ClusterSpec,
    nodes: &[Node],
    provider: &dyn InstanceProvider,
) -> Result<Vec<Match>, MainError> {
    let mut named: Vec<(Option<&str>, &str)> =
        args.machines.iter().map(|m| (None, m.as_str())).collect();
    for m in &args.map {
        let (node, machine) = m
            .split_once('=')
            .ok_or_else(|| MainError::BadInput(format!("--map {m}: expected NODE=MACHINE")))?;
        named.push((Some(node), machine));
    }
    if named.is_empty() {
        return Err(MainError::BadInput(
            "name the machines to adopt with --machine MACHINE (or --map NODE=MACHINE)".into(),
        ));
    }
    let mut out: Vec<Match> = Vec::new();
    for (given, machine) in named {
        let foreign = provider
            .inspect_foreign(machine)
            .await
            .map_err(|e| MainError::BadInput(format!("machine {machine}: {e}")))?;
        let node_id = match given {
            Some(n) => find_node(nodes, n)
                .map_err(|why| MainError::BadInput(format!("--map {n}={machine}: {why}")))?
                .id
                .clone(),
            None => foreign.node_id.clone().ok_or_else(|| {
                MainError::BadInput(format!(
                    "machine {machine}: its engine does not say which node it is: give --map NODE={machine}"
                ))
            })?,
        };
        let node = nodes.iter().find(|n| n.id == node_id).ok_or_else(|| {
            MainError::BadInput(format!(
                "machine {machine}: its engine is node {node_id}, which is not in the swarm seen through --engine"
            ))
        })?;
        if let Some(prev) = out
            .iter()
            .find(|m| m.node.id == node.id || m.foreign.reference == foreign.reference)
        {
            return Err(MainError::BadInput(format!(
                "machine {machine} and machine {} are the same node or machine ({}): name each once",
                prev.foreign.reference, node.id
            )));
        }
        let group = group_for(spec, node, args.workers.as_deref())?;
        out.push(Match {
            node: node.clone(),
            foreign,
            group,
            logical_id: None,
            zone: None,
        });
    }
    Ok(out)
}

/// A node by id or unique id prefix (as `docker node inspect` accepts).
fn find_node<'a>(nodes: &'a [Node], given: &str) -> Result<&'a Node, String> {
    let found: Vec<&Node> = nodes.iter().filter(|n| n.id.starts_with(given)).collect();
    match found.as_slice() {
        [one] => Ok(one),
        [] => Err(format!("no node {given} in the swarm")),
        _ => Err(format!(
            "{given} names {} nodes: give more of the id",
            found.len()
        )),
    }
}

/// The group a node goes to: the manager group for managers; for workers
/// the only worker group, or the one named by `--workers`.
fn group_for(spec: &ClusterSpec, node: &Node, workers: Option<&str>) -> Result<String, MainError> {
    let role = if node.manager_role {
        Role::Manager
    } else {
        Role::Worker
    };
    let candidates: Vec<&GroupSpec> = spec.groups.iter().filter(|g| g.role == role).collect();
    let chosen = match (role, workers, candidates.as_slice()) {
        (Role::Worker, Some(name), _) => candidates.iter().find(|g| g.name == name).copied(),
        (_, _, [one]) => Some(*one),
        _ => None,
    };
    chosen.map(|g| g.name.clone()).ok_or_else(|| {
        MainError::BadInput(match (role, workers) {
            (Role::Worker, Some(w)) => format!("--workers {w}: not a worker group of the file"),
            (Role::Worker, None) if candidates.len() > 1 => format!(
                "node {} is a worker and the file has {} worker groups: name one with --workers GROUP",
                node.id,
                candidates.len()
            ),
            _ => format!(
                "node {} is a {} but the file has no {} group to adopt it into",
                node.id,
                role.as_str(),
                role.as_str()
            ),
        })
    })
}

/// Gives every new match a slot: pets by the address their engine
/// advertises (it must be one of the group's free logical ids), cattle
/// within the group's size.
async fn assign_slots(
    spec: &ClusterSpec,
    mut matches: Vec<Match>,
    provider: &dyn InstanceProvider,
    cluster_id: Option<&str>,
) -> Result<Vec<Match>, MainError> {
    for g in &spec.groups {
        let existing = match cluster_id {
            Some(c) => provider
                .describe(
                    &[
                        (tags::CLUSTER.to_string(), c.to_string()),
                        (tags::GROUP.to_string(), g.name.clone()),
                    ]
                    .into(),
                )
                .await
                .map_err(|e| {
                    MainError::Failed(anyhow::anyhow!("describing group {}: {e}", g.name))
                })?,
            None => Vec::new(),
        };
        let mut taken: BTreeSet<String> = existing
            .iter()
            .filter_map(|i| i.logical_id().map(str::to_string))
            .collect();
        let mut count = existing.len();
        for m in matches
            .iter_mut()
            .filter(|m| m.group == g.name && m.foreign.adopted_as.is_none())
        {
            count += 1;
            if count > g.allocation.size() {
                return Err(MainError::BadInput(format!(
                    "group {} has {} member(s) declared; adopting node {} would exceed that: raise its size or adopt fewer machines",
                    g.name,
                    g.allocation.size(),
                    m.node.id
                )));
            }
            let slots = g.slots();
            if !g.allocation.is_pets() {
                m.zone = slots.get(count - 1).and_then(|s| s.zone.clone());
                continue;
            }
            let addr = m.foreign.address.clone().unwrap_or_default();
            let slot = slots
                .iter()
                .find(|s| s.logical_id.as_deref() == Some(addr.as_str()) && !taken.contains(&addr))
                .ok_or_else(|| {
                    MainError::BadInput(format!(
                        "node {} advertises {:?}, which is not a free logical id of group {}: add it to allocation.logical_ids",
                        m.node.id, addr, g.name
                    ))
                })?;
            taken.insert(addr.clone());
            m.logical_id = Some(addr);
            m.zone = slot.zone.clone();
        }
    }
    Ok(matches)
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

/// Labels the node, then hands the machine to the provider (see the module
/// doc for why in this order). Rerunning reuses the node's link.
async fn adopt_one(
    m: &Match,
    spec: &ClusterSpec,
    cluster_id: &str,
    engine: &Engine,
    provider: &dyn InstanceProvider,
) -> Result<(), MainError> {
    if m.foreign.adopted_as.is_some() {
        return Ok(());
    }
    let group = spec
        .group(&m.group)
        .expect("matched groups come from the spec");
    let link = match (&m.node.link, &m.node.cluster) {
        (Some(l), Some(c)) if c == cluster_id => l.clone(),
        _ => format!("l{}", uuid::Uuid::new_v4().simple()),
    };
    let labels: BTreeMap<String, String> = [
        (tags::CLUSTER, cluster_id.to_string()),
        (tags::GROUP, m.group.clone()),
        (tags::LINK, link),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v))
    .collect();
    engine
        .update_node_spec(&m.node.id, |s| {
            let l = s.labels.get_or_insert_with(Default::default);
            l.extend(labels.iter().map(|(k, v)| (k.clone(), v.clone())));
        })
        .await
        .map_err(|e| MainError::Failed(anyhow::anyhow!("labelling node {}: {e}", m.node.id)))?;
    let mut instance_tags = labels;
    instance_tags.insert(tags::ADOPTED.into(), config_hash(group));
    if let Some(l) = &m.logical_id {
        instance_tags.insert(tags::LOGICAL_ID.into(), l.clone());
    }
    if let Some(z) = &m.zone {
        instance_tags.insert(tags::ZONE.into(), z.clone());
    }
    let id = provider
        .adopt(&m.foreign.reference, &instance_tags)
        .await
        .map_err(|e| MainError::Failed(anyhow::anyhow!("adopting {}: {e}", m.foreign.reference)))?;
    println!("adopted node {} as instance {id} of {}", m.node.id, m.group);
    Ok(())
}

/// The file's groups (keeping the store's others) and the revision they
/// replace, validated; `None` when the store already holds exactly that.
async fn to_commit(
    store: &dyn Store,
    file: &ClusterSpec,
) -> Result<Option<(u64, Committable)>, MainError> {
    let current = store.desired().await.map_err(anyhow::Error::from)?;
    let (spec, _) = merge(current.as_ref().map(|r| &r.spec), file, false);
    if current.as_ref().is_some_and(|r| r.spec == spec) {
        return Ok(None);
    }
    let spec = validated(current.as_ref().map(|r| &r.spec), spec, "adopt")?;
    Ok(Some((current.map_or(0, |r| r.rev), spec)))
}
