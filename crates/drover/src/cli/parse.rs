//! Turning the process's arguments into a [`Cli`]: the clap command with
//! the global `--log-format` listed once, and the value parsers the derive
//! names.

use super::Cli;

impl Cli {
    /// Parses the process's arguments (exits on a usage error, as clap does).
    pub fn parse_args() -> Cli {
        Cli::parse_from_args(std::env::args_os()).unwrap_or_else(|e| e.exit())
    }

    /// Parses `args` (the program name first) as [`command`] defines them.
    pub fn parse_from_args(
        args: impl IntoIterator<Item = std::ffi::OsString>,
    ) -> Result<Cli, clap::Error> {
        use clap::FromArgMatches;
        Cli::from_arg_matches(&command().try_get_matches_from(args)?)
    }
}

/// The command line. `--log-format` is global (it may follow any
/// subcommand) but listed only in `drover --help`: repeated in every
/// subcommand's help it buried each command's own flags.
pub fn command() -> clap::Command {
    let command = <Cli as clap::CommandFactory>::command();
    let log_format = command
        .get_arguments()
        .find(|a| a.get_id() == "log_format")
        .cloned();
    match log_format {
        Some(arg) => with_hidden_copy(command, &arg.hide(true)),
        None => command,
    }
}

/// Gives every subcommand, at every depth, its own hidden copy of the
/// global `arg`: clap propagates a global argument only where none of that
/// id exists, so each subcommand still accepts it, and its help omits it.
fn with_hidden_copy(mut command: clap::Command, arg: &clap::Arg) -> clap::Command {
    let names: Vec<String> = command
        .get_subcommands()
        .map(|s| s.get_name().to_string())
        .collect();
    for name in names {
        command = command.mut_subcommand(name, |sub| with_hidden_copy(sub.arg(arg.clone()), arg));
    }
    command
}

/// A duration in the cluster files' grammar (`30s`, `5m`, `1h30m`), above zero.
pub(super) fn positive_duration(text: &str) -> Result<std::time::Duration, String> {
    match drover_core::spec::parse_duration(text) {
        Ok(d) if d.is_zero() => Err("it must be longer than 0s, e.g. 5s".into()),
        Ok(d) => Ok(d),
        Err(e) => Err(e.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::{Command, LogFormat, Output};

    fn parse(args: &[&str]) -> Cli {
        Cli::parse_from_args(args.iter().map(Into::into)).expect("parses")
    }

    #[test]
    fn log_format_is_accepted_after_any_subcommand_and_listed_once() {
        for args in [
            &["drover", "--log-format", "json", "status"][..],
            &["drover", "status", "--log-format", "json"],
            &[
                "drover",
                "sim",
                "rollout",
                "-f",
                "x.yaml",
                "--log-format",
                "json",
            ],
        ] {
            assert_eq!(parse(args).log_format, LogFormat::Json, "{args:?}");
        }
        let mut top = command();
        assert!(top.render_long_help().to_string().contains("--log-format"));
        for path in [&["status"][..], &["sim", "rollout"], &["demo", "up"]] {
            let mut sub = command();
            for name in path {
                sub = sub.find_subcommand(name).expect("subcommand").clone();
            }
            let help = sub.render_long_help().to_string();
            assert!(!help.contains("--log-format"), "{path:?}: {help}");
        }
    }

    #[test]
    fn o_is_short_for_output_wherever_output_exists() {
        fn walk(cmd: &clap::Command, path: String) {
            for arg in cmd.get_arguments() {
                if arg.get_long() == Some("output") {
                    assert_eq!(arg.get_short(), Some('o'), "{path} --output");
                }
            }
            for sub in cmd.get_subcommands() {
                walk(sub, format!("{path} {}", sub.get_name()));
            }
        }
        walk(&command(), "drover".into());
        assert!(matches!(
            parse(&["drover", "status", "-o", "json"]).command,
            Command::Status {
                output: Output::Json,
                ..
            }
        ));
    }
}
