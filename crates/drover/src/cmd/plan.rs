//! `drover plan -f FILE --sim`: the ordered steps and the FT timeline.

use crate::cli::Output;
use crate::cmd::sim::{simulate, target};
use crate::error::MainError;
use crate::spec_file;
use drover_sim::Faults;
use std::path::Path;
use std::process::ExitCode;

pub fn run(
    file: &Path,
    sim: bool,
    from: Option<&Path>,
    output: Output,
) -> Result<ExitCode, MainError> {
    if !sim {
        return Err(MainError::BadInput(
            "plan against a live cluster needs a store (not built yet): add --sim to plan against a simulated cluster".into(),
        ));
    }
    let desired = spec_file::load(file)?;
    let current = match from {
        Some(p) => spec_file::load(p)?,
        None => desired.clone(),
    };
    // Without --from, show a full roll of the file against itself.
    let desired = if from.is_none() {
        target(&desired, None)?
    } else {
        desired
    };
    let (runner, outcome) = simulate(&current, &desired, 1, Faults::default())?;
    let steps: Vec<&drover_sim::TraceLine> = runner.trace.iter().collect();
    if output == Output::Json {
        let doc = serde_json::json!({ "outcome": format!("{outcome:?}"), "steps": steps });
        println!(
            "{}",
            serde_json::to_string_pretty(&doc).map_err(anyhow::Error::from)?
        );
        return Ok(ExitCode::SUCCESS);
    }
    println!("{:>4}  {:<10} {:<9} STEP", "#", "GROUP", "FT");
    let mut leader = steps.first().and_then(|t| t.leader.clone());
    for (i, t) in steps.iter().enumerate() {
        println!(
            "{:>4}  {:<10} {:<9} {}",
            i + 1,
            t.group.as_deref().unwrap_or("-"),
            format!("{} → {}", t.ft_before, t.ft_after),
            t.what
        );
        if t.leader != leader {
            println!(
                "      {:<10} {:<9} leadership moves to {}",
                "",
                "",
                t.leader.as_deref().unwrap_or("(election)")
            );
            leader = t.leader.clone();
        }
    }
    println!(
        "\n{} steps; minimum manager fault tolerance during the change: {}",
        steps.len(),
        steps.iter().map(|t| t.ft_after).min().unwrap_or(0)
    );
    Ok(ExitCode::SUCCESS)
}
