//! The revision commands through the binary, against a file store seeded
//! with two converged revisions (no Docker needed): `rollback`, `restart`,
//! `destroy`, `diff` (secrets redacted), `export`/`import`, and their
//! bad-input exits.

use drover_core::hash::config_hash;
use drover_core::spec::{ClusterSpec, parse_str};
use drover_spi::{Provenance, Revision, StatusJson};
use std::path::Path;
use std::process::{Command, Output, Stdio};

fn spec(release: &str) -> ClusterSpec {
    let yaml = format!(
        "groups:
- name: managers
  role: manager
  allocation: {{size: 3}}
  instance: {{provider: local}}
- name: workers
  role: worker
  allocation: {{size: 2}}
  instance: {{provider: local, properties: {{zone_hint: a}}}}
  flavor: {{engine_labels: {{release: {release}}}}}
"
    );
    parse_str(&yaml).spec.expect("valid spec")
}

/// [`spec`] as a drover from before secrets were refused could store it:
/// a token in the workers' properties, a join token in their boot script.
fn spec_with_secrets(release: &str) -> ClusterSpec {
    let mut s = spec(release);
    let workers = &mut s.groups[1];
    workers.instance.properties = serde_json::json!({"api_token": format!("secret-{release}")});
    workers.flavor.boot_script = format!(
        "#!/bin/sh
docker swarm join --token SWMTKN-1-secret-{release} 10.0.0.1:2377
"
    );
    s
}

/// Who commits the seeded revisions, with `message`.
fn who(message: impl Into<String>) -> Provenance {
    Provenance {
        who: "test".into(),
        at_ms: 1,
        message: message.into(),
    }
}

/// The store at `url`, holding cluster `c1`, and the epoch of its
/// controller `test`.
async fn started(url: &str) -> (Box<dyn drover_spi::Store>, drover_spi::Epoch) {
    let store = drover_store::open(url).await.expect("store");
    store.init_cluster("c1").await.unwrap();
    let epoch = store.campaign("test").await.unwrap();
    (store, epoch)
}

/// A store at `url` holding revisions v1 and v2, both converged.
async fn seed(url: &str) {
    let (store, epoch) = started(url).await;
    for (i, release) in ["v1", "v2"].iter().enumerate() {
        let rev = store
            .commit(
                i as u64,
                &spec(release),
                who(format!("release {release}")),
                false,
            )
            .await
            .unwrap();
        store.mark_converged(epoch, rev).await.unwrap();
    }
}

fn drover(url: &str, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_drover"))
        .args(args)
        .env("DROVER_STORE", url)
        .env_remove("DROVER_LOCAL_DIR")
        .stdin(Stdio::null())
        .output()
        .expect("run drover")
}

fn history(url: &str) -> Vec<Revision> {
    let out = drover(url, &["history", "--output", "json"]);
    serde_json::from_slice(&out.stdout).expect("history JSON")
}

/// What a command that exited with `want` said on stderr.
fn exited(out: &Output, want: i32) -> String {
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(code(out), Some(want), "{stderr}");
    stderr
}

fn code(out: &Output) -> Option<i32> {
    eprintln!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out.status.code()
}

