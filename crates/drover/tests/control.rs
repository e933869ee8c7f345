//! Who may act, declared in the cluster file (issue 38, items 1 and 2),
//! checked without an engine: a control the store cannot serve is refused
//! before anything is opened or made (exit 2, one sentence naming the
//! field and what to do); an external controller needs a store other hosts
//! reach; a plain-only cluster shows no manager fault tolerance.

mod support;

use std::path::Path;
use std::process::Output;

fn drover(args: &[&str]) -> Output {
    support::drover_at_root(
        args,
        &["DROVER_STORE", "DROVER_LOCAL_DIR", "DROVER_LOCAL_POOL"],
    )
}

fn text(out: &[u8]) -> String {
    String::from_utf8_lossy(out).into_owned()
}

fn plain(dir: &Path, control: &str) -> String {
    let path = dir.join("plain.yaml");
    let text = format!(
        "{control}groups:
- name: edge
  role: plain
  allocation: {{size: 3}}
  instance: {{provider: local}}
"
    );
    std::fs::write(&path, text).unwrap();
    path.to_str().unwrap().to_string()
}

#[test]
fn external_control_over_a_file_store_is_refused_before_anything_is_made() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("state.db");
    let store = format!("file://{}", db.display());
    let machines = dir.path().join("machines");
    std::fs::create_dir(&machines).unwrap();
    for control in ["", "control: external\n", "control: both\n"] {
        let spec = plain(dir.path(), control);
        let out = drover(&[
            "apply",
            "-f",
            &spec,
            "--store",
            &store,
            "--local-dir",
            machines.to_str().unwrap(),
            "--local-pool",
            "127.0.173.20-127.0.173.30",
        ]);
        let err = text(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{control:?}: {err}");
        assert!(err.contains("a file store is one host's"), "{err}");
        assert!(err.contains("etcd"), "says what to use: {err}");
        assert!(
            !err.contains("control: in-cluster"),
            "advice it cannot follow: {err}"
        );
        assert_eq!(err.trim().lines().count(), 1, "one sentence: {err}");
        assert!(!db.exists(), "a store was made");
        assert_eq!(
            std::fs::read_dir(&machines).unwrap().count(),
            0,
            "machines made"
        );
    }
}

#[test]
fn an_external_controller_over_a_file_store_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("state.db");
    let store = format!("file://{}", db.display());
    let out = drover(&["controller", "--external", "--store", &store]);
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("--external"), "{err}");
    assert!(err.contains("a file store is one host's"), "{err}");
    assert!(!db.exists(), "a store was made");
}

#[test]
fn a_name_is_only_for_an_external_controller() {
    let out = drover(&["controller", "--name", "x", "--store", "etcd://127.0.0.1:1"]);
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("--external"), "{err}");
}

#[test]
fn a_plain_only_plan_shows_no_fault_tolerance() {
    let dir = tempfile::tempdir().unwrap();
    let spec = plain(dir.path(), "");
    let out = drover(&["plan", "-f", &spec, "--sim"]);
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(
        stdout.contains("plain groups only: no swarm, no manager fault tolerance to keep"),
        "{stdout}"
    );
    assert!(!stdout.contains("NOT held"), "{stdout}");
    assert!(
        !stdout.contains("-1 →"),
        "a fault tolerance of -1: {stdout}"
    );
}

#[test]
fn in_cluster_control_without_managers_is_refused_naming_the_field() {
    let dir = tempfile::tempdir().unwrap();
    let spec = plain(dir.path(), "control: in-cluster\n");
    let out = drover(&["validate", "-f", &spec]);
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains(":1:10: control: in-cluster control needs a group with role: manager"),
        "{err}"
    );
}

#[test]
fn an_export_of_external_control_is_not_imported_into_a_file_store() {
    let dir = tempfile::tempdir().unwrap();
    let spec =
        drover_core::spec::parse_str(&std::fs::read_to_string(plain(dir.path(), "")).unwrap())
            .spec
            .expect("a valid spec");
    let revision = drover_spi::Revision {
        rev: 1,
        spec,
        provenance: drover_spi::Provenance {
            who: "t".into(),
            at_ms: 0,
            message: "first".into(),
        },
        is_rollback: false,
        converged: false,
    };
    let export = serde_json::json!({
        "format": "drover-export/1",
        "cluster_id": "c1",
        "revisions": [revision],
        "controls": drover_spi::Controls::default(),
    });
    let file = dir.path().join("export.json");
    std::fs::write(&file, export.to_string()).unwrap();
    let db = dir.path().join("state.db");
    let store = format!("file://{}", db.display());
    let out = drover(&["import", "-f", file.to_str().unwrap(), "--store", &store]);
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("control: external"), "{err}");
    assert!(
        err.contains("a cluster of plain groups only is controlled from outside"),
        "{err}"
    );
    assert!(!db.exists(), "a store was made");
}
