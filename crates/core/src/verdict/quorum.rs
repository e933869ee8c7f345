//! "Is the managers' quorum lost?" One rule for `status` (engines asked
//! now, or the controllers' heartbeats), `recover` and the heartbeats'
//! judge. Only certainty says lost: the raft members that may still vote
//! are fewer than a quorum of them all (rule 11; a busy or unreachable
//! member may be voting in an election — rule 13).

use super::machine::{self, Listing, MachineEvidence, Power};
use crate::quorum::quorum;
use crate::quorum_probe::EngineAnswer;

/// One machine asked: its id, its group, and what its engine said.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Probe {
    /// The machine.
    pub machine: String,
    /// Its group (the provider's tag).
    pub group: String,
    /// Its engine's answer.
    pub answer: EngineAnswer,
    /// For a manager without a leader: how many raft members it lists
    /// (`info .Swarm.RemoteManagers`), machines the provider no longer
    /// lists included.
    pub raft_members: Option<usize>,
}

/// The managers' raft as their engines tell it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum QuorumVerdict {
    /// A manager's engine knows a leader.
    Held,
    /// Managers answer, none knows a leader, and too few could be voting
    /// for a quorum: the manager machines whose engines are certainly down
    /// leave fewer than a majority.
    Lost {
        /// Manager engines that answer.
        reachable: usize,
        /// Raft members: the machines of the manager groups, or as many
        /// as an answering manager lists when it lists more.
        managers: usize,
        /// Raft members no machine of the provider stands for (destroyed).
        unlisted: usize,
        /// The manager machines whose engines do not answer (down or
        /// busy), with why.
        silent: Vec<(String, String)>,
        /// What an answering manager's engine said.
        engine_says: String,
    },
    /// Nothing can be concluded: no engine answers as a manager, or enough
    /// of them may still be voting (busy, e.g. in an election).
    Unknown,
}

/// The one count behind every "lost": `may_vote` members that may still
/// vote of `members` raft members are fewer than their quorum.
pub fn too_few_to_vote(may_vote: usize, members: usize) -> bool {
    may_vote < quorum(members)
}

/// Whether the machine a member's engine answered for may still vote: it
/// is a manager (or silent) and the machine verdict says it may.
pub fn may_vote(answer: &EngineAnswer) -> bool {
    let v = machine::verdict(&MachineEvidence {
        listing: Listing::Listed(Power::Unknown),
        engine: Some(answer.clone()),
        named_gone: false,
    });
    *answer != EngineAnswer::NotAManager && v.may_vote()
}

/// Judges `probes`. A group is a manager group when one of its engines
/// answers as a manager; every machine of it counts as a member (a silent
/// one cannot say, and its group is what the provider knows of it), and
/// when an answering manager lists more raft members than that, the
/// others are members whose machines are gone (they cannot vote). Only
/// certainty says "lost": the members that may still vote (answering
/// without a leader, or busy) are fewer than a quorum of them all.
pub fn judge(probes: &[Probe]) -> QuorumVerdict {
    let answers_as_manager =
        |p: &Probe| matches!(p.answer, EngineAnswer::Led | EngineAnswer::NoLeader(_));
    if probes.iter().any(|p| p.answer == EngineAnswer::Led) {
        return QuorumVerdict::Held;
    }
    let Some(engine_says) = probes.iter().find_map(|p| match &p.answer {
        EngineAnswer::NoLeader(m) => Some(m.clone()),
        _ => None,
    }) else {
        return QuorumVerdict::Unknown;
    };
    let manager_group = |g: &str| probes.iter().any(|p| p.group == g && answers_as_manager(p));
    let members: Vec<&Probe> = probes.iter().filter(|p| manager_group(&p.group)).collect();
    let voting = members.iter().filter(|p| may_vote(&p.answer)).count();
    let raft = probes.iter().filter_map(|p| p.raft_members).max();
    let managers = members.len().max(raft.unwrap_or(0));
    if !too_few_to_vote(voting, managers) {
        return QuorumVerdict::Unknown;
    }
    QuorumVerdict::Lost {
        reachable: members.iter().filter(|p| answers_as_manager(p)).count(),
        managers,
        unlisted: managers - members.len(),
        silent: members
            .iter()
            .filter_map(|p| match &p.answer {
                EngineAnswer::Down(why) | EngineAnswer::Busy(why) => {
                    Some((p.machine.clone(), why.clone()))
                }
                _ => None,
            })
            .collect(),
        engine_says,
    }
}

/// Which evidence a verdict rests on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    /// The engines, asked now.
    Engines,
    /// What each controller's engine last said (its heartbeat).
    Heartbeats,
}

impl Source {
    /// As `status -o json` names it.
    pub fn as_str(self) -> &'static str {
        match self {
            Source::Engines => "engines",
            Source::Heartbeats => "heartbeats",
        }
    }
}

/// `status`'s verdict from both kinds of evidence: the engines asked now
/// say more than heartbeats when they can conclude; else the heartbeats
/// judge.
pub fn of_both(engines: QuorumVerdict, heartbeats: &QuorumVerdict) -> (QuorumVerdict, Source) {
    match engines {
        QuorumVerdict::Unknown => (heartbeats.clone(), Source::Heartbeats),
        v => (v, Source::Engines),
    }
}

#[cfg(test)]
mod tests;
