//! Nothing an operator types can hurt them, through the binary (no Docker):
//! a secret in a cluster file or in an argument that reaches machines'
//! user data is refused (exit 2, naming the field or argument, never the
//! secret), and commands that only look never create the directory they
//! were pointed at.

use std::path::Path;
use std::process::{Command, Output};

/// Environment variables a case sets.
type Env = Vec<(&'static str, String)>;

/// What every secret in these tests contains, so a leak is found by it.
const MARK: &str = "Zq9Leak";

fn drover(args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_drover"));
    cmd.args(args)
        .current_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/../.."))
        .env_remove("DROVER_STORE")
        .env_remove("DROVER_LOCAL_DIR")
        .env_remove("DROVER_JOIN_TOKEN")
        .env_remove("DOCKER_HOST");
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd.output().expect("run drover")
}

fn text(out: &[u8]) -> String {
    String::from_utf8_lossy(out).into_owned()
}

/// Exit 2, stderr saying `says`, the secret never echoed.
fn refused(out: &Output, says: &str, what: &str) {
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{what}: {err}");
    assert!(err.contains(says), "{what}: `{says}` not in: {err}");
    assert!(
        !err.contains(MARK) && !text(&out.stdout).contains(MARK),
        "{what}: the secret was echoed: {err}"
    );
}

fn cluster_file(dir: &Path, boot_script: &str) -> String {
    let path = dir.join("cluster.yaml");
    let yaml = format!(
        "groups:\n  - name: w\n    role: worker\n    allocation: {{size: 1}}\n    instance: {{provider: local}}\n    flavor:\n      boot_script: |\n        #!/bin/sh\n        {boot_script}\n"
    );
    std::fs::write(&path, yaml).unwrap();
    path.display().to_string()
}

#[test]
fn validate_and_apply_refuse_a_secret_in_the_file_naming_the_field_and_where_it_belongs() {
    let dir = tempfile::tempdir().unwrap();
    let store = format!("file://{}/state.db", dir.path().display());
    let local = dir.path().join("local");
    for (script, says) in [
        (
            format!("docker swarm join --token SWMTKN-1-{MARK} 10.0.0.1:2377"),
            "a swarm join token (SWMTKN-1-…), which a spec never may",
        ),
        (
            format!("curl https://ops:{MARK}@artifacts.example/a"),
            "a credential in a URL (user:password@ or token@)",
        ),
        (
            format!("curl 'https://artifacts.example/a?X-Amz-Signature={MARK}'"),
            "a credential in a URL's query",
        ),
    ] {
        let file = cluster_file(dir.path(), &script);
        let out = drover(&["validate", "-f", &file], &[]);
        refused(&out, says, &script);
        let err = text(&out.stderr);
        assert!(
            err.contains(&format!("{file}:9:")) && err.contains("groups[0].flavor.boot_script"),
            "positioned at the script's line: {err}"
        );
        let out = drover(
            &[
                "apply",
                "-f",
                &file,
                "--store",
                &store,
                "--local-dir",
                local.to_str().unwrap(),
            ],
            &[],
        );
        refused(&out, says, &script);
        assert!(!dir.path().join("state.db").exists(), "a store was created");
    }
    let out = drover(
        &[
            "validate",
            "-f",
            &cluster_file(
                dir.path(),
                "docker swarm join --token \"$DROVER_JOIN_TOKEN\" x",
            ),
        ],
        &[],
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
}

#[test]
fn arguments_that_reach_user_data_or_boot_environments_refuse_a_secret_naming_the_argument() {
    let dir = tempfile::tempdir().unwrap();
    let store = format!("file://{}/state.db", dir.path().display());
    let token = format!("SWMTKN-1-{MARK}");
    let join = [
        "engine",
        "join",
        "--role",
        "worker",
        "--address",
        "127.0.0.1",
        "--remote",
        "127.0.0.1:1",
    ];
    let with = |extra: &[&str], base: &[&str]| -> Vec<String> {
        base.iter().chain(extra).map(|s| s.to_string()).collect()
    };
    let status = ["status", "--store", store.as_str()];
    let cases: Vec<(Vec<String>, Env, &str)> = vec![
        (
            with(
                &["--store", &format!("etcd://127.0.0.1:1?prefix=/{token}")],
                &["status"],
            ),
            vec![],
            "--store: holds a swarm join token",
        ),
        (
            vec!["status".into()],
            vec![(
                "DROVER_STORE",
                format!("etcd://127.0.0.1:1?user=SWMKEY-1-{MARK}"),
            )],
            "--store: holds a swarm unlock key",
        ),
        (
            with(
                &["--engine", &format!("tcp://ops:{MARK}@127.0.0.1:1")],
                &join,
            ),
            vec![],
            "--engine: holds a credential in a URL",
        ),
        (
            with(
                &[
                    "--engine",
                    &format!("tcp://127.0.0.1:1?access_token={MARK}"),
                ],
                &join,
            ),
            vec![],
            "--engine: holds a credential in a URL's query",
        ),
        (
            with(&["--ec2-region", &token], &status),
            vec![],
            "--ec2-region: holds a swarm join token",
        ),
        (
            with(&["--incus-project", &token], &status),
            vec![],
            "--incus-project: holds a swarm join token",
        ),
        (
            with(
                &["--ec2-endpoint", &format!("https://{token}.example")],
                &status,
            ),
            vec![],
            "--ec2-endpoint: holds a swarm join token",
        ),
    ];
    for (args, env, says) in cases {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
        let out = drover(&args, &env);
        refused(&out, says, &format!("{args:?} {env:?}"));
        assert!(
            text(&out.stderr).contains("reaches machines' user data or boot environments"),
            "{}",
            text(&out.stderr)
        );
    }
    // A store's TLS key named by path is no secret.
    let out = drover(
        &[
            "status",
            "--store",
            "etcds://127.0.0.1:1?key=/nonexistent/k.pem&cert=/nonexistent/c.pem&ca=/nonexistent/ca.pem",
        ],
        &[],
    );
    assert!(
        !text(&out.stderr).contains("holds a"),
        "{}",
        text(&out.stderr)
    );
}

#[test]
fn commands_that_only_look_never_create_a_mistyped_local_dir() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("state.db");
    drop(drover_store::FileStore::open(&path).expect("create the store"));
    let store = format!("file://{}", path.display());
    let typo = dir.path().join("var/lib/drover-lcoal");
    let typo_arg = typo.to_str().unwrap();
    for args in [
        &["recover", "--dry-run", "--local-dir", typo_arg][..],
        &["recover", "--local-dir", typo_arg],
        &["status", "--local-dir", typo_arg],
        &["gc", "--dry-run", "--local-dir", typo_arg],
    ] {
        let out = drover(args, &[("DROVER_STORE", store.as_str())]);
        refused(
            &out,
            "not a local provider's directory",
            &format!("{args:?}"),
        );
        assert!(text(&out.stderr).contains("--local-dir"));
        assert!(
            !dir.path().join("var").exists(),
            "{args:?} created the mistyped directory"
        );
    }
    // An existing directory that is not a local provider's, and one whose
    // provider holds no machine: recover refuses both and creates nothing.
    let other = dir.path().join("other");
    std::fs::create_dir(&other).unwrap();
    let out = drover(
        &["recover", "--local-dir", other.to_str().unwrap()],
        &[("DROVER_STORE", store.as_str())],
    );
    refused(&out, "not a local provider's directory", "other");
    assert_eq!(
        std::fs::read_dir(&other).unwrap().count(),
        0,
        "created inside"
    );
    let empty = dir.path().join("empty");
    std::fs::create_dir_all(empty.join("instances")).unwrap();
    let out = drover(
        &["recover", "--local-dir", empty.to_str().unwrap()],
        &[("DROVER_STORE", store.as_str())],
    );
    refused(
        &out,
        "holds no machines, so there is nothing to recover from",
        "empty",
    );
    assert_eq!(
        std::fs::read_dir(&empty).unwrap().count(),
        1,
        "created inside"
    );
}
