//! `drover apply` of a spec that is not valid never changes the stored
//! desired state: every spec of the bad-spec corpus, a valid file whose
//! `--prune` would retire every manager, and valid files whose merge with
//! the stored state is not valid (a second manager group, a role changed in
//! place) exit 2 with the stored revision, its history and the cluster id
//! untouched; `plan --store` refuses the latter the same way.

use drover_spi::{Provenance, Store};
use drover_store::FileStore;
use std::path::Path;
use std::process::Command;

const GOOD: &str = "groups:
- name: managers
  role: manager
  allocation: {size: 3}
  instance: {provider: local}
- name: workers
  role: worker
  allocation: {size: 2}
  instance: {provider: local}
";

/// What must not change: current revision, history, cluster id.
async fn snapshot(db: &Path) -> (u64, String, usize, Option<String>) {
    let s = FileStore::open(db).unwrap();
    let d = s.desired().await.unwrap().unwrap();
    let out = (
        d.rev,
        serde_json::to_string(&d.spec).unwrap(),
        s.history().await.unwrap().len(),
        s.cluster_id().await.unwrap(),
    );
    drop(s);
    out
}

fn apply(db: &Path, file: &Path, extra: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_drover"))
        .args(["apply", "-f"])
        .arg(file)
        .arg("--store")
        .arg(format!("file://{}", db.display()))
        .args(extra)
        .env_remove("DROVER_STORE")
        .env_remove("DROVER_LOCAL_DIR")
        .output()
        .expect("run drover")
}

/// A file store at `db` holding cluster `c-1` with [`GOOD`] as revision 1.
async fn store_with_good(db: &Path) {
    let s = FileStore::open(db).unwrap();
    s.init_cluster("c-1").await.unwrap();
    let spec = drover_core::spec::parse_str(GOOD).spec.unwrap();
    let p = Provenance {
        who: "t".into(),
        at_ms: 0,
        message: "good".into(),
    };
    s.commit(0, &spec, p, false).await.unwrap();
}

#[tokio::test]
async fn apply_of_an_invalid_spec_never_changes_the_stored_desired_state() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("state.db");
    store_with_good(&db).await;
    let before = snapshot(&db).await;

    let corpus = Path::new(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../core/tests/bad-specs"
    ));
    let mut tried = 0;
    for entry in std::fs::read_dir(corpus).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "expected") {
            continue;
        }
        let out = apply(&db, &path, &[]);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{}: {err}", path.display());
        assert!(
            err.contains(&path.display().to_string()),
            "{}: the message does not name the file: {err}",
            path.display()
        );
        assert_eq!(
            snapshot(&db).await,
            before,
            "{} changed the store",
            path.display()
        );
        tried += 1;
    }
    assert!(tried >= 60, "only {tried} bad specs found");

    // Valid on its own, refused as a whole: --prune would retire the managers.
    let workers_only = dir.path().join("workers.yaml");
    std::fs::write(
        &workers_only,
        GOOD[GOOD.find("- name: workers").unwrap()..].replace("- name", "groups:\n- name"),
    )
    .unwrap();
    let out = apply(&db, &workers_only, &["--prune"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("--prune") && err.contains("managers"), "{err}");
    assert_eq!(
        snapshot(&db).await,
        before,
        "--prune refusal changed the store"
    );
}

/// With the swarm store and no swarm yet, `apply` would create the first
/// manager; a dry run says so and creates nothing.
#[test]
fn a_dry_run_against_a_swarm_store_with_no_swarm_creates_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let spec = dir.path().join("cluster.yaml");
    std::fs::write(&spec, GOOD).unwrap();
    let local = dir.path().join("local");
    let out = Command::new(env!("CARGO_BIN_EXE_drover"))
        .args(["apply", "--dry-run", "-f"])
        .arg(&spec)
        .arg("--store")
        .arg(format!("swarm:unix://{}/none.sock", dir.path().display()))
        .arg("--local-dir")
        .arg(&local)
        .args(["--local-pool", "127.0.94.20-127.0.94.30"])
        .env_remove("DROVER_STORE")
        .output()
        .expect("run drover");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        stdout.contains("would create its first manager"),
        "{stdout}"
    );
    let made = std::fs::read_dir(local.join("instances")).map_or(0, |d| d.count());
    assert_eq!(made, 0, "a dry run created a machine");
}

/// Each file is valid on its own; what `apply` would commit is not.
#[tokio::test]
async fn apply_never_commits_an_invalid_merged_state() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("state.db");
    store_with_good(&db).await;
    let before = snapshot(&db).await;
    let cases = [
        // The manager group renamed: `managers` is kept (not in the file),
        // `control` added: two manager groups.
        (
            GOOD.replace("name: managers", "name: control"),
            vec!["+ control: new group", "= managers: not in the file, kept"],
            "groups[2].role (group managers): only one manager group per cluster",
        ),
        // A worker group turned plain: its members would be destroyed
        // without being drained.
        (
            GOOD.replace("role: worker", "role: plain"),
            vec!["~ workers: config"],
            "groups[1].role (group workers): group workers is a worker group now and a group's role never changes in place",
        ),
    ];
    for (file, plan, why) in cases {
        let path = dir.path().join("cluster.yaml");
        std::fs::write(&path, &file).unwrap();
        for extra in [&["--dry-run"][..], &[]] {
            let out = apply(&db, &path, extra);
            let (text, err) = (
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr),
            );
            assert_eq!(out.status.code(), Some(2), "{extra:?} {file}: {text}{err}");
            assert!(err.contains(why), "{err}");
            assert!(err.contains("nothing was committed"), "{err}");
            for line in &plan {
                assert!(
                    text.contains(line),
                    "the plan does not show `{line}`: {text}"
                );
            }
            assert_eq!(snapshot(&db).await, before, "{file} changed the store");
        }
        // `plan` against the store refuses it the same way.
        let out = Command::new(env!("CARGO_BIN_EXE_drover"))
            .args(["plan", "-f"])
            .arg(&path)
            .arg("--store")
            .arg(format!("file://{}", db.display()))
            .env_remove("DROVER_STORE")
            .env_remove("DROVER_LOCAL_DIR")
            .output()
            .expect("run drover");
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "plan {file}: {err}");
        assert!(err.contains(why), "{err}");
    }
}
