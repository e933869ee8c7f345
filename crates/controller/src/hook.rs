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
    /// The command's end could not be read.
    #[error("hook command could not be waited for: {0}")]
    Wait(std::io::Error),
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
    match &hook.call {
        HookCall::Command(argv) => command(argv, facts, hook.timeout).await,
        HookCall::Http(url) => tokio::time::timeout(hook.timeout, http(url, facts, hook.timeout))
            .await
            .unwrap_or(Err(HookError::TimedOut(hook.timeout))),
    }
}

/// Runs the command in a process group of its own, so that a timeout (or
/// this controller standing down) ends what it started too, not only the
/// program itself.
async fn command(
    argv: &[String],
    facts: &HookFacts,
    timeout: Duration,
) -> Result<String, HookError> {
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
        .process_group(0)
        .kill_on_drop(true);
    let child = cmd
        .spawn()
        .map_err(|source| HookError::Spawn { program, source })?;
    // Killed when this returns or is cancelled: nothing the hook started
    // outlives it.
    let _group = child.id().map(|id| ProcessGroup(id as i32));
    let out = match tokio::time::timeout(timeout, child.wait_with_output()).await {
        Ok(out) => out.map_err(HookError::Wait)?,
        Err(_) => return Err(HookError::TimedOut(timeout)),
    };
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

/// A hook's process group, killed when dropped.
struct ProcessGroup(i32);

impl Drop for ProcessGroup {
    fn drop(&mut self) {
        let _ = nix::sys::signal::killpg(
            nix::unistd::Pid::from_raw(self.0),
            nix::sys::signal::Signal::SIGKILL,
        );
    }
}

/// The last [`KEPT`] bytes of `said`, as text, trimmed.
fn tail(said: &[u8]) -> String {
    let from = said.len().saturating_sub(KEPT);
    String::from_utf8_lossy(&said[from..]).trim().to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::Json;
    use axum::http::{HeaderMap, StatusCode};
    use drover_core::spec::{HookOnFailure, HookPoint};
    use std::sync::{Arc, Mutex};

    fn facts() -> HookFacts {
        HookFacts {
            hook: HookPoint::PreDrain,
            idempotency_key: HookFacts::key("op-1", HookPoint::PreDrain),
            operation: "op-1".into(),
            cluster: "c-1".into(),
            group: "workers".into(),
            instance: Some("i-1".into()),
            logical_id: None,
            node: Some("n-1".into()),
        }
    }

    fn hook(call: HookCall, timeout_ms: u64) -> Hook {
        Hook {
            call,
            timeout: Duration::from_millis(timeout_ms),
            on_failure: HookOnFailure::Block,
        }
    }

    fn sh(script: &str) -> HookCall {
        HookCall::Command(vec!["/bin/sh".into(), "-c".into(), script.into()])
    }

    #[tokio::test]
    async fn a_command_gets_its_facts_and_nothing_of_the_controllers_environment() {
        // The controller's own settings (e.g. the store's address with its
        // credentials) live in its environment, as cargo's do in this test's.
        assert!(std::env::var_os("CARGO_PKG_NAME").is_some());
        let said = call(
            &hook(
                sh("echo \"$DROVER_IDEMPOTENCY_KEY $DROVER_NODE ${CARGO_PKG_NAME:-none}\""),
                5_000,
            ),
            &facts(),
        )
        .await
        .expect("the hook succeeds");
        assert_eq!(said, "op-1/pre_drain n-1 none");
    }

    #[tokio::test]
    async fn a_failing_command_says_why_with_the_end_of_its_output() {
        let e = call(
            &hook(sh("echo starting; echo 'change freeze' >&2; exit 3"), 5_000),
            &facts(),
        )
        .await
        .unwrap_err();
        let text = e.to_string();
        assert!(
            text.contains("exit status: 3") && text.contains("change freeze"),
            "{text}"
        );
        let e = call(&hook(sh("sleep 5"), 200), &facts()).await.unwrap_err();
        assert!(matches!(e, HookError::TimedOut(_)), "{e}");
        let missing = HookCall::Command(vec!["/nonexistent/hook".into()]);
        let e = call(&hook(missing, 1_000), &facts()).await.unwrap_err();
        assert!(matches!(e, HookError::Spawn { .. }), "{e}");
    }

    #[tokio::test]
    async fn what_a_timed_out_hook_started_goes_with_it() {
        let dir = std::env::temp_dir().join(format!("drover-hook-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let pid_file = dir.join("child");
        let script = format!("sleep 30 & echo $! > {}; wait", pid_file.display());
        let e = call(&hook(sh(&script), 500), &facts()).await.unwrap_err();
        assert!(matches!(e, HookError::TimedOut(_)), "{e}");
        let child: i32 = std::fs::read_to_string(&pid_file)
            .unwrap()
            .trim()
            .parse()
            .unwrap();
        std::fs::remove_dir_all(&dir).unwrap();
        tokio::time::sleep(Duration::from_millis(200)).await;
        let state = std::fs::read_to_string(format!("/proc/{child}/stat")).unwrap_or_default();
        assert!(
            state.is_empty() || state.contains(") Z "),
            "the hook's child {child} still runs: {state}"
        );
    }

    #[tokio::test]
    async fn an_endpoint_gets_the_facts_and_the_idempotency_key() {
        let seen = Arc::new(Mutex::new(Vec::new()));
        let app = {
            let seen = seen.clone();
            axum::Router::new().route(
                "/hook",
                axum::routing::post(move |headers: HeaderMap, Json(body): Json<HookFacts>| {
                    let seen = seen.clone();
                    async move {
                        let key = headers["idempotency-key"].to_str().unwrap().to_string();
                        let refuse = body.node.as_deref() == Some("n-busy");
                        seen.lock().unwrap().push((key, body));
                        if refuse {
                            (
                                StatusCode::CONFLICT,
                                "node n-busy is in a maintenance window",
                            )
                        } else {
                            (StatusCode::OK, "noted")
                        }
                    }
                }),
            )
        };
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}/hook", listener.local_addr().unwrap());
        let server = tokio::spawn(async move { axum::serve(listener, app).await });
        let ok = call(&hook(HookCall::Http(url.clone()), 5_000), &facts()).await;
        assert_eq!(ok.unwrap(), "noted");
        let mut busy = facts();
        busy.node = Some("n-busy".into());
        let e = call(&hook(HookCall::Http(url), 5_000), &busy)
            .await
            .unwrap_err();
        assert!(
            matches!(&e, HookError::Status { status: 409, body } if body.contains("maintenance window")),
            "{e}"
        );
        let seen = seen.lock().unwrap().clone();
        assert_eq!(seen[0].0, "op-1/pre_drain");
        assert_eq!(seen[0].1, facts());
        server.abort();
    }
}