/// Destroying a pets manager group with a spare slot commits it at size 0
/// without the spare (a retired group is cattle, which has no spare
/// slots): before the fix the commit was refused as invalid.
#[tokio::test]
async fn destroying_a_pets_group_with_a_spare_slot_drops_the_slot() {
    let dir = tempfile::tempdir().unwrap();
    let url = store_url(dir.path(), "state.db");
    let store = drover_store::open_with(
        &url,
        drover_store::OpenOptions {
            create: true,
            read_only: false,
            timeout: std::time::Duration::from_secs(5),
        },
    )
    .await
    .expect("store");
    store.init_cluster("c1").await.unwrap();
    let epoch = store.campaign("test").await.unwrap();
    let pets = parse_str(
        "groups:
- name: managers
  role: manager
  allocation: {logical_ids: [127.0.0.11, 127.0.0.12, 127.0.0.13], spare_ids: [127.0.0.14]}
  instance: {provider: local}
",
    )
    .spec
    .expect("valid spec");
    store.commit(0, &pets, who("pets"), false).await.unwrap();
    drop((store, epoch));
    // The last machine is removed from here, which needs the provider:
    // refused for that (exit 2), not for an invalid state.
    let out = drover(&url, &["destroy", "managers", "--yes"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(code(&out), Some(2));
    assert!(stderr.contains("--local-dir"), "{stderr}");
    assert!(!stderr.contains("spare"), "{stderr}");
}

/// A status document, as a controller publishes it, listing `ids` (workers).
fn status_listing(ids: &[&str]) -> StatusJson {
    status_with(ids, serde_json::json!([]))
}

/// [`status_listing`], its workers group shown unobservable by the acting
/// controller (its provider's describe fails there too).
fn status_workers_unobservable(ids: &[&str]) -> StatusJson {
    status_with(
        ids,
        serde_json::json!([{
            "name": "workers", "role": "worker", "phase": "unobservable",
            "reason": "provider describe failed: no plugin answers", "desired_hash": "h",
            "desired": 2, "members": 0, "current": 0, "healthy": 0, "in_flight": 0
        }]),
    )
}

/// A status document listing `ids` as workers, with `groups`.
fn status_with(ids: &[&str], groups: serde_json::Value) -> StatusJson {
    let instances: Vec<_> = ids
        .iter()
        .map(|id| {
            serde_json::json!({
                "id": id, "group": "workers", "logical_id": null, "node_id": null,
                "role": "worker", "leader": false, "health": "healthy",
                "health_reason": null, "current": true, "created_ms": 0, "held": false
            })
        })
        .collect();
    StatusJson::new(&serde_json::json!({
        "observed_at_ms": 0, "controller": "test", "epoch": 1, "revision": 1,
        "groups": groups, "swarm": {"members": 0, "reachable": 0, "fault_tolerance": null,
        "leader_link": null, "problem": null},
        "instances": instances, "operations": 0, "explanation": []
    }))
    .unwrap()
}

fn store_url(dir: &Path, name: &str) -> String {
    format!("file://{}", dir.join(name).display())
}

#[tokio::test]
async fn rollback_restart_and_destroy_commit_revisions_through_the_store() {
    let dir = tempfile::tempdir().unwrap();
    let url = store_url(dir.path(), "state.db");
    seed(&url).await;
    let workers = |r: &Revision| r.spec.group("workers").unwrap().clone();

    assert_eq!(code(&drover(&url, &["rollback", "workers"])), Some(0));
    let h = history(&url);
    assert_eq!(h.len(), 3);
    assert!(h[2].is_rollback);
    assert_eq!(workers(&h[2]), workers(&h[0]), "not rolled back to v1");
    assert_eq!(h[2].spec.group("managers"), h[1].spec.group("managers"));

    assert_eq!(
        code(&drover(&url, &["rollback", "workers", "--to", "2"])),
        Some(0)
    );
    assert_eq!(workers(&history(&url)[3]), workers(&h[1]));

    assert_eq!(code(&drover(&url, &["restart", "workers"])), Some(0));
    let h = history(&url);
    assert!(workers(&h[4]).rollout_after.is_some());
    assert_ne!(
        config_hash(&workers(&h[4])),
        config_hash(&workers(&h[3])),
        "restart does not roll"
    );

    // Confirmation is required; a manager group is refused while workers have members.
    assert_eq!(code(&drover(&url, &["destroy", "workers"])), Some(2));
    assert_eq!(
        code(&drover(&url, &["destroy", "managers", "--yes"])),
        Some(2)
    );
    assert_eq!(history(&url).len(), 5, "a refused destroy committed");
    assert_eq!(
        code(&drover(&url, &["destroy", "workers", "--yes"])),
        Some(0)
    );
    assert_eq!(workers(&history(&url)[5]).allocation.size(), 0);
    // Workers gone, the manager group may go, but its last machine is removed
    // from here: without the provider, exit 2 and nothing committed.
    let out = drover(&url, &["destroy", "managers", "--yes"]);
    assert_eq!(
        code(&out),
        Some(2),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stderr).contains("--local-dir"));
    assert_eq!(history(&url).len(), 6, "a refused destroy committed");

    // Bad input: exit 2, nothing committed.
    for args in [
        &["rollback", "nope"][..],
        &["rollback", "workers", "--to", "99"],
        &["restart", "nope"],
        &["diff", "1", "99"],
    ] {
        let out = drover(&url, args);
        assert_eq!(code(&out), Some(2), "{args:?}");
        assert_eq!(
            String::from_utf8_lossy(&out.stderr).lines().count(),
            1,
            "{args:?}"
        );
    }
    assert_eq!(history(&url).len(), 6);
}

#[tokio::test]
async fn diff_and_export_redact_the_same_secrets_an_older_store_holds_and_import_refuses_them() {
    let dir = tempfile::tempdir().unwrap();
    let url = store_url(dir.path(), "state.db");
    seed_unchecked(&url, &[spec_with_secrets("v1"), spec_with_secrets("v2")]).await;

    let out = drover(&url, &["diff", "1", "2"]);
    assert_eq!(code(&out), Some(0));
    let text = String::from_utf8_lossy(&out.stdout);
    // The token changed between the revisions too, yet never shows.
    assert!(!text.contains("secret-v"), "{text}");
    let changed = |sign: char, line: &str| {
        text.lines()
            .any(|l| l.starts_with(sign) && l.trim_start_matches(sign).trim() == line)
    };
    assert!(changed('-', "\"release\": \"v1\""), "{text}");
    assert!(changed('+', "\"release\": \"v2\""), "{text}");
    let out = drover(&url, &["diff", "1", "1"]);
    assert!(String::from_utf8_lossy(&out.stdout).contains("(no difference)"));

    let out = drover(&url, &["export"]);
    assert_eq!(code(&out), Some(0));
    let printed = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(!printed.contains("secret-v"), "export leaked: {printed}");
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(doc["redacted"], serde_json::json!([1, 2]), "{printed}");
    // Exactly what diff redacts: the one rule over the same spec.
    for (i, release) in ["v1", "v2"].iter().enumerate() {
        let mut want = serde_json::to_value(spec_with_secrets(release)).unwrap();
        assert!(drover_core::spec::secret_value::redact(&mut want));
        assert_eq!(doc["revisions"][i]["spec"], want, "revision {}", i + 1);
    }
    let file = dir.path().join("export.json");
    std::fs::write(&file, &out.stdout).unwrap();
    let mut edited = doc.clone();
    edited.as_object_mut().unwrap().remove("redacted");
    let hand_edited = dir.path().join("edited.json");
    std::fs::write(&hand_edited, edited.to_string()).unwrap();
    for f in [&file, &hand_edited] {
        let copy_path = dir.path().join("copy.db");
        let copy = store_url(dir.path(), "copy.db");
        let out = drover(&copy, &["import", "-f", f.to_str().unwrap()]);
        let err = String::from_utf8_lossy(&out.stderr).to_string();
        assert_eq!(code(&out), Some(2), "{err}");
        assert!(
            err.contains("revision(s) 1, 2 held a secret that export replaced with <redacted>"),
            "{err}"
        );
        assert!(!copy_path.exists(), "a store was created");
    }
}

#[tokio::test]
async fn export_of_a_store_without_secrets_is_unchanged_and_imports_as_it_was() {
    let dir = tempfile::tempdir().unwrap();
    let url = store_url(dir.path(), "state.db");
    seed(&url).await;
    let out = drover(&url, &["export"]);
    assert_eq!(code(&out), Some(0));
    assert!(!String::from_utf8_lossy(&out.stdout).contains("redacted"));
    let file = dir.path().join("export.json");
    std::fs::write(&file, &out.stdout).unwrap();
    let copy = store_url(dir.path(), "copy.db");
    let import = || code(&drover(&copy, &["import", "-f", file.to_str().unwrap()]));
    assert_eq!(import(), Some(0));
    assert_eq!(import(), Some(2), "imported into a non-empty store");
    let (a, b) = (history(&url), history(&copy));
    assert_eq!(b.len(), 2);
    assert_eq!(a, b, "the same revisions, provenance and converged flags");
    // The copy exports exactly as the original did.
    assert_eq!(drover(&copy, &["export"]).stdout, out.stdout);
    // rollback's default target is the newest converged revision: the copy has one.
    assert_eq!(code(&drover(&copy, &["rollback", "workers"])), Some(0));
}

/// An import whose store refuses a write midway (here etcd, with a request
/// limit the second revision exceeds) leaves no cluster behind, and the
/// rerun of a corrected export succeeds: the import is one write.
#[tokio::test]
async fn an_import_cut_short_leaves_no_cluster_and_a_rerun_works() {
    let dir = tempfile::tempdir().unwrap();
    let url = store_url(dir.path(), "state.db");
    seed(&url).await;
    let out = drover(&url, &["export"]);
    assert_eq!(code(&out), Some(0));
    let good = dir.path().join("export.json");
    std::fs::write(&good, &out.stdout).unwrap();
    let mut doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    doc["revisions"][1]["spec"]["groups"][1]["instance"]["properties"]["blob"] =
        "x".repeat(100_000).into();
    let big = dir.path().join("big.json");
    std::fs::write(&big, doc.to_string()).unwrap();

    let etcd = drover_store::testkit::Etcd::start_with(&["--max-request-bytes", "65536"]).await;
    let out = drover(&etcd.url, &["import", "-f", big.to_str().unwrap()]);
    assert_eq!(code(&out), Some(1), "the store refused the write");
    let store = drover_store::open(&etcd.url).await.unwrap();
    assert_eq!(
        store.cluster_id().await.unwrap(),
        None,
        "a cluster was left behind"
    );
    assert!(
        store.history().await.unwrap().is_empty(),
        "a revision was left behind"
    );
    let out = drover(&etcd.url, &["import", "-f", good.to_str().unwrap()]);
    assert_eq!(code(&out), Some(0), "the rerun");
    assert_eq!(history(&etcd.url), history(&url));
}

#[tokio::test]
async fn hold_and_release_an_instance_the_status_lists() {
    let dir = tempfile::tempdir().unwrap();
    let url = store_url(dir.path(), "state.db");
    seed(&url).await;
    {
        let store = drover_store::open(&url).await.unwrap();
        let epoch = store.campaign("test").await.unwrap();
        store
            .publish_status(epoch, status_listing(&["i-1"]))
            .await
            .unwrap();
    }
    let held = || async {
        let store = drover_store::open(&url).await.unwrap();
        store.controls().await.unwrap().held
    };
    assert_eq!(code(&drover(&url, &["hold", "nope"])), Some(2));
    assert!(
        held().await.is_empty(),
        "a refused hold changed the controls"
    );
    assert_eq!(code(&drover(&url, &["hold", "i-1"])), Some(0));
    assert!(held().await.contains("i-1"));
    assert_eq!(code(&drover(&url, &["hold", "i-1", "--release"])), Some(0));
    assert!(held().await.is_empty());
}

#[tokio::test]
async fn replace_records_a_request_for_a_listed_instance_and_forgets_gone_ones() {
    let dir = tempfile::tempdir().unwrap();
    let url = store_url(dir.path(), "state.db");
    seed(&url).await;
    let publish = |ids: &'static [&'static str]| {
        let url = url.clone();
        async move {
            let store = drover_store::open(&url).await.unwrap();
            let epoch = store.campaign("test").await.unwrap();
            store
                .publish_status(epoch, status_listing(ids))
                .await
                .unwrap();
        }
    };
    let requested = || async {
        let store = drover_store::open(&url).await.unwrap();
        store.controls().await.unwrap().replace
    };
    publish(&["i-1", "i-2"]).await;
    assert_eq!(code(&drover(&url, &["replace", "nope"])), Some(2));
    assert_eq!(code(&drover(&url, &["replace", "i-1"])), Some(0));
    assert!(requested().await.contains("i-1"));
    // i-1 was replaced (the status no longer lists it): its request goes.
    publish(&["i-2", "i-3"]).await;
    assert_eq!(code(&drover(&url, &["replace", "i-2"])), Some(0));
    let now = requested().await;
    assert!(now.contains("i-2") && !now.contains("i-1"), "{now:?}");
}

