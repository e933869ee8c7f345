//! Retiring a group whose provider is gone, from outside the cluster
//! (`drover destroy GROUP --forget-machines`; the decisions are
//! [`drover_core::forget`]'s): whether the provider answers, what drover
//! last knew of the group's machines, and the forget itself — the group
//! leaves the desired state by a commit (compare-and-swap, in history),
//! its journaled operations leave the journal, its Down swarm nodes are
//! removed, and every machine forgotten is an event. Nothing is destroyed:
//! the machines may still run.

use crate::context::Context;
use crate::procedure::commit::{CommitError, commit};
use crate::status::{StatusDoc, wall_ms};
use drover_core::forget::{Known, Published, Reach, last_known, reach, removable};
use drover_core::model::{SwarmView, tags};
use drover_core::spec::{Committable, GroupSpec};
use drover_spi::{Event, EventAction, StoreError, Unfenced, Write};
use std::collections::BTreeMap;

/// Who the forget's events name.
pub const IDENTITY: &str = "drover destroy --forget-machines";

/// Why a forget stopped.
#[derive(Debug, thiserror::Error)]
pub enum ForgetError {
    /// The commit did not happen: nothing was forgotten.
    #[error(transparent)]
    Commit(#[from] CommitError),
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// What drover last knew of a group, read before anything is decided.
#[derive(Debug, Clone)]
pub struct Survey {
    /// Whether its provider can be described.
    pub reach: Reach,
    /// Every machine last known, each once.
    pub known: Vec<Known>,
    /// The swarm as seen from here.
    pub swarm: SwarmView,
}

/// Looks at group `g` of `cluster`: its provider (described here when it
/// is configured here, else judged from the acting controller's status),
/// the status document's members, the journal and the swarm's nodes.
pub async fn survey(ctx: &Context, g: &GroupSpec, cluster: &str) -> Result<Survey, StoreError> {
    let provider = g.instance.provider_key();
    let here = match ctx.providers.get(&provider) {
        None => None,
        Some(p) => {
            let filter = BTreeMap::from([
                (tags::CLUSTER.to_string(), cluster.to_string()),
                (tags::GROUP.to_string(), g.name.clone()),
            ]);
            Some(
                p.describe_fresh(&filter)
                    .await
                    .map(drop)
                    .map_err(|e| e.to_string()),
            )
        }
    };
    // A document this build cannot read tells nothing: as if none.
    let doc = StatusDoc::read(ctx.store.as_ref()).await.ok().flatten();
    let published = Published {
        providers: doc.as_ref().and_then(|d| d.providers.as_deref()),
        group: doc
            .as_ref()
            .and_then(|d| d.groups.iter().find(|s| s.name == g.name)),
    };
    let reach = reach(&provider, here, published);
    let journal = ctx.store.journal().await?;
    let swarm = ctx.cluster.observe().await;
    let nodes = match &swarm {
        SwarmView::Ok(nodes) => nodes.as_slice(),
        _ => &[],
    };
    let members = doc.as_ref().map(|d| &*d.instances).unwrap_or_default();
    let known = last_known(&g.name, members, &journal, nodes);
    Ok(Survey {
        reach,
        known,
        swarm,
    })
}

/// What a forget did besides the commit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Forgotten {
    /// The revision without the group.
    pub rev: u64,
    /// Operations of the group taken out of the journal.
    pub operations: Vec<String>,
    /// Down nodes of the group removed from the swarm.
    pub removed: Vec<String>,
    /// Nodes of the group left in the swarm, each with why.
    pub left: Vec<(String, String)>,
}

/// How often the group's records are tried again when the acting
/// controller takes the term back in between (it campaigns every pass).
const BATCH_TRIES: usize = 5;

/// Forgets group `g` as `who`: commits `without` (the desired state without
/// it, planned against revision `expected`: a conflict deposes nobody),
/// then, under an epoch of its own, takes the group's operations out of the
/// journal and records one event per machine in `survey.known` and one for
/// the group, all in one batch (again, a bounded number of times, when the
/// acting controller took the term back meanwhile: every write of it is
/// idempotent), and last removes its Down nodes from the swarm (unfenced;
/// never a live one, never a manager).
pub async fn forget(
    ctx: &Context,
    survey: &Survey,
    g: &GroupSpec,
    (expected, without): (u64, &Committable),
    who: &str,
) -> Result<Forgotten, ForgetError> {
    let store = ctx.store.as_ref();
    let group = &g.name;
    let message = format!("destroy {group} --forget-machines");
    let rev = commit(store, expected, without, who, &message, false).await?;
    let why = format!(
        "{}; forgotten on the operator's word ({who}): it may still run",
        gone_why(&survey.reach)
    );
    let mut tries = 0;
    let operations = loop {
        // The epoch fences the acting controller while the group's records
        // go (it campaigns again on a later pass, against the new revision).
        let epoch = store.campaign(IDENTITY).await?;
        let journal = store.journal().await?;
        let ops: Vec<String> = journal
            .iter()
            .filter(|o| &o.group == group)
            .map(|o| o.id.clone())
            .collect();
        let writes = records(&ops, survey, group, rev, &why);
        match store.write_batch(epoch, &writes).await {
            Err(StoreError::Fenced { .. }) if tries + 1 < BATCH_TRIES => tries += 1,
            Err(e) => return Err(e.into()),
            Ok(()) => break ops,
        }
    };
    let (removed, left) = nodes(ctx, survey, group).await;
    Ok(Forgotten {
        rev,
        operations,
        removed,
        left,
    })
}

/// The forget's writes: the group's operations out of the journal, one
/// event per machine last known, one for the group.
fn records(ops: &[String], survey: &Survey, group: &str, rev: u64, why: &str) -> Vec<Write> {
    let removals = ops.iter().map(|id| Write::JournalRemove(id.clone()));
    let machines = survey.known.iter().map(|k| {
        let reason = format!("{why} (last known from {})", k.from.as_str());
        note(group, Some(k.id().to_string()), reason)
    });
    let count = survey.known.len();
    let last = note(
        group,
        None,
        format!(
            "group {group} left the desired state at revision {rev} with {count} machine(s) forgotten: {why}"
        ),
    );
    let events = machines.chain(std::iter::once(last)).map(Write::Event);
    removals.chain(events).collect()
}

/// Why the provider is gone, as the survey found.
fn gone_why(reach: &Reach) -> &str {
    match reach {
        Reach::Gone { why, .. } | Reach::Answers(why) | Reach::Unknown(why) => why,
    }
}

/// Removes the group's Down nodes through the swarm's `node rm` (unforced:
/// a node that came back is refused by the swarm); the rest is left, each
/// with why.
async fn nodes(
    ctx: &Context,
    survey: &Survey,
    group: &str,
) -> (Vec<String>, Vec<(String, String)>) {
    let nodes = match &survey.swarm {
        SwarmView::Ok(nodes) => nodes,
        SwarmView::Absent => return (Vec::new(), Vec::new()),
        SwarmView::NoQuorum(why) | SwarmView::Unavailable(why) => {
            let left = survey
                .known
                .iter()
                .filter_map(|k| k.node.clone())
                .map(|n| (n, format!("the swarm could not be asked: {why}")))
                .collect();
            return (Vec::new(), left);
        }
    };
    let (down, up) = removable(nodes, group);
    let mut left: Vec<(String, String)> = up
        .iter()
        .map(|n| {
            let why = if n.in_raft() {
                "a manager: demote it first"
            } else {
                "still up: drain it and docker node rm it once its machine is gone"
            };
            (n.id.clone(), why.to_string())
        })
        .collect();
    let mut removed = Vec::new();
    for n in down {
        match ctx.cluster.remove_node(&n.id, false, &Unfenced).await {
            Ok(()) => removed.push(n.id.clone()),
            Err(e) => left.push((n.id.clone(), format!("node rm failed: {e}"))),
        }
    }
    (removed, left)
}

/// One `forget` event of `group` (`target`: a machine, `None`: the group).
fn note(group: &str, target: Option<String>, reason: String) -> Event {
    Event {
        at_ms: wall_ms(),
        controller: IDENTITY.into(),
        group: Some(group.into()),
        op: None,
        action: EventAction::Forget,
        target,
        outcome: "ok".into(),
        reason,
    }
}
