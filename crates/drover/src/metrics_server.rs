//! The controller's Prometheus endpoint: `GET /metrics` (axum) on
//! `--metrics-addr`.
//!
//! By default (`auto`) a controller serves on its manager's own address
//! when that is a loopback address (each machine of the local provider has
//! its own), else on 127.0.0.1 — always port 9464 and never beyond
//! loopback unless the operator names an address. An address already taken
//! (a second controller on one host) is logged and skipped: metrics are
//! never a reason for a controller not to run.

use crate::error::MainError;
use drover_controller::Metrics;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};

/// The default port (Prometheus' registry of exporter ports has no
/// conflict at 9464 on a manager).
pub const DEFAULT_PORT: u16 = 9464;

/// Where to serve: `off` (none), `auto`, or `HOST:PORT`. `node_addr` is
/// the engine's swarm address (`auto` uses it when it is loopback).
pub fn address(setting: &str, node_addr: &str) -> Result<Option<SocketAddr>, MainError> {
    match setting {
        "off" => Ok(None),
        "auto" => {
            let ip = node_addr
                .parse::<IpAddr>()
                .ok()
                .filter(IpAddr::is_loopback)
                .unwrap_or(IpAddr::V4(Ipv4Addr::LOCALHOST));
            Ok(Some(SocketAddr::new(ip, DEFAULT_PORT)))
        }
        other => other.parse().map(Some).map_err(|_| {
            MainError::BadInput(format!(
                "--metrics-addr {other}: not an address; give HOST:PORT (e.g. 127.0.0.1:9464), auto, or off"
            ))
        }),
    }
}

/// Binds `addr` and serves `metrics` in the background. A bind failure is
/// logged, not fatal.
pub async fn serve(addr: SocketAddr, metrics: Metrics) {
    let listener = match tokio::net::TcpListener::bind(addr).await {
        Ok(l) => l,
        Err(e) => {
            tracing::warn!(%addr, error = %e, "metrics endpoint not served");
            return;
        }
    };
    let app = axum::Router::new().route(
        "/metrics",
        axum::routing::get(move || {
            let metrics = metrics.clone();
            async move {
                (
                    [(
                        axum::http::header::CONTENT_TYPE,
                        "text/plain; version=0.0.4; charset=utf-8",
                    )],
                    metrics.encode(),
                )
            }
        }),
    );
    tracing::info!(%addr, "serving metrics at /metrics");
    tokio::spawn(async move {
        if let Err(e) = axum::serve(listener, app).await {
            tracing::warn!(error = %e, "metrics endpoint stopped");
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn auto_serves_on_a_loopback_manager_address_and_never_beyond_loopback() {
        let at = |s, n| address(s, n).unwrap().map(|a| a.to_string());
        assert_eq!(
            at("auto", "127.0.85.11").as_deref(),
            Some("127.0.85.11:9464")
        );
        assert_eq!(at("auto", "10.0.0.5").as_deref(), Some("127.0.0.1:9464"));
        assert_eq!(at("auto", "").as_deref(), Some("127.0.0.1:9464"));
        assert_eq!(at("off", "127.0.85.11"), None);
        assert_eq!(at("0.0.0.0:9100", "").as_deref(), Some("0.0.0.0:9100"));
        assert!(matches!(address("nine", ""), Err(MainError::BadInput(_))));
    }
}
