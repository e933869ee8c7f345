//! Whether the managers' raft has a quorum, judged from their engines —
//! what `drover status` falls back on when the published status is stale or
//! the store cannot be read (a store kept in the raft is unreadable exactly
//! when the quorum is lost). No controller acts then, so nobody else says
//! it. Two kinds of evidence, one verdict ([`judge`]): the engines asked
//! directly ([`Probe`]s, through a provider that knows the machines), and
//! what each controller last heard from its own engine, published in its
//! heartbeat where the store lives outside the raft ([`EngineView`],
//! judged by [`judge_heartbeats`]).

use crate::model::{LeftReport, SwarmView};
use serde::{Deserialize, Serialize};

/// What one machine's engine said when asked directly.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "state", content = "says", rename_all = "snake_case")]
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

/// How long a controller's heartbeat stays evidence. A live controller
/// beats every pass: at least every resync (2 s), but a pass over an engine
/// that lost its quorum waits on it: the engine holds every swarm call for
/// ~20 s (swarm-facts; metrics.md measured the survivor's pass at ~30-40 s
/// end to end). 90 s covers two such passes with room; an older beat may
/// describe a swarm that has changed since, so it is shown with its age
/// and not judged.
pub const HEARTBEAT_FRESH_MS: u64 = 90_000;

/// How long engines may know no leader before the silent members are
/// taken for gone. A majority that can still vote elects a leader within
/// 9-25 s here (swarm-facts: a killed leader's successor), so no leader for
/// a minute means no majority answers — the same minute as the
/// `DroverSwarmQuorumLost` alerting rule (docs/metrics.md).
pub const NO_LEADER_BOUND_MS: u64 = 60_000;

/// How much older than a beat whose engine knows no leader a beat whose
/// engine knew one may be and still count: five resyncs (2 s) of a live
/// leader's controller that did not beat.
pub const LED_SUPERSEDED_MS: u64 = 10_000;

/// What a controller's own engine said of the swarm at its last pass, as
/// its heartbeat publishes it. Wall-clock times are the controller's host's.
/// Never holds a secret: node ids, links, counts and the engine's error text.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EngineView {
    /// What the engine answered: it knows a leader, has none (with the
    /// raft's error text), is in no swarm or is no manager, or could not be
    /// asked (with why).
    pub answer: EngineAnswer,
    /// The controller's machine link (`drover.link`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub link: Option<String>,
    /// This engine's swarm node id, as last listed while it had a leader.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node: Option<String>,
    /// This engine's node is a raft member (as last listed).
    #[serde(default)]
    pub manager: bool,
    /// The leader's node id and link, when the engine knows one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub leader: Option<LeaderSeen>,
    /// Raft members and how many of them are reachable, as last listed
    /// while there was a leader (a leaderless engine lists nothing).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub members: Option<(u32, u32)>,
    /// When this controller last saw its engine know a leader.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub leader_seen_ms: Option<u64>,
    /// This engine left the swarm: the controller's own hand-over's
    /// `swarm leave` returned (a fact only it knows at once).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub left: Option<Left>,
}

/// A leader as an engine names it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LeaderSeen {
    /// Its node id.
    pub node: String,
    /// Its machine link, when labelled.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub link: Option<String>,
}

/// The engine's leave, as its controller saw its hand-over end.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Left {
    /// The node id it had.
    pub node: String,
    /// When the leave returned, ms since the Unix epoch.
    pub at_ms: u64,
}

