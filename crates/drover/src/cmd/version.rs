//! `drover version`: which drover this is, to quote in a bug report.

use crate::cli::Output;
use crate::error::MainError;
use serde::Serialize;
use std::process::ExitCode;

/// What this binary is, as recorded when it was built (`build.rs`).
#[derive(Debug, Serialize)]
struct BuildInfo {
    /// The crate version.
    version: &'static str,
    /// The git commit (12 hex digits), or `unknown` outside a clone.
    commit: &'static str,
    /// The target triple.
    target: &'static str,
    /// `debug` or `release`.
    profile: &'static str,
    /// Cargo features enabled.
    features: Vec<&'static str>,
    /// The store backends compiled in.
    stores: &'static [&'static str],
    /// The instance providers a cluster file may name.
    providers: &'static [&'static str],
}

fn build_info() -> BuildInfo {
    BuildInfo {
        version: env!("CARGO_PKG_VERSION"),
        commit: env!("DROVER_GIT_COMMIT"),
        target: env!("DROVER_BUILD_TARGET"),
        profile: env!("DROVER_BUILD_PROFILE"),
        features: env!("DROVER_FEATURES")
            .split(',')
            .filter(|f| !f.is_empty())
            .collect(),
        stores: crate::wiring::STORE_BACKENDS,
        providers: drover_core::spec::PROVIDERS,
    }
}

pub fn run(output: Output) -> Result<ExitCode, MainError> {
    let info = build_info();
    if output == Output::Json {
        println!(
            "{}",
            serde_json::to_string_pretty(&info).map_err(anyhow::Error::from)?
        );
        return Ok(ExitCode::SUCCESS);
    }
    let features = if info.features.is_empty() {
        "(none)".to_string()
    } else {
        info.features.join(", ")
    };
    println!("drover {}", info.version);
    println!("commit:    {}", info.commit);
    println!("target:    {} ({})", info.target, info.profile);
    println!("features:  {features}");
    println!("stores:    {}", info.stores.join(", "));
    println!("providers: {}", info.providers.join(", "));
    Ok(ExitCode::SUCCESS)
}
