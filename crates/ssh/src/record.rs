//! What drover keeps on an enrolled host, and how a free host is chosen:
//! pure, so the format and the choice are unit-tested without a host.
//!
//! The record is the truth of an enrollment: a host carrying one is
//! drover's (for the cluster and group its tags name), a host without one
//! is free. It lives in the host's state directory as `instance.json`,
//! root-only, written whole (a new file linked or renamed into place), so
//! a reader sees the old record or the new one, never half of either.

use drover_core::model::{Instance, tags};
use drover_core::spec::ssh::SshHost;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// The record's file name in the host's state directory.
pub const RECORD: &str = "instance.json";
/// The record format this build writes (and the only one it reads).
pub const FORMAT: u32 = 1;

/// One host's enrollment.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Record {
    /// [`FORMAT`]: a later format is refused, never misread.
    pub drover: u32,
    /// The instance id ([`instance_id`]): the host's name and this
    /// enrollment's nonce.
    pub id: String,
    /// drover's tags (cluster, group, link, config, ...).
    pub tags: BTreeMap<String, String>,
    /// When the host was enrolled, ms since the Unix epoch (the
    /// controller's clock): the machine's creation time to the planner.
    pub created_ms: u64,
}

impl Record {
    /// A new enrollment of `host` carrying `tags`.
    pub fn new(host: &SshHost, tags: BTreeMap<String, String>, created_ms: u64) -> Record {
        let nonce = uuid::Uuid::new_v4().simple().to_string();
        Record {
            drover: FORMAT,
            id: instance_id(&host.name(), &nonce[..8]),
            tags,
            created_ms,
        }
    }

    /// The record's text: one line of JSON.
    pub fn to_text(&self) -> String {
        // A struct of strings and numbers always serialises.
        serde_json::to_string(self).unwrap_or_default() + "\n"
    }

    /// Reads a record's text: `None` when it is not one this build can read
    /// (another format, or not a record at all).
    pub fn parse(text: &str) -> Option<Record> {
        let r: Record = serde_json::from_str(text.trim()).ok()?;
        (r.drover == FORMAT).then_some(r)
    }

    /// As the planner sees it. Read from the host now, or last read from
    /// it when it does not answer: either way it is running (a host that
    /// does not answer is unknown, never stopped).
    pub fn instance(&self) -> Instance {
        Instance {
            id: self.id.clone(),
            tags: self.tags.clone().into(),
            running: true,
            created_ms: self.created_ms,
        }
    }

    /// True when the record carries every tag of `wanted`.
    pub fn matches(&self, wanted: &BTreeMap<String, String>) -> bool {
        wanted.iter().all(|(k, v)| self.tags.get(k) == Some(v))
    }
}

/// The id of enrollment `nonce` of the host named `host`: `NAME-NONCE`.
/// One per enrollment, not per host: a destroy of an earlier enrollment,
/// replayed from the journal after the host was enrolled again, finds an
/// id that is not the host's and leaves the new enrollment alone.
pub fn instance_id(host: &str, nonce: &str) -> String {
    format!("{host}-{nonce}")
}

/// The host name an instance id names ([`instance_id`]'s inverse).
pub fn host_of(id: &str) -> Option<&str> {
    let (host, nonce) = id.rsplit_once('-')?;
    let ok = nonce.len() == 8 && nonce.bytes().all(|b| b.is_ascii_hexdigit());
    (ok && !host.is_empty()).then_some(host)
}

/// What one host answered when its record was read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Answer {
    /// No record: the host is free.
    Free,
    /// Enrolled, by this record.
    Enrolled(Record),
    /// A record this build cannot read: taken, by nobody drover knows.
    Unreadable,
    /// The host could not be asked.
    Silent(Silence),
    /// No record, but its engine is part of a swarm already (found as the
    /// host was claimed): refused, for the reason given (naming the host),
    /// until the operator makes it leave.
    InSwarm(String),
}

/// Why a host could not be asked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Silence {
    /// What failed, naming the host.
    pub why: String,
    /// True when only the operator can change it (a host key refused, a
    /// login denied, a key file missing); false when the host may answer
    /// later (not reachable).
    pub lasting: bool,
}

