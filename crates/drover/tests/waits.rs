//! No silent waits, no silent refusals: `apply` of groups whose provider
//! neither this command line nor a controller acting on the store has is
//! refused before anything is committed (exit 2 naming the group, its
//! provider and the flag); with a live controller wired to it, `apply`
//! commits and `--wait` says when nobody picks the revision up; `plan
//! --sim` says which maintenance window a roll waits for and when it
//! opens, and exits non-zero when the roll did not finish. File stores
//! and the simulator only: no engine.

mod support;

use drover_spi::{Provenance, StatusJson, Store};
use drover_store::FileStore;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

const INCUS: &str = "groups:
- name: managers
  role: manager
  allocation: {size: 3}
  instance: {provider: incus, properties: {image: drover-bookworm}}
- name: workers
  role: worker
  allocation: {size: 2}
  instance: {provider: incus, properties: {image: drover-bookworm}}
";

fn drover(args: &[&str]) -> Output {
    support::drover_at_root(
        args,
        &[
            "DROVER_STORE",
            "DROVER_LOCAL_DIR",
            "DROVER_INCUS_ENGINES",
            "DROVER_PLUGINS",
            "DROVER_EC2",
        ],
    )
}

fn text(out: &[u8]) -> String {
    String::from_utf8_lossy(out).into_owned()
}

fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64
}

/// A file store at `dir/state.db` holding cluster `c-1` with `spec` as
/// revision 1; its address.
async fn store_with(dir: &Path, spec: &str) -> (PathBuf, String) {
    let db = dir.join("state.db");
    let s = FileStore::open(&db).unwrap();
    s.init_cluster("c-1").await.unwrap();
    let spec = drover_core::spec::parse_str(spec).spec.unwrap();
    let who = Provenance {
        who: "t".into(),
        at_ms: 0,
        message: "first".into(),
    };
    s.commit(0, &spec, who, false).await.unwrap();
    drop(s);
    let url = format!("file://{}", db.display());
    (db, url)
}

/// A status of revision `rev` published `age_ms` ago by controller `m-1`
/// wired to `providers` (`None`: an older controller, which does not say).
async fn publish(db: &Path, age_ms: u64, rev: u64, providers: Option<&[&str]>) {
    let s = FileStore::open(db).unwrap();
    let epoch = s.campaign("m-1").await.unwrap();
    let mut doc = serde_json::json!({
        "observed_at_ms": now_ms() - age_ms,
        "controller": "m-1",
        "epoch": epoch,
        "revision": rev,
        "groups": [],
        "swarm": {"members": 3, "reachable": 3, "fault_tolerance": 1, "leader_link": null, "problem": null},
        "operations": 0,
        "explanation": [],
    });
    if let Some(p) = providers {
        doc["providers"] = serde_json::json!(p);
    }
    s.publish_status(epoch, StatusJson::new(&doc).unwrap())
        .await
        .unwrap();
}

async fn revision(db: &Path) -> u64 {
    let s = FileStore::open(db).unwrap();
    s.desired().await.unwrap().map_or(0, |r| r.rev)
}

/// The cluster file with the workers grown to `size`.
fn grown(dir: &Path, spec: &str, size: usize) -> PathBuf {
    let file = dir.join(format!("grown-{size}.yaml"));
    let text = spec.replacen("{size: 2}", &format!("{{size: {size}}}"), 1);
    std::fs::write(&file, text).unwrap();
    file
}

#[test]
fn apply_to_a_new_store_refuses_a_group_whose_provider_is_not_given_and_creates_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("mixed.yaml");
    // The managers through the local provider given here; the workers
    // through Incus, which nothing here or elsewhere is wired to.
    let mixed = INCUS.replacen(
        "instance: {provider: incus, properties: {image: drover-bookworm}}",
        "instance: {provider: local}",
        1,
    );
    std::fs::write(&file, mixed).unwrap();
    let db = dir.path().join("state.db");
    let store = format!("file://{}", db.display());
    let local = dir.path().join("machines");
    let out = drover(&[
        "apply",
        "-f",
        file.to_str().unwrap(),
        "--store",
        &store,
        "--local-dir",
        local.to_str().unwrap(),
        "--local-pool",
        "127.0.95.20-127.0.95.30",
    ]);
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{}{err}", text(&out.stdout));
    assert!(
        err.contains("group workers: its instance.provider incus is not configured")
            && err.contains("--incus-engines DIR")
            && err.contains("no controller has ever acted on this store")
            && err.contains("nothing was committed"),
        "{err}"
    );
    assert!(!err.contains("group managers"), "{err}");
    assert!(!db.exists(), "a refused apply created the store");
    assert!(
        !text(&out.stdout).contains("committed revision"),
        "{}",
        text(&out.stdout)
    );
}

