//! Unit tests of the local provider (pools, ids, the listing).

use super::*;

/// Issue 37: the listing reads the provider's own records, so an empty
/// pet slot is filled without waiting (`plan::stage::fill`).
#[test]
fn its_listing_is_complete() {
    let d = std::env::temp_dir().join(format!("drover-listing-{}", std::process::id()));
    let p = LocalProvider::new(&d, []).unwrap();
    assert!(p.listing_is_complete());
    let _ = std::fs::remove_dir_all(d);
}

#[test]
fn pool_is_loopback_only() {
    assert_eq!(parse_pool("127.0.5.10-127.0.5.12").unwrap().len(), 3);
    assert!(matches!(
        parse_pool("10.0.0.1"),
        Err(LocalError::NotLoopback(_))
    ));
    assert!(matches!(
        parse_pool("127.0.0.9-127.0.0.1"),
        Err(LocalError::BadPool(_))
    ));
    let d = std::env::temp_dir().join(format!("drover-pool-{}", std::process::id()));
    let e = LocalProvider::new(&d, ["192.168.1.1".parse().unwrap()]).unwrap_err();
    assert!(e.to_string().contains("not a loopback"), "{e}");
    let _ = std::fs::remove_dir_all(d);
}

#[test]
fn ids_are_checked() {
    assert!(valid_id("i0123abcd"));
    assert!(!valid_id("../etc"));
    assert!(!valid_id(""));
}

/// An update started again while an earlier run of it still runs (a
/// controller SIGKILLed mid-update leaves its run going; its successor
/// starts the step again) waits for it, finds its mark and does not run
/// the command a second time; a later run of it does nothing either; the
/// next update (another mark) runs, and only its mark is kept.
#[tokio::test]
async fn an_update_started_twice_runs_its_command_once() {
    use drover_core::in_place::{UpdateRun, mark_file};
    let d = tempfile::tempdir().unwrap();
    let p = LocalProvider::new(d.path(), []).unwrap();
    let id = "i0000upd1";
    std::fs::create_dir_all(p.dir_of(id)).unwrap();
    p.write_record(&InstanceRecord {
        id: id.into(),
        tags: BTreeMap::new(),
        logical_id: None,
        address: "127.0.0.1".into(),
        socket: p.dir_of(id).join("sock"),
        pid: None,
        pgid: None,
        supervisor: None,
        created_ms: 0,
        engine_dir: None,
        marked: false,
    })
    .unwrap();
    let log = d.path().join("runs");
    let run = |mark: &str| UpdateRun {
        command: format!(
            "echo start >> {log}; sleep 1; echo end >> {log}",
            log = log.display()
        ),
        timeout: std::time::Duration::from_secs(30),
        mark: mark.into(),
    };
    let runs = || std::fs::read_to_string(&log).unwrap_or_default();
    let (first, again) = (run("op1-h1"), run("op1-h1"));
    let fence = drover_spi::Unfenced;
    let (a, b) = tokio::join!(p.update(id, &first, &fence), p.update(id, &again, &fence));
    let (a, b) = (a.unwrap(), b.unwrap());
    assert!(a.succeeded() && b.succeeded(), "{a:?} {b:?}");
    assert_eq!(runs(), "start\nend\n", "the command ran once");
    let said = format!("{} {}", a.tail.last(3), b.tail.last(3));
    assert!(said.contains("already updated (op1-h1)"), "{said}");
    assert!(p.update(id, &first, &fence).await.unwrap().succeeded());
    assert_eq!(runs(), "start\nend\n", "a late run does nothing");
    let next = run("op2-h2");
    assert!(p.update(id, &next, &fence).await.unwrap().succeeded());
    assert_eq!(runs(), "start\nend\nstart\nend\n");
    let marks: Vec<String> = std::fs::read_dir(p.update_dir(id))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("updated-"))
        .collect();
    assert_eq!(marks, [mark_file(&next)]);
}
