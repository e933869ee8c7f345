//! One engine asked directly, within a bound: what a provider reports of
//! its machine's engine for the quorum verdict and `recover`'s evidence.

use crate::{Engine, LocalState};
use drover_core::boot::JoinFailed;
use drover_core::quorum_probe::EngineAnswer;
use drover_core::recover::{Peer, Raft};
use std::time::Duration;

/// How long one engine may take to answer before it counts as busy (a
/// manager in an election holds every call; swarm-facts).
pub const ASK_WITHIN: Duration = Duration::from_secs(3);

/// The engine at `endpoint` asked within [`ASK_WITHIN`]: its answer and,
/// for a manager whose swarm has no leader, its raft as it reports it (its
/// node id and the members it knows: `info .Swarm.RemoteManagers`, which a
/// manager without a leader still reports — measured). No answer in time,
/// or an error, is busy: it does not prove the engine down.
pub async fn ask(endpoint: &str) -> (EngineAnswer, Option<Raft>) {
    let asked = async {
        let engine = match Engine::connect_with_timeout(endpoint, ASK_WITHIN).await {
            Ok(engine) => engine,
            Err(e) => return (EngineAnswer::Busy(e.to_string()), None),
        };
        let info = match engine.info().await {
            Ok(info) => info,
            Err(e) => return (EngineAnswer::Busy(e.to_string()), None),
        };
        // A worker says so in its info: no node list asked.
        if info.state == LocalState::Active && !info.control_available {
            return (EngineAnswer::NotAManager, None);
        }
        let mut peers: Vec<Peer> = info
            .raft_peers
            .iter()
            .map(|(node_id, addr)| Peer {
                node_id: node_id.clone(),
                addr: addr.clone(),
            })
            .collect();
        // The engine lists them in no stable order.
        peers.sort_by(|a, b| a.addr.cmp(&b.addr));
        let raft = Raft {
            node_id: info.node_id.clone(),
            peers,
        };
        let answer = EngineAnswer::of_view(&engine.view_from(info).await);
        let raft = matches!(answer, EngineAnswer::NoLeader(_)).then_some(raft);
        (answer, raft)
    };
    tokio::time::timeout(ASK_WITHIN, asked)
        .await
        .unwrap_or_else(|_| {
            (
                EngineAnswer::Busy(format!("no answer within {}s", ASK_WITHIN.as_secs())),
                None,
            )
        })
}

/// Whether the engine at `endpoint`, asked within [`ASK_WITHIN`], reports
/// its swarm state as `error` (`info .Swarm.LocalNodeState`), with its
/// `Swarm.Error` redacted: a join that failed (swarmkit does not retry a
/// first join that failed). `None` when it does not, or cannot be asked:
/// silence is no evidence.
pub async fn join_failed(endpoint: &str) -> Option<JoinFailed> {
    let asked = async {
        let engine = Engine::connect_with_timeout(endpoint, ASK_WITHIN)
            .await
            .ok()?;
        let info = engine.info().await.ok()?;
        (info.state == LocalState::Error)
            .then(|| JoinFailed::new(info.swarm_error.as_deref().unwrap_or_default()))
    };
    tokio::time::timeout(ASK_WITHIN, asked).await.ok().flatten()
}
