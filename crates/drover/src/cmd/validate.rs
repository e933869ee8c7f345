//! `drover validate -f FILE [-o json]`.

use crate::cli::Output;
use crate::error::MainError;
use crate::spec_file::{self, Problem};
use drover_core::spec::Severity;
use std::path::Path;
use std::process::ExitCode;

pub fn run(file: &Path, output: Output) -> Result<ExitCode, MainError> {
    if output == Output::Json {
        return json(file);
    }
    let spec = spec_file::load(file)?;
    let names: Vec<&str> = spec.groups.iter().map(|g| g.name.as_str()).collect();
    println!(
        "{}: valid ({} group{}: {})",
        spec_file::display_name(file),
        names.len(),
        if names.len() == 1 { "" } else { "s" },
        names.join(", ")
    );
    Ok(ExitCode::SUCCESS)
}

/// `{"file", "valid", "groups": [names], "problems": [{file, line, col,
/// path, severity, reason}]}` on stdout, warnings included; exit 2 when
/// invalid, as in text.
fn json(file: &Path) -> Result<ExitCode, MainError> {
    let decoded = spec_file::decode(file)?;
    let problems: Vec<Problem> = decoded
        .diagnostics
        .iter()
        .map(|d| Problem::new(&decoded.name, d))
        .collect();
    let valid = decoded.spec.is_some()
        && !decoded
            .diagnostics
            .iter()
            .any(|d| d.severity == Severity::Error);
    let groups: Vec<&str> = decoded
        .spec
        .iter()
        .flat_map(|s| s.groups.iter().map(|g| g.name.as_str()))
        .collect();
    let doc = serde_json::json!({
        "file": decoded.name,
        "valid": valid,
        "groups": groups,
        "problems": problems,
    });
    println!(
        "{}",
        serde_json::to_string_pretty(&doc).map_err(anyhow::Error::from)?
    );
    Ok(if valid {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(2)
    })
}
