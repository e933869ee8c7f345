//! Recovering a lost manager quorum, on evidence (design rule 11, issue 18).
//!
//! `swarm init --force-new-cluster` turns one surviving manager into a
//! single-member raft that keeps the swarm's state (services, workers,
//! the cluster id and join tokens). Run on a minority whose majority still
//! lives elsewhere — a partition, a paused engine — it makes **two
//! swarms**, each taking writes. So [`decide`] proceeds only when every raft
//! member that does not answer is named gone for good by the operator
//! (`--gone`: its machine, or, for a member on no machine the provider
//! lists, its address or node id). A member on no listed machine is not
//! proven gone by that absence: drover cannot tell a machine it destroyed
//! from a manager it never made (joined by hand, another provider, another
//! state dir), which may still run. Any other lost member refuses the
//! recovery, naming the machine and why.
//!
//! The shell gathers the [`Evidence`] (each machine of the provider, its
//! engine asked directly; the raft membership as the answering managers
//! report it), calls [`decide`], prints, and only on
//! [`Decision::Proceed`] or [`Decision::Finish`] acts.
//!
//! # Journaled: a rerun finishes what a cut-short run started
//! A recovery is three steps, only the first irreversible: force-new-cluster,
//! then removing the gone members' node entries, then the audit event. The
//! shell writes a [`Started`] record (the recovery as decided, with its
//! evidence and time) *before* force-new-cluster. A run cut short after it
//! leaves a swarm with a leader, the gone members' entries and the record; a
//! rerun finds the record and an engine that knows a leader, and [`decide`]
//! answers [`Decision::Finish`]: the [`Tail`] of that very recovery — the
//! entries the record names that are still listed, down and out of the raft
//! — and never force-new-cluster again. A record with no leader anywhere
//! [`FORMING_MS`] after it started means force-new-cluster did not take
//! effect: the evidence is judged afresh, on the operator's `--gone` as the
//! first time (before then, the new cluster may still be forming: refused).
//!
//! # Guarantees
//! - Never proceeds while an engine knows a leader, or while enough members
//!   may still be voting for a quorum (an election, not a loss).
//! - Never proceeds while a lost member is not named by the operator with
//!   `--gone`, whether or not the provider lists a machine at its address.
//! - With several surviving managers it proceeds only from the one the
//!   operator names with `--from`: the engines do not report how far each
//!   raft log got (`docker info` shows no raft index without a leader,
//!   measured), so drover cannot tell which holds the most recent state.
//! - Never proceeds (a second force-new-cluster) while a recovery is
//!   recorded and an engine knows a leader; finishing it removes only node
//!   entries the record names gone, listed neither Ready nor in the raft.
//! - Nor while a recovery recorded less than [`FORMING_MS`] ago may still
//!   be forming its new cluster (the engine goes on without its client).

use crate::model::{Node, NodeState};
use crate::quorum::quorum;
use crate::quorum_probe::EngineAnswer;
use crate::verdict::machine::{self, Listing, MachineEvidence, MachineVerdict, Power};
use crate::verdict::quorum::too_few_to_vote;
use serde::{Deserialize, Serialize};

mod refusal;
pub use refusal::{BadInput, Refusal};

/// One raft member as an answering manager's engine lists it
/// (`docker info .Swarm.RemoteManagers`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Peer {
    /// Its swarm node id.
    pub node_id: String,
    /// Its raft address, `host:port`.
    pub addr: String,
}

impl Peer {
    /// The address without its port: how a machine is matched to it.
    pub fn host(&self) -> &str {
        self.addr
            .rsplit_once(':')
            .map_or(self.addr.as_str(), |(h, _)| h)
    }
}

/// What a manager whose swarm has no leader says of its raft.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Raft {
    /// Its own node id.
    pub node_id: String,
    /// The raft members it knows, itself included.
    pub peers: Vec<Peer>,
}

/// One machine as its provider lists it, and what its engine said.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Machine {
    /// The provider's id.
    pub id: String,
    /// Its group (the provider's tag).
    pub group: String,
    /// The address its engine advertises.
    pub address: String,
    /// What its engine said, asked directly.
    pub answer: EngineAnswer,
    /// For a manager without a leader: its raft as it reports it.
    pub raft: Option<Raft>,
}

