//! `drover apply` of a spec that is not valid never changes the stored
//! desired state: every spec of the bad-spec corpus, and a valid file whose
//! `--prune` would retire every manager, exit 2 with the stored revision,
//! its history and the cluster id untouched.

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

#[tokio::test]
async fn apply_of_an_invalid_spec_never_changes_the_stored_desired_state() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("state.db");
    {
        let s = FileStore::open(&db).unwrap();
        s.init_cluster("c-1").await.unwrap();
        let spec = drover_core::spec::parse_str(GOOD).spec.unwrap();
        let p = Provenance {
            who: "t".into(),
            at_ms: 0,
            message: "good".into(),
        };
        s.commit(0, &spec, p, false).await.unwrap();
    }
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
