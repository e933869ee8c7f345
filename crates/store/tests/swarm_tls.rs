//! The swarm store reaches a remote engine the way the docker CLI does:
//! `tcp://` with TLS when `DOCKER_TLS_VERIFY` is set, the client
//! certificates from `DOCKER_CERT_PATH`; and says plainly what is wrong
//! when the setting cannot work. Each case passes its docker environment
//! explicitly (`DockerEnv`): the process environment is shared by every
//! thread of the test binary.

mod support;

use drover_engine::DockerEnv;
use drover_spi::{Provenance, Store, StoreError};
use drover_store::testkit::TestCerts;
use drover_store::{SwarmOptions, SwarmStore};
use std::path::Path;

const ADDR: &str = "127.0.97.1";

/// The options a process with `DOCKER_HOST=tcp://ADDR:2376`, `DOCKER_TLS_VERIFY`
/// (when `verify`) and `DOCKER_CERT_PATH=certs` would get.
fn from_env(verify: bool, certs: &Path) -> SwarmOptions {
    SwarmOptions {
        docker_env: Some(DockerEnv {
            host: Some(format!("tcp://{ADDR}:2376")),
            tls_verify: verify,
            cert_path: Some(certs.to_path_buf()),
        }),
        ..SwarmOptions::default()
    }
}

fn bad_address(r: Result<SwarmStore, StoreError>) -> String {
    match r {
        Err(StoreError::BadAddress(m)) => m,
        Err(e) => panic!("expected a bad address, got {e}"),
        Ok(_) => panic!("expected a bad address, got a store"),
    }
}

#[tokio::test]
async fn swarm_store_reaches_a_tls_engine_through_docker_host() {
    let dir = tempfile::tempdir().unwrap();
    let certs = TestCerts::generate(dir.path(), ADDR);
    let d = support::Dockerd::start_swarm_tls(ADDR, &certs).await;

    // DOCKER_HOST=tcp://…:2376 DOCKER_TLS_VERIFY=1 DOCKER_CERT_PATH=client/
    let tls = SwarmStore::connect_with(None, from_env(true, &certs.client))
        .await
        .expect("the swarm store over TLS");
    tls.init_cluster("c-tls").await.unwrap();
    let who = Provenance {
        who: "op@h".into(),
        at_ms: 1,
        message: "over TLS".into(),
    };
    let rev = tls.commit(0, &support::spec(2), who, false).await.unwrap();

    // The same engine's own socket sees the commit: the TLS client reached it.
    let local = SwarmStore::connect(Some(&d.endpoint)).await.unwrap();
    let desired = local.desired().await.unwrap().expect("a desired revision");
    assert_eq!(
        (desired.rev, desired.provenance.message.as_str()),
        (rev, "over TLS")
    );
    assert_eq!(local.cluster_id().await.unwrap().as_deref(), Some("c-tls"));

    // https:// asks for TLS by itself, without DOCKER_TLS_VERIFY.
    let https = SwarmStore::connect_with(
        Some(&format!("https://{ADDR}:2376")),
        from_env(false, &certs.client),
    )
    .await
    .expect("the swarm store over https://");
    assert_eq!(https.desired().await.unwrap().map(|r| r.rev), Some(rev));

    // Without DOCKER_TLS_VERIFY the client speaks plain HTTP to the TLS port.
    let m = bad_address(SwarmStore::connect_with(None, from_env(false, &certs.client)).await);
    assert!(
        m.contains(&format!("tcp://{ADDR}:2376")) && m.contains("DOCKER_TLS_VERIFY=1"),
        "{m}"
    );

    // A DOCKER_CERT_PATH without the client's files: the missing one is named.
    let m = bad_address(
        SwarmStore::connect_with(None, from_env(true, &certs.server.join("none"))).await,
    );
    let missing = certs.server.join("none").join("key.pem");
    assert!(
        m.contains(&missing.display().to_string()) && m.contains("DOCKER_CERT_PATH"),
        "{m}"
    );
}
