//! Whether the managers' raft has a quorum, judged from their engines asked
//! one by one — what `drover status` falls back on when the published
//! status is stale or the store cannot be read (a store kept in the raft is
//! unreadable exactly when the quorum is lost). No controller acts then, so
//! nobody else says it.

use crate::model::SwarmView;

/// What one machine's engine said when asked directly.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EngineAnswer {
    /// A manager whose swarm has a leader.
    Led,
    /// A manager whose swarm has no leader (the engine's words).
    NoLeader(String),
    /// A worker, or an engine in no swarm: it does not vote.
    NotAManager,
    /// Certainly not voting: its engine is not running.
    Down(String),
    /// No answer in time, or an error that does not prove the engine down:
    /// it may be a member busy with an election (swarmkit holds calls then).
    Busy(String),
}

impl EngineAnswer {
    /// The answer a manager's (or a swarm-less) engine's view of the swarm
    /// gives; a worker is told by its engine's info before any view is asked.
    pub fn of_view(view: &SwarmView) -> Self {
        match view {
            SwarmView::Ok(_) => EngineAnswer::Led,
            SwarmView::NoQuorum(m) => EngineAnswer::NoLeader(m.clone()),
            SwarmView::Absent => EngineAnswer::NotAManager,
            SwarmView::Unavailable(m) => EngineAnswer::Busy(m.clone()),
        }
    }
}

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
    let may_vote = members
        .iter()
        .filter(|p| !matches!(p.answer, EngineAnswer::Down(_) | EngineAnswer::NotAManager))
        .count();
    let raft = probes.iter().filter_map(|p| p.raft_members).max();
    let managers = members.len().max(raft.unwrap_or(0));
    if may_vote >= crate::quorum::quorum(managers) {
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

#[cfg(test)]
mod tests {
    use super::*;

    fn probe(machine: &str, group: &str, answer: EngineAnswer) -> Probe {
        Probe {
            machine: machine.into(),
            group: group.into(),
            answer,
            raft_members: None,
        }
    }

    fn silent() -> EngineAnswer {
        EngineAnswer::Down("its engine is not running".into())
    }

    #[test]
    fn two_of_three_managers_silent_and_the_third_without_a_leader_is_a_lost_quorum() {
        let probes = [
            probe("m1", "managers", silent()),
            probe("m2", "managers", silent()),
            probe(
                "m3",
                "managers",
                EngineAnswer::NoLeader("The swarm does not have a leader".into()),
            ),
            probe("w1", "workers", EngineAnswer::NotAManager),
        ];
        let QuorumVerdict::Lost {
            reachable,
            managers,
            silent,
            ..
        } = judge(&probes)
        else {
            panic!("not lost: {:?}", judge(&probes));
        };
        assert_eq!((reachable, managers), (1, 3));
        let names: Vec<&str> = silent.iter().map(|(m, _)| m.as_str()).collect();
        assert_eq!(names, ["m1", "m2"]);
    }

    /// Issue 18: two of three managers' machines destroyed: the provider
    /// lists the survivor alone, whose engine still lists a raft of 3.
    #[test]
    fn members_the_survivor_lists_without_a_machine_count_as_lost() {
        let survivor = Probe {
            raft_members: Some(3),
            ..probe("m3", "managers", EngineAnswer::NoLeader("no leader".into()))
        };
        let verdict = judge(&[
            survivor.clone(),
            probe("w1", "workers", EngineAnswer::NotAManager),
        ]);
        assert!(
            matches!(
                verdict,
                QuorumVerdict::Lost {
                    reachable: 1,
                    managers: 3,
                    unlisted: 2,
                    ..
                }
            ),
            "{verdict:?}"
        );
        let without_the_raft = Probe {
            raft_members: None,
            ..survivor
        };
        assert_eq!(judge(&[without_the_raft]), QuorumVerdict::Unknown);
    }

    #[test]
    fn one_engine_that_knows_a_leader_means_the_quorum_holds() {
        let probes = [
            probe("m1", "managers", silent()),
            probe("m2", "managers", EngineAnswer::Led),
            probe("m3", "managers", EngineAnswer::NoLeader("election".into())),
        ];
        assert_eq!(judge(&probes), QuorumVerdict::Held);
    }

    /// During an election the followers' engines hold every call: busy
    /// members may still vote, so nothing is concluded from them (no false
    /// alarm, no runbook recommending a new cluster).
    #[test]
    fn busy_managers_beside_one_without_a_leader_are_no_lost_quorum() {
        let busy = || EngineAnswer::Busy("no answer within 3s".into());
        let probes = [
            probe("m1", "managers", busy()),
            probe("m2", "managers", busy()),
            probe("m3", "managers", EngineAnswer::NoLeader("election".into())),
        ];
        assert_eq!(judge(&probes), QuorumVerdict::Unknown);
        let one_down = [
            probe("m1", "managers", silent()),
            probe("m2", "managers", busy()),
            probe("m3", "managers", EngineAnswer::NoLeader("election".into())),
        ];
        assert_eq!(judge(&one_down), QuorumVerdict::Unknown, "2 of 3 may vote");
    }

    #[test]
    fn nothing_is_concluded_when_no_engine_answers_as_a_manager() {
        let probes = [
            probe("m1", "managers", silent()),
            probe("w1", "workers", EngineAnswer::NotAManager),
        ];
        assert_eq!(judge(&probes), QuorumVerdict::Unknown);
        assert_eq!(judge(&[]), QuorumVerdict::Unknown);
    }

    #[test]
    fn an_engine_in_no_swarm_does_not_vote_and_an_unavailable_one_may() {
        assert_eq!(
            EngineAnswer::of_view(&SwarmView::Absent),
            EngineAnswer::NotAManager
        );
        let down = SwarmView::Unavailable("connection refused".into());
        assert!(matches!(
            EngineAnswer::of_view(&down),
            EngineAnswer::Busy(_)
        ));
    }
}
