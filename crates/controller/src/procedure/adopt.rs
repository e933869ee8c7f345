//! Bringing a swarm built by hand under management without replacing
//! anything (`drover adopt`).
//!
//! Machines are matched to swarm nodes by what their own engine says (the
//! provider asks it) or by an explicit node given with the machine (node
//! addresses are no evidence: every non-leader node may report 127.0.0.1).
//! Each match becomes an instance tagged `drover.adopted=<config hash>` (it
//! counts as built from the spec it was adopted under, so it rolls only
//! when that changes), and its node gets drover's labels (an engine label
//! cannot be added without restarting the engine). Nodes nobody named are
//! never touched.
//!
//! Order, for crash safety: node labels first, then the provider record,
//! then the spec. A crash in between leaves a labelled node without an
//! instance (harmless: the reaper only collects Down nodes; adopting again
//! reuses its link), never an instance without its node (which would read
//! as a machine that never joined) nor a spec whose group looks empty
//! (which would provision a second set of machines).
//!
//! Every write is made under a term of the store's epoch ([`IDENTITY`]
//! campaigns for it): each is preceded by the store's fresh confirmation of
//! that term, and the node update carries it as its [`Fence`], checked by
//! the engine right before it sends. An adoption whose term was taken by a
//! controller meanwhile writes nothing more.

use crate::execute::{StepError, Tenure};
use crate::procedure::commit::{CommitError, commit};
use async_trait::async_trait;
use drover_core::hash::config_hash;
use drover_core::model::{Node, tags};
use drover_core::retire::with_file;
use drover_core::spec::{ClusterSpec, Committable, GroupSpec, Refused, Role, validate_commit};
use drover_spi::{
    ClusterError, Epoch, Fence, Foreign, InstanceProvider, ProviderError, Store, StoreError,
};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

/// Who an adoption's term, revision and events name.
pub const IDENTITY: &str = "drover adopt";

/// The swarm side of an adoption: labelling a node.
#[async_trait]
pub trait NodeLabels: Send + Sync {
    /// Adds `labels` to `node`'s spec; `fence` is checked right before the
    /// update is sent (and before each retry), and nothing is sent once it
    /// refuses.
    async fn label_node(
        &self,
        node: &str,
        labels: &BTreeMap<String, String>,
        fence: &dyn Fence,
    ) -> Result<(), ClusterError>;
}

/// A machine the operator named, with the node it is said to be (`None`:
/// ask its engine).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Named {
    /// The node id or unique id prefix the operator gave.
    pub node: Option<String>,
    /// The provider's reference to the machine.
    pub machine: String,
}

/// One machine matched to one node.
#[derive(Debug, Clone)]
pub struct Match {
    /// The node.
    pub node: Node,
    /// The machine, as its provider sees it.
    pub foreign: Foreign,
    /// The group it joins.
    pub group: String,
    /// Its pet slot, if its group has pets.
    pub logical_id: Option<String>,
    /// Its slot's zone, if any.
    pub zone: Option<String>,
}

/// What an adoption would do, decided before anything is written.
#[derive(Debug)]
pub struct Adoption {
    /// Every named machine, matched.
    pub matches: Vec<Match>,
    /// The spec to commit and the revision it replaces; `None` when the
    /// store already holds exactly it.
    pub change: Option<(u64, Committable)>,
}

impl Adoption {
    /// The matches not adopted before.
    pub fn new_ones(&self) -> impl Iterator<Item = &Match> {
        self.matches
            .iter()
            .filter(|m| m.foreign.adopted_as.is_none())
    }
}

/// The spec to commit with `file`'s groups (keeping the store's others)
/// and the revision it replaces, validated; `None` when the store already
/// holds exactly that. Asked after [`matches()`], before anything is written.
pub async fn change(
    store: &dyn Store,
    file: &ClusterSpec,
) -> Result<Option<(u64, Committable)>, AdoptError> {
    let current = store.desired().await?;
    let spec = with_file(current.as_ref().map(|r| &r.spec), file, false);
    if current.as_ref().is_some_and(|r| r.spec == spec) {
        return Ok(None);
    }
    let spec =
        validate_commit(current.as_ref().map(|r| &r.spec), spec).map_err(AdoptError::Refused)?;
    Ok(Some((current.map_or(0, |r| r.rev), spec)))
}

