//! Output for scripts and habits, through the binary, engine-free: `-o`,
//! JSON where JSON is asked for (also from an empty store), `validate -o
//! json`, `version`, `-f -`, and human text where text is asked for.

use drover_spi::{Provenance, Store};
use std::io::Write;
use std::path::Path;
use std::process::{Command, Output, Stdio};

fn drover(args: &[&str]) -> Output {
    drover_in(args, None)
}

/// Runs drover with `stdin` as its standard input.
fn drover_in(args: &[&str], stdin: Option<&[u8]>) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_drover"))
        .args(args)
        .current_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/../.."))
        .env_remove("DROVER_STORE")
        .env_remove("DROVER_LOCAL_DIR")
        .env_remove("DROVER_LOG_FORMAT")
        .stdin(if stdin.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run drover");
    if let Some(bytes) = stdin {
        child.stdin.take().unwrap().write_all(bytes).unwrap();
    }
    child.wait_with_output().expect("wait for drover")
}

fn text(out: &[u8]) -> String {
    String::from_utf8_lossy(out).into_owned()
}

fn json(out: &Output) -> serde_json::Value {
    serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("not JSON ({e}): {}{}", text(&out.stdout), text(&out.stderr)))
}

/// A file store in `dir`: empty, or holding `examples/cluster.yaml` as
/// revision 1, committed at `at_ms`.
async fn store(dir: &Path, at_ms: Option<u64>) -> String {
    let path = dir.join("state.db");
    let store = drover_store::FileStore::open(&path).expect("store");
    if let Some(at_ms) = at_ms {
        store.init_cluster("c1").await.unwrap();
        let yaml = std::fs::read_to_string(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../examples/cluster.yaml"
        ))
        .unwrap();
        let spec = drover_core::spec::parse_str(&yaml).spec.expect("valid");
        let who = Provenance {
            who: "test".into(),
            at_ms,
            message: "first".into(),
        };
        store.commit(0, &spec, who, false).await.unwrap();
    }
    format!("file://{}", path.display())
}

#[tokio::test]
async fn status_o_json_on_an_empty_store_prints_json() {
    let dir = tempfile::tempdir().unwrap();
    let url = store(dir.path(), None).await;
    let out = drover(&["status", "--store", &url, "-o", "json"]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    assert_eq!(json(&out), serde_json::Value::Null);
    assert!(text(&out.stderr).contains("no controller has published a status yet"));
}

#[test]
fn sim_rollout_json_has_a_structured_outcome() {
    let out = drover(&[
        "sim",
        "rollout",
        "-f",
        "examples/cluster-sim.yaml",
        "-o",
        "json",
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let doc = json(&out);
    assert_eq!(doc["outcome"], serde_json::json!({"kind": "converged"}));
    let plan = drover(&[
        "plan",
        "-f",
        "examples/cluster-sim.yaml",
        "--sim",
        "-o",
        "json",
    ]);
    assert_eq!(json(&plan)["outcome"]["kind"], "converged");
    // A rollout that cannot finish: the reason is a field of its own.
    let out = drover(&[
        "sim",
        "rollout",
        "-f",
        "examples/cluster-sim.yaml",
        "--provision-failure",
        "1",
        "--faults-for",
        "1000d",
        "-o",
        "json",
    ]);
    assert_eq!(out.status.code(), Some(3), "{}", text(&out.stderr));
    let outcome = &json(&out)["outcome"];
    assert!(
        ["blocked", "stuck", "timed_out"].contains(&outcome["kind"].as_str().unwrap_or("")),
        "{outcome}"
    );
    let reason = outcome["reason"].as_str().expect("a reason");
    assert!(!reason.is_empty() && !reason.contains("(\""), "{reason}");
    let all = text(&out.stdout);
    for debug in ["Blocked(", "Stuck(", "TimedOut("] {
        assert!(!all.contains(debug), "Rust debug text: {all}");
    }
}

#[test]
fn validate_o_json_lists_problems_with_their_position() {
    let out = drover(&["validate", "-f", "examples/cluster.yaml", "-o", "json"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let doc = json(&out);
    assert_eq!(doc["valid"], true);
    assert_eq!(doc["groups"], serde_json::json!(["managers", "workers"]));
    assert_eq!(doc["problems"], serde_json::json!([]));

    let bad = "groups:\n- name: m\n  role: manager\n  allocation: {size: 2}\n  instance: {provider: local}\n  update: {max_inflight: 2}\n";
    let out = drover_in(&["validate", "-f", "-", "-o", "json"], Some(bad.as_bytes()));
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
    let doc = json(&out);
    assert_eq!(doc["valid"], false);
    let problems = doc["problems"].as_array().unwrap();
    assert_eq!(problems.len(), 2, "{doc}");
    let typo = problems
        .iter()
        .find(|p| p["path"] == "groups[0].update.max_inflight")
        .expect("the typo");
    assert_eq!(typo["file"], "<stdin>");
    assert_eq!(typo["line"], 6);
    assert!(typo["col"].as_u64().unwrap() > 0);
    assert_eq!(typo["severity"], "error");
    assert!(typo["reason"].as_str().unwrap().contains("max_in_flight"));
}

#[test]
fn dash_f_dash_reads_the_cluster_file_from_standard_input() {
    let yaml = std::fs::read(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../examples/cluster-sim.yaml"
    ))
    .unwrap();
    let out = drover_in(&["validate", "-f", "-"], Some(&yaml));
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(
        text(&out.stdout).starts_with("<stdin>: valid"),
        "{}",
        text(&out.stdout)
    );
    let out = drover_in(&["plan", "-f", "-", "--sim"], Some(&yaml));
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let out = drover_in(&["sim", "rollout", "-f", "-"], Some(&yaml));
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let out = drover_in(&["plan", "-f", "-", "--sim", "--from", "-"], Some(&yaml));
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out.stderr).contains("standard input can be read once"));
    let out = drover_in(&["validate", "-f", "-"], Some(b"groups: [\n"));
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).starts_with("<stdin>:"),
        "{}",
        text(&out.stderr)
    );
}