/// Everything [`decide`] judges by.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Evidence {
    /// Every machine of a successful describe of the provider.
    pub machines: Vec<Machine>,
    /// Machines the operator says are gone for good (`--gone`).
    pub gone: Vec<String>,
    /// The survivor the operator chose (`--from`).
    pub from: Option<String>,
    /// The recovery a previous run recorded as started and did not
    /// finish, if any.
    pub started: Option<Started>,
    /// The swarm's nodes, read through an engine that knows a leader (the
    /// shell reads them when a recovery is recorded as started).
    pub listed: Option<Listed>,
    /// Now, ms since the Unix epoch (the caller's clock): how long ago a
    /// recorded recovery started.
    pub now_ms: u64,
}

/// How long after a recorded recovery started its force-new-cluster may
/// still be forming the new cluster without its client: the engine goes on
/// when the client is gone, took 16–21 s in the e2e (`swarm-facts.md`),
/// and a second force-new-cluster meanwhile breaks the first ("address
/// already in use", measured). `recover` itself waits up to 60 s for the
/// call and 30 s more for a leader.
pub const FORMING_MS: u64 = 120_000;

/// The swarm's node list, as a manager that knows a leader lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Listed {
    /// The machine whose engine listed them.
    pub by: String,
    /// The nodes.
    pub nodes: Vec<Node>,
}

/// The durable record of a recovery, written before force-new-cluster
/// and removed once its tail is done: what was decided, on what evidence,
/// when. Holds machine ids, node ids and addresses, never a secret.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Started {
    /// When it started, ms since the Unix epoch (the caller's clock).
    pub at_ms: u64,
    /// The recovery as decided: the survivor and the members named gone,
    /// each with the operator's word.
    pub recovery: Recovery,
}

impl Started {
    /// The record of `recovery`, starting at `now_ms`.
    pub fn new(recovery: Recovery, now_ms: u64) -> Started {
        Started {
            at_ms: now_ms,
            recovery,
        }
    }

    /// The audit event's operation id: the same for every run that
    /// finishes this recovery, so its event is written once.
    pub fn op(&self) -> String {
        format!("recover-{}", self.at_ms)
    }
}

/// Why a node entry the record names gone is not removed: it is back.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Back {
    /// The leader lists it in the raft.
    RaftMember,
    /// The leader lists it Ready.
    Ready,
}

impl std::fmt::Display for Back {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Back::RaftMember => "the leader lists it in the raft again",
            Back::Ready => "the leader lists it Ready again",
        })
    }
}

/// A member the record names gone whose node entry stays, and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Kept {
    /// The member.
    pub member: Peer,
    /// Why its entry stays.
    pub why: Back,
}

/// A recovery's remaining steps after force-new-cluster, from the node
/// list of the swarm that has a leader again.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Default)]
pub struct Tail {
    /// Gone members whose node entries are still listed, neither Ready nor
    /// in the raft: removed (`docker node rm`, never forced).
    pub remove: Vec<Peer>,
    /// Gone members whose node entries are not listed any more.
    pub absent: Vec<Peer>,
    /// Gone members listed Ready or in the raft: back, not removed.
    pub kept: Vec<Kept>,
}

/// What is left to do of the recovery `started`, the swarm's nodes being
/// `nodes` (listed with a leader). Only members the record names are
/// considered; any other node is left alone.
pub fn tail(started: &Started, nodes: &[Node]) -> Tail {
    let mut t = Tail::default();
    for g in &started.recovery.gone {
        let member = g.member.clone();
        match nodes.iter().find(|n| n.id == g.member.node_id) {
            None => t.absent.push(member),
            Some(n) if n.raft.is_some() => t.kept.push(Kept {
                member,
                why: Back::RaftMember,
            }),
            Some(n) if n.state == NodeState::Ready => t.kept.push(Kept {
                member,
                why: Back::Ready,
            }),
            Some(_) => t.remove.push(member),
        }
    }
    t
}

/// Finishing a recovery a previous run started and did not complete.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Finish {
    /// The record of the recovery.
    pub started: Started,
    /// The machine whose engine knows the leader: the tail is done through it.
    pub through: String,
    /// What is left to do.
    pub tail: Tail,
}

/// Why a lost member counts as gone for good: the operator said so.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Proof {
    /// No machine of the provider has its address, and the operator named
    /// the member (its address or node id) with `--gone`.
    Unlisted {
        /// The name the operator gave.
        named: String,
    },
    /// The operator named its machine with `--gone`.
    Operator {
        /// The machine.
        machine: String,
    },
}

/// A raft member that does not answer, proven gone for good.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Gone {
    /// The member.
    pub member: Peer,
    /// Why it counts as gone.
    pub proof: Proof,
}

/// What a recovery does.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Recovery {
    /// The machine whose engine becomes the new cluster's only manager.
    pub survivor: String,
    /// Its node id.
    pub node_id: String,
    /// Its raft address (`host:port`): it listens and advertises there again.
    pub addr: String,
    /// The raft's members before the recovery.
    pub members: usize,
    /// The members that do not answer, each proven gone; their node
    /// entries are removed after the new cluster is formed.
    pub gone: Vec<Gone>,
}