/// What was adopted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Adopted {
    /// Node id, instance id and group of each machine adopted now.
    pub instances: Vec<(String, String, String)>,
    /// The revision committed, if the spec changed.
    pub revision: Option<u64>,
}

/// Why an adoption was refused or stopped.
#[derive(Debug, thiserror::Error)]
pub enum AdoptError {
    /// No machine was named.
    #[error("name the machines to adopt with --machine MACHINE (or --map NODE=MACHINE)")]
    NoMachines,
    /// The provider cannot look at the machine.
    #[error("machine {machine}: {error}")]
    Inspect {
        /// The machine.
        machine: String,
        /// The provider's refusal.
        error: ProviderError,
    },
    /// The node given with a machine is not one node of the swarm.
    #[error("--map {given}={machine}: {}", match .count { 0 => format!("no node {given} in the swarm"), n => format!("{given} names {n} nodes: give more of the id") })]
    NodeNotOne {
        /// The id (prefix) given.
        given: String,
        /// The machine.
        machine: String,
        /// How many nodes it names.
        count: usize,
    },
    /// The machine's engine does not say which node it is.
    #[error(
        "machine {machine}: its engine does not say which node it is: give --map NODE={machine}"
    )]
    NodeUnknown {
        /// The machine.
        machine: String,
    },
    /// The machine's engine is a node the swarm does not list.
    #[error(
        "machine {machine}: its engine is node {node}, which is not in the swarm seen through --engine"
    )]
    NotInSwarm {
        /// The machine.
        machine: String,
        /// The node its engine says it is.
        node: String,
    },
    /// Two names for one node or one machine.
    #[error(
        "machine {machine} and machine {earlier} are the same node or machine ({node}): name each once"
    )]
    Twice {
        /// The machine named second.
        machine: String,
        /// The machine named first.
        earlier: String,
        /// The node.
        node: String,
    },
    /// The worker group named is not one of the file's.
    #[error("--workers {0}: not a worker group of the file")]
    NoSuchWorkers(String),
    /// A worker node, and more than one worker group to put it in.
    #[error(
        "node {node} is a worker and the file has {groups} worker groups: name one with --workers GROUP"
    )]
    WhichWorkers {
        /// The node.
        node: String,
        /// How many worker groups the file has.
        groups: usize,
    },
    /// No group of the node's role.
    #[error("node {node} is a {} but the file has no {} group to adopt it into", .role.as_str(), .role.as_str())]
    NoGroup {
        /// The node.
        node: String,
        /// Its role.
        role: Role,
    },
    /// The provider could not list a group's machines.
    #[error("describing group {group}: {error}")]
    Describe {
        /// The group.
        group: String,
        /// The provider's error.
        error: ProviderError,
    },
    /// More members than the group declares.
    #[error(
        "group {group} has {size} member(s) declared; adopting node {node} would exceed that: raise its size or adopt fewer machines"
    )]
    TooMany {
        /// The group.
        group: String,
        /// Its declared size.
        size: usize,
        /// The node that would exceed it.
        node: String,
    },
    /// A pet's address is not a free logical id of its group.
    #[error(
        "node {node} advertises {address:?}, which is not a free logical id of group {group}: add it to allocation.logical_ids"
    )]
    NoSlot {
        /// The node.
        node: String,
        /// The address its engine advertises.
        address: String,
        /// The group.
        group: String,
    },
    /// The spec with the file's groups may not be committed.
    #[error("adopt: the desired state it would commit is not valid; nothing was committed")]
    Refused(Refused),
    /// The store did not confirm the adoption's term right before a write
    /// (another controller campaigned since, or the store could not be
    /// asked): nothing more was written.
    #[error("not adopted: the store did not confirm this adoption's term: {0}")]
    Unconfirmed(StoreError),
    /// Every confirmation of the term arrived too late to be trusted.
    #[error("not adopted: the store's confirmation of this adoption's term came too late")]
    SlowConfirmation,
    /// Labelling a node failed (or its fence refused: nothing was sent).
    #[error("labelling node {node}: {error}")]
    Label {
        /// The node.
        node: String,
        /// The swarm's error.
        error: ClusterError,
    },
    /// The provider failed to adopt a machine.
    #[error("adopting {machine}: {error}")]
    Adopt {
        /// The machine.
        machine: String,
        /// The provider's error.
        error: ProviderError,
    },
    /// The commit was refused or failed.
    #[error(transparent)]
    Commit(#[from] CommitError),
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl AdoptError {
    /// True when what the operator gave is wrong (nothing was written).
    pub fn is_bad_input(&self) -> bool {
        !matches!(
            self,
            AdoptError::Describe { .. }
                | AdoptError::Unconfirmed(_)
                | AdoptError::SlowConfirmation
                | AdoptError::Label { .. }
                | AdoptError::Adopt { .. }
                | AdoptError::Commit(CommitError::Store(_))
                | AdoptError::Store(_)
        )
    }

    /// True when the term was taken by another controller.
    pub fn is_deposed(&self) -> bool {
        matches!(self, AdoptError::Unconfirmed(StoreError::Fenced { .. }))
    }
}

impl From<StepError> for AdoptError {
    fn from(e: StepError) -> Self {
        match e {
            StepError::Unconfirmed(e) => AdoptError::Unconfirmed(e),
            _ => AdoptError::SlowConfirmation,
        }
    }
}

/// Matches every `named` machine to one of `nodes` and a slot of `spec`'s
/// groups; writes nothing. `workers` names the worker group when the file
/// has several.
pub async fn matches(
    spec: &ClusterSpec,
    named: &[Named],
    workers: Option<&str>,
    nodes: &[Node],
    provider: &dyn InstanceProvider,
    store: &dyn Store,
) -> Result<Vec<Match>, AdoptError> {
    let cluster_id = store.cluster_id().await?;
    let matches = match_machines(spec, named, workers, nodes, provider).await?;
    assign_slots(spec, matches, provider, cluster_id.as_deref()).await
}

/// Who writes an adoption, and under which term.
pub struct Writer<'a> {
    /// The store.
    pub store: Arc<dyn Store>,
    /// The term won for the adoption (campaigned for as [`IDENTITY`]).
    pub epoch: Epoch,
    /// The operator, as the revision records them.
    pub who: &'a str,
}

