//! A controller next to a manager's engine: its context (the swarm through
//! that engine, acting only as the leader; the other managers' engines
//! from the local provider), which machine it runs on, and the engine's
//! node events as nudges.

use super::Machines;
use crate::cli::StoreArgs;
use crate::error::MainError;
use drover_controller::Context;
use drover_engine::{Engine, EngineError, EngineInfo, LocalState};
use drover_swarm::SwarmCluster;
use std::sync::Arc;
use std::time::Duration;

/// The context of the controller beside `engine`, and the engine's own
/// description (its node address serves the metrics).
pub async fn on_manager(
    engine: &str,
    store_args: &StoreArgs,
    local: &Machines,
) -> Result<(Context, EngineInfo), MainError> {
    let bad = |e: EngineError| {
        MainError::BadInput(format!(
            "--engine {engine}: {e}; point it at this manager's docker socket"
        ))
    };
    let own = Engine::connect(engine).await.map_err(bad)?;
    let info = in_swarm(&own, own.info().await.map_err(bad)?).await;
    let self_link = self_link(&own, &info).await;
    let peers = local.peers();
    let store = super::own_store(store_args).await?;
    let ctx = Context {
        providers: super::providers(local, Some(&store)),
        cluster: Arc::new(SwarmCluster::new(engine, peers).acting_only_as_leader()),
        store,
        identity: self_link
            .clone()
            .unwrap_or_else(|| format!("engine {}", info.node_id)),
        self_link,
        store_url: Some(store_args.url.clone()),
        resync: Duration::from_secs(2),
    };
    Ok((ctx, info))
}

/// The engine's description once it is in a swarm (`info`, or a later
/// one). A manager's boot script starts its controller before the engine
/// joins (`templates/manager.sh.j2`: a join can complete after the script
/// stopped waiting for it), so the controller waits here, asking every
/// second, while its engine is outside a swarm, joining, or failed to join:
/// an engine outside the swarm leads nothing, and only a member knows its
/// swarm address, where `--metrics-addr auto` serves.
async fn in_swarm(own: &Engine, mut info: EngineInfo) -> EngineInfo {
    let mut told = false;
    while matches!(
        info.state,
        LocalState::Inactive | LocalState::Pending | LocalState::Error
    ) {
        if !told {
            tracing::info!(state = ?info.state, "this engine is not in a swarm yet: waiting until it joins");
            told = true;
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
        if let Ok(i) = own.info().await {
            info = i;
        }
    }
    info
}

/// Which instance this controller runs on: its engine's `drover.link`
/// label, or (for an adopted machine, whose engine was started by someone
/// else) its node's. A swarm member carrying neither is not drover's yet:
/// acting as an off-cluster controller there would lose the "self goes
/// last" rule, so wait until it is adopted or built by drover.
async fn self_link(own: &Engine, info: &EngineInfo) -> Option<String> {
    let mut warned = false;
    let mut info = info.clone();
    loop {
        if let Some(l) = info.labels.get(drover_core::model::tags::LINK) {
            return Some(l.clone());
        }
        if info.node_id.is_empty() {
            return None;
        }
        if let Ok(Some(l)) = own.node(&info.node_id).await.map(|n| n.link) {
            return Some(l);
        }
        if !warned {
            tracing::warn!(node = %info.node_id, "this engine's node carries no drover.link label: waiting until drover adopts or builds it");
            warned = true;
        }
        tokio::time::sleep(Duration::from_secs(2)).await;
        if let Ok(i) = own.info().await {
            info = i;
        }
    }
}

/// Turns the engine's node events into nudges, reconnecting after errors
/// (the stream stalls during elections; the controller's resync covers that).
/// Every reconnection is a nudge too: what changed while the stream was down
/// (a new leader, during an election) sent no event this controller saw.
pub async fn forward_node_events(engine: String, tx: tokio::sync::mpsc::UnboundedSender<()>) {
    use futures_util::StreamExt;
    loop {
        if let Ok(e) = Engine::connect(&engine).await {
            if tx.send(()).is_err() {
                return;
            }
            let mut events = std::pin::pin!(e.node_events());
            while let Some(Ok(())) = events.next().await {
                if tx.send(()).is_err() {
                    return;
                }
            }
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}