impl Recovery {
    /// The recovery and its evidence in one sentence (the audit event's
    /// reason, the plan's line).
    pub fn summary(&self) -> String {
        let gone: Vec<String> = self
            .gone
            .iter()
            .map(|g| {
                let why = match &g.proof {
                    Proof::Unlisted { named } => format!(
                        "on no machine the provider lists, named gone by the operator (--gone {named})"
                    ),
                    Proof::Operator { machine } => {
                        format!("its machine {machine} named gone by the operator (--gone)")
                    }
                };
                format!("node {} ({}): {why}", g.member.node_id, g.member.addr)
            })
            .collect();
        format!(
            "force-new-cluster on {} ({}, node {}): {} of {} raft members lost, each gone for good: {}",
            self.survivor,
            self.addr,
            self.node_id,
            self.gone.len(),
            self.members,
            gone.join("; ")
        )
    }
}

/// What [`decide`] concluded.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "decision", rename_all = "snake_case")]
pub enum Decision {
    /// Recover as described.
    Proceed(Recovery),
    /// Finish the recorded recovery: the swarm has a leader again.
    Finish(Finish),
    /// Change nothing, for these reasons.
    Refuse {
        /// Every reason found.
        reasons: Vec<Refusal>,
    },
}

/// Judges `e`: finish a recorded recovery (one is recorded and an engine
/// knows a leader), recover (from which survivor, with which members
/// proven gone) or refuse, with every reason. `Err` when the operator's
/// `--gone` or `--from` names what it cannot.
pub fn decide(e: &Evidence) -> Result<Decision, BadInput> {
    if let (Some(started), Some(listed)) = (&e.started, &e.listed)
        && e.machines
            .iter()
            .any(|m| m.id == listed.by && m.answer == EngineAnswer::Led)
    {
        return finish(e, started, listed).map(Decision::Finish);
    }
    if let Some(s) = &e.started
        && !e.machines.iter().any(|m| m.answer == EngineAnswer::Led)
        && e.now_ms.saturating_sub(s.at_ms) < FORMING_MS
    {
        let ago = e.now_ms.saturating_sub(s.at_ms);
        return Ok(refuse(Refusal::MayStillBeForming {
            survivor: s.recovery.survivor.clone(),
            ago_s: ago / 1000,
            wait_s: (FORMING_MS - ago).div_ceil(1000),
        }));
    }
    let survivors: Vec<(&Machine, &Raft)> = e
        .machines
        .iter()
        .filter_map(|m| m.raft.as_ref().map(|r| (m, r)))
        .collect();
    let members = membership(&survivors);
    check_names(e, &members)?;
    check_gone_are_members(e, &survivors, &members)?;
    if let Some(m) = e.machines.iter().find(|m| m.answer == EngineAnswer::Led) {
        return Ok(refuse(Refusal::QuorumHeld {
            machine: m.id.clone(),
        }));
    }
    if survivors.is_empty() {
        return Ok(refuse(Refusal::NoSurvivor));
    }
    let lost: Vec<&Peer> = members
        .iter()
        .filter(|p| !survivors.iter().any(|(_, r)| r.node_id == p.node_id))
        .collect();
    // Every silent member that may still run is named, whether or not the
    // quorum is lost for sure: the operator's next step is about them.
    let mut reasons = Vec::new();
    let mut gone = Vec::new();
    for p in &lost {
        match proof(e, p) {
            Ok(proof) => gone.push(Gone {
                member: (*p).clone(),
                proof,
            }),
            Err(r) => reasons.push(r),
        }
    }
    let may_vote = survivors.len() + lost.iter().filter(|p| member(e, p).may_vote()).count();
    if !too_few_to_vote(may_vote, members.len()) {
        reasons.push(Refusal::NotLost {
            may_vote,
            members: members.len(),
            quorum: quorum(members.len()),
        });
    }
    let survivor = match choose(e, &survivors) {
        Ok(s) => Some(s),
        Err(r) => {
            reasons.push(r);
            None
        }
    };
    match survivor {
        Some((m, raft)) if reasons.is_empty() => Ok(Decision::Proceed(Recovery {
            survivor: m.id.clone(),
            node_id: raft.node_id.clone(),
            addr: own_addr(m, raft),
            members: members.len(),
            gone,
        })),
        _ => Ok(Decision::Refuse { reasons }),
    }
}

