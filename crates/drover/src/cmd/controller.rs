//! `drover controller`: the reconciler next to a manager's engine.

use crate::cli::{LocalArgs, StoreArgs};
use crate::error::MainError;
use crate::wiring;
use drover_controller::{Controller, Metrics};
use std::process::ExitCode;

pub async fn run(
    engine: &str,
    store_args: &StoreArgs,
    local: &LocalArgs,
    metrics_addr: &str,
) -> Result<ExitCode, MainError> {
    let local = wiring::machines(local)?;
    let (ctx, info) = wiring::on_manager(engine, store_args, &local).await?;
    tracing::info!(identity = %ctx.identity, "controller starting");
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
    tokio::spawn(wiring::forward_node_events(engine.to_string(), tx));
    let mut controller = Controller::new(ctx).with_triggers(rx);
    if let Some(addr) = crate::metrics_server::address(metrics_addr, &info.node_addr)? {
        let metrics = Metrics::with(|r| {
            if let Some(ec2) = &local.ec2 {
                ec2.metrics().register(r);
            }
        });
        crate::metrics_server::serve(addr, metrics.clone()).await;
        controller = controller.with_metrics(metrics);
    }
    controller.run(shutdown()).await;
    Ok(ExitCode::SUCCESS)
}

pub(super) async fn shutdown() {
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()).ok();
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = async { match term.as_mut() { Some(t) => { t.recv().await; } None => std::future::pending::<()>().await } } => {}
    }
}
