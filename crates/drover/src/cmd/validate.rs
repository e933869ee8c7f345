//! `drover validate -f FILE`.

use crate::error::MainError;
use crate::spec_file;
use std::path::Path;
use std::process::ExitCode;

pub fn run(file: &Path) -> Result<ExitCode, MainError> {
    let spec = spec_file::load(file)?;
    let names: Vec<&str> = spec.groups.iter().map(|g| g.name.as_str()).collect();
    println!(
        "{}: valid ({} group{}: {})",
        file.display(),
        names.len(),
        if names.len() == 1 { "" } else { "s" },
        names.join(", ")
    );
    Ok(ExitCode::SUCCESS)
}