/// Why no host could be chosen.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NoHost {
    /// A pet's host is not in the inventory.
    #[error("`{0}` is not a host of the group's inventory (instance.properties.hosts)")]
    NotInInventory(String),
    /// A pet's host is enrolled already (by another operation).
    #[error("host {host} is enrolled already, as {by}: a pet's host holds one member")]
    PetTaken {
        /// The host.
        host: String,
        /// The enrollment holding it.
        by: String,
    },
    /// A pet's host does not answer.
    #[error("the pet's host {host} cannot be asked: {why}")]
    PetSilent {
        /// The host.
        host: String,
        /// Why.
        why: String,
        /// See [`Silence::lasting`].
        lasting: bool,
    },
    /// A pet's host is refused: its engine is part of a swarm already.
    #[error("{why}")]
    PetRefused {
        /// Why, naming the host.
        why: String,
    },
    /// No free host answered (in the zone, when one was asked).
    #[error("{why}")]
    Exhausted {
        /// Host by host, why none is free.
        why: String,
        /// True when some host was refused for a reason only the operator
        /// can change ([`Silence::lasting`]).
        refused: bool,
    },
}

/// The host to enroll for a slot: a pet's own host (`logical_id` names
/// it), else the first free host in the inventory's order, in `zone` when
/// the slot asks one. `answers` are the hosts' answers in the
/// inventory's order; hosts in `skip` were tried already.
pub fn choose<'a>(
    hosts: &'a [SshHost],
    answers: &[Answer],
    logical_id: Option<&str>,
    zone: Option<&str>,
    skip: &[String],
) -> Result<&'a SshHost, NoHost> {
    let pairs = hosts.iter().zip(answers);
    if let Some(id) = logical_id {
        let (h, a) = pairs
            .clone()
            .find(|(h, _)| h.name() == id)
            .ok_or_else(|| NoHost::NotInInventory(id.to_string()))?;
        return match a {
            Answer::Free if !skip.contains(&h.name()) => Ok(h),
            Answer::Free | Answer::Unreadable => Err(NoHost::PetTaken {
                host: h.name(),
                by: "a record drover cannot read".into(),
            }),
            Answer::Enrolled(r) => Err(NoHost::PetTaken {
                host: h.name(),
                by: r.id.clone(),
            }),
            Answer::Silent(s) => Err(NoHost::PetSilent {
                host: h.name(),
                why: s.why.clone(),
                lasting: s.lasting,
            }),
            Answer::InSwarm(why) => Err(NoHost::PetRefused { why: why.clone() }),
        };
    }
    let in_zone = |h: &SshHost| zone.is_none_or(|z| h.zone.as_deref() == Some(z));
    if let Some((h, _)) = pairs
        .clone()
        .find(|(h, a)| in_zone(h) && **a == Answer::Free && !skip.contains(&h.name()))
    {
        return Ok(h);
    }
    let refused = pairs.clone().any(|(h, a)| {
        in_zone(h)
            && matches!(
                a,
                Answer::Silent(Silence { lasting: true, .. }) | Answer::InSwarm(_)
            )
    });
    Err(NoHost::Exhausted {
        why: exhausted(hosts, answers, zone),
        refused,
    })
}

/// Why no host is free, host by host: what an operator reads in the
/// group's blocked reason.
fn exhausted(hosts: &[SshHost], answers: &[Answer], zone: Option<&str>) -> String {
    let mut enrolled = Vec::new();
    let mut silent = Vec::new();
    let mut refused = Vec::new();
    for (h, a) in hosts.iter().zip(answers) {
        if zone.is_some_and(|z| h.zone.as_deref() != Some(z)) {
            continue;
        }
        match a {
            Answer::Enrolled(r) => enrolled.push(format!("{} ({})", h.name(), group_of(r))),
            Answer::Unreadable => enrolled.push(format!("{} (unreadable record)", h.name())),
            Answer::Silent(s) => silent.push(format!("{} ({})", h.name(), s.why)),
            Answer::Free => enrolled.push(format!("{} (taken meanwhile)", h.name())),
            Answer::InSwarm(why) => refused.push(why.clone()),
        }
    }
    let place = zone.map_or("the inventory".to_string(), |z| format!("zone {z}"));
    let mut out = format!("no free host in {place}");
    if !enrolled.is_empty() {
        out.push_str(&format!("; enrolled: {}", enrolled.join(", ")));
    }
    if !silent.is_empty() {
        out.push_str(&format!("; not answering: {}", silent.join(", ")));
    }
    if !refused.is_empty() {
        out.push_str(&format!("; refused: {}", refused.join("; ")));
    }
    out.push_str(": add hosts to instance.properties.hosts, or lower the group's size");
    out
}

/// Whose an enrollment is, for messages.
fn group_of(r: &Record) -> String {
    match r.tags.get(tags::GROUP) {
        Some(g) => format!("group {g}"),
        None => "no group".into(),
    }
}

#[cfg(test)]
mod tests;
