//! Credentials etcd refuses, against a real etcd (Debian's 3.4) on free
//! loopback ports: each is [`StoreError::Refused`] (not transient: a
//! controller would otherwise retry it for ever), or `BadAddress` for a TLS
//! file drover cannot use, one sentence naming the endpoint and the option
//! to fix, and never the password.

use drover_spi::{Provenance, Store, StoreError};
use drover_store::testkit::{Etcd, TestCerts};
use drover_store::{EtcdOptions, EtcdStore};
use etcd_client::Permission;
use std::path::Path;

mod support;

/// The password of every user here, so a message quoting it is caught.
const SECRET: &str = "s3cret-Pa55word";

fn user(name: &str, password: &str) -> EtcdOptions {
    EtcdOptions {
        user: Some(name.into()),
        password: Some(password.into()),
        ..EtcdOptions::default()
    }
}

/// TLS options from `dir` (a `TestCerts` side: `ca.pem`, `cert.pem`,
/// `key.pem`); `ca`/`identity` say which to give.
fn tls(dir: &Path, ca: bool, identity: bool) -> EtcdOptions {
    EtcdOptions {
        ca: ca.then(|| dir.join("ca.pem")),
        cert: identity.then(|| dir.join("cert.pem")),
        key: identity.then(|| dir.join("key.pem")),
        ..EtcdOptions::default()
    }
}

/// The refusal's message, after checking its kind, that it is one line
/// naming the endpoint, and that no password is in it.
async fn refused(url: &str, options: EtcdOptions) -> String {
    let e = match EtcdStore::connect(url, options).await {
        Err(e) => e,
        Ok(_) => panic!("{url}: connected"),
    };
    let StoreError::Refused(m) = &e else {
        panic!("{url}: not a refusal: {e:?}");
    };
    assert!(!e.is_transient(), "{m}");
    check_sentence(url, m);
    m.clone()
}

fn check_sentence(url: &str, m: &str) {
    eprintln!("message: {m}");
    let endpoint = url.split_once("://").unwrap().1;
    assert!(m.contains(&format!("etcd at {endpoint}")), "{m}");
    assert_eq!(m.lines().count(), 1, "{m}");
    assert!(!m.contains(SECRET), "the password is in: {m}");
    for chain in ["source:", "Status {", "transport error"] {
        assert!(!m.contains(chain), "library error chain in: {m}");
    }
}

fn has(m: &str, words: &[&str]) {
    for w in words {
        assert!(m.contains(w), "{w:?} not in: {m}");
    }
}

fn prov() -> Provenance {
    Provenance {
        who: "op@h".into(),
        at_ms: 1,
        message: "m".into(),
    }
}

/// Authentication on a plain etcd: a wrong password, a user without
/// password, no user, a user without a grant on the prefix, and a user
/// who may read but not write, each refused for what it is.
#[tokio::test]
async fn refused_users_are_one_sentence_naming_what_to_fix() {
    let etcd = Etcd::start().await;
    let url = etcd.url.as_str();
    etcd.enable_auth(
        SECRET,
        &[
            (
                "elsewhere",
                SECRET,
                Some(Permission::read_write("/elsewhere/").with_prefix()),
            ),
            (
                "reader",
                SECRET,
                Some(Permission::read("/drover/default/").with_prefix()),
            ),
        ],
    )
    .await;
    // The right credentials work: what follows is refused for itself.
    let root = EtcdStore::connect(url, user("root", SECRET)).await.unwrap();
    assert_eq!(root.desired().await.unwrap(), None);

    let m = refused(url, user("root", &format!("{SECRET}x"))).await;
    has(
        &m,
        &[
            "refused the user \"root\"",
            "authentication failed",
            "?user=",
            "DROVER_ETCD_PASSWORD",
        ],
    );
    let m = refused(url, user("nobody", SECRET)).await;
    has(
        &m,
        &["refused the user \"nobody\"", "authentication failed"],
    );

    let no_password = EtcdOptions {
        password: None,
        ..user("root", SECRET)
    };
    let m = refused(url, no_password).await;
    has(&m, &["\"root\"", "DROVER_ETCD_PASSWORD is not set"]);

    let m = refused(url, EtcdOptions::default()).await;
    has(
        &m,
        &["requires a user", "?user=NAME", "DROVER_ETCD_PASSWORD"],
    );

    let m = refused(url, user("elsewhere", SECRET)).await;
    has(
        &m,
        &[
            "denied the user \"elsewhere\" access to the prefix /drover/default",
            "readwrite /drover/default/",
        ],
    );

    // May read, may not write: opened, and the first write is refused,
    // not retried; nothing was written.
    let reader = EtcdStore::connect(url, user("reader", SECRET))
        .await
        .unwrap();
    let e = reader
        .commit(0, &support::spec(1), prov(), false)
        .await
        .expect_err("a read-only user committed");
    let StoreError::Refused(m) = &e else {
        panic!("not a refusal: {e:?}");
    };
    check_sentence(url, m);
    has(m, &["denied the user \"reader\"", "/drover/default"]);
    assert_eq!(root.desired().await.unwrap(), None);
}

/// Two certificate sets for 127.0.0.1 under `dir`, each of its own CA:
/// etcd's and a stranger's.
fn two_cas(dir: &Path) -> (TestCerts, TestCerts) {
    let (a, b) = (dir.join("a"), dir.join("b"));
    std::fs::create_dir_all(&a).unwrap();
    std::fs::create_dir_all(&b).unwrap();
    (
        TestCerts::generate(&a, "127.0.0.1"),
        TestCerts::generate(&b, "127.0.0.1"),
    )
}

