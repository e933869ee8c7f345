//! The binary's contract: exit codes, one line per problem, the simulator commands.

use std::process::{Command, Output};

fn drover(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_drover"))
        .args(args)
        .current_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/../.."))
        .output()
        .expect("run drover")
}

fn text(out: &[u8]) -> String {
    String::from_utf8_lossy(out).into_owned()
}

/// The address of a new, empty file store in `dir` (read-only and control
/// commands never create one).
fn empty_store(dir: &std::path::Path) -> String {
    let path = dir.join("state.db");
    drop(drover_store::FileStore::open(&path).expect("create the store"));
    format!("file://{}", path.display())
}

#[test]
fn validate_accepts_the_examples() {
    for f in ["examples/cluster.yaml", "examples/cluster-sim.yaml"] {
        let out = drover(&["validate", "-f", f]);
        assert_eq!(out.status.code(), Some(0), "{f}: {}", text(&out.stderr));
        assert!(text(&out.stdout).contains("valid"));
    }
}

#[test]
fn validate_rejects_with_exit_2_and_one_line_per_problem() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("bad.yaml");
    std::fs::write(&path, "groups:\n- name: m\n  role: manager\n  allocation: {size: 2}\n  instance: {provider: local}\n  update: {max_inflight: 2}\n").unwrap();
    let out = drover(&["validate", "-f", path.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    let err = text(&out.stderr);
    let lines: Vec<&str> = err.lines().collect();
    assert_eq!(lines.len(), 2, "{err}");
    let p = path.display().to_string();
    assert!(
        lines.iter().all(|l| l.starts_with(&format!("{p}:"))),
        "{err}"
    );
    assert!(err.contains(":4:") && err.contains("odd number"), "{err}");
    assert!(
        err.contains("groups[0].update.max_inflight")
            && err.contains("did you mean `max_in_flight`"),
        "{err}"
    );
}

#[test]
fn validate_refuses_a_boot_script_past_the_render_budget_quickly() {
    let dir = tempfile::tempdir().unwrap();
    for (name, script, bound) in [
        (
            "gigabytes",
            r#"{% for i in range(100000) %}{{ 'x' * 100000 }}{% endfor %}"#,
            "renders too much",
        ),
        (
            "billion",
            r#"{% for a in range(100000) %}{% for b in range(100000) %}.{% endfor %}{% endfor %}"#,
            "takes too many steps",
        ),
    ] {
        let path = dir.path().join(format!("{name}.yaml"));
        let file = format!(
            "groups:\n- name: w\n  role: worker\n  allocation: {{size: 1}}\n  instance: {{provider: local}}\n  flavor:\n    boot_script: \"{script}\"\n"
        );
        assert!(file.len() < 300, "{}", file.len());
        std::fs::write(&path, file).unwrap();
        let started = std::time::Instant::now();
        let out = drover(&["validate", "-f", path.to_str().unwrap()]);
        assert!(started.elapsed() < std::time::Duration::from_secs(5));
        assert_eq!(out.status.code(), Some(2), "{name}: {}", text(&out.stderr));
        let err = text(&out.stderr);
        assert!(
            err.contains(":7:")
                && err.contains("groups[0].flavor.boot_script")
                && err.contains(bound),
            "{name}: {err}"
        );
    }
}

#[test]
fn missing_file_is_bad_input() {
    let out = drover(&["validate", "-f", "/nonexistent/cluster.yaml"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out.stderr).contains("cannot read -f /nonexistent/cluster.yaml"));
}

#[test]
fn sim_rollout_rolls_the_leader_last_without_violations() {
    let out = drover(&["sim", "rollout", "-f", "examples/cluster-sim.yaml"]);
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}{}", text(&out.stderr));
    assert!(
        stdout.contains("Converged") && stdout.contains("0 safety violations"),
        "{stdout}"
    );
    let self_demotion = stdout
        .lines()
        .position(|l| l.contains("demote self"))
        .expect("the leader demotes itself");
    let manager_demotions: Vec<usize> = stdout
        .lines()
        .enumerate()
        .filter(|(_, l)| l.contains("managers") && l.contains("demote node"))
        .map(|(i, _)| i)
        .collect();
    assert!(!manager_demotions.is_empty());
    assert!(
        manager_demotions.iter().all(|i| *i < self_demotion),
        "leader not last:\n{stdout}"
    );
}

