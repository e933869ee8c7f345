//! Retiring a group whose provider is gone (`drover destroy GROUP
//! --forget-machines`): the decisions, without I/O.
//!
//! A group is normally retired by scaling it to zero, and its provider
//! destroys each member. When the provider can no longer be reached (a
//! plugin gone for good), nothing can be destroyed, and the group would
//! stay declared, unobservable, forever — blocking the manager group's
//! teardown behind it. Silence is never evidence that machines are gone
//! (design rule 13), so the group leaves the desired state only on the
//! operator's explicit word, and only while its provider cannot be
//! described: one that answers is destroyed properly. What the operator
//! is told it may leave running is everything drover last knew of the
//! group — the acting controller's published members, its journaled
//! operations, the swarm's nodes carrying the group's label — each with
//! where it was learnt.

use crate::journal::Operation;
use crate::model::{Node, NodeState};
use crate::plan::{GroupStatus, MemberStatus, Phase};

/// Whether a group's provider can be described, as far as this command
/// can tell.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reach {
    /// It answers (here, or in the acting controller): retire the group
    /// properly.
    Answers(String),
    /// It cannot be described: why, and whether it is configured here at
    /// all (not configured here is the operator's input to fix or confirm).
    Gone {
        /// Why, naming the provider.
        why: String,
        /// The provider is configured for this command (it failed here).
        configured_here: bool,
    },
    /// Not configured here, and nothing published says the acting
    /// controller cannot describe it: why it is unknown.
    Unknown(String),
}

/// What the acting controller last published about the group's provider.
#[derive(Debug, Clone, Copy, Default)]
pub struct Published<'a> {
    /// The providers it is wired to (`None`: a document of an older
    /// controller, or none at all).
    pub providers: Option<&'a [String]>,
    /// The group's status in it.
    pub group: Option<&'a GroupStatus>,
}

/// Decides [`Reach`] for `provider` from this command's own describe
/// (`here`: `None` when the provider is not configured here, else its
/// outcome) and the acting controller's document. A describe that fails
/// here is not enough: the acting controller may still describe the group
/// (a plugin socket on its host only, a failure of the moment), and a
/// group forgotten while it does would have its machines collected as
/// orphans, undrained. Gone is what the controller says too, or a
/// provider it is not wired to.
pub fn reach(provider: &str, here: Option<Result<(), String>>, published: Published<'_>) -> Reach {
    let failed_here = match here {
        Some(Ok(())) => return Reach::Answers(format!("provider {provider} answers here")),
        Some(Err(e)) => Some(format!("provider {provider} does not answer here: {e}")),
        None => None,
    };
    let configured_here = failed_here.is_some();
    let local =
        failed_here.unwrap_or_else(|| format!("provider {provider} is not configured here"));
    let gone = |why: String| Reach::Gone {
        why,
        configured_here,
    };
    if let Some(g) = published.group.filter(|g| g.phase == Phase::Unobservable) {
        let reason = g.reason.as_deref().unwrap_or("no reason given");
        return gone(format!(
            "{local}, and the acting controller cannot describe the group ({reason})"
        ));
    }
    match published.providers {
        Some(wired) if !wired.iter().any(|p| p == provider) => gone(format!(
            "{local}, and the acting controller is not wired to it"
        )),
        Some(_) => Reach::Answers(format!(
            "{local}, but the acting controller is wired to it and describes the group"
        )),
        None => Reach::Unknown(format!(
            "{local}, and no controller has published whether it can describe the group"
        )),
    }
}

/// Where a machine's last known id was learnt.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    /// The acting controller's published status document (its members).
    Status,
    /// An operation in the journal (a member it was replacing or removing,
    /// or one it was making).
    Journal,
    /// A swarm node carrying the group's label.
    Swarm,
}

impl Source {
    /// As the operator reads it.
    pub fn as_str(self) -> &'static str {
        match self {
            Source::Status => "the published status",
            Source::Journal => "the journal",
            Source::Swarm => "the swarm's nodes",
        }
    }
}

/// One machine drover last knew of in a group; at least one id is set.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Known {
    /// Its provider instance id.
    pub instance: Option<String>,
    /// Its swarm node id.
    pub node: Option<String>,
    /// Its link (the `drover.link` tag): the only id of a machine an
    /// operation was making.
    pub link: Option<String>,
    /// Where it was learnt first.
    pub from: Source,
}

impl Known {
    /// The id events and the operator see: the instance id, else the node
    /// id, else the link.
    pub fn id(&self) -> &str {
        self.instance
            .as_deref()
            .or(self.node.as_deref())
            .or(self.link.as_deref())
            .unwrap_or_default()
    }
}

impl std::fmt::Display for Known {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match (&self.instance, &self.node, &self.link) {
            (Some(i), Some(n), _) => write!(f, "{i} (node {n})")?,
            (Some(i), None, _) => f.write_str(i)?,
            (None, Some(n), _) => write!(f, "node {n}")?,
            (None, None, Some(l)) => write!(f, "a machine tagged drover.link={l}")?,
            (None, None, None) => f.write_str("?")?,
        }
        write!(f, ", from {}", self.from.as_str())
    }
}

/// Every machine of `group` drover last knew of: the published members,
/// then the journal's (victims, and machines being made), then swarm nodes
/// labelled with the group that neither names. Each machine once.
pub fn last_known(
    group: &str,
    members: &[MemberStatus],
    journal: &[Operation],
    nodes: &[Node],
) -> Vec<Known> {
    let mut known: Vec<Known> = members
        .iter()
        .filter(|m| m.group == group)
        .map(|m| Known {
            instance: Some(m.id.clone()),
            node: m.node_id.clone(),
            link: None,
            from: Source::Status,
        })
        .collect();
    for op in journal.iter().filter(|o| o.group == group) {
        if let Some(v) = &op.victim
            && !known
                .iter()
                .any(|k| k.instance.is_some() && k.instance == v.instance)
        {
            known.push(Known {
                instance: v.instance.clone(),
                node: v.node.clone(),
                link: v.link.clone(),
                from: Source::Journal,
            });
        }
        if op.target.is_some() {
            known.push(Known {
                instance: None,
                node: None,
                link: Some(op.id.clone()),
                from: Source::Journal,
            });
        }
    }
    for n in nodes.iter().filter(|n| n.group.as_deref() == Some(group)) {
        let named = known.iter().any(|k| {
            k.node.as_deref() == Some(n.id.as_str()) || (k.link.is_some() && k.link == n.link)
        });
        if !named {
            known.push(Known {
                instance: None,
                node: Some(n.id.clone()),
                link: n.link.clone(),
                from: Source::Swarm,
            });
        }
    }
    known
}

/// The swarm nodes of `group` a forget removes (`node rm`, unforced):
/// Down and in no raft — a dead worker's leftover. Every other node of the
/// group is still up (or a manager) and is left for the operator.
pub fn removable<'a>(nodes: &'a [Node], group: &str) -> (Vec<&'a Node>, Vec<&'a Node>) {
    nodes
        .iter()
        .filter(|n| n.group.as_deref() == Some(group))
        .partition(|n| n.state == NodeState::Down && !n.in_raft())
}

#[cfg(test)]
mod tests;
