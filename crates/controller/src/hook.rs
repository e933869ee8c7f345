//! Calls a lifecycle hook ([`drover_core::spec::hooks`]): a command on
//! this host, or an HTTP endpoint, bounded by the hook's timeout.
//!
//! Secrets are kept out: a command starts with an empty environment plus
//! `PATH` and the hook's facts (`DROVER_*`, never this controller's own
//! settings, which may hold the store's credentials), an endpoint gets the
//! facts as JSON. What the hook said (its output's end, or the answer's
//! body) is returned for the audit log either way.

use drover_core::spec::{Hook, HookCall, HookFacts};
use std::process::Stdio;
use std::time::Duration;

/// How much of a hook's output is kept (its end: where errors are).
const KEPT: usize = 2000;

/// Why a hook failed, with what it said.
#[derive(Debug, thiserror::Error)]
pub enum HookError {
    /// The command could not be started.
    #[error("hook command {program:?} could not be started: {source}")]
    Spawn {
        /// The program.
        program: String,
        /// Why.
        source: std::io::Error,
    },
    /// The command ended with a failure.
    #[error("hook command exited with {status}: {output}")]
    Exit {
        /// Its exit status.
        status: std::process::ExitStatus,
        /// The end of its output (stdout, then stderr).
        output: String,
    },
    /// The endpoint answered with a status other than 2xx.
    #[error("hook endpoint answered {status}: {body}")]
    Status {
        /// The HTTP status.
        status: u16,
        /// The end of its answer.
        body: String,
    },
    /// The endpoint could not be reached.
    #[error("hook endpoint could not be reached: {0}")]
    Transport(String),
    /// No answer within the hook's timeout.
    #[error("hook did not finish within {0:?}")]
    TimedOut(Duration),
}

/// Calls `hook` with `facts`; what it said on success.
pub(crate) async fn call(hook: &Hook, facts: &HookFacts) -> Result<String, HookError> {
    let run = async {
        match &hook.call {
            HookCall::Command(argv) => command(argv, facts).await,
            HookCall::Http(url) => http(url, facts, hook.timeout).await,
        }
    };
    tokio::time::timeout(hook.timeout, run)
        .await
        .unwrap_or(Err(HookError::TimedOut(hook.timeout)))
}

async fn command(argv: &[String], facts: &HookFacts) -> Result<String, HookError> {
    let program = argv.first().cloned().unwrap_or_default();
    let mut cmd = tokio::process::Command::new(&program);
    cmd.args(&argv[1..])
        .env_clear()
        .env(
            "PATH",
            std::env::var_os("PATH").unwrap_or_else(|| "/usr/sbin:/usr/bin:/sbin:/bin".into()),
        )
        .envs(facts.env())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        // A hook cut short by its timeout is killed, not left running.
        .kill_on_drop(true);
    let out = cmd
        .output()
        .await
        .map_err(|source| HookError::Spawn { program, source })?;
    let mut said = out.stdout;
    said.extend_from_slice(&out.stderr);
    let output = tail(&said);
    if out.status.success() {
        Ok(output)
    } else {
        Err(HookError::Exit {
            status: out.status,
            output,
        })
    }
}

async fn http(url: &str, facts: &HookFacts, timeout: Duration) -> Result<String, HookError> {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let client = reqwest::Client::builder()
        .timeout(timeout)
        .build()
        .map_err(|e| HookError::Transport(e.to_string()))?;
    let answer = client
        .post(url)
        .header("Idempotency-Key", &facts.idempotency_key)
        .json(facts)
        .send()
        .await
        .map_err(|e| HookError::Transport(e.without_url().to_string()))?;
    let status = answer.status();
    let body = answer.bytes().await.map(|b| tail(&b)).unwrap_or_default();
    if status.is_success() {
        Ok(body)
    } else {
        Err(HookError::Status {
            status: status.as_u16(),
            body,
        })
    }
}

/// The last [`KEPT`] bytes of `said`, as text, trimmed.
fn tail(said: &[u8]) -> String {
    let from = said.len().saturating_sub(KEPT);
    String::from_utf8_lossy(&said[from..]).trim().to_string()
}
