//! "Is the quorum lost?" as `drover status` asks it when the published
//! status is stale or the store cannot be read (no controller acts without
//! a quorum, and a store kept in the raft cannot be read then, so nobody
//! else says it): the engines asked now through their providers, and what
//! each controller's engine last said (its heartbeat, where the store lives
//! outside the raft), judged by [`drover_core::verdict::quorum`].

use crate::context::Providers;
use drover_core::quorum_probe::{Beat, EngineView, HeartbeatVerdict, judge_heartbeats};
use drover_core::verdict::quorum::{self, Probe, QuorumVerdict};
use drover_spi::{Heartbeat, Store};
use std::collections::BTreeMap;

/// One controller's heartbeat as `status` shows it.
#[derive(Debug, Clone, serde::Serialize)]
pub struct BeatRow {
    /// The controller.
    pub controller: String,
    /// How old the beat is, ms.
    pub age_ms: u64,
    /// Young enough to be judged
    /// ([`HEARTBEAT_FRESH_MS`](drover_core::quorum_probe::HEARTBEAT_FRESH_MS)).
    pub judged: bool,
    /// What its engine said.
    pub engine: EngineView,
}

/// What each controller's engine last said, from the heartbeats, judged.
#[derive(Debug, Clone)]
pub struct Heard {
    /// The heartbeats' verdict.
    pub verdict: HeartbeatVerdict,
    /// One row per heartbeat that carries its engine's view.
    pub rows: Vec<BeatRow>,
}

impl Heard {
    /// `beats` judged at `now` (ms since the epoch).
    pub fn of(beats: &[Heartbeat], now: u64) -> Heard {
        let views: Vec<Beat<'_>> = beats
            .iter()
            .filter_map(|b| {
                Some(Beat {
                    holder: &b.holder,
                    at_ms: b.at_ms,
                    view: b.engine.as_ref()?,
                })
            })
            .collect();
        let verdict = judge_heartbeats(&views, now);
        let rows = views
            .iter()
            .zip(&verdict.ages)
            .map(|(b, (_, age_ms, judged))| BeatRow {
                controller: b.holder.to_string(),
                age_ms: *age_ms,
                judged: *judged,
                engine: b.view.clone(),
            })
            .collect();
        Heard { verdict, rows }
    }
}

/// A manager machine whose engine does not answer.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Unreachable {
    /// The machine.
    pub machine: String,
    /// Why it does not answer.
    pub why: String,
}

/// A quorum lost, as the managers' own engines tell it (asked now, or
/// through their controllers' heartbeats): the evidence an operator reads.
#[derive(Debug, Clone, serde::Serialize)]
pub struct LostQuorum {
    /// Always `lost` (what a script matches on).
    pub quorum: &'static str,
    /// `engines` (asked directly) or `heartbeats` (what each controller's
    /// engine last said).
    pub evidence: &'static str,
    /// Manager engines that answer.
    pub reachable: usize,
    /// Raft members.
    pub managers: usize,
    /// Raft members no machine of the provider stands for (destroyed).
    pub unlisted: usize,
    /// The manager machines whose engines do not answer.
    pub unreachable: Vec<Unreachable>,
    /// What an answering manager's engine said.
    pub engine_says: String,
    /// When an engine last knew a leader, by the heartbeats (ms since the epoch).
    pub leader_seen_ms: Option<u64>,
    /// When the last status was published (ms since the epoch), if one can be read.
    pub last_status_ms: Option<u64>,
    /// Why the store could not be read, if it could not.
    pub store_error: Option<String>,
    /// Every controller's heartbeat, with its age (etcd and file stores).
    pub heartbeats: Vec<BeatRow>,
}

/// What `status` knows of the published status when it is in doubt.
#[derive(Debug, Clone, Default)]
pub struct Published {
    /// When the last status was published, if one could be read.
    pub last_status_ms: Option<u64>,
    /// Why the store could not be read, if it could not.
    pub store_error: Option<String>,
}

/// The diagnosis: the heartbeats as heard, and the lost quorum if the
/// evidence proves one.
#[derive(Debug, Clone)]
pub struct Diagnosis {
    /// The heartbeats (empty unless in doubt and the store is outside the raft).
    pub heard: Heard,
    /// The lost quorum, with its evidence.
    pub lost: Option<LostQuorum>,
}

/// Diagnoses the quorum at `now` when `in_doubt` (the published status is
/// stale or unreadable): the heartbeats of `store` when it lives outside
/// the raft, and every provider's machines' engines asked now. Not in
/// doubt: nothing is asked.
pub async fn diagnose(
    store: Option<&dyn Store>,
    providers: &Providers,
    in_doubt: bool,
    published: Published,
    now: u64,
) -> Diagnosis {
    let beats = match store {
        Some(store) if in_doubt && store.outside_raft() => {
            store.heartbeats().await.unwrap_or_default()
        }
        _ => Vec::new(),
    };
    let heard = Heard::of(&beats, now);
    let lost = if in_doubt {
        let probes = ask_engines(providers).await;
        lost(&probes, &heard, published)
    } else {
        None
    };
    Diagnosis { heard, lost }
}

/// Every machine of every provider, its engine asked now through its
/// provider (a bounded wait each, all at once). A provider whose machines
/// cannot be listed adds nothing: status only reports.
pub async fn ask_engines(providers: &Providers) -> Vec<Probe> {
    let all = BTreeMap::new();
    let asked = providers.values().map(|p| p.ask_engines(&all));
    let listed = futures_util::future::join_all(asked).await;
    listed
        .into_iter()
        .flatten()
        .flatten()
        .map(|r| Probe {
            group: r
                .instance
                .tag(drover_core::model::tags::GROUP)
                .unwrap_or_default()
                .to_string(),
            machine: r.instance.id.clone(),
            answer: r.answer,
            raft_members: r.raft.map(|r| r.peers.len()),
        })
        .collect()
}

/// The lost quorum the engines (or, when they cannot conclude, the
/// heartbeats) prove, with its evidence.
fn lost(probes: &[Probe], heard: &Heard, published: Published) -> Option<LostQuorum> {
    let engines = quorum::judge(probes);
    let (verdict, source) = quorum::of_both(engines, &heard.verdict.verdict);
    let QuorumVerdict::Lost {
        reachable,
        managers,
        unlisted,
        silent,
        engine_says,
    } = verdict
    else {
        return None;
    };
    Some(LostQuorum {
        quorum: "lost",
        evidence: source.as_str(),
        reachable,
        managers,
        unlisted,
        unreachable: silent
            .into_iter()
            .map(|(machine, why)| Unreachable { machine, why })
            .collect(),
        engine_says,
        leader_seen_ms: heard.verdict.leader_seen_ms,
        last_status_ms: published.last_status_ms,
        store_error: published.store_error,
        heartbeats: heard.rows.clone(),
    })
}