#[test]
fn plan_sim_shows_the_fault_tolerance_timeline_and_leadership_move() {
    let out = drover(&["plan", "-f", "examples/cluster.yaml", "--sim"]);
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}{}", text(&out.stderr));
    // The pets roll with a temporary manager in the spare slot, added first.
    let first = stdout.lines().nth(1).unwrap_or_default();
    assert!(first.contains("provision managers 127.0.0.14"), "{stdout}");
    assert!(!stdout.contains("1 → 0"), "{stdout}");
    assert!(stdout.contains("leadership moves to"), "{stdout}");
    assert!(
        stdout.contains(
            "minimum manager fault tolerance during the change: 1 (the roll's floor 1: held)"
        ),
        "{stdout}"
    );
    let json = drover(&[
        "plan",
        "-f",
        "examples/cluster.yaml",
        "--sim",
        "--output",
        "json",
    ]);
    let doc: serde_json::Value = serde_json::from_slice(&json.stdout).expect("json");
    assert!(doc["steps"].as_array().is_some_and(|s| !s.is_empty()));
}

#[test]
fn sim_rollout_rejects_bad_probabilities_with_exit_2() {
    let out = drover(&[
        "sim",
        "rollout",
        "-f",
        "examples/cluster-sim.yaml",
        "--never-join",
        "1.5",
    ]);
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out.stderr).contains("--never-join 1.5 is not a probability"));
}

#[test]
fn apply_to_a_fresh_store_without_a_provider_is_bad_input_and_changes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let store = format!("file://{}/state.db", dir.path().display());
    let out = drover(&["apply", "-f", "examples/cluster.yaml", "--store", &store]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
    assert!(text(&out.stderr).contains("--local-dir"));
    assert!(
        !dir.path().join("state.db").exists(),
        "a refused apply created the store"
    );
}

#[test]
fn pausing_an_undeclared_group_is_bad_input() {
    let dir = tempfile::tempdir().unwrap();
    let store = empty_store(dir.path());
    let out = drover(&["pause", "nosuch", "--store", &store]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).contains("no group named nosuch"),
        "{}",
        text(&out.stderr)
    );
}