impl EngineView {
    /// This pass's view from `swarm` (the controller's own engine's), on
    /// the controller of `link`, at `now_ms`; what the engine cannot say
    /// while it has no leader (its node, the membership, when it last had
    /// one) is carried over from `before`, as is a leave.
    pub fn next(
        before: Option<&EngineView>,
        swarm: &SwarmView,
        link: Option<&str>,
        now_ms: u64,
    ) -> EngineView {
        let mut view = EngineView {
            answer: EngineAnswer::of_view(swarm),
            link: link.map(str::to_string),
            node: before.and_then(|b| b.node.clone()),
            manager: before.is_some_and(|b| b.manager),
            leader: None,
            members: before.and_then(|b| b.members),
            leader_seen_ms: before.and_then(|b| b.leader_seen_ms),
            left: before.and_then(|b| b.left.clone()),
        };
        match swarm {
            SwarmView::Ok(nodes) => {
                let own = link.and_then(|l| nodes.iter().find(|n| n.link.as_deref() == Some(l)));
                if let Some(own) = own {
                    view.node = Some(own.id.clone());
                    view.manager = own.raft.is_some();
                }
                view.leader = nodes
                    .iter()
                    .find(|n| n.raft.as_ref().is_some_and(|r| r.leader))
                    .map(|n| LeaderSeen {
                        node: n.id.clone(),
                        link: n.link.clone(),
                    });
                let raft = nodes.iter().filter_map(|n| n.raft.as_ref());
                let (members, reachable) =
                    raft.fold((0, 0), |(m, r), n| (m + 1, r + u32::from(n.reachable)));
                view.members = Some((members, reachable));
                view.leader_seen_ms = Some(now_ms);
                // Listed in a swarm again under another id: that leave is history.
                if view
                    .left
                    .as_ref()
                    .is_some_and(|l| Some(&l.node) != view.node.as_ref())
                {
                    view.left = None;
                }
            }
            SwarmView::NoQuorum(_) => view.manager = true,
            SwarmView::Absent => view.manager = false,
            SwarmView::Unavailable(_) => {}
        }
        view
    }

    /// Whether the engine knows a swarm leader: the one rule behind the
    /// heartbeat and the `drover_swarm_leader_known` gauge.
    pub fn leader_known(&self) -> bool {
        self.answer == EngineAnswer::Led
    }

    /// The leave this view reports, as the planner reads it.
    pub fn left_report(&self) -> Option<LeftReport> {
        let (link, left) = (self.link.as_ref()?, self.left.as_ref()?);
        Some(LeftReport {
            link: link.clone(),
            node: left.node.clone(),
            at_ms: left.at_ms,
        })
    }
}

/// One controller's heartbeat as `status` judges it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Beat<'a> {
    /// The controller.
    pub holder: &'a str,
    /// When it beat (its host's clock), ms since the Unix epoch.
    pub at_ms: u64,
    /// What its engine said then.
    pub view: &'a EngineView,
}

/// The managers' raft as the controllers' heartbeats tell it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HeartbeatVerdict {
    /// The verdict, as for engines asked directly.
    pub verdict: QuorumVerdict,
    /// Each heartbeat: holder, age in ms, judged (younger than
    /// [`HEARTBEAT_FRESH_MS`]) or not.
    pub ages: Vec<(String, u64, bool)>,
    /// The latest moment any fresh heartbeat's engine knew a leader.
    pub leader_seen_ms: Option<u64>,
}

