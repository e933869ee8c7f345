//! Credentials an etcd store refuses, through the binary: a real etcd
//! (free loopback ports) serving only TLS with client certificates
//! required (`--client-cert-auth`) and authentication on. `status` and
//! `apply` with a wrong password, no password, no client certificate, or a
//! user who may only read exit 2 with one line naming the endpoint and
//! what to fix, never the password; the store is left as it was (no key at
//! all: no cluster id, no revision).

use drover_spi::Store;
use drover_store::testkit::{Etcd, TestCerts};
use drover_store::{EtcdOptions, EtcdStore};
use etcd_client::{GetOptions, Permission};
mod support;

use std::path::Path;
use std::process::{Command, Output, Stdio};

/// The password of every user here, so output quoting it is caught.
const SECRET: &str = "s3cret-Pa55word";
/// A wrong password, also never to be echoed.
const WRONG: &str = "wr0ng-Pa55word";

/// `drover ARGS` from the repository's root, with `password` (or none) as
/// `DROVER_ETCD_PASSWORD` and nothing else pointing it elsewhere.
fn drover(args: &[&str], password: Option<&str>) -> Output {
    let mut c = Command::new(env!("CARGO_BIN_EXE_drover"));
    c.args(args)
        .current_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/../.."))
        .stdin(Stdio::null());
    for var in [
        "DROVER_STORE",
        "DROVER_STORE_TIMEOUT",
        "DROVER_LOCAL_DIR",
        "DROVER_ETCD_PASSWORD",
        "DOCKER_HOST",
    ] {
        c.env_remove(var);
    }
    if let Some(p) = password {
        c.env("DROVER_ETCD_PASSWORD", p);
    }
    support::run_printed(c, args)
}

/// The one line a refused command printed, after checking its exit code
/// (2), that it names the endpoint, and that no password is anywhere.
fn refused(out: &Output, endpoint: &str) -> String {
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    for secret in [SECRET, WRONG] {
        assert!(
            !stdout.contains(secret) && !stderr.contains(secret),
            "password shown"
        );
    }
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(stderr.starts_with("drover: "), "{stderr}");
    assert!(stderr.contains(&format!("etcd at {endpoint}")), "{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
    stderr.into_owned()
}

fn has(m: &str, words: &[&str]) {
    for w in words {
        assert!(m.contains(w), "{w:?} not in: {m}");
    }
}

/// `etcds://…` with the CA, and the client certificate when `identity`.
fn store_url(etcd: &Etcd, client: &Path, user: &str, identity: bool) -> String {
    let mut url = format!(
        "{}?ca={}&user={user}",
        etcd.url,
        client.join("ca.pem").display()
    );
    if identity {
        url.push_str(&format!(
            "&cert={}&key={}",
            client.join("cert.pem").display(),
            client.join("key.pem").display()
        ));
    }
    url
}

#[tokio::test]
async fn refused_credentials_exit_2_in_one_line_and_write_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let certs = TestCerts::generate(dir.path(), "127.0.0.1");
    let etcd = Etcd::start_tls(&certs).await;
    let endpoint = etcd.url.split_once("://").unwrap().1.to_string();
    etcd.enable_auth(
        SECRET,
        &[(
            "reader",
            SECRET,
            Some(Permission::read("/drover/default/").with_prefix()),
        )],
    )
    .await;
    let root = store_url(&etcd, &certs.client, "root", true);
    let apply = |url: &str, password: Option<&str>, extra: &[&str]| {
        let mut args = vec!["apply", "-f", "examples/cluster.yaml", "--store", url];
        args.extend_from_slice(extra);
        drover(&args, password)
    };

    // The right credentials are let in (an empty store: nothing to show,
    // nothing refused).
    let out = apply(&root, Some(SECRET), &["--dry-run"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    // A wrong password.
    for out in [
        drover(&["status", "--store", &root], Some(WRONG)),
        apply(&root, Some(WRONG), &[]),
    ] {
        let m = refused(&out, &endpoint);
        has(
            &m,
            &[
                "refused the user \"root\"",
                "authentication failed",
                "DROVER_ETCD_PASSWORD",
            ],
        );
    }
    // No password at all.
    for out in [
        drover(&["status", "--store", &root], None),
        apply(&root, None, &[]),
    ] {
        let m = refused(&out, &endpoint);
        has(&m, &["\"root\"", "DROVER_ETCD_PASSWORD is not set"]);
    }
    // No client certificate.
    let no_cert = store_url(&etcd, &certs.client, "root", false);
    for out in [
        drover(&["status", "--store", &no_cert], Some(SECRET)),
        apply(&no_cert, Some(SECRET), &[]),
    ] {
        let m = refused(&out, &endpoint);
        has(
            &m,
            &["requires a client certificate", "?cert=FILE&key=FILE"],
        );
    }
    // A user who may read, not write: `status` works, `apply` is refused at
    // its first write (the cluster id), before any machine is made.
    let reader = store_url(&etcd, &certs.client, "reader", true);
    let out = drover(&["status", "--store", &reader], Some(SECRET));
    // Read, and found nothing published yet: exit 1, not a refusal (2).
    assert_eq!(
        out.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stdout).contains("no controller has published"));
    let local = dir.path().join("machines");
    let local_dir = local.to_str().unwrap();
    let out = apply(&reader, Some(SECRET), &["--local-dir", local_dir]);
    let m = refused(&out, &endpoint);
    has(&m, &["denied the user \"reader\"", "/drover/default"]);

    // Nothing was written: no key at all under the store, no cluster id,
    // no revision.
    let store = EtcdStore::connect(
        &etcd.url,
        EtcdOptions {
            ca: Some(certs.client.join("ca.pem")),
            cert: Some(certs.client.join("cert.pem")),
            key: Some(certs.client.join("key.pem")),
            user: Some("root".into()),
            password: Some(SECRET.into()),
            ..EtcdOptions::default()
        },
    )
    .await
    .expect("the right credentials");
    assert_eq!(store.cluster_id().await.unwrap(), None);
    assert_eq!(store.desired().await.unwrap(), None);
    let mut raw = etcd.client(Some(("root", SECRET))).await.unwrap();
    let all = raw
        .get("", Some(GetOptions::new().with_all_keys().with_keys_only()))
        .await
        .unwrap();
    let keys: Vec<String> = all
        .kvs()
        .iter()
        .map(|kv| String::from_utf8_lossy(kv.key()).into_owned())
        .collect();
    assert!(keys.is_empty(), "written: {keys:?}");
}
