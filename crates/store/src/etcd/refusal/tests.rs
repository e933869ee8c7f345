use super::*;

fn peer(user: Option<&str>, tls: bool) -> Peer {
    Peer {
        shown: "127.0.0.1:2379, 10.0.0.2:2379".into(),
        prefix: "/drover/prod".into(),
        user: user.map(str::to_string),
        tls,
        ca: tls.then(|| "/etc/drover/ca.pem".into()),
        cert: None,
    }
}

fn refused(e: Option<StoreError>) -> String {
    match e {
        Some(StoreError::Refused(m)) => m,
        other => panic!("not a refusal: {other:?}"),
    }
}

/// etcd 3.4's own texts (crates/store/tests/credentials.rs sees them from
/// a real etcd) map to one sentence naming the endpoints and the fix.
#[test]
fn etcd_answers_about_credentials_are_refusals_naming_the_fix() {
    for (p, message, words) in [
        (
            peer(Some("root"), false),
            "etcdserver: authentication failed, invalid user ID or password",
            &["\"root\"", "?user=", "DROVER_ETCD_PASSWORD"][..],
        ),
        (
            peer(None, false),
            "etcdserver: user name is empty",
            &["requires a user", "?user=NAME", "DROVER_ETCD_PASSWORD"][..],
        ),
        (
            peer(Some("ops"), false),
            "etcdserver: permission denied",
            &["\"ops\"", "/drover/prod", "readwrite /drover/prod/"][..],
        ),
        (
            peer(None, true),
            "etcdserver: permission denied",
            &["common name", "?user=NAME"][..],
        ),
        (
            peer(Some("root"), false),
            "etcdserver: authentication is not enabled",
            &["authentication off", "remove ?user="][..],
        ),
    ] {
        let m = refused(answered(&p, message));
        assert!(
            m.starts_with("etcd at 127.0.0.1:2379, 10.0.0.2:2379 "),
            "{m}"
        );
        for w in words {
            assert!(m.contains(w), "{w:?} not in {m}");
        }
        assert_eq!(m.lines().count(), 1, "{m}");
    }
    // Not about credentials: retried.
    assert!(answered(&peer(None, false), "etcdserver: no leader").is_none());
    assert!(answered(&peer(None, false), "etcdserver: request timed out").is_none());
}

#[test]
fn tls_refusals_name_the_option_to_fix() {
    let m = refused(Some(server_not_trusted(&peer(None, true), "BadSignature")));
    assert!(
        m.contains("?ca=/etc/drover/ca.pem") && m.contains("--cert-file"),
        "{m}"
    );
    let m = refused(Some(server_not_trusted(
        &peer(None, false),
        "UnknownIssuer",
    )));
    assert!(m.contains("names no CA: add ?ca=FILE"), "{m}");
    let m = refused(Some(client_certificate_refused(
        &peer(None, true),
        "alert BadCertificate",
    )));
    assert!(m.contains("requires a client certificate") && m.contains("?cert=FILE&key=FILE"));
    let mut with_cert = peer(None, true);
    with_cert.cert = Some("/etc/drover/client.pem".into());
    let m = refused(Some(client_certificate_refused(
        &with_cert,
        "alert BadCertificate",
    )));
    assert!(m.contains("refused the client certificate ?cert=/etc/drover/client.pem"));
    assert!(is_certificate_alert("BadCertificate") && !is_certificate_alert("HandshakeFailure"));
}
