//! The `drover` binary: a thin shell over the library crates. Parses
//! arguments, runs one command, maps its error to an exit code. Only here
//! may a process exit.

mod bootstrap;
mod cli;
mod cmd;
mod error;
mod spec_file;
mod wiring;

use clap::Parser;
use std::process::ExitCode;

fn main() -> ExitCode {
    let cli = cli::Cli::parse();
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("DROVER_LOG")
                .unwrap_or_else(|_| "info".into()),
        )
        .with_writer(std::io::stderr)
        .init();
    match cmd::run(cli) {
        Ok(code) => code,
        Err(e @ error::MainError::InvalidSpec(_)) => {
            eprintln!("{e}");
            e.exit_code()
        }
        Err(e) => {
            eprintln!("drover: {e}");
            e.exit_code()
        }
    }
}
