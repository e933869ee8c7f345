//! The default store is the swarm the docker CLI would reach: with
//! `DROVER_STORE` unset, `drover` follows `DOCKER_HOST=tcp://…`,
//! `DOCKER_TLS_VERIFY` and `DOCKER_CERT_PATH` to a TLS engine, and exits 2
//! with one clear sentence when those settings cannot work. The binary runs
//! as a subprocess with its own environment.

use drover_spi::{Provenance, Revision, Store};
use drover_store::SwarmStore;
use drover_store::testkit::{Dockerd, TestCerts};
use std::path::Path;
use std::process::{Command, Output, Stdio};

const ADDR: &str = "127.0.97.2";

/// `drover history --output json` with only the docker CLI's variables set.
fn history(tls_verify: bool, cert_path: &Path) -> Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_drover"));
    cmd.args(["history", "--output", "json"])
        .env_remove("DROVER_STORE")
        .env_remove("DOCKER_TLS_VERIFY")
        .env_remove("DOCKER_CONFIG")
        .env("DOCKER_HOST", format!("tcp://{ADDR}:2376"))
        .env("DOCKER_CERT_PATH", cert_path)
        .stdin(Stdio::null());
    if tls_verify {
        cmd.env("DOCKER_TLS_VERIFY", "1");
    }
    cmd.output().expect("run drover")
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[tokio::test]
async fn the_default_store_follows_docker_host_with_tls() {
    let dir = tempfile::tempdir().unwrap();
    let certs = TestCerts::generate(dir.path(), ADDR);
    let d = Dockerd::start_swarm_tls(ADDR, &certs).await;
    let local = SwarmStore::connect(Some(&d.endpoint)).await.unwrap();
    local.init_cluster("c-tls").await.unwrap();
    let spec = drover_core::spec::parse_str(
        "groups:\n- name: web\n  role: worker\n  allocation: {size: 1}\n  instance: {provider: local}\n",
    )
    .spec
    .expect("valid spec");
    let who = Provenance {
        who: "op@h".into(),
        at_ms: 1,
        message: "seen over TLS".into(),
    };
    local.commit(0, &spec, who, false).await.unwrap();

    let out = history(true, &certs.client);
    assert!(out.status.success(), "{}", stderr(&out));
    let revs: Vec<Revision> = serde_json::from_slice(&out.stdout).expect("history JSON");
    assert_eq!(revs.len(), 1);
    assert_eq!(revs[0].provenance.message, "seen over TLS");

    // Plain HTTP to the TLS port: bad input, and the fix is named.
    let out = history(false, &certs.client);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("DOCKER_TLS_VERIFY=1"), "{err}");

    // A certificate directory without the client's files: the missing one is named.
    let empty = dir.path().join("empty");
    std::fs::create_dir(&empty).unwrap();
    let out = history(true, &empty);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains(&empty.join("key.pem").display().to_string()),
        "{err}"
    );
    assert!(!err.contains("panicked"), "{err}");
}
