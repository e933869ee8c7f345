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
use serde::{Deserialize, Serialize};

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

/// Why a recovery is refused (nothing is changed).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, thiserror::Error)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Refusal {
    /// An engine knows a leader: the quorum holds.
    #[error("the quorum is not lost: the engine of {machine} knows a leader; nothing to recover")]
    QuorumHeld {
        /// The machine whose engine knows a leader.
        machine: String,
    },
    /// No manager's engine answers (without a leader).
    #[error(
        "no manager's engine answers: nothing to recover from (for ~20 s after losing its peers a manager's engine answers no swarm call; try again then)"
    )]
    NoSurvivor,
    /// Enough members may still vote: an election, not a loss.
    #[error(
        "the quorum is not known to be lost: {may_vote} of {members} raft members may still vote (quorum {quorum}); a member whose engine does not answer may be busy in an election, or paused"
    )]
    NotLost {
        /// Members that answer without a leader or do not answer in time.
        may_vote: usize,
        /// Raft members.
        members: usize,
        /// Their quorum.
        quorum: usize,
    },
    /// A lost member's machine is still listed by the provider.
    #[error(
        "{machine} ({addr}, raft member {node_id}) may still be running: {why}; a new cluster beside it could make two swarms. Bring it back (it rejoins by itself) or destroy it through its provider; only if its engine is not running and you know it is gone for good, name it with --gone {machine}"
    )]
    MayStillRun {
        /// The machine.
        machine: String,
        /// Its member's node id.
        node_id: String,
        /// Its member's raft address.
        addr: String,
        /// What the provider and its engine said.
        why: String,
    },
    /// A lost member is on no machine the provider lists, unnamed.
    #[error(
        "raft member {node_id} ({addr}) is on no machine the provider lists: drover cannot tell a machine destroyed from a manager it never made (joined by hand, another provider or state dir), which may still run; a new cluster beside it could make two swarms. If it is gone for good, name it with --gone {host}"
    )]
    Unaccounted {
        /// Its node id.
        node_id: String,
        /// Its raft address.
        addr: String,
        /// Its address without the port (what `--gone` takes).
        host: String,
    },
    /// A recovery recorded as started a moment ago may still be forming
    /// its new cluster: no second force-new-cluster meanwhile.
    #[error(
        "a recovery from {survivor} was recorded as started {ago_s}s ago and no engine knows a leader yet: its force-new-cluster may still be forming the new cluster, and a second one would break it; run drover recover again in {wait_s}s (it finishes the recovery if the new cluster formed, else judges afresh)"
    )]
    MayStillBeForming {
        /// The recorded survivor.
        survivor: String,
        /// How long ago it started, s.
        ago_s: u64,
        /// How long until the evidence is judged afresh, s.
        wait_s: u64,
    },
    /// Several managers survive and the operator named none.
    #[error(
        "{} managers survive ({}): the engines do not say which holds the most recent raft state; name the one to recover from with --from MACHINE",
        candidates.len(),
        candidates.join(", ")
    )]
    SeveralSurvivors {
        /// The surviving managers' machines.
        candidates: Vec<String>,
    },
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