/// A store at `url` holding `specs` as revisions 1.., each converged, as a
/// drover without `validate_commit` (or a hand-edited import) could leave
/// it.
async fn seed_unchecked(url: &str, specs: &[ClusterSpec]) {
    let (store, epoch) = started(url).await;
    for (i, spec) in specs.iter().enumerate() {
        let who = Provenance {
            who: "older drover".into(),
            at_ms: 1,
            message: format!("revision {}", i + 1),
        };
        let rev = store.commit(i as u64, spec, who, false).await.unwrap();
        store.mark_converged(epoch, rev).await.unwrap();
    }
}

/// Exit 2, stderr naming every `want`, and the history as it was.
fn refused(url: &str, args: &[&str], want: &[&str]) {
    let before = history(url);
    let out = drover(url, args);
    let err = String::from_utf8_lossy(&out.stderr).to_string();
    assert_eq!(code(&out), Some(2), "{args:?} was not refused");
    for w in want {
        assert!(err.contains(w), "{args:?}: `{w}` not in: {err}");
    }
    assert!(err.contains("nothing was committed"), "{err}");
    assert_eq!(history(url), before, "{args:?} changed the history");
}

#[tokio::test]
async fn rollback_restart_and_destroy_never_commit_an_invalid_state() {
    let dir = tempfile::tempdir().unwrap();
    // Revision 1's managers watch 0s (stored before the rule existed):
    // rolling back to it is refused.
    let url = store_url(dir.path(), "rollback.db");
    let mut old = spec("v1");
    old.groups[0].update.watch = std::time::Duration::ZERO;
    let mut new = spec("v2");
    new.groups[0].update.watch = std::time::Duration::from_secs(20);
    seed_unchecked(&url, &[old, new]).await;
    refused(
        &url,
        &["rollback", "managers"],
        &[
            "rollback of managers to revision 1",
            "groups[0].update.watch (group managers): managers need a non-zero watch",
        ],
    );

    // The current revision holds 4 managers and a reserved label: a restart
    // or destroy would commit them again.
    let url = store_url(dir.path(), "current.db");
    let mut bad = spec("v2");
    bad.groups[0].allocation = drover_core::spec::Allocation::Size {
        size: 4,
        zones: vec![],
    };
    bad.groups[1]
        .flavor
        .engine_labels
        .insert("drover.group".into(), "x".into());
    seed_unchecked(&url, &[spec("v1"), bad]).await;
    let want = [
        "groups[0].allocation.size (group managers): a manager group needs an odd number",
        "groups[1].flavor.engine_labels.drover.group (group workers): labels starting with `drover.` are reserved",
    ];
    refused(&url, &["restart", "workers"], &want);
    refused(&url, &["destroy", "workers", "--yes"], &want);

    // A worker group turned plain (stored by an older drover): rolling back
    // to the worker spec is a role change, refused; so is going back again.
    let url = store_url(dir.path(), "role.db");
    let plain = parse_str(
        "groups:
- name: managers
  role: manager
  allocation: {size: 3}
  instance: {provider: local}
- name: workers
  role: plain
  allocation: {size: 2}
  instance: {provider: local}
",
    )
    .spec
    .unwrap();
    seed_unchecked(&url, &[spec("v1"), plain]).await;
    refused(
        &url,
        &["rollback", "workers"],
        &[
            "groups[1].role (group workers): group workers is a plain group now and a group's role never changes in place",
        ],
    );
}

