//! `drover controller`: the reconciler next to a manager's engine, or
//! (`--external`) one of the external controllers off the cluster.

use crate::cli::{ControllerArgs, LocalArgs, StoreArgs};
use crate::error::MainError;
use crate::wiring;
use drover_controller::{Controller, Metrics};
use std::process::ExitCode;

pub async fn run(args: &ControllerArgs) -> Result<ExitCode, MainError> {
    let (store, local, metrics) = (&args.store, &args.local, &args.metrics_addr);
    match args.external {
        true => external(args.name.clone(), store, local, metrics).await,
        false => beside(&args.engine, store, local, metrics).await,
    }
}

/// The controller next to the manager engine `engine`.
async fn beside(
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
    let controller = Controller::new(ctx).with_triggers(rx);
    let at = crate::metrics_server::address(metrics_addr, &info.node_addr)?;
    served(controller, at, &local).await.run(shutdown()).await;
    Ok(ExitCode::SUCCESS)
}

/// `drover controller --external`: no engine of its own, no nudges but the
/// store's; metrics on loopback unless told otherwise (it runs on an admin
/// host, not inside the cluster's network).
async fn external(
    name: Option<String>,
    store_args: &StoreArgs,
    local: &LocalArgs,
    metrics_addr: &str,
) -> Result<ExitCode, MainError> {
    let machines = wiring::machines(local)?;
    let metrics_at = crate::metrics_server::address(metrics_addr, "127.0.0.1")?;
    let ctx = wiring::external(name, store_args, &machines).await?;
    tracing::info!(identity = %ctx.identity, "external controller starting");
    let controller = Controller::new(ctx).external(machines.any());
    served(controller, metrics_at, &machines)
        .await
        .run(shutdown())
        .await;
    Ok(ExitCode::SUCCESS)
}

/// `controller` with its metrics served at `at` (none: not served), the
/// EC2 provider's own among them.
async fn served(
    controller: Controller,
    at: Option<std::net::SocketAddr>,
    machines: &wiring::Machines,
) -> Controller {
    let Some(addr) = at else {
        return controller;
    };
    let metrics = Metrics::with(|r| {
        if let Some(ec2) = &machines.ec2 {
            ec2.metrics().register(r);
        }
    });
    crate::metrics_server::serve(addr, metrics.clone()).await;
    controller.with_metrics(metrics)
}

pub(super) async fn shutdown() {
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()).ok();
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = async { match term.as_mut() { Some(t) => { t.recv().await; } None => std::future::pending::<()>().await } } => {}
    }
}