/// Operator input that names something it cannot (exit 2 before anything).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BadInput {
    /// `--gone` or `--from` names no machine the provider lists.
    #[error(
        "{flag} {machine}: the provider lists no machine {machine} (machines: {known}), and no lost raft member on no listed machine has that address or node id"
    )]
    UnknownMachine {
        /// `--gone` or `--from`.
        flag: &'static str,
        /// The name given.
        machine: String,
        /// The machines there are.
        known: String,
    },
    /// `--gone` names a machine whose engine answers as a manager.
    #[error("--gone {machine}: its engine answers as a manager; it is not lost")]
    GoneAnswers {
        /// The machine.
        machine: String,
    },
    /// `--gone` names a machine whose engine is running but silent.
    #[error(
        "--gone {machine}: its engine is running but does not answer ({why}): paused or partitioned, not gone; destroy it through its provider first (or bring it back: it rejoins by itself)"
    )]
    GoneStillRuns {
        /// The machine.
        machine: String,
        /// What asking its engine gave.
        why: String,
    },
    /// `--gone` names a machine that is no lost raft member's.
    #[error(
        "--gone {machine}: it is no lost raft member's machine (its address {address} is not a manager the survivors list)"
    )]
    GoneNotAMember {
        /// The machine.
        machine: String,
        /// Its address.
        address: String,
    },
    /// While a recorded recovery is finished, `--gone` names a member the
    /// record does not.
    #[error(
        "--gone {name}: the recovery being finished (started at {at_ms} ms since the epoch) named only {recorded} gone; drover removes no other node entry (check that it is gone, then docker node rm it yourself)"
    )]
    NotRecorded {
        /// The name given.
        name: String,
        /// When the recovery started.
        at_ms: u64,
        /// The members it named, by address.
        recorded: String,
    },
    /// While a recorded recovery is finished, `--from` names another survivor.
    #[error(
        "--from {machine}: the recovery being finished (started at {at_ms} ms since the epoch) forced a new cluster on {survivor}"
    )]
    FromNotRecorded {
        /// The name given.
        machine: String,
        /// When the recovery started.
        at_ms: u64,
        /// The recorded survivor.
        survivor: String,
    },
    /// `--from` names a machine whose engine is not a manager without a leader.
    #[error(
        "--from {machine}: its engine is not a surviving manager (it says: {said}); name a machine whose engine answers as a manager without a leader"
    )]
    FromNotASurvivor {
        /// The machine.
        machine: String,
        /// What its engine said.
        said: String,
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
    let may_vote = survivors.len() + lost.iter().filter(|p| may_vote(e, p)).count();
    if may_vote >= quorum(members.len()) {
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
        if let EngineAnswer::Busy(why) = &m.answer {
            // Its engine runs and does not answer: paused or partitioned,
            // exactly what must not be taken for gone on anyone's word.
            return Err(BadInput::GoneStillRuns {
                machine: m.id.clone(),
                why: why.clone(),
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

/// `name` (a `--gone` argument) names member `p`: its address or node id.
fn named(p: &Peer, name: &str) -> bool {
    name == p.host() || name == p.node_id
}

/// The operator's name for member `p` on no listed machine, if given.
fn named_unlisted<'e>(e: &'e Evidence, p: &Peer) -> Option<&'e String> {
    e.gone.iter().find(|g| named(p, g))
}

/// A silent member may still vote unless its engine is certainly not
/// running, or the operator says it is gone.
fn may_vote(e: &Evidence, p: &Peer) -> bool {
    match machine_of(e, p) {
        None => named_unlisted(e, p).is_none(),
        Some(m) if e.gone.contains(&m.id) => false,
        Some(m) => !matches!(m.answer, EngineAnswer::Down(_)),
    }
}

/// Why the lost member `p` is gone for good, or why it may still run.
fn proof(e: &Evidence, p: &Peer) -> Result<Proof, Refusal> {
    let Some(m) = machine_of(e, p) else {
        return match named_unlisted(e, p) {
            Some(name) => Ok(Proof::Unlisted {
                named: name.clone(),
            }),
            None => Err(Refusal::Unaccounted {
                node_id: p.node_id.clone(),
                addr: p.addr.clone(),
                host: p.host().to_string(),
            }),
        };
    };
    if e.gone.contains(&m.id) {
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
mod tests {
    use super::*;

    const NO_LEADER: &str = "The swarm does not have a leader";

    fn peer(n: u8) -> Peer {
        Peer {
            node_id: format!("node{n}"),
            addr: format!("127.0.9.{n}:2377"),
        }
    }

    fn manager(n: u8, answer: EngineAnswer) -> Machine {
        Machine {
            id: format!("m{n}"),
            group: "managers".into(),
            address: format!("127.0.9.{n}"),
            raft: matches!(answer, EngineAnswer::NoLeader(_)).then(|| Raft {
                node_id: format!("node{n}"),
                peers: vec![peer(1), peer(2), peer(3)],
            }),
            answer,
        }
    }

    fn survivor(n: u8) -> Machine {
        manager(n, EngineAnswer::NoLeader(NO_LEADER.into()))
    }

    fn worker() -> Machine {
        Machine {
            id: "w1".into(),
            group: "workers".into(),
            address: "127.0.9.50".into(),
            answer: EngineAnswer::NotAManager,
            raft: None,
        }
    }

    fn evidence(machines: Vec<Machine>) -> Evidence {
        Evidence {
            machines,
            ..Evidence::default()
        }
    }

    fn reasons(d: Decision) -> Vec<Refusal> {
        match d {
            Decision::Refuse { reasons } => reasons,
            other => panic!("does not refuse: {other:?}"),
        }
    }

    /// Issue 18: two of three managers' machines destroyed through the
    /// provider, and named gone by the operator (by address and by node id).
    #[test]
    fn two_destroyed_members_named_gone_and_the_survivor_is_recovered_from() {
        let e = Evidence {
            gone: vec!["127.0.9.1".into(), "node2".into()],
            ..evidence(vec![survivor(3), worker()])
        };
        let d = decide(&e).unwrap();
        let Decision::Proceed(r) = d else {
            panic!("{d:?}")
        };
        assert_eq!(r.survivor, "m3");
        assert_eq!(r.addr, "127.0.9.3:2377");
        assert_eq!(r.members, 3);
        let gone: Vec<_> = r.gone.iter().map(|g| g.member.node_id.as_str()).collect();
        assert_eq!(gone, ["node1", "node2"]);
        assert!(
            r.gone
                .iter()
                .all(|g| matches!(g.proof, Proof::Unlisted { .. }))
        );
    }

    /// Review finding: a raft member on no listed machine may be a manager
    /// drover never made (joined by hand, another state dir) that is only
    /// paused: its absence from the describe proves nothing. Without the
    /// operator's word the recovery refuses, naming it.
    #[test]
    fn members_on_no_listed_machine_refuse_until_the_operator_names_them() {
        let d = decide(&evidence(vec![survivor(3), worker()])).unwrap();
        let r = reasons(d);
        let unaccounted: Vec<_> = r
            .iter()
            .filter_map(|x| match x {
                Refusal::Unaccounted { node_id, .. } => Some(node_id.as_str()),
                _ => None,
            })
            .collect();
        assert_eq!(unaccounted, ["node1", "node2"], "{r:?}");
        assert!(r[0].to_string().contains("--gone 127.0.9.1"), "{}", r[0]);
        // Unnamed, they may still vote: 3 of 3, not a known loss.
        assert!(
            r.iter()
                .any(|x| matches!(x, Refusal::NotLost { may_vote: 3, .. })),
            "{r:?}"
        );
        // One named is not enough.
        let e = Evidence {
            gone: vec!["127.0.9.1".into()],
            ..evidence(vec![survivor(3), worker()])
        };
        assert!(matches!(decide(&e).unwrap(), Decision::Refuse { .. }));
    }

    /// Design rule 11: a paused engine (SIGSTOP) does not answer, but its
    /// machine is listed: it may come back with a majority elsewhere.
    #[test]
    fn a_lost_member_whose_machine_is_still_listed_refuses_naming_it() {
        let paused = manager(2, EngineAnswer::Busy("no answer within 3s".into()));
        let e = Evidence {
            gone: vec!["127.0.9.1".into()],
            ..evidence(vec![paused, survivor(3)])
        };
        let d = decide(&e).unwrap();
        let r = reasons(d);
        assert_eq!(r.len(), 2, "{r:?}");
        assert!(
            matches!(&r[0], Refusal::MayStillRun { machine, .. } if machine == "m2"),
            "{r:?}"
        );
        assert!(r[0].to_string().contains("--gone m2"), "{}", r[0]);
    }

    #[test]
    fn a_listed_machine_named_gone_by_the_operator_counts_as_gone() {
        let stopped = manager(2, EngineAnswer::Down("its engine is not running".into()));
        let e = Evidence {
            gone: vec!["m2".into(), "127.0.9.1".into()],
            ..evidence(vec![stopped, survivor(3)])
        };
        let Decision::Proceed(r) = decide(&e).unwrap() else {
            panic!()
        };
        assert!(r.gone.contains(&Gone {
            member: peer(2),
            proof: Proof::Operator {
                machine: "m2".into()
            }
        }));
    }

    #[test]
    fn an_engine_that_knows_a_leader_means_nothing_to_recover() {
        let d = decide(&evidence(vec![manager(1, EngineAnswer::Led), survivor(3)])).unwrap();
        assert!(matches!(&reasons(d)[..], [Refusal::QuorumHeld { machine }] if machine == "m1"));
    }

    /// Two of three may still vote (one busy in an election): no loss.
    #[test]
    fn enough_members_that_may_vote_are_an_election_not_a_loss() {
        let busy = manager(2, EngineAnswer::Busy("no answer within 3s".into()));
        let d = decide(&evidence(vec![busy, survivor(3)]));
        // m1 is on no listed machine and unnamed (may vote), m2 busy
        // (may), m3 answers: 3 of 3.
        assert!(matches!(
            &reasons(d.unwrap())[..],
            [
                Refusal::Unaccounted { .. },
                Refusal::MayStillRun { .. },
                Refusal::NotLost {
                    may_vote: 3,
                    members: 3,
                    quorum: 2
                }
            ]
        ));
    }

    #[test]
    fn no_answering_manager_is_nothing_to_recover_from() {
        let d = decide(&evidence(vec![worker()])).unwrap();
        assert_eq!(reasons(d), [Refusal::NoSurvivor]);
    }

    /// Five managers, three destroyed, two survive: the operator chooses.
    #[test]
    fn several_survivors_need_the_operator_to_name_one() {
        let five = |n: u8| {
            let mut m = survivor(n);
            m.raft.as_mut().unwrap().peers = (1..=5).map(peer).collect();
            m
        };
        let named = Evidence {
            gone: (1..=3).map(|n| format!("node{n}")).collect(),
            ..evidence(vec![five(4), five(5)])
        };
        let d = decide(&named).unwrap();
        assert!(
            matches!(&reasons(d)[..], [Refusal::SeveralSurvivors { candidates }] if candidates == &["m4", "m5"])
        );
        let e = Evidence {
            from: Some("m5".into()),
            gone: (1..=3).map(|n| format!("node{n}")).collect(),
            ..evidence(vec![five(4), five(5)])
        };
        let Decision::Proceed(r) = decide(&e).unwrap() else {
            panic!()
        };
        assert_eq!((r.survivor.as_str(), r.gone.len()), ("m5", 3));
    }

    #[test]
    fn names_the_operator_gives_must_be_machines_that_fit() {
        let e = |gone: &str, from: Option<&str>| Evidence {
            gone: vec![gone.into()]
                .into_iter()
                .filter(|g: &String| !g.is_empty())
                .collect(),
            from: from.map(Into::into),
            ..evidence(vec![
                manager(2, EngineAnswer::Busy("x".into())),
                survivor(3),
                worker(),
            ])
        };
        assert!(matches!(
            decide(&e("nope", None)),
            Err(BadInput::UnknownMachine { flag: "--gone", .. })
        ));
        assert!(matches!(
            decide(&e("m3", None)),
            Err(BadInput::GoneAnswers { .. })
        ));
        assert!(matches!(
            decide(&e("w1", None)),
            Err(BadInput::GoneNotAMember { .. })
        ));
        assert!(matches!(
            decide(&e("", Some("w1"))),
            Err(BadInput::FromNotASurvivor { .. })
        ));
        assert!(matches!(
            decide(&e("", Some("zz"))),
            Err(BadInput::UnknownMachine { flag: "--from", .. })
        ));
        // Review finding: m2's engine runs but is silent (paused?): the
        // operator's word does not make it gone.
        assert!(matches!(
            decide(&e("m2", Some("m3"))),
            Err(BadInput::GoneStillRuns { .. })
        ));
        // A member on no listed machine is named by address or node id.
        assert!(decide(&e("127.0.9.1", None)).is_ok());
        assert!(decide(&e("node1", None)).is_ok());
        assert!(matches!(
            decide(&e("127.0.9.2", None)),
            Err(BadInput::UnknownMachine { .. })
        ));
    }

    /// The record a run writes before force-new-cluster: members 1 and 2
    /// named gone (by address and by node id), survivor m3.
    fn started() -> Started {
        let e = Evidence {
            gone: vec!["127.0.9.1".into(), "node2".into()],
            ..evidence(vec![survivor(3), worker()])
        };
        let Decision::Proceed(r) = decide(&e).unwrap() else {
            panic!()
        };
        Started::new(r, 1_700_000_000_000)
    }

    fn node(n: u8, state: NodeState, in_raft: bool) -> Node {
        Node {
            id: format!("node{n}"),
            link: None,
            cluster: None,
            group: None,
            state,
            availability: crate::model::Availability::Active,
            manager_role: true,
            raft: in_raft.then(|| crate::model::RaftMember {
                leader: n == 3,
                reachable: true,
                addr: format!("127.0.9.{n}:2377"),
            }),
            running_tasks: 0,
            locked: false,
            left: false,
        }
    }

    /// After force-new-cluster the survivor leads; what a rerun sees.
    fn after_force(nodes: Vec<Node>) -> Evidence {
        Evidence {
            started: Some(started()),
            listed: Some(Listed {
                by: "m3".into(),
                nodes,
            }),
            ..evidence(vec![manager(3, EngineAnswer::Led), worker()])
        }
    }

    fn finishing(e: &Evidence) -> Finish {
        match decide(e).unwrap() {
            Decision::Finish(f) => f,
            other => panic!("does not finish: {other:?}"),
        }
    }

    /// Issue 18's last gap: the run was cut short right after
    /// force-new-cluster. The rerun finds the record and a leader: it
    /// finishes that recovery (the gone members' entries, the audit event),
    /// it does not refuse "nothing to recover", and it never forces a new
    /// cluster again.
    #[test]
    fn a_rerun_after_force_new_cluster_finishes_the_recorded_recovery() {
        let e = after_force(vec![
            node(1, NodeState::Down, false),
            node(2, NodeState::Unknown, false),
            node(3, NodeState::Ready, true),
        ]);
        let f = finishing(&e);
        assert_eq!(f.through, "m3");
        assert_eq!(f.started, started());
        let remove: Vec<_> = f.tail.remove.iter().map(|p| p.node_id.as_str()).collect();
        assert_eq!(remove, ["node1", "node2"]);
        assert!(f.tail.absent.is_empty() && f.tail.kept.is_empty());
        // The operator may repeat the first run's names, by any of them.
        for gone in [
            vec!["127.0.9.1", "node2"],
            vec!["node1", "127.0.9.2"],
            vec![],
        ] {
            let e = Evidence {
                gone: gone.iter().map(|g| g.to_string()).collect(),
                from: Some("m3".into()),
                ..e.clone()
            };
            assert_eq!(finishing(&e).tail.remove.len(), 2, "{gone:?}");
        }
    }

    #[test]
    fn finishing_removes_no_node_the_record_does_not_name() {
        let e = after_force(vec![
            node(1, NodeState::Down, false),
            node(4, NodeState::Down, false),
        ]);
        let f = finishing(&e);
        assert_eq!(f.tail.remove, [peer(1)]);
        assert_eq!(
            f.tail.absent,
            [peer(2)],
            "node2 was removed before the crash"
        );
        // Naming another node now is bad input, not a licence.
        for (gone, from) in [("127.0.9.4", None), ("node4", None), ("node1", Some("m1"))] {
            let e = Evidence {
                gone: vec![gone.into()],
                from: from.map(Into::into),
                ..e.clone()
            };
            let err = decide(&e).unwrap_err();
            assert!(
                matches!(
                    err,
                    BadInput::NotRecorded { .. } | BadInput::FromNotRecorded { .. }
                ),
                "{err:?}"
            );
        }
    }

    /// A member named gone that is back (it rejoined the raft, or is
    /// Ready) keeps its entry: the engine would refuse, and it is no
    /// garbage.
    #[test]
    fn a_recorded_member_that_is_back_keeps_its_node_entry() {
        let f = finishing(&after_force(vec![
            node(1, NodeState::Ready, false),
            node(2, NodeState::Unknown, true),
        ]));
        assert!(f.tail.remove.is_empty(), "{f:?}");
        assert_eq!(
            f.tail.kept,
            [
                Kept {
                    member: peer(1),
                    why: Back::Ready
                },
                Kept {
                    member: peer(2),
                    why: Back::RaftMember
                }
            ]
        );
    }

    /// A record and no engine that knows a leader: force-new-cluster did
    /// not take effect (the run stopped before it). The evidence is judged
    /// afresh, on the operator's word again.
    #[test]
    fn a_record_without_a_leader_is_judged_afresh() {
        let fresh = Evidence {
            started: Some(started()),
            now_ms: started().at_ms + FORMING_MS,
            ..evidence(vec![survivor(3), worker()])
        };
        assert!(matches!(
            &reasons(decide(&fresh).unwrap())[..],
            [
                Refusal::Unaccounted { .. },
                Refusal::Unaccounted { .. },
                Refusal::NotLost { .. }
            ]
        ));
        let named = Evidence {
            gone: vec!["127.0.9.1".into(), "127.0.9.2".into()],
            ..fresh
        };
        assert!(matches!(decide(&named).unwrap(), Decision::Proceed(_)));
        // A listing by an engine that does not lead is no leader.
        let e = Evidence {
            listed: Some(Listed {
                by: "m3".into(),
                nodes: vec![],
            }),
            ..named
        };
        assert!(matches!(decide(&e).unwrap(), Decision::Proceed(_)));
    }

    /// A rerun right after a run killed during force-new-cluster: the
    /// engine goes on forming the new cluster without its client (16–21 s);
    /// a second force-new-cluster meanwhile would break it.
    #[test]
    fn a_record_without_a_leader_yet_refuses_while_the_cluster_may_be_forming() {
        let s = started();
        let e = Evidence {
            started: Some(s.clone()),
            gone: vec!["127.0.9.1".into(), "127.0.9.2".into()],
            now_ms: s.at_ms + 20_000,
            ..evidence(vec![survivor(3), worker()])
        };
        let r = reasons(decide(&e).unwrap());
        assert_eq!(
            r,
            [Refusal::MayStillBeForming {
                survivor: "m3".into(),
                ago_s: 20,
                wait_s: 100
            }]
        );
        assert!(r[0].to_string().contains("again in 100s"), "{}", r[0]);
    }

    /// Without a record, a leader still means nothing to recover.
    #[test]
    fn a_leader_without_a_record_is_nothing_to_recover() {
        let e = Evidence {
            started: None,
            ..after_force(vec![node(1, NodeState::Down, false)])
        };
        assert!(matches!(
            &reasons(decide(&e).unwrap())[..],
            [Refusal::QuorumHeld { .. }]
        ));
    }

    #[test]
    fn the_record_reads_back_as_written_and_names_its_operation() {
        let s = started();
        let text = serde_json::to_string(&s).unwrap();
        assert_eq!(serde_json::from_str::<Started>(&text).unwrap(), s);
        assert_eq!(s.op(), "recover-1700000000000");
        assert!(
            text.contains("node1") && text.contains("127.0.9.2:2377"),
            "{text}"
        );
    }

    mod props {
        use super::*;
        use proptest::prelude::*;

        /// How one of five raft members' machine stands.
        #[derive(Debug, Clone)]
        enum Fate {
            Answers,
            Led,
            Destroyed,
            Stopped,
            Busy,
            NoLongerAManager,
        }

        fn fate() -> impl Strategy<Value = Fate> {
            prop_oneof![
                Just(Fate::Answers),
                Just(Fate::Led),
                Just(Fate::Destroyed),
                Just(Fate::Stopped),
                Just(Fate::Busy),
                Just(Fate::NoLongerAManager),
            ]
        }

        fn machines(fates: &[Fate]) -> Vec<Machine> {
            let n = fates.len() as u8;
            fates
                .iter()
                .enumerate()
                .filter_map(|(i, f)| {
                    let i = i as u8 + 1;
                    let answer = match f {
                        Fate::Answers => EngineAnswer::NoLeader(NO_LEADER.into()),
                        Fate::Led => EngineAnswer::Led,
                        Fate::Destroyed => return None,
                        Fate::Stopped => EngineAnswer::Down("not running".into()),
                        Fate::Busy => EngineAnswer::Busy("no answer".into()),
                        Fate::NoLongerAManager => EngineAnswer::NotAManager,
                    };
                    let mut m = manager(i, answer);
                    if let Some(r) = m.raft.as_mut() {
                        r.peers = (1..=n).map(peer).collect();
                    }
                    Some(m)
                })
                .collect()
        }

        fn state() -> impl Strategy<Value = NodeState> {
            prop_oneof![
                Just(NodeState::Ready),
                Just(NodeState::Down),
                Just(NodeState::Unknown),
                Just(NodeState::Disconnected),
            ]
        }

        proptest! {
            /// Design rule 11: never a new cluster while a lost member is
            /// not named by the operator (its machine, or its address when
            /// no listed machine holds it), nor while any engine knows a
            /// leader; and every member the recovery drops is named.
            #[test]
            fn never_proceeds_while_a_lost_members_machine_may_still_run(
                fates in proptest::collection::vec(fate(), 1..=7),
                named in proptest::collection::vec(any::<bool>(), 7),
            ) {
                let ms = machines(&fates);
                // The operator names machines, and destroyed members by address.
                let gone: Vec<String> = fates
                    .iter()
                    .enumerate()
                    .zip(&named)
                    .filter(|(_, n)| **n)
                    .filter_map(|((i, f), _)| match f {
                        Fate::Destroyed => Some(format!("127.0.9.{}", i + 1)),
                        Fate::Answers | Fate::Led => None,
                        _ => Some(format!("m{}", i + 1)),
                    })
                    .collect();
                let e = Evidence { machines: ms.clone(), gone: gone.clone(), ..Evidence::default() };
                let Ok(Decision::Proceed(r)) = decide(&e) else { return Ok(()); };
                prop_assert!(ms.iter().all(|m| m.answer != EngineAnswer::Led));
                for m in ms.iter().filter(|m| m.raft.is_none()) {
                    prop_assert!(gone.contains(&m.id), "{} may still run: {:?}", m.id, r);
                }
                // A member on no listed machine is dropped only when named.
                for (i, f) in fates.iter().enumerate() {
                    if matches!(f, Fate::Destroyed) {
                        let host = format!("127.0.9.{}", i + 1);
                        prop_assert!(gone.contains(&host), "{host} dropped unnamed: {:?}", r);
                    }
                }
                let answering = ms.iter().filter(|m| m.raft.is_some()).count();
                prop_assert!(answering < quorum(fates.len()));
                prop_assert_eq!(answering + r.gone.len(), fates.len());
            }

            /// Issue 18: with a recovery recorded and any engine knowing a
            /// leader, a rerun never forces a new cluster again; it removes
            /// only node entries the record names gone, listed, neither
            /// Ready nor in the raft; the operator's names must be the
            /// record's.
            #[test]
            fn a_rerun_never_forces_again_nor_removes_an_unrecorded_node(
                fates in proptest::collection::vec(fate(), 1..=7),
                recorded in proptest::collection::vec(any::<bool>(), 9),
                listed in proptest::collection::vec(
                    proptest::option::of((state(), any::<bool>())), 9),
                names in proptest::collection::vec(0u8..9, 0..3),
                by in 0usize..7,
            ) {
                let ms = machines(&fates);
                let gone: Vec<Gone> = (1..=9u8)
                    .filter(|n| recorded[*n as usize - 1])
                    .map(|n| Gone {
                        member: peer(n),
                        proof: Proof::Unlisted { named: format!("127.0.9.{n}") },
                    })
                    .collect();
                let started = Started::new(
                    Recovery {
                        survivor: "m1".into(),
                        node_id: "node1".into(),
                        addr: "127.0.9.1:2377".into(),
                        members: 9,
                        gone,
                    },
                    7,
                );
                let nodes: Vec<Node> = listed
                    .iter()
                    .enumerate()
                    .filter_map(|(i, l)| l.map(|(st, raft)| node(i as u8 + 1, st, raft)))
                    .collect();
                let by = ms.get(by % ms.len().max(1)).map_or("m1".into(), |m| m.id.clone());
                let e = Evidence {
                    machines: ms.clone(),
                    gone: names.iter().map(|n| format!("node{}", n + 1)).collect(),
                    started: Some(started.clone()),
                    listed: Some(Listed { by: by.clone(), nodes: nodes.clone() }),
                    ..Evidence::default()
                };
                let leads = ms.iter().any(|m| m.id == by && m.answer == EngineAnswer::Led);
                match decide(&e) {
                    Ok(Decision::Proceed(r)) => {
                        prop_assert!(!leads, "forced again though {by} leads: {r:?}");
                    }
                    Ok(Decision::Finish(f)) => {
                        prop_assert!(leads);
                        for p in &f.tail.remove {
                            prop_assert!(started.recovery.gone.iter().any(|g| g.member == *p));
                            let n = nodes.iter().find(|n| n.id == p.node_id);
                            prop_assert!(n.is_some_and(|n| n.state != NodeState::Ready && n.raft.is_none()), "{p:?}");
                        }
                        let accounted = f.tail.remove.len() + f.tail.absent.len() + f.tail.kept.len();
                        prop_assert_eq!(accounted, started.recovery.gone.len());
                        for name in &e.gone {
                            prop_assert!(started.recovery.gone.iter().any(|g| &g.member.node_id == name));
                        }
                    }
                    Ok(Decision::Refuse { .. }) => {}
                    Err(err) => prop_assert!(
                        !leads || matches!(err, BadInput::NotRecorded { .. }),
                        "{err:?}"
                    ),
                }
            }
        }
    }
}
