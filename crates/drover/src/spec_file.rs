//! Reading a cluster file: all problems at once, as `FILE:LINE:COL: path: reason`.

use crate::error::MainError;
use drover_core::spec::{ClusterSpec, Severity, load_bytes};
use std::path::Path;

/// Reads and validates `path`. Warnings go to stderr; errors become one
/// `BadInput` listing every problem.
pub fn load(path: &Path) -> Result<ClusterSpec, MainError> {
    let name = path.display().to_string();
    let bytes = std::fs::read(path).map_err(|e| {
        MainError::BadInput(format!(
            "cannot read -f {name}: {e}; give the path of a cluster file (YAML or JSON)"
        ))
    })?;
    let loaded = load_bytes(&bytes);
    let (errors, warnings): (Vec<_>, Vec<_>) = loaded
        .diagnostics
        .iter()
        .partition(|d| d.severity == Severity::Error);
    for w in &warnings {
        eprintln!("{}", w.render(&name));
    }
    match loaded.spec {
        Some(spec) => Ok(spec),
        None => Err(MainError::InvalidSpec(
            errors.iter().map(|d| d.render(&name)).collect(),
        )),
    }
}
