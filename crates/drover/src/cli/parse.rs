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

/// `--ec2-endpoint`, exactly `https://HOST[:PORT]` (or `http://` to a
/// loopback host, a test's moto): the endpoint goes into the managers'
/// user data, so credentials, a path or a query in it are refused, and the
/// refusal never repeats the value (clap's own error would).
#[derive(Debug, Clone, Copy)]
pub(super) struct Ec2Endpoint;

/// The grammar `--ec2-endpoint` accepts, for its errors.
const EC2_ENDPOINT_FORM: &str =
    "https://HOST[:PORT] (plain http:// only to localhost or 127.0.0.0/8)";

impl clap::builder::TypedValueParser for Ec2Endpoint {
    type Value = String;

    fn parse_ref(
        &self,
        _cmd: &clap::Command,
        _arg: Option<&clap::Arg>,
        value: &std::ffi::OsStr,
    ) -> Result<String, clap::Error> {
        let refuse = |why: &str| {
            clap::Error::raw(
                clap::error::ErrorKind::ValueValidation,
                format!("--ec2-endpoint: {why}; write {EC2_ENDPOINT_FORM}\n"),
            )
        };
        let text = value.to_str().ok_or_else(|| refuse("not UTF-8"))?;
        ec2_endpoint(text).map_err(|why| refuse(&why))?;
        no_secret("--ec2-endpoint", text, true)?;
        Ok(text.to_string())
    }
}

/// A command-line value that reaches machines' user data or boot
/// environments (`--store` becomes managers' `DROVER_STORE`, the engine,
/// region and project their settings): refused, exit 2 naming the argument
/// and never the value, when [`secret_value`]'s one rule finds a secret in
/// it. `.1`: the argument's own address grammar refuses every credential
/// in a URL with its own words, so only swarm tokens are left to this rule.
#[derive(Debug, Clone, Copy)]
pub(super) struct NoSecret(pub &'static str, pub bool);

impl clap::builder::TypedValueParser for NoSecret {
    type Value = String;

    fn parse_ref(
        &self,
        _cmd: &clap::Command,
        _arg: Option<&clap::Arg>,
        value: &std::ffi::OsStr,
    ) -> Result<String, clap::Error> {
        let text = value.to_str().ok_or_else(|| {
            clap::Error::raw(
                clap::error::ErrorKind::ValueValidation,
                format!("{}: not UTF-8\n", self.0),
            )
        })?;
        no_secret(self.0, text, self.1)?;
        Ok(text.to_string())
    }
}

/// Refuses `text` given as `arg` when it holds a secret (only a swarm
/// token or unlock key when `urls_by_grammar`).
fn no_secret(arg: &str, text: &str, urls_by_grammar: bool) -> Result<(), clap::Error> {
    use drover_core::spec::secret_value::{self, Secret};
    let Some(found) = secret_value::in_text(text)
        .filter(|f| !urls_by_grammar || matches!(f.secret, Secret::JoinToken | Secret::UnlockKey))
    else {
        return Ok(());
    };
    Err(clap::Error::raw(
        clap::error::ErrorKind::ValueValidation,
        format!(
            "{arg}: holds {}, and this value reaches machines' user data or boot environments; {}\n",
            found.secret.what(),
            found.secret.belongs()
        ),
    ))
}

/// Why `text` is not an EC2 endpoint, in words that never repeat a
/// credential it may hold.
fn ec2_endpoint(text: &str) -> Result<(), String> {
    let (scheme, rest) = text
        .split_once("://")
        .ok_or_else(|| "no scheme (https://)".to_string())?;
    let authority_end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let (authority, tail) = rest.split_at(authority_end);
    if authority.contains('@') {
        return Err("credentials (user:password@) never go in the endpoint: the ec2 provider signs with the AWS credentials of its environment".into());
    }
    let path = tail.split(['?', '#']).next().unwrap_or_default();
    if !(path.is_empty() || path == "/") {
        return Err("a path after the host is not part of an endpoint".into());
    }
    if tail.contains(['?', '#']) {
        return Err("a query after the host is not part of an endpoint".into());
    }
    let (host, port) = match authority.rsplit_once(':') {
        Some((h, p)) if !h.ends_with(':') && (!h.contains(':') || h.starts_with('[')) => {
            (h, Some(p))
        }
        _ => (authority, None),
    };
    if host.is_empty() {
        return Err("no host".into());
    }
    if let Some(p) = port
        && !p.parse::<u16>().is_ok_and(|p| p > 0)
    {
        return Err(format!("the port {p:?} is not a number from 1 to 65535"));
    }
    let loopback = host == "localhost"
        || host
            .parse::<std::net::Ipv4Addr>()
            .is_ok_and(|a| a.is_loopback());
    match scheme {
        "https" => Ok(()),
        "http" if loopback => Ok(()),
        "http" => Err(
            "plain http:// reaches only a loopback host (signed requests carry a session token)"
                .into(),
        ),
        other => Err(format!("the scheme {other}:// is not https://")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::{Command, LogFormat, Output};

    #[test]
    fn an_ec2_endpoint_is_exactly_a_scheme_a_host_and_a_port() {
        for ok in [
            "https://ec2.eu-west-1.amazonaws.com",
            "https://vpce-1.ec2.eu-west-1.vpce.amazonaws.com:443/",
            "http://127.0.0.1:5000",
            "http://localhost:5000",
            "https://[fd00::1]:443",
        ] {
            assert_eq!(ec2_endpoint(ok), Ok(()), "{ok}");
        }
        for (bad, why) in [
            ("https://KEY:secret@host", "credentials (user:password@)"),
            ("https://host/ec2", "a path after the host"),
            (
                "https://host?X-Amz-Security-Token=t",
                "a query after the host",
            ),
            ("https://host#f", "a query after the host"),
            (
                "http://10.0.0.1",
                "plain http:// reaches only a loopback host",
            ),
            ("ftp://host", "the scheme ftp:// is not https://"),
            ("host:443", "no scheme"),
            ("https://:443", "no host"),
            ("https://host:0", "not a number from 1 to 65535"),
        ] {
            let e = ec2_endpoint(bad).unwrap_err();
            assert!(e.contains(why), "{bad}: {e}");
            assert!(!e.contains("secret") && !e.contains("X-Amz"), "{e}");
        }
    }

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