#[tokio::test]
async fn import_of_a_hand_edited_export_is_refused_whole() {
    let dir = tempfile::tempdir().unwrap();
    let url = store_url(dir.path(), "state.db");
    seed(&url).await;
    let out = drover(&url, &["export"]);
    assert_eq!(code(&out), Some(0));
    let mut doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let workers = &mut doc["revisions"][1]["spec"]["groups"][1];
    workers["name"] = "Bad_Name".into();
    workers["update"]["watch"] = "0s".into();
    workers["flavor"]["boot_script"] = "{{ nope(".into();
    workers["flavor"]["engine_labels"]["drover.group"] = "x".into();
    workers["instance"]["provider"] = "locl".into();
    doc["revisions"][1]["spec"]["groups"][0]["allocation"] =
        serde_json::json!({"size": {"size": 4, "zones": []}});
    let file = dir.path().join("export.json");
    std::fs::write(&file, doc.to_string()).unwrap();

    let copy = store_url(dir.path(), "copy.db");
    let out = drover(&copy, &["import", "-f", file.to_str().unwrap()]);
    let err = exited(&out, 2);
    for want in [
        "import of revision 2 of -f",
        "groups[1].name (group Bad_Name): `Bad_Name` is not a valid name",
        "groups[0].allocation.size (group managers): a manager group needs an odd number",
        "groups[1].flavor.boot_script (group Bad_Name): template does not render",
        "groups[1].flavor.engine_labels.drover.group (group Bad_Name)",
        "(group Bad_Name): `locl` is not a provider drover knows",
        // Revision 1's `workers` is gone from revision 2.
        "group workers is in the current desired state but not in this one",
    ] {
        assert!(err.contains(want), "`{want}` not in: {err}");
    }
    let store = drover_store::open(&copy).await.unwrap();
    assert_eq!(
        store.cluster_id().await.unwrap(),
        None,
        "the store was touched"
    );
    assert!(
        store.history().await.unwrap().is_empty(),
        "a revision was imported"
    );
}