/// Carries `adoption` of `spec`'s machines out in cluster `cluster_id`, as
/// `writer`: labels each new match's node, hands its machine to the
/// provider, then commits the spec. `adopted` hears each machine as it is
/// adopted.
pub async fn carry_out(
    adoption: &Adoption,
    spec: &ClusterSpec,
    cluster_id: &str,
    writer: Writer<'_>,
    nodes: &dyn NodeLabels,
    provider: &dyn InstanceProvider,
    mut adopted: impl FnMut(&Match, &str),
) -> Result<Adopted, AdoptError> {
    let Writer { store, epoch, who } = writer;
    let term = Tenure { store, epoch };
    let mut instances = Vec::new();
    for m in adoption.new_ones() {
        let id = adopt_one(m, spec, cluster_id, &term, nodes, provider).await?;
        adopted(m, &id);
        instances.push((m.node.id.clone(), id, m.group.clone()));
    }
    let mut revision = None;
    if let Some((expected, spec)) = &adoption.change {
        let lease = term.confirm("adopt: commit").await?;
        // The operator's commit takes no fence: the lease is checked right before it.
        lease.check().map_err(|_| AdoptError::SlowConfirmation)?;
        revision = Some(commit(term.store.as_ref(), *expected, spec, who, "adopt", false).await?);
    }
    Ok(Adopted {
        instances,
        revision,
    })
}

/// Asks the provider about every named machine and finds its node.
async fn match_machines(
    spec: &ClusterSpec,
    named: &[Named],
    workers: Option<&str>,
    nodes: &[Node],
    provider: &dyn InstanceProvider,
) -> Result<Vec<Match>, AdoptError> {
    if named.is_empty() {
        return Err(AdoptError::NoMachines);
    }
    let mut out: Vec<Match> = Vec::new();
    for Named { node, machine } in named {
        let foreign =
            provider
                .inspect_foreign(machine)
                .await
                .map_err(|error| AdoptError::Inspect {
                    machine: machine.clone(),
                    error,
                })?;
        let node_id = match node {
            Some(n) => find_node(nodes, n, machine)?.id.clone(),
            None => foreign
                .node_id
                .clone()
                .ok_or_else(|| AdoptError::NodeUnknown {
                    machine: machine.clone(),
                })?,
        };
        let node =
            nodes
                .iter()
                .find(|n| n.id == node_id)
                .ok_or_else(|| AdoptError::NotInSwarm {
                    machine: machine.clone(),
                    node: node_id.clone(),
                })?;
        if let Some(prev) = out
            .iter()
            .find(|m| m.node.id == node.id || m.foreign.reference == foreign.reference)
        {
            return Err(AdoptError::Twice {
                machine: machine.clone(),
                earlier: prev.foreign.reference.clone(),
                node: node.id.clone(),
            });
        }
        let group = group_for(spec, node, workers)?;
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
fn find_node<'a>(nodes: &'a [Node], given: &str, machine: &str) -> Result<&'a Node, AdoptError> {
    let found: Vec<&Node> = nodes.iter().filter(|n| n.id.starts_with(given)).collect();
    match found.as_slice() {
        [one] => Ok(one),
        _ => Err(AdoptError::NodeNotOne {
            given: given.to_string(),
            machine: machine.to_string(),
            count: found.len(),
        }),
    }
}