#[test]
fn demo_up_without_dockerd_says_how_to_install_it_and_exits_2() {
    let out = Command::new(env!("CARGO_BIN_EXE_drover"))
        .args(["demo", "up", "--dir", "/nonexistent/demo"])
        .env("PATH", "/nonexistent")
        .output()
        .expect("run drover");
    assert_eq!(out.status.code(), Some(2));
    let err = text(&out.stderr);
    assert!(err.contains("apt-get install docker.io"), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
}

#[test]
fn bootstrap_without_a_provider_is_bad_input_and_changes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let store = format!("file://{}/state.db", dir.path().display());
    let out = drover(&[
        "bootstrap",
        "-f",
        "examples/cluster.yaml",
        "--store",
        &store,
    ]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
    assert!(text(&out.stderr).contains("--local-dir"));
    assert!(
        !dir.path().join("state.db").exists(),
        "a refused bootstrap created the store"
    );
}

#[test]
fn adopt_names_what_is_missing() {
    let dir = tempfile::tempdir().unwrap();
    let store = format!("file://{}/state.db", dir.path().display());
    let out = drover(&["adopt", "-f", "examples/cluster.yaml", "--store", &store]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
    assert!(
        text(&out.stderr).contains("--local-dir"),
        "{}",
        text(&out.stderr)
    );
    let sock = format!("unix://{}/no.sock", dir.path().display());
    let local = dir.path().join("local");
    let out = drover(&[
        "adopt",
        "-f",
        "examples/cluster.yaml",
        "--store",
        &store,
        "--local-dir",
        local.to_str().unwrap(),
        "--engine",
        &sock,
    ]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
    assert!(
        text(&out.stderr).contains("--engine"),
        "{}",
        text(&out.stderr)
    );
}

#[test]
fn gc_lists_nothing_on_a_fresh_store_and_rejects_a_bad_store_address() {
    let dir = tempfile::tempdir().unwrap();
    let store = empty_store(dir.path());
    let out = drover(&["gc", "--dry-run", "--store", &store]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(
        text(&out.stdout).contains("nothing was applied"),
        "{}",
        text(&out.stdout)
    );
    let out = drover(&["gc", "--dry-run", "--store", "nosuch://x"]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
}

#[test]
fn the_ec2_provider_needs_a_region_and_its_spec_validates() {
    let dir = tempfile::tempdir().unwrap();
    let store = empty_store(dir.path());
    let out = Command::new(env!("CARGO_BIN_EXE_drover"))
        .args(["gc", "--dry-run", "--store", &store, "--ec2", "true"])
        .env_remove("AWS_REGION")
        .output()
        .expect("run drover");
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
    assert!(
        text(&out.stderr).contains("--ec2-region"),
        "{}",
        text(&out.stderr)
    );
    // Signed requests carry credentials: plain http only to loopback.
    let out = Command::new(env!("CARGO_BIN_EXE_drover"))
        .args(["gc", "--dry-run", "--store", &store, "--ec2", "true"])
        .args([
            "--ec2-region",
            "eu-west-1",
            "--ec2-endpoint",
            "http://10.0.0.1:5000",
        ])
        .output()
        .expect("run drover");
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
    assert!(
        text(&out.stderr).contains(
            "--ec2-endpoint: plain http:// reaches only a loopback host (signed requests carry a session token); write https://HOST[:PORT]"
        ),
        "{}",
        text(&out.stderr)
    );
    let out = drover(&["validate", "-f", "crates/core/tests/good-specs/ec2.yaml"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let out = drover(&[
        "validate",
        "-f",
        "crates/core/tests/bad-specs/83-ec2-properties.yaml",
    ]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
    assert!(text(&out.stderr).contains("instance.properties.image_id"));
}

/// `git ARGS` at the top of the clone, trimmed; `None` outside a clone.
fn git(args: &[&str]) -> Option<String> {
    let out = Command::new("git")
        .args(args)
        .current_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/../.."))
        .output()
        .ok()?;
    out.status
        .success()
        .then(|| text(&out.stdout).trim().to_string())
}

/// The commit `drover version` names is the clone's HEAD (12 hex digits),
/// `+dirty` when the sources differ from it (what `build.rs` watches:
/// `crates/`, `Cargo.toml`, `Cargo.lock`, `rust-toolchain.toml`), in the
/// table and the JSON alike; a packager's `DROVER_GIT_COMMIT` wins.
#[test]
fn version_names_the_commit_it_was_built_from() {
    let expected = match option_env!("DROVER_GIT_COMMIT") {
        Some(given) if !given.trim().is_empty() => given.trim().to_string(),
        _ => match git(&["rev-parse", "--short=12", "HEAD"]) {
            None => "unknown".to_string(),
            Some(head) => {
                let changed = git(&[
                    "--no-optional-locks",
                    "status",
                    "--porcelain",
                    "--untracked-files=no",
                    "--",
                    "crates",
                    "Cargo.toml",
                    "Cargo.lock",
                    "rust-toolchain.toml",
                ])
                .expect("git status");
                let dirty = if changed.is_empty() { "" } else { "+dirty" };
                format!("{head}{dirty}")
            }
        },
    };
    let out = drover(&["version"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let shown = text(&out.stdout);
    assert!(
        shown.lines().any(|l| l == format!("commit:    {expected}")),
        "expected commit {expected}:\n{shown}"
    );
    let out = drover(&["version", "--output", "json"]);
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).expect("version JSON");
    assert_eq!(doc["commit"], expected.as_str(), "{doc}");
    assert_eq!(
        doc["profile"],
        if cfg!(debug_assertions) {
            "debug"
        } else {
            "release"
        }
    );
}

#[test]
fn addresses_outside_their_grammar_are_exit_2_naming_the_part_and_create_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("state.db");
    let file = format!("file://{}", db.display());
    for (store, extra, says) in [
        (
            "etcd://127.0.0.1:1/drover/prod",
            None,
            "the path /drover/prod is not part of an etcd address: name the key prefix as a parameter, etcd://host:port?prefix=/drover/prod",
        ),
        (
            "etcd://127.0.0.1:1?prefix=/a&tls=1",
            None,
            "unknown etcd option \"tls\"",
        ),
        (
            "etcd://root:hunter2@127.0.0.1:1",
            None,
            "never put credentials in the store address",
        ),
        (
            file.as_str(),
            Some("https://KEY:hunter2@ec2.example"),
            "--ec2-endpoint: credentials (user:password@) never go in the endpoint",
        ),
        (
            file.as_str(),
            Some("https://ec2.example/x?a=b"),
            "--ec2-endpoint: a path after the host",
        ),
    ] {
        let mut args = vec!["apply", "-f", "examples/cluster.yaml", "--store", store];
        if let Some(e) = extra {
            args.extend([
                "--ec2",
                "true",
                "--ec2-region",
                "eu-west-1",
                "--ec2-endpoint",
                e,
            ]);
        }
        let out = drover(&args);
        let err = text(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{store} {extra:?}: {err}");
        assert!(err.contains(says), "{store} {extra:?}: {err}");
        assert!(!err.contains("hunter2"), "a secret echoed: {err}");
        assert!(!db.exists(), "a store was created");
    }
}