/// Judges the controllers' heartbeats at `now_ms` with the same rule as
/// the engines asked directly ([`judge`]). Each fresh beat whose engine was
/// last listed as a raft member (and has not left) is that member's
/// answer; the raft members no such beat accounts for (from the largest
/// membership a fresh beat last listed) are silent. Silent and busy members
/// may still vote, unless no fresh beat's engine has known a leader for
/// [`NO_LEADER_BOUND_MS`]: a majority that can vote would have elected one
/// by then, so they count as gone. Stale beats (older than
/// [`HEARTBEAT_FRESH_MS`]), and beats that knew a leader more than
/// [`LED_SUPERSEDED_MS`] before a fresh beat that knows none, are not
/// judged (their members count as silent), only listed with their age.
pub fn judge_heartbeats(beats: &[Beat<'_>], now_ms: u64) -> HeartbeatVerdict {
    let age = |b: &Beat<'_>| now_ms.saturating_sub(b.at_ms);
    let ages = beats
        .iter()
        .map(|b| (b.holder.to_string(), age(b), age(b) <= HEARTBEAT_FRESH_MS))
        .collect();
    // A beat that knew a leader is superseded by a later one that knows
    // none: a live leader's controller beats every resync, so its word
    // that the leader is there is current only while it keeps coming.
    let newest_leaderless = beats
        .iter()
        .filter(|b| {
            age(b) <= HEARTBEAT_FRESH_MS && matches!(b.view.answer, EngineAnswer::NoLeader(_))
        })
        .map(|b| b.at_ms)
        .max();
    let superseded = |b: &Beat<'_>| {
        b.view.answer == EngineAnswer::Led
            && newest_leaderless.is_some_and(|t| t > b.at_ms.saturating_add(LED_SUPERSEDED_MS))
    };
    let judged = |b: &Beat<'_>| age(b) <= HEARTBEAT_FRESH_MS && !superseded(b);
    let fresh: Vec<&Beat<'_>> = beats.iter().filter(|b| judged(b)).collect();
    let leader_seen_ms = fresh.iter().filter_map(|b| b.view.leader_seen_ms).max();
    // Unknown when no fresh beat ever saw a leader (a controller started
    // during the outage cannot say for how long).
    let election_over = leader_seen_ms
        .map(|t| now_ms.saturating_sub(t))
        .filter(|&gap| gap >= NO_LEADER_BOUND_MS);
    let gone = |why: String| match election_over {
        Some(gap) => EngineAnswer::Down(format!("{why}; no leader elected for {}s", gap / 1000)),
        None => EngineAnswer::Busy(why),
    };
    let voters: Vec<&&Beat<'_>> = fresh
        .iter()
        .filter(|b| b.view.manager && b.view.left.is_none())
        .collect();
    let mut probes: Vec<Probe> = voters
        .iter()
        .map(|b| Probe {
            machine: b.view.link.clone().unwrap_or_else(|| b.holder.to_string()),
            group: String::new(),
            answer: match &b.view.answer {
                EngineAnswer::Busy(why) => gone(why.clone()),
                other => other.clone(),
            },
            // The members no fresh beat covers are added below, one probe each.
            raft_members: None,
        })
        .collect();
    let members = fresh
        .iter()
        .filter_map(|b| b.view.members.map(|(m, _)| m as usize))
        .max()
        .unwrap_or(0);
    // Named after the stale beats of members where there are some.
    let mut stale = beats
        .iter()
        .filter(|b| !judged(b) && b.view.manager && b.view.left.is_none())
        .map(|b| {
            let who = b.view.link.as_deref().unwrap_or(b.holder);
            format!("{who} (last heartbeat {}s ago)", age(b) / 1000)
        });
    for i in voters.len()..members {
        probes.push(Probe {
            machine: stale
                .next()
                .unwrap_or_else(|| format!("raft member #{} (no heartbeat)", i + 1)),
            group: String::new(),
            answer: gone("its controller has not beaten within the bound".into()),
            raft_members: None,
        });
    }
    HeartbeatVerdict {
        verdict: judge(&probes),
        ages,
        leader_seen_ms,
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

    fn raft_node(id: &str, leader: bool, reachable: bool) -> crate::model::Node {
        crate::model::Node {
            id: id.into(),
            link: Some(format!("l-{id}")),
            cluster: None,
            group: Some("managers".into()),
            state: crate::model::NodeState::Ready,
            availability: crate::model::Availability::Active,
            manager_role: true,
            raft: Some(crate::model::RaftMember {
                leader,
                reachable,
                addr: String::new(),
            }),
            running_tasks: 0,
            locked: false,
            left: false,
        }
    }

    /// A controller's view over three passes: led, then leaderless (what
    /// the engine no longer lists is carried over), with the time it last
    /// knew a leader kept.
    #[test]
    fn a_view_keeps_what_a_leaderless_engine_cannot_say() {
        let led = SwarmView::Ok(vec![
            raft_node("n1", true, true),
            raft_node("n2", false, true),
            raft_node("n3", false, false),
        ]);
        let v1 = EngineView::next(None, &led, Some("l-n2"), 1_000);
        assert_eq!(v1.answer, EngineAnswer::Led);
        assert!(v1.leader_known());
        assert_eq!(
            (v1.node.as_deref(), v1.manager, v1.members),
            (Some("n2"), true, Some((3, 2)))
        );
        assert_eq!(v1.leader.as_ref().map(|l| l.node.as_str()), Some("n1"));
        let lost = SwarmView::NoQuorum("The swarm does not have a leader".into());
        let v2 = EngineView::next(Some(&v1), &lost, Some("l-n2"), 50_000);
        assert!(!v2.leader_known());
        assert_eq!(v2.leader, None);
        assert_eq!(
            (v2.node.as_deref(), v2.members, v2.leader_seen_ms),
            (Some("n2"), Some((3, 2)), Some(1_000))
        );
        // Its hand-over's leave is kept until it is listed under another id.
        let mut v3 = v2.clone();
        v3.left = Some(Left {
            node: "n2".into(),
            at_ms: 60_000,
        });
        let absent = EngineView::next(Some(&v3), &SwarmView::Absent, Some("l-n2"), 61_000);
        assert!(!absent.manager);
        assert_eq!(
            absent.left_report().map(|r| (r.link, r.node)),
            Some(("l-n2".to_string(), "n2".to_string()))
        );
        let mut rejoined = raft_node("n9", false, true);
        rejoined.link = Some("l-n2".into());
        let again = SwarmView::Ok(vec![raft_node("n1", true, true), rejoined]);
        assert_eq!(
            EngineView::next(Some(&absent), &again, Some("l-n2"), 62_000).left,
            None
        );
    }

    fn beat<'a>(holder: &'a str, at_ms: u64, view: &'a EngineView) -> Beat<'a> {
        Beat {
            holder,
            at_ms,
            view,
        }
    }

    /// Issue 18, a lost quorum seen from the heartbeats: two of three
    /// managers' machines died with their controllers; the survivor's
    /// engine has had no leader. Busy at first (an election may still end),
    /// lost once no leader was known for a minute; the dead ones are named
    /// by their last (stale) heartbeat.
    #[test]
    fn heartbeats_of_a_survivor_without_a_leader_for_a_minute_say_the_quorum_is_lost() {
        let led = SwarmView::Ok(vec![
            raft_node("n1", true, true),
            raft_node("n2", false, true),
            raft_node("n3", false, true),
        ]);
        let t0 = 1_000_000;
        let last = |link: &str| EngineView::next(None, &led, Some(link), t0);
        let (v1, v2) = (last("l-n1"), last("l-n2"));
        let lost = SwarmView::NoQuorum("The swarm does not have a leader".into());
        let survivor = |now| EngineView::next(Some(&last("l-n3")), &lost, Some("l-n3"), now);
        let s = survivor(t0 + 30_000);
        let beats = [
            beat("c1", t0, &v1),
            beat("c2", t0, &v2),
            beat("c3", t0 + 30_000, &s),
        ];
        // 30 s: an election may still be running.
        let early = judge_heartbeats(&beats, t0 + 30_000);
        assert_eq!(early.verdict, QuorumVerdict::Unknown);
        assert_eq!(early.leader_seen_ms, Some(t0));
        // 100 s: c1 and c2 beat last 100 s ago (stale), no leader for 100 s.
        let s = survivor(t0 + 100_000);
        let beats = [
            beat("c1", t0, &v1),
            beat("c2", t0, &v2),
            beat("c3", t0 + 99_000, &s),
        ];
        let late = judge_heartbeats(&beats, t0 + 100_000);
        let QuorumVerdict::Lost {
            reachable,
            managers,
            silent,
            engine_says,
            ..
        } = &late.verdict
        else {
            panic!("not lost: {late:?}");
        };
        assert_eq!((*reachable, *managers), (1, 3));
        assert_eq!(engine_says, "The swarm does not have a leader");
        let names: Vec<&str> = silent.iter().map(|(m, _)| m.as_str()).collect();
        assert_eq!(
            names,
            [
                "l-n1 (last heartbeat 100s ago)",
                "l-n2 (last heartbeat 100s ago)"
            ]
        );
        assert_eq!(
            late.ages,
            vec![
                ("c1".to_string(), 100_000, false),
                ("c2".to_string(), 100_000, false),
                ("c3".to_string(), 1_000, true),
            ]
        );
    }

    /// Stale heartbeats prove nothing: one fresh beat that knows a leader
    /// holds the quorum; engines that cannot be asked (controllers alive,
    /// engines busy) are no lost quorum before the election bound.
    #[test]
    fn a_fresh_beat_that_knows_a_leader_holds_and_busy_engines_are_no_loss_yet() {
        let led = SwarmView::Ok(vec![
            raft_node("n1", true, true),
            raft_node("n2", false, true),
            raft_node("n3", false, true),
        ]);
        let now = 10_000_000;
        let held = EngineView::next(None, &led, Some("l-n1"), now);
        let old_lost = EngineView::next(
            Some(&held),
            &SwarmView::NoQuorum("no leader".into()),
            Some("l-n2"),
            now - 200_000,
        );
        let beats = [
            beat("c1", now - 1_000, &held),
            beat("c2", now - 200_000, &old_lost),
        ];
        assert_eq!(judge_heartbeats(&beats, now).verdict, QuorumVerdict::Held);
        let busy = |link| {
            EngineView::next(
                Some(&EngineView::next(None, &led, Some(link), now - 20_000)),
                &SwarmView::Unavailable("connection refused".into()),
                Some(link),
                now,
            )
        };
        let (b1, b2) = (busy("l-n1"), busy("l-n2"));
        let survivor = EngineView::next(
            Some(&EngineView::next(None, &led, Some("l-n3"), now - 20_000)),
            &SwarmView::NoQuorum("no leader".into()),
            Some("l-n3"),
            now,
        );
        let beats = [
            beat("c1", now, &b1),
            beat("c2", now, &b2),
            beat("c3", now, &survivor),
        ];
        assert_eq!(
            judge_heartbeats(&beats, now).verdict,
            QuorumVerdict::Unknown
        );
        // A minute later the same answers: no election ended, so the
        // engines that cannot be asked are gone.
        let later = now + 60_000;
        let beats = [
            beat("c1", later, &b1),
            beat("c2", later, &b2),
            beat("c3", later, &survivor),
        ];
        assert!(matches!(
            judge_heartbeats(&beats, later).verdict,
            QuorumVerdict::Lost {
                reachable: 1,
                managers: 3,
                ..
            }
        ));
    }

    #[test]
    fn a_heartbeat_view_reads_back_from_its_json_and_an_old_heartbeat_has_none() {
        let led = SwarmView::Ok(vec![raft_node("n1", true, true)]);
        let v = EngineView::next(None, &led, Some("l-n1"), 5);
        let json = serde_json::to_string(&v).expect("serialises");
        assert_eq!(
            serde_json::from_str::<EngineView>(&json).expect("parses"),
            v
        );
        let lost = EngineView::next(Some(&v), &SwarmView::NoQuorum("x".into()), None, 6);
        let json = serde_json::to_string(&lost).expect("serialises");
        assert!(
            json.contains(r#""answer":{"state":"no_leader","says":"x"}"#),
            "{json}"
        );
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