#[tokio::test]
async fn apply_refuses_when_no_controller_ever_acts_or_the_acting_one_lacks_the_provider() {
    let dir = tempfile::tempdir().unwrap();
    let (db, store) = store_with(dir.path(), INCUS).await;
    let file = grown(dir.path(), INCUS, 4);
    let apply = || drover(&["apply", "-f", file.to_str().unwrap(), "--store", &store]);

    // No controller ever published a status, no revision converged.
    let out = apply();
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("group workers: its instance.provider incus is not configured on this command line (give --incus-engines DIR")
            && err.contains("no controller has ever acted on this store"),
        "{err}"
    );
    assert!(
        !err.contains("group managers"),
        "unchanged groups need nothing: {err}"
    );

    // A live controller, wired to another provider only.
    publish(&db, 1_000, 1, Some(&["local"])).await;
    let out = apply();
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("the acting controller (m-1) is not wired to it either"),
        "{err}"
    );
    assert_eq!(revision(&db).await, 1, "a refused apply committed");

    // A dry run says so, and exits 0.
    let out = drover(&[
        "apply",
        "--dry-run",
        "-f",
        file.to_str().unwrap(),
        "--store",
        &store,
    ]);
    let said = text(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{said}");
    assert!(
        said.contains("apply would refuse it") && said.contains("group workers"),
        "{said}"
    );

    // The cluster's controller acted, and is down now (its status a minute
    // old): committed, with a warning saying what the revision waits for.
    publish(&db, 60_000, 1, Some(&["incus"])).await;
    let out = apply();
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{err}");
    assert!(
        err.contains("warning: group workers")
            && err.contains("the last status (m-1) is 60s old: no controller acts now")
            && err.contains("waits until a controller wired to incus runs"),
        "{err}"
    );
    assert_eq!(revision(&db).await, 2);
}

