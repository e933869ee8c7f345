//! Recovering a lost manager quorum, on evidence (design rule 11, issue 18).
//!
//! `swarm init --force-new-cluster` turns one surviving manager into a
//! single-member raft that keeps the swarm's state (services, workers,
//! the cluster id and join tokens). Run on a minority whose majority still
//! lives elsewhere — a partition, a paused engine — it makes **two
//! swarms**, each taking writes. So [`decide`] proceeds only when every raft
//! member that does not answer is proven gone for good: the provider no
//! longer lists a machine at its address (it was destroyed), or the
//! operator names its machine with `--gone`. Any other lost member refuses
//! the recovery, naming the machine and why.
//!
//! The shell gathers the [`Evidence`] (each machine of the provider, its
//! engine asked directly; the raft membership as the answering managers
//! report it), calls [`decide`], prints, and only on
//! [`Decision::Proceed`] acts.
//!
//! # Guarantees
//! - Never proceeds while an engine knows a leader, or while enough members
//!   may still be voting for a quorum (an election, not a loss).
//! - Never proceeds while a lost member's machine is listed by the provider
//!   and the operator did not name it with `--gone`.
//! - With several surviving managers it proceeds only from the one the
//!   operator names with `--from`: the engines do not report how far each
//!   raft log got (`docker info` shows no raft index without a leader,
//!   measured), so drover cannot tell which holds the most recent state.

use crate::quorum::quorum;
use crate::quorum_probe::EngineAnswer;
use serde::Serialize;

/// One raft member as an answering manager's engine lists it
/// (`docker info .Swarm.RemoteManagers`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
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
}

/// Why a lost member counts as gone for good.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Proof {
    /// No machine of the provider has its address: destroyed.
    Absent,
    /// The operator named its machine with `--gone`.
    Operator {
        /// The machine.
        machine: String,
    },
}

/// A raft member that does not answer, proven gone for good.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Gone {
    /// The member.
    pub member: Peer,
    /// Why it counts as gone.
    pub proof: Proof,
}

/// What a recovery does.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
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
                    Proof::Absent => "the provider lists no machine at its address".to_string(),
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
        "{machine} ({addr}, raft member {node_id}) may still be running: {why}; a new cluster beside it could make two swarms. Bring it back (it rejoins by itself), or destroy it through its provider, or, if you know it is gone for good, name it with --gone {machine}"
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
        "{flag} {machine}: the provider lists no machine {machine} (machines: {known}); a machine the provider no longer lists needs no --gone"
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

/// Judges `e`: recover (from which survivor, with which members proven
/// gone) or refuse, with every reason. `Err` when the operator's `--gone`
/// or `--from` names what it cannot.
pub fn decide(e: &Evidence) -> Result<Decision, BadInput> {
    check_names(e)?;
    let survivors: Vec<(&Machine, &Raft)> = e
        .machines
        .iter()
        .filter_map(|m| m.raft.as_ref().map(|r| (m, r)))
        .collect();
    let members = membership(&survivors);
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

fn refuse(r: Refusal) -> Decision {
    Decision::Refuse { reasons: vec![r] }
}

/// Every `--gone` and `--from` names a machine the provider lists; a
/// `--gone` machine does not answer as a manager; `--from` does, without
/// a leader.
fn check_names(e: &Evidence) -> Result<(), BadInput> {
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
        let m = find("--gone", name)?;
        if matches!(m.answer, EngineAnswer::Led | EngineAnswer::NoLeader(_)) {
            return Err(BadInput::GoneAnswers {
                machine: m.id.clone(),
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
            continue;
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

/// A silent member may still vote unless its engine is certainly not
/// running or its machine is gone (or the operator says so).
fn may_vote(e: &Evidence, p: &Peer) -> bool {
    match machine_of(e, p) {
        None => false,
        Some(m) if e.gone.contains(&m.id) => false,
        Some(m) => !matches!(m.answer, EngineAnswer::Down(_)),
    }
}

/// Why the lost member `p` is gone for good, or why it may still run.
fn proof(e: &Evidence, p: &Peer) -> Result<Proof, Refusal> {
    let Some(m) = machine_of(e, p) else {
        return Ok(Proof::Absent);
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
            Decision::Proceed(r) => panic!("proceeds: {r:?}"),
        }
    }

    /// Issue 18: two of three managers' machines destroyed through the
    /// provider — absent from its describe — is proof they are gone.
    #[test]
    fn two_destroyed_members_are_gone_and_the_survivor_is_recovered_from() {
        let d = decide(&evidence(vec![survivor(3), worker()])).unwrap();
        let Decision::Proceed(r) = d else {
            panic!("{d:?}")
        };
        assert_eq!(r.survivor, "m3");
        assert_eq!(r.addr, "127.0.9.3:2377");
        assert_eq!(r.members, 3);
        let gone: Vec<_> = r.gone.iter().map(|g| g.member.node_id.as_str()).collect();
        assert_eq!(gone, ["node1", "node2"]);
        assert!(r.gone.iter().all(|g| g.proof == Proof::Absent));
    }

    /// Design rule 11: a paused engine (SIGSTOP) does not answer, but its
    /// machine is listed: it may come back with a majority elsewhere.
    #[test]
    fn a_lost_member_whose_machine_is_still_listed_refuses_naming_it() {
        let paused = manager(2, EngineAnswer::Busy("no answer within 3s".into()));
        let d = decide(&evidence(vec![paused, survivor(3)])).unwrap();
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
            gone: vec!["m2".into()],
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
        // m1 is absent (cannot vote), m2 busy (may), m3 answers: 2 of 3.
        assert!(matches!(
            &reasons(d.unwrap())[..],
            [
                Refusal::MayStillRun { .. },
                Refusal::NotLost {
                    may_vote: 2,
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
        let d = decide(&evidence(vec![five(4), five(5)])).unwrap();
        assert!(
            matches!(&reasons(d)[..], [Refusal::SeveralSurvivors { candidates }] if candidates == &["m4", "m5"])
        );
        let e = Evidence {
            from: Some("m5".into()),
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
        assert!(decide(&e("m2", Some("m3"))).is_ok());
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

        proptest! {
            /// Design rule 11: never a new cluster while a lost member's
            /// machine is listed by the provider and not named by the
            /// operator, nor while any engine knows a leader; and every
            /// member the recovery drops is absent or named.
            #[test]
            fn never_proceeds_while_a_lost_members_machine_may_still_run(
                fates in proptest::collection::vec(fate(), 1..=7),
                named in proptest::collection::vec(any::<bool>(), 7),
            ) {
                let ms = machines(&fates);
                let gone: Vec<String> = ms
                    .iter()
                    .zip(&named)
                    .filter(|(m, n)| **n && m.raft.is_none() && m.answer != EngineAnswer::Led)
                    .map(|(m, _)| m.id.clone())
                    .collect();
                let e = Evidence { machines: ms.clone(), gone: gone.clone(), from: None };
                let Ok(Decision::Proceed(r)) = decide(&e) else { return Ok(()); };
                prop_assert!(ms.iter().all(|m| m.answer != EngineAnswer::Led));
                for m in ms.iter().filter(|m| m.raft.is_none()) {
                    prop_assert!(gone.contains(&m.id), "{} may still run: {:?}", m.id, r);
                }
                let answering = ms.iter().filter(|m| m.raft.is_some()).count();
                prop_assert!(answering < quorum(fates.len()));
                prop_assert_eq!(answering + r.gone.len(), fates.len());
            }
        }
    }
}
