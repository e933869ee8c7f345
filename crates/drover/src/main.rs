//! The `drover` binary: a thin shell over the library crates. Parses
//! arguments, runs one command, maps its error to an exit code. Only here
//! may a process exit.

// Production functions stay short enough to read at once (clippy.toml:
// 80 lines); tests may be long scenarios.
#![cfg_attr(not(test), deny(clippy::too_many_lines))]

mod cli;
mod cmd;
mod error;
mod metrics_server;
mod spec_file;
mod wiring;

use std::process::ExitCode;

/// mimalloc rather than the system's malloc. A planning pass makes and
/// drops tens of thousands of small strings (the actions, operations and
/// timer keys it hands back), and reads an observation that was itself
/// allocated string by string: with glibc's malloc a pass over 100 000
/// members took a quarter longer (BENCHMARKS.md §1). The benchmarks run
/// with the same allocator (`crates/bench/benches/drover/main.rs`).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> ExitCode {
    quiet_panics();
    let cli = cli::Cli::parse_args();
    // Colour only for a person at a terminal: a log file or journald
    // gets plain text.
    let logs = tracing_subscriber::fmt()
        .with_env_filter(log_filter())
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_writer(std::io::stderr);
    match cli.log_format {
        cli::LogFormat::Text => logs.init(),
        cli::LogFormat::Json => logs.json().init(),
    }
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

/// `DROVER_LOG` (default `info`), with the Docker client capped at `info`
/// whatever it says: bollard logs request and response bodies at debug and
/// trace, and those carry join tokens (`swarm join`, `swarm inspect`).
fn log_filter() -> tracing_subscriber::EnvFilter {
    let wanted = std::env::var("DROVER_LOG").unwrap_or_else(|_| "info".into());
    tracing_subscriber::EnvFilter::try_new(format!("{wanted},bollard=info"))
        .unwrap_or_else(|_| "info,bollard=info".into())
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