#[tokio::test]
async fn import_refuses_a_cluster_id_that_is_not_a_name_and_creates_no_store() {
    let dir = tempfile::tempdir().unwrap();
    let url = store_url(dir.path(), "state.db");
    seed(&url).await;
    let out = drover(&url, &["export"]);
    assert_eq!(code(&out), Some(0));
    let mut doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    for (i, bad) in ["", "a\nb", "../x", "Prod", "-a", "a b"]
        .into_iter()
        .enumerate()
    {
        doc["cluster_id"] = bad.into();
        let file = dir.path().join("export.json");
        std::fs::write(&file, doc.to_string()).unwrap();
        let copy = store_url(dir.path(), &format!("copy{i}.db"));
        let copy_path = dir.path().join(format!("copy{i}.db"));
        let out = drover(&copy, &["import", "-f", file.to_str().unwrap()]);
        let err = String::from_utf8_lossy(&out.stderr).to_string();
        assert_eq!(code(&out), Some(2), "{bad:?}: {err}");
        assert!(
            err.contains(&format!(
                "cluster id {bad:?} is not a valid cluster id: use 1-63 lowercase letters"
            )),
            "{bad:?}: {err}"
        );
        assert!(!copy_path.exists(), "{bad:?}: a store was created");
    }
}

/// A store holding managers on `local` and workers on plugin `gone`, the
/// last status listing workers `i-w1` and `i-w2` (issue 38, item 5).
async fn seed_plugin_workers(url: &str) {
    let (store, epoch) = started(url).await;
    let spec = parse_str(
        "groups:
- name: managers
  role: manager
  allocation: {size: 3}
  instance: {provider: local}
- name: workers
  role: worker
  allocation: {size: 2}
  instance: {provider: plugin, plugin: gone}
",
    )
    .spec
    .expect("valid spec");
    store
        .commit(0, &spec, who("plugin workers"), false)
        .await
        .unwrap();
    store
        .publish_status(epoch, status_listing(&["i-w1", "i-w2"]))
        .await
        .unwrap();
}