#[tokio::test]
async fn apply_commits_when_a_live_controller_has_the_provider_and_wait_says_none_picks_it_up() {
    let dir = tempfile::tempdir().unwrap();
    let (db, store) = store_with(dir.path(), INCUS).await;
    publish(&db, 1_000, 1, Some(&["incus"])).await;
    let file = grown(dir.path(), INCUS, 3);
    let out = drover(&["apply", "-f", file.to_str().unwrap(), "--store", &store]);
    let said = text(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{said}{}", text(&out.stderr));
    assert!(said.contains("committed revision 2"), "{said}");

    // The "controller" never plans against revision 3: the follow says so
    // within seconds, naming the provider, then times out (exit 4).
    publish(&db, 0, 2, Some(&["incus"])).await;
    let file = grown(dir.path(), INCUS, 4);
    let out = drover(&[
        "apply",
        "-f",
        file.to_str().unwrap(),
        "--store",
        &store,
        "--wait",
        "--timeout",
        "8s",
    ]);
    let said = text(&out.stdout);
    assert_eq!(out.status.code(), Some(4), "{said}{}", text(&out.stderr));
    assert!(said.contains("committed revision 3"), "{said}");
    assert!(
        said.contains("no controller has picked up revision 3 after 5 s")
            && said.contains("the acting controller (m-1) still plans against revision 2")
            && said.contains("is one running with provider incus?"),
        "{said}"
    );
}

#[tokio::test]
async fn an_older_controller_that_does_not_say_its_providers_is_counted_on() {
    let dir = tempfile::tempdir().unwrap();
    let (db, store) = store_with(dir.path(), INCUS).await;
    publish(&db, 1_000, 1, None).await;
    let file = grown(dir.path(), INCUS, 3);
    let out = drover(&["apply", "-f", file.to_str().unwrap(), "--store", &store]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert_eq!(revision(&db).await, 2);
}

/// A simulated cluster (3 managers, 2 workers) whose groups roll only in
/// the window opening at cron `start` for `duration` (UTC).
fn windowed(dir: &Path, start: &str, duration: &str) -> PathBuf {
    let window = format!("[{{start: \"{start}\", duration: {duration}, time_zone: UTC}}]");
    let spec = format!(
        "groups:
- name: managers
  role: manager
  allocation: {{size: 3}}
  instance: {{provider: sim}}
  update: {{windows: {window}}}
- name: workers
  role: worker
  allocation: {{size: 2}}
  instance: {{provider: sim}}
  update: {{windows: {window}}}
"
    );
    let file = dir.join("windowed.yaml");
    std::fs::write(&file, spec).unwrap();
    file
}

/// `date -u` of `when` (`tomorrow`, `now + 2 months`) in `format`: `plan
/// --sim` starts its virtual clock at the real one.
fn date(when: &str, format: &str) -> String {
    let out = Command::new("date")
        .args(["-u", "-d", when, &format!("+{format}")])
        .output()
        .expect("run date");
    text(&out.stdout).trim().to_string()
}

/// `when`, or the day after when it falls on 29 February: a window on
/// that day opens only in leap years, which the decoder refuses (never
/// open within a year).
fn not_leap_day(when: &str) -> String {
    match date(when, "%m-%d").as_str() {
        "02-29" => format!("{when} + 1 day"),
        _ => when.to_string(),
    }
}

fn plan_sim(file: &Path, json: bool) -> Output {
    let mut args = vec!["plan", "-f", file.to_str().unwrap(), "--sim"];
    if json {
        args.extend(["--output", "json"]);
    }
    drover(&args)
}

#[test]
fn plan_sim_of_a_roll_whose_window_opens_past_the_horizon_says_when_and_exits_4() {
    let dir = tempfile::tempdir().unwrap();
    // Open once a year, on a day three months from now: past the
    // simulation's horizon, yet within a year (a window that never opens
    // within a year is refused by the decoder).
    let day = not_leap_day("now + 3 months");
    let start = format!("0 0 {} *", date(&day, "%-d %-m"));
    let opens = date(&day, "-%m-%d 00:00 UTC");
    let file = windowed(dir.path(), &start, "1d");
    let out = plan_sim(&file, false);
    let said = text(&out.stdout);
    assert_eq!(out.status.code(), Some(4), "{said}{}", text(&out.stderr));
    assert!(!said.contains("no change"), "{said}");
    assert!(
        said.contains("the roll did NOT finish: the simulation's horizon of 8days passed first"),
        "{said}"
    );
    assert!(
        said.contains(&format!(
            "waiting for maintenance window `{start}` for 1d (UTC), next open "
        )) && said.contains(&opens),
        "{said}"
    );
    let out = plan_sim(&file, true);
    assert_eq!(out.status.code(), Some(4));
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    assert_eq!(doc["outcome"]["kind"], "timed_out", "{doc}");
    let wait = &doc["waits"][0];
    assert!(
        wait["opens"].as_str().is_some_and(|o| o.ends_with(&opens)),
        "{doc}"
    );
    assert!(wait["until"].is_null(), "{doc}");
}

#[test]
fn plan_sim_of_a_window_opening_in_two_months_says_when_and_exits_4() {
    let dir = tempfile::tempdir().unwrap();
    let month = date("now + 2 months", "%-m");
    let file = windowed(dir.path(), &format!("0 0 1 {month} *"), "4h");
    let opens = date("now + 2 months", "%Y-%m-01 00:00 UTC");
    let out = plan_sim(&file, false);
    let said = text(&out.stdout);
    assert_eq!(out.status.code(), Some(4), "{said}{}", text(&out.stderr));
    assert!(said.contains("no step was taken"), "{said}");
    assert!(said.contains(&format!("next open {opens}")), "{said}");
    let out = plan_sim(&file, true);
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    assert_eq!(doc["waits"][0]["opens"], opens.as_str(), "{doc}");
    assert_eq!(doc["outcome"]["kind"], "timed_out", "{doc}");
}

#[test]
fn plan_sim_of_a_window_too_short_for_the_roll_says_it_stopped_after_one_member() {
    let dir = tempfile::tempdir().unwrap();
    // Open 1 ms tomorrow at 02:00, then not for a year: one manager's
    // roll starts inside it and runs to its end; the rest waits.
    let day = date(&not_leap_day("tomorrow"), "%-d %-m");
    let file = windowed(dir.path(), &format!("0 2 {day} *"), "1ms");
    let out = plan_sim(&file, false);
    let said = text(&out.stdout);
    assert_eq!(out.status.code(), Some(4), "{said}{}", text(&out.stderr));
    assert!(said.contains("steps before the roll stopped"), "{said}");
    assert!(said.contains("the roll did NOT finish"), "{said}");
    assert!(
        said.contains("managers: 1/3 members on the new config; waiting for maintenance window"),
        "{said}"
    );
    assert!(
        said.contains("workers: 0/2 members on the new config"),
        "{said}"
    );
}

#[test]
fn plan_sim_of_a_window_opening_within_the_horizon_shows_the_wait_and_converges() {
    let dir = tempfile::tempdir().unwrap();
    // Daily, opening 6 hours from now: closed when the roll begins.
    let hour = date("now + 6 hours", "%-H");
    let file = windowed(dir.path(), &format!("0 {hour} * * *"), "4h");
    let out = plan_sim(&file, false);
    let said = text(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{said}{}", text(&out.stderr));
    assert!(
        said.contains("the roll waits ")
            && said.contains(&format!(
                "for maintenance window `0 {hour} * * *` for 4h (UTC), which opens "
            )),
        "{said}"
    );
    assert!(!said.contains("did NOT finish"), "{said}");
}
