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
    quiet_panics();
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

/// No Rust panic or backtrace reaches the user: a closed pipe (`drover ... |
/// head`) ends quietly, anything else is one line asking for a report.
#[allow(clippy::exit)]
fn quiet_panics() {
    std::panic::set_hook(Box::new(|info| {
        let msg = info
            .payload()
            .downcast_ref::<String>()
            .map(String::as_str)
            .or_else(|| info.payload().downcast_ref::<&str>().copied())
            .unwrap_or("unknown");
        if msg.contains("Broken pipe") {
            std::process::exit(0);
        }
        eprintln!(
            "drover: internal error: {msg} (at {}); please report it with the command you ran",
            info.location().map_or_else(String::new, |l| l.to_string())
        );
    }));
}
