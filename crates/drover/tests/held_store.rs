//! A file store held by another process (issue 38, item 4): a command that
//! would write it is refused at once, naming the holder and what to do
//! (exit 2, nothing changed); the commands that only read it work beside
//! the holder. This test process is the holder, as a controller would be.

mod support;

use drover_spi::{Provenance, Store};
use drover_store::{Access, FileStore, Limits};
use std::path::{Path, PathBuf};
use std::process::Output;

fn drover(args: &[&str]) -> Output {
    support::drover_at_root(args, &["DROVER_STORE", "DROVER_LOCAL_DIR"])
}

fn text(out: &[u8]) -> String {
    String::from_utf8_lossy(out).into_owned()
}

/// `dir/state.db` opened for writing as the CLI's writers open it (readers
/// may share it), holding cluster `c-1` at revision 1: its path, the store
/// and its address.
async fn held(dir: &Path) -> (PathBuf, FileStore, String) {
    let path = dir.join("state.db");
    let url = format!("file://{}", path.display());
    let s = FileStore::open_as(&path, Access::Shared, Limits::default()).expect("open");
    s.init_cluster("c-1").await.unwrap();
    let spec = drover_core::spec::parse_str(
        &std::fs::read_to_string(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../examples/cluster.yaml"
        ))
        .unwrap(),
    )
    .spec
    .unwrap();
    let who = Provenance {
        who: "t".into(),
        at_ms: 0,
        message: "first".into(),
    };
    s.commit(0, &spec, who, false).await.unwrap();
    (path, s, url)
}

/// The status a controller `m-1` publishes now, at revision 1.
async fn publish(store: &FileStore) {
    let epoch = store.campaign("m-1").await.unwrap();
    let now_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64;
    let doc = serde_json::json!({
        "observed_at_ms": now_ms,
        "controller": "m-1",
        "epoch": epoch,
        "revision": 1,
        "groups": [],
        "swarm": {"members": 3, "reachable": 3, "fault_tolerance": 1, "leader_link": null, "problem": null},
        "operations": 0,
        "explanation": [],
    });
    let doc = drover_spi::StatusJson::new(&doc).unwrap();
    store.publish_status(epoch, doc).await.unwrap();
}

#[tokio::test]
async fn a_held_file_store_refuses_a_writer_at_once_naming_its_holder() {
    let dir = tempfile::tempdir().unwrap();
    let (path, store, url) = held(dir.path()).await;
    let out = drover(&[
        "apply",
        "-f",
        "examples/cluster.yaml",
        "--store",
        &url,
        "--wait",
    ]);
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    let pid = std::process::id();
    assert!(
        err.contains(&format!(
            "file store {} is held by pid {pid} (`",
            path.display()
        )),
        "{err}"
    );
    assert!(
        err.contains("stop it, or use an etcd store to run commands beside controllers"),
        "{err}"
    );
    assert!(text(&out.stdout).is_empty(), "{}", text(&out.stdout));
    // Nothing changed: still revision 1.
    assert_eq!(store.desired().await.unwrap().map(|r| r.rev), Some(1));
}

#[tokio::test]
async fn the_read_commands_work_beside_the_holder_and_see_its_commits() {
    let dir = tempfile::tempdir().unwrap();
    let (_, store, url) = held(dir.path()).await;
    publish(&store).await;
    let out = drover(&["status", "--store", &url]);
    let err = text(&out.stderr);
    assert!(!err.contains("is held by"), "{err}");
    assert!(
        text(&out.stdout).contains("m-1"),
        "{}{err}",
        text(&out.stdout)
    );
    for args in [
        vec!["history", "--store", &url],
        vec!["events", "--store", &url],
        vec!["diff", "1", "--store", &url],
        vec!["export", "--store", &url],
        vec!["plan", "-f", "examples/cluster.yaml", "--store", &url],
    ] {
        let out = drover(&args);
        let err = text(&out.stderr);
        assert!(!err.contains("is held by"), "{args:?}: {err}");
        assert_eq!(out.status.code(), Some(0), "{args:?}: {err}");
    }
    // A commit the holder makes now is read by the next command.
    let current = store.desired().await.unwrap().unwrap();
    let who = Provenance {
        who: "t".into(),
        at_ms: 0,
        message: "second".into(),
    };
    store.commit(1, &current.spec, who, false).await.unwrap();
    let out = drover(&["history", "--store", &url]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(
        text(&out.stdout).contains("second"),
        "{}",
        text(&out.stdout)
    );
}
