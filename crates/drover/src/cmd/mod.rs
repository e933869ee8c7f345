//! One module per command; each returns the exit code on success.

mod plan;
mod sim;
mod validate;

use crate::cli::{Cli, Command, SimCommand};
use crate::error::MainError;
use std::process::ExitCode;

/// Runs the parsed command.
pub fn run(cli: Cli) -> Result<ExitCode, MainError> {
    match cli.command {
        Command::Validate { file } => validate::run(&file),
        Command::Plan {
            file,
            sim,
            from,
            output,
        } => plan::run(&file, sim, from.as_deref(), output),
        Command::Sim(SimCommand::Rollout(args)) => sim::rollout(&args),
        Command::Completions { shell } => {
            let mut cmd = <Cli as clap::CommandFactory>::command();
            clap_complete::generate(shell, &mut cmd, "drover", &mut std::io::stdout());
            Ok(ExitCode::SUCCESS)
        }
    }
}
