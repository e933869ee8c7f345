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
use crate::verdict::quorum::{Probe, QuorumVerdict, judge};
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

#[cfg(test)]
mod tests;
