//! `drover engine join`: join with the token from the environment.

use crate::error::MainError;
use crate::wiring;
use drover_spi::Secret;
use std::process::ExitCode;

pub async fn join(
    role: &str,
    address: &str,
    remote: &str,
    engine: &str,
) -> Result<ExitCode, MainError> {
    let token = std::env::var("DROVER_JOIN_TOKEN")
        .map(Secret::new)
        .map_err(|_| {
            MainError::BadInput(
                "DROVER_JOIN_TOKEN is not set: the join token is read from the environment only"
                    .into(),
            )
        })?;
    if !matches!(role, "manager" | "worker") {
        return Err(MainError::BadInput(format!(
            "--role {role}: use manager or worker"
        )));
    }
    let remotes = remotes(remote)?;
    let engine = wiring::Engine::connect(engine).await.map_err(|e| match e {
        wiring::EngineError::BadAddress(m) => MainError::BadInput(format!("--engine: {m}")),
        other => MainError::Failed(anyhow::anyhow!("{other}")),
    })?;
    // Each failed attempt is said at once: this is the machine's boot log,
    // where an operator (and `drover status`) reads why it never joined.
    let tried = |a: &drover_engine::JoinAttempt| {
        eprintln!("drover: joining through {} failed: {}", a.remote, a.error);
    };
    let addr = format!("{address}:2377");
    match engine.join_any(&token, &remotes, &addr, &tried).await {
        Ok(through) => {
            eprintln!("drover: joined as {role} through {through}");
            Ok(ExitCode::SUCCESS)
        }
        Err(failed) => Err(MainError::Failed(anyhow::anyhow!(
            "joining as {role}: no manager took the join ({} tried: {})",
            failed.len(),
            remotes.join(", ")
        ))),
    }
}

/// `--remote`: managers' addresses, comma separated, tried in turn.
fn remotes(remote: &str) -> Result<Vec<String>, MainError> {
    let list: Vec<String> = remote
        .split(',')
        .map(str::trim)
        .filter(|r| !r.is_empty())
        .map(str::to_string)
        .collect();
    if list.is_empty() {
        return Err(MainError::BadInput(
            "--remote: give at least one manager address (host:port; several comma separated)"
                .into(),
        ));
    }
    Ok(list)
}