/// The recorded recovery's tail. The operator may repeat its `--gone`
/// and `--from`; a name it did not record is bad input.
fn finish(e: &Evidence, started: &Started, listed: &Listed) -> Result<Finish, BadInput> {
    let r = &started.recovery;
    for name in &e.gone {
        if !r.gone.iter().any(|g| recorded(g, name)) {
            return Err(BadInput::NotRecorded {
                name: name.clone(),
                at_ms: started.at_ms,
                recorded: r
                    .gone
                    .iter()
                    .map(|g| g.member.host())
                    .collect::<Vec<_>>()
                    .join(", "),
            });
        }
    }
    if let Some(from) = &e.from
        && from != &r.survivor
    {
        return Err(BadInput::FromNotRecorded {
            machine: from.clone(),
            at_ms: started.at_ms,
            survivor: r.survivor.clone(),
        });
    }
    Ok(Finish {
        started: started.clone(),
        through: listed.by.clone(),
        tail: tail(started, &listed.nodes),
    })
}

/// `name` (a `--gone` argument) is how the record names gone member `g`:
/// its address, node id, or the machine or name the operator gave.
fn recorded(g: &Gone, name: &str) -> bool {
    named(&g.member, name)
        || match &g.proof {
            Proof::Operator { machine } => machine == name,
            Proof::Unlisted { named } => named == name,
        }
}

fn refuse(r: Refusal) -> Decision {
    Decision::Refuse { reasons: vec![r] }
}

/// Every `--gone` names a machine the provider lists or a raft member on
/// no listed machine (address or node id), and `--from` a listed machine;
/// a `--gone` machine does not answer as a manager; `--from` does, without
/// a leader.
fn check_names(e: &Evidence, members: &[Peer]) -> Result<(), BadInput> {
    let find = |flag: &'static str, name: &str| {
        e.machines
            .iter()
            .find(|m| m.id == name)
            .ok_or_else(|| BadInput::UnknownMachine {
                flag,
                machine: name.to_string(),
                known: e
                    .machines
                    .iter()
                    .map(|m| m.id.as_str())
                    .collect::<Vec<_>>()
                    .join(", "),
            })
    };
    for name in &e.gone {
        if members
            .iter()
            .any(|p| named(p, name) && machine_of(e, p).is_none())
        {
            continue;
        }
        let m = find("--gone", name)?;
        if matches!(m.answer, EngineAnswer::Led | EngineAnswer::NoLeader(_)) {
            return Err(BadInput::GoneAnswers {
                machine: m.id.clone(),
            });
        }
        let named = MachineEvidence {
            listing: Listing::Listed(Power::Unknown),
            engine: Some(m.answer.clone()),
            named_gone: true,
        };
        if let MachineVerdict::Unreachable(why) = machine::verdict(&named) {
            // Its engine runs and does not answer: paused or partitioned,
            // exactly what must not be taken for gone on anyone's word.
            return Err(BadInput::GoneStillRuns {
                machine: m.id.clone(),
                why,
            });
        }
    }
    if let Some(name) = &e.from {
        let m = find("--from", name)?;
        if m.raft.is_none() {
            return Err(BadInput::FromNotASurvivor {
                machine: m.id.clone(),
                said: said(&m.answer),
            });
        }
    }
    Ok(())
}

/// A `--gone` machine must be where a lost member lived (checked only when
/// the membership is known, i.e. some manager answered).
fn check_gone_are_members(
    e: &Evidence,
    survivors: &[(&Machine, &Raft)],
    members: &[Peer],
) -> Result<(), BadInput> {
    if survivors.is_empty() {
        return Ok(());
    }
    for name in &e.gone {
        let Some(m) = e.machines.iter().find(|m| &m.id == name) else {
            continue; // a member on no listed machine (check_names)
        };
        if !members.iter().any(|p| p.host() == m.address) {
            return Err(BadInput::GoneNotAMember {
                machine: m.id.clone(),
                address: m.address.clone(),
            });
        }
    }
    Ok(())
}

/// The raft's members: every member any answering manager lists (the
/// union: a larger membership only asks for more proof).
fn membership(survivors: &[(&Machine, &Raft)]) -> Vec<Peer> {
    let mut out: Vec<Peer> = Vec::new();
    for (_, raft) in survivors {
        for p in &raft.peers {
            if !out.iter().any(|o| o.node_id == p.node_id) {
                out.push(p.clone());
            }
        }
    }
    out.sort_by(|a, b| a.addr.cmp(&b.addr).then(a.node_id.cmp(&b.node_id)));
    out
}