#[test]
fn version_names_the_commit_and_the_build() {
    let out = drover(&["version", "-o", "json"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let doc = json(&out);
    assert_eq!(doc["version"], env!("CARGO_PKG_VERSION"));
    let commit = doc["commit"].as_str().unwrap();
    let hash = commit.strip_suffix("+dirty").unwrap_or(commit);
    assert!(
        commit == "unknown" || (hash.len() == 12 && hash.chars().all(|c| c.is_ascii_hexdigit())),
        "{commit}"
    );
    assert!(doc["features"].is_array() && doc["stores"].is_array());
    let out = drover(&["version"]);
    let shown = text(&out.stdout);
    assert!(
        shown.starts_with(&format!(
            "drover {}\ncommit:    {commit}\n",
            env!("CARGO_PKG_VERSION")
        )),
        "{shown}"
    );
}

#[test]
fn plan_on_an_unchanged_spec_shows_the_real_fault_tolerance() {
    let f = "examples/cluster-sim.yaml";
    let out = drover(&["plan", "-f", f, "--sim", "--from", f]);
    let shown = text(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert_eq!(
        shown,
        "no change: nothing to do; manager fault tolerance stays 1\n"
    );
}

#[tokio::test]
async fn plan_against_a_store_prints_human_text() {
    let dir = tempfile::tempdir().unwrap();
    let url = store(dir.path(), Some(1_700_000_000_000)).await;
    let out = drover(&["plan", "-f", "examples/cluster.yaml", "--store", &url]);
    eprintln!("{}", text(&out.stdout));
    let shown = text(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{shown}{}", text(&out.stderr));
    assert!(
        !shown.contains("None") && !shown.contains("Some("),
        "{shown}"
    );
    assert!(!shown.contains("Unobservable"), "{shown}");
    // A cluster is declared and no engine given: the swarm cannot be seen
    // from here, which is not "no swarm" (issue 38, item 7).
    assert!(shown.contains("swarm: cannot be seen from here"), "{shown}");
    assert!(!shown.contains("no swarm exists yet"), "{shown}");
    assert!(!shown.contains("[]") && !shown.contains("[\""), "{shown}");
}

#[tokio::test]
async fn history_ages_are_real_or_unknown() {
    let dir = tempfile::tempdir().unwrap();
    let url = store(dir.path(), Some(0)).await;
    let out = drover(&["history", "--store", &url]);
    let shown = text(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(!shown.contains("years"), "{shown}");
    let row = shown.lines().nth(1).expect("a revision");
    assert!(row.contains(" unknown "), "{row}");
}

#[tokio::test]
async fn pause_and_hold_on_an_empty_store_say_what_is_missing() {
    let dir = tempfile::tempdir().unwrap();
    let url = store(dir.path(), None).await;
    for (args, says) in [
        (&["pause", "workers"][..], "holds no desired state yet"),
        (&["hold", "i1"], "lists no instance"),
        (&["replace", "i1"], "lists no instance"),
    ] {
        let mut argv = args.to_vec();
        argv.extend(["--store", &url]);
        let out = drover(&argv);
        let err = text(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(says), "{args:?}: {err}");
        assert!(
            !err.contains("()") && !err.contains(": )"),
            "{args:?}: {err}"
        );
    }
}