/// The acting controller's next document: it cannot describe the workers.
async fn publish_workers_unobservable(url: &str) {
    let (store, epoch) = started(url).await;
    store
        .publish_status(epoch, status_workers_unobservable(&["i-w1", "i-w2"]))
        .await
        .unwrap();
}

/// A group whose plugin is gone: `destroy` is refused without
/// `--forget-machines` (naming the machines and the flag, nothing
/// changed), `--forget-machines` is refused while the provider answers or
/// cannot be checked, and with the flag the group leaves the desired state,
/// its machines listed and recorded as events.
#[tokio::test]
async fn a_group_whose_plugin_is_gone_is_refused_then_forgotten_with_the_flag() {
    let dir = tempfile::tempdir().unwrap();
    let url = store_url(dir.path(), "state.db");
    seed_plugin_workers(&url).await;
    // Nobody serves a socket here: the plugin is gone.
    let plugins = dir.path().join("plugins");
    std::fs::create_dir(&plugins).unwrap();
    let plugins = plugins.to_str().unwrap();
    let gone = ["--plugin", "gone", "--plugins-dir", plugins];
    let with = |extra: &[&'static str]| {
        let mut args = vec!["destroy", "workers", "--yes"];
        args.extend_from_slice(extra);
        args.extend_from_slice(&gone);
        drover(&url, &args)
    };

    // Failing here alone, with the controller's status saying nothing of
    // it: nobody can tell.
    let out = with(&["--forget-machines"]);
    let stderr = exited(&out, 2);
    assert!(
        stderr.contains("cannot tell whether it is gone"),
        "{stderr}"
    );
    assert_eq!(history(&url).len(), 1, "a refused forget committed");

    // The acting controller cannot describe the group either: gone.
    publish_workers_unobservable(&url).await;
    let out = with(&[]);
    let stderr = exited(&out, 2);
    for needle in [
        "workers",
        "plugin:gone",
        "i-w1",
        "i-w2",
        "published status",
        "--forget-machines",
    ] {
        assert!(stderr.contains(needle), "{needle} missing: {stderr}");
    }
    assert_eq!(history(&url).len(), 1, "a refused destroy committed");

    // A provider that answers (an empty local provider): destroy it properly.
    let local = dir.path().join("local");
    std::fs::create_dir_all(local.join("instances")).unwrap();
    let out = drover(
        &url,
        &[
            "destroy",
            "managers",
            "--yes",
            "--forget-machines",
            "--local-dir",
            local.to_str().unwrap(),
        ],
    );
    let stderr = exited(&out, 2);
    assert!(stderr.contains("without --forget-machines"), "{stderr}");
    assert_eq!(history(&url).len(), 1, "a refused forget committed");

    let out = with(&["--forget-machines"]);
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert_eq!(code(&out), Some(0));
    for needle in [
        "workers left the desired state",
        "i-w1, from the published status",
        "cost money",
    ] {
        assert!(stdout.contains(needle), "{needle} missing: {stdout}");
    }
    let h = history(&url);
    assert_eq!(h.len(), 2);
    assert!(
        h[1].spec.group("workers").is_none(),
        "workers still declared"
    );
    assert!(h[1].spec.group("managers").is_some());
    let store = drover_store::open(&url).await.expect("store");
    let forgotten: Vec<Option<String>> = store
        .events(0)
        .await
        .unwrap()
        .into_iter()
        .filter(|e| e.action == "forget" && e.group.as_deref() == Some("workers"))
        .map(|e| e.target)
        .collect();
    assert_eq!(forgotten, [Some("i-w1".into()), Some("i-w2".into()), None]);
    drop(store);
    // Its history still moves to another store: the forget is imported as one.
    let out = drover(&url, &["export"]);
    assert_eq!(code(&out), Some(0));
    let backup = dir.path().join("backup.json");
    std::fs::write(&backup, &out.stdout).unwrap();
    let copy = store_url(dir.path(), "copy.db");
    let out = drover(
        &url,
        &["import", "-f", backup.to_str().unwrap(), "--store", &copy],
    );
    assert_eq!(code(&out), Some(0));
    assert_eq!(history(&copy).len(), 2);
}