/// The machine the provider lists at a member's address.
fn machine_of<'e>(e: &'e Evidence, p: &Peer) -> Option<&'e Machine> {
    e.machines.iter().find(|m| m.address == p.host())
}

/// The listed machines whose address the provider could not tell and
/// whose engine is not certainly down (one may hold a member no address
/// matches), named for the operator; `None` when there are none.
fn unknown_addresses(e: &Evidence) -> Option<String> {
    let ids: Vec<&str> = e
        .machines
        .iter()
        .filter(|m| m.address.is_empty() && !matches!(m.answer, EngineAnswer::Down(_)))
        .map(|m| m.id.as_str())
        .collect();
    (!ids.is_empty()).then(|| ids.join(", "))
}

/// `name` (a `--gone` argument) names member `p`: its address or node id.
fn named(p: &Peer, name: &str) -> bool {
    name == p.host() || name == p.node_id
}

/// The operator's name for member `p` on no listed machine, if given.
fn named_unlisted<'e>(e: &'e Evidence, p: &Peer) -> Option<&'e String> {
    e.gone.iter().find(|g| named(p, g))
}

/// What the machine verdict says of lost member `p`: the machine the
/// provider lists at its address (its engine asked now), or none, and
/// whether the operator named it gone.
fn member(e: &Evidence, p: &Peer) -> MachineVerdict {
    let m = machine_of(e, p);
    machine::verdict(&MachineEvidence {
        listing: m.map_or(Listing::NoMachine, |_| Listing::Listed(Power::Unknown)),
        engine: m.map(|m| m.answer.clone()),
        named_gone: match m {
            Some(m) => e.gone.contains(&m.id),
            None => named_unlisted(e, p).is_some(),
        },
    })
}

/// Why the lost member `p` is gone for good, or why it may still run.
fn proof(e: &Evidence, p: &Peer) -> Result<Proof, Refusal> {
    let gone = member(e, p).is_gone();
    let Some(m) = machine_of(e, p) else {
        if let Some(machines) = unknown_addresses(e) {
            return Err(Refusal::AddressUnknown {
                node_id: p.node_id.clone(),
                addr: p.addr.clone(),
                machines,
            });
        }
        return match named_unlisted(e, p) {
            Some(name) if gone => Ok(Proof::Unlisted {
                named: name.clone(),
            }),
            _ => Err(Refusal::Unaccounted {
                node_id: p.node_id.clone(),
                addr: p.addr.clone(),
                host: p.host().to_string(),
            }),
        };
    };
    if gone {
        return Ok(Proof::Operator {
            machine: m.id.clone(),
        });
    }
    Err(Refusal::MayStillRun {
        machine: m.id.clone(),
        node_id: p.node_id.clone(),
        addr: p.addr.clone(),
        why: format!("the provider still lists it, and {}", said(&m.answer)),
    })
}

/// The survivor to recover from: the only one, or the operator's choice.
fn choose<'e>(
    e: &Evidence,
    survivors: &[(&'e Machine, &'e Raft)],
) -> Result<(&'e Machine, &'e Raft), Refusal> {
    if let Some(from) = &e.from
        && let Some(s) = survivors.iter().find(|(m, _)| &m.id == from)
    {
        return Ok(*s);
    }
    match survivors {
        [one] => Ok(*one),
        _ => Err(Refusal::SeveralSurvivors {
            candidates: survivors.iter().map(|(m, _)| m.id.clone()).collect(),
        }),
    }
}

/// The survivor's raft address as it lists itself (its port included),
/// else its machine's address on the swarm port.
fn own_addr(m: &Machine, raft: &Raft) -> String {
    raft.peers
        .iter()
        .find(|p| p.node_id == raft.node_id)
        .map(|p| p.addr.clone())
        .unwrap_or_else(|| format!("{}:2377", m.address))
}

/// `ms` since the Unix epoch as an RFC 3339 time (seconds): how a
/// recorded recovery's start is shown.
pub fn rfc3339(ms: u64) -> String {
    let at = std::time::UNIX_EPOCH + std::time::Duration::from_millis(ms);
    humantime::format_rfc3339_seconds(at).to_string()
}

/// An engine's answer in words, for a reason.
pub fn said(answer: &EngineAnswer) -> String {
    match answer {
        EngineAnswer::Led => "its engine knows a leader".into(),
        EngineAnswer::NoLeader(m) => format!("its engine answers without a leader ({m})"),
        EngineAnswer::NotAManager => "its engine is not a manager".into(),
        EngineAnswer::Down(why) => format!("its engine does not answer ({why})"),
        EngineAnswer::Busy(why) => format!("its engine does not answer ({why})"),
    }
}

#[cfg(test)]
mod tests;
