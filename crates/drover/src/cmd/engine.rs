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
    let engine = wiring::Engine::connect(engine).await.map_err(|e| match e {
        wiring::EngineError::BadAddress(m) => MainError::BadInput(format!("--engine: {m}")),
        other => MainError::Failed(anyhow::anyhow!("{other}")),
    })?;
    engine
        .join(&token, &[remote.to_string()], &format!("{address}:2377"))
        .await
        .map_err(|e| MainError::Failed(anyhow::anyhow!("joining {remote} as {role}: {e}")))?;
    Ok(ExitCode::SUCCESS)
}
