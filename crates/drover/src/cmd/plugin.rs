//! `drover plugin serve`: one of drover's providers as an InfraKit
//! instance plugin on a unix socket.

use crate::cli::LocalArgs;
use crate::error::MainError;
use crate::wiring;
use std::path::Path;
use std::process::ExitCode;

pub async fn serve(
    provider: &str,
    socket: &Path,
    local: &LocalArgs,
) -> Result<ExitCode, MainError> {
    let provider = wiring::served_provider(provider, local)?;
    let (listener, _removed_on_exit) = wiring::bind_plugin_socket(socket)?;
    eprintln!(
        "serving an InfraKit instance plugin on {}",
        socket.display()
    );
    wiring::serve_plugin(provider, listener, super::controller::shutdown())
        .await
        .map_err(|e| MainError::Failed(anyhow::anyhow!("serving {}: {e}", socket.display())))?;
    Ok(ExitCode::SUCCESS)
}