/// etcd with `--client-cert-auth`: no client certificate, one from another
/// CA, a CA that did not sign etcd's certificate, no CA at all, a user
/// while authentication is off; then, with authentication on, a wrong
/// password and no user over TLS.
#[tokio::test]
async fn refused_certificates_are_one_sentence_naming_what_to_fix() {
    let dir = tempfile::tempdir().unwrap();
    let (ours, other) = two_cas(dir.path());
    let etcd = Etcd::start_tls(&ours).await;
    let url = etcd.url.as_str();
    EtcdStore::connect(url, tls(&ours.client, true, true))
        .await
        .expect("the right certificates");

    // etcd refuses the client's certificate after the client finished its
    // TLS 1.3 handshake: the client sees an alert or only "connection
    // closed", by timing. Every try must tell the same.
    for _ in 0..5 {
        let m = refused(url, tls(&ours.client, true, false)).await;
        has(
            &m,
            &[
                "requires a client certificate",
                "?cert=FILE&key=FILE",
                "--trusted-ca-file",
            ],
        );
        let m = refused(url, tls(&other.client, false, true).with_ca(&ours.client)).await;
        has(
            &m,
            &[
                &format!(
                    "refused the client certificate ?cert={}",
                    other.client.join("cert.pem").display()
                ),
                "--trusted-ca-file",
            ],
        );
    }
    let m = refused(url, tls(&ours.client, false, true).with_ca(&other.client)).await;
    has(
        &m,
        &[
            &format!(
                "the CA in ?ca={} did not sign",
                other.client.join("ca.pem").display()
            ),
            "--cert-file",
        ],
    );
    let m = refused(url, tls(&ours.client, false, true)).await;
    has(&m, &["names no CA: add ?ca=FILE", "UnknownIssuer"]);

    let m = refused(
        url,
        EtcdOptions {
            user: Some("root".into()),
            password: Some(SECRET.into()),
            ..tls(&ours.client, true, true)
        },
    )
    .await;
    has(&m, &["authentication off", "\"root\"", "remove ?user="]);

    etcd.enable_auth(SECRET, &[]).await;
    let with = |password: &str| EtcdOptions {
        user: Some("root".into()),
        password: Some(password.into()),
        ..tls(&ours.client, true, true)
    };
    EtcdStore::connect(url, with(SECRET))
        .await
        .expect("the right certificates and password");
    let m = refused(url, with(&format!("x{SECRET}"))).await;
    has(&m, &["refused the user \"root\"", "DROVER_ETCD_PASSWORD"]);
    // No user: etcd takes the certificate's common name (`drover`) for one.
    let m = refused(url, tls(&ours.client, true, true)).await;
    has(
        &m,
        &[
            "denied access to the prefix /drover/default",
            "common name",
            "?user=NAME",
        ],
    );
}

/// TLS asked of a plain etcd, and plain HTTP to a TLS-only one.
#[tokio::test]
async fn tls_or_not_the_wrong_way_round_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let certs = TestCerts::generate(dir.path(), "127.0.0.1");
    let (plain, secure) = tokio::join!(Etcd::start(), Etcd::start_tls(&certs));

    let url = plain.url.replace("etcd://", "etcds://");
    let m = refused(&url, tls(&certs.client, true, true)).await;
    has(&m, &["answers without TLS", "write etcd://"]);

    let url = secure.url.replace("etcds://", "etcd://");
    let m = refused(&url, EtcdOptions::default()).await;
    has(&m, &["answers only TLS", "write etcds://", "?ca=FILE"]);
}

/// TLS files drover cannot use are bad input naming the option, found
/// before anything is dialled (nothing listens on the port).
#[tokio::test]
async fn unusable_tls_files_name_their_option() {
    let dir = tempfile::tempdir().unwrap();
    let (ours, other) = two_cas(dir.path());
    let garbage = dir.path().join("garbage.pem");
    std::fs::write(&garbage, "not a certificate\n").unwrap();
    let url = format!("etcds://127.0.0.1:{}", drover_store::testkit::free_port());
    let bad = |options: EtcdOptions| {
        let url = url.clone();
        async move {
            match EtcdStore::connect(&url, options).await {
                Err(StoreError::BadAddress(m)) => {
                    check_sentence(&url, &m);
                    m
                }
                other => panic!("not bad input: {other:?}"),
            }
        }
    };
    let missing = dir.path().join("missing.pem");
    let m = bad(EtcdOptions {
        ca: Some(missing.clone()),
        ..EtcdOptions::default()
    })
    .await;
    has(
        &m,
        &[
            &format!("cannot read ?ca={}", missing.display()),
            "No such file",
        ],
    );
    let m = bad(EtcdOptions {
        ca: Some(garbage.clone()),
        ..EtcdOptions::default()
    })
    .await;
    has(
        &m,
        &[&format!(
            "?ca={} holds no PEM certificate",
            garbage.display()
        )],
    );
    let m = bad(EtcdOptions {
        key: Some(ours.client.join("ca.pem")),
        ..tls(&ours.client, true, true)
    })
    .await;
    has(&m, &["holds no PEM private key"]);
    let m = bad(EtcdOptions {
        key: Some(other.client.join("key.pem")),
        ..tls(&ours.client, true, true)
    })
    .await;
    has(
        &m,
        &["does not go with ?cert=", "the certificate's own key"],
    );
    let m = bad(EtcdOptions {
        key: None,
        ..tls(&ours.client, true, true)
    })
    .await;
    has(&m, &["?cert= without ?key="]);
}

/// `EtcdOptions` with another CA file.
trait WithCa {
    fn with_ca(self, dir: &Path) -> EtcdOptions;
}

impl WithCa for EtcdOptions {
    fn with_ca(self, dir: &Path) -> EtcdOptions {
        EtcdOptions {
            ca: Some(dir.join("ca.pem")),
            ..self
        }
    }
}
