//! `drover controller`: the reconciler next to a manager's engine.

use crate::cli::{LocalArgs, StoreArgs};
use crate::error::MainError;
use crate::wiring;
use drover_controller::{Context, Controller, Metrics};
use drover_swarm::SwarmCluster;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

pub async fn run(
    engine: &str,
    store_args: &StoreArgs,
    local: &LocalArgs,
    metrics_addr: &str,
) -> Result<ExitCode, MainError> {
    let bad = |e: drover_engine::EngineError| {
        MainError::BadInput(format!(
            "--engine {engine}: {e}; point it at this manager's docker socket"
        ))
    };
    let own = drover_engine::Engine::connect(engine).await.map_err(bad)?;
    let info = own.info().await.map_err(bad)?;
    let self_link = self_link(&own, &info).await;
    let local = wiring::local(local)?;
    let peers = local
        .clone()
        .map(|l| l as Arc<dyn drover_engine::PeerEndpoints>);
    let ctx = Context {
        providers: wiring::providers(&local),
        cluster: Arc::new(SwarmCluster::new(engine, peers).acting_only_as_leader()),
        store: wiring::store_with(store_args, wiring::Open::OrCreate).await?,
        identity: self_link
            .clone()
            .unwrap_or_else(|| format!("engine {}", info.node_id)),
        self_link,
        store_url: Some(store_args.url.clone()),
        resync: Duration::from_secs(2),
    };
    tracing::info!(identity = %ctx.identity, "controller starting");
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
    tokio::spawn(forward_node_events(engine.to_string(), tx));
    let mut controller = Controller::new(ctx).with_triggers(rx);
    if let Some(addr) = crate::metrics_server::address(metrics_addr, &info.node_addr)? {
        let metrics = Metrics::new();
        crate::metrics_server::serve(addr, metrics.clone()).await;
        controller = controller.with_metrics(metrics);
    }
    controller.run(shutdown()).await;
    Ok(ExitCode::SUCCESS)
}

/// Which instance this controller runs on: its engine's `drover.link`
/// label, or (for an adopted machine, whose engine was started by someone
/// else) its node's. A swarm member carrying neither is not drover's yet:
/// acting as an off-cluster controller there would lose the "self goes
/// last" rule, so wait until it is adopted or built by drover.
async fn self_link(
    own: &drover_engine::Engine,
    info: &drover_engine::EngineInfo,
) -> Option<String> {
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

async fn shutdown() {
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()).ok();
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = async { match term.as_mut() { Some(t) => { t.recv().await; } None => std::future::pending::<()>().await } } => {}
    }
}

/// Turns the engine's node events into nudges, reconnecting after errors
/// (the stream stalls during elections; the controller's resync covers that).
/// Every reconnection is a nudge too: what changed while the stream was down
/// (a new leader, during an election) sent no event this controller saw.
async fn forward_node_events(engine: String, tx: tokio::sync::mpsc::UnboundedSender<()>) {
    use futures_util::StreamExt;
    loop {
        if let Ok(e) = drover_engine::Engine::connect(&engine).await {
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