/// The group a node goes to: the manager group for managers; for workers
/// the only worker group, or the one named by `workers`.
fn group_for(spec: &ClusterSpec, node: &Node, workers: Option<&str>) -> Result<String, AdoptError> {
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
    chosen
        .map(|g| g.name.clone())
        .ok_or_else(|| match (role, workers) {
            (Role::Worker, Some(w)) => AdoptError::NoSuchWorkers(w.to_string()),
            (Role::Worker, None) if candidates.len() > 1 => AdoptError::WhichWorkers {
                node: node.id.clone(),
                groups: candidates.len(),
            },
            _ => AdoptError::NoGroup {
                node: node.id.clone(),
                role,
            },
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
) -> Result<Vec<Match>, AdoptError> {
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
                .map_err(|error| AdoptError::Describe {
                    group: g.name.clone(),
                    error,
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
                return Err(AdoptError::TooMany {
                    group: g.name.clone(),
                    size: g.allocation.size(),
                    node: m.node.id.clone(),
                });
            }
            slot(g, m, count, &mut taken)?;
        }
    }
    Ok(matches)
}

/// Places `m`, the `count`th member of `g`, in its slot.
fn slot(
    g: &GroupSpec,
    m: &mut Match,
    count: usize,
    taken: &mut BTreeSet<String>,
) -> Result<(), AdoptError> {
    let slots = g.slots();
    if !g.allocation.is_pets() {
        m.zone = slots.get(count - 1).and_then(|s| s.zone.clone());
        return Ok(());
    }
    let addr = m.foreign.address.clone().unwrap_or_default();
    let slot = slots
        .iter()
        .find(|s| s.logical_id.as_deref() == Some(addr.as_str()) && !taken.contains(&addr))
        .ok_or_else(|| AdoptError::NoSlot {
            node: m.node.id.clone(),
            address: addr.clone(),
            group: g.name.clone(),
        })?;
    taken.insert(addr.clone());
    m.logical_id = Some(addr);
    m.zone = slot.zone.clone();
    Ok(())
}

/// Labels the node, then hands the machine to the provider (see the module
/// doc for why in this order), each under a fresh confirmation of the
/// term. Adopting again reuses the node's link.
async fn adopt_one(
    m: &Match,
    spec: &ClusterSpec,
    cluster_id: &str,
    term: &Tenure,
    nodes: &dyn NodeLabels,
    provider: &dyn InstanceProvider,
) -> Result<String, AdoptError> {
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
    let lease = term.confirm(&format!("adopt: label {}", m.node.id)).await?;
    nodes
        .label_node(&m.node.id, &labels, &lease)
        .await
        .map_err(|error| AdoptError::Label {
            node: m.node.id.clone(),
            error,
        })?;
    let mut instance_tags = labels;
    instance_tags.insert(tags::ADOPTED.into(), config_hash(group));
    if let Some(l) = &m.logical_id {
        instance_tags.insert(tags::LOGICAL_ID.into(), l.clone());
    }
    if let Some(z) = &m.zone {
        instance_tags.insert(tags::ZONE.into(), z.clone());
    }
    let adopt_failed = |error| AdoptError::Adopt {
        machine: m.foreign.reference.clone(),
        error,
    };
    let lease = term
        .confirm(&format!("adopt: {}", m.foreign.reference))
        .await?;
    // The provider's adopt takes no fence: the lease is checked right before it.
    lease.check().map_err(|e| adopt_failed(e.into()))?;
    provider
        .adopt(&m.foreign.reference, &instance_tags)
        .await
        .map_err(adopt_failed)
}

#[cfg(test)]
mod tests;
