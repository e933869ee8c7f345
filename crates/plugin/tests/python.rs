//! A plugin in another language (`tests/plugin.py`, Python's standard
//! library only) driven by drover's client: the protocol, not drover's own
//! server, is what is tested. Also where "maybe done" is proven: a
//! Provision slower than the client's bound still makes one machine, and a
//! failing DescribeInstances is an error, never "none".

mod support;

use drover_core::model::tags;
use drover_plugin::Timeouts;
use drover_plugin::testkit::{contract, plain};
use drover_spi::{InstanceProvider, ProviderError, Secret, Unfenced};
use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;
use support::PythonPlugin;

fn cluster(id: &str) -> BTreeMap<String, String> {
    BTreeMap::from([(tags::CLUSTER.to_string(), id.to_string())])
}

fn files_containing(dir: &Path, needle: &str) -> Vec<String> {
    let mut hits = Vec::new();
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        let p = e.path();
        if p.is_dir() {
            hits.extend(files_containing(&p, needle));
        } else if std::fs::read_to_string(&p).is_ok_and(|t| t.contains(needle)) {
            hits.push(p.display().to_string());
        }
    }
    hits
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_contract_holds_with_a_python_plugin_of_either_version() {
    for api in ["0.6.1", "0.5.0"] {
        let py = PythonPlugin::start(&["--api", api]);
        let client = py.client(Timeouts::default());
        contract(&client, "c-py", |link| {
            plain("c-py", link, "#!/bin/sh\necho {{ address }}\n")
        })
        .await;
        let agreed = client.handshake().await.unwrap();
        assert!(agreed.drover, "{api}: it declares drover's extension");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_boot_script_runs_with_its_address_and_secrets_in_its_environment_only() {
    let py = PythonPlugin::start(&[]);
    let client = py.client(Timeouts::default());
    let token = "SWMTKN-1-pysecret-0123456789";
    let mut req = plain(
        "c-sec",
        "link-s",
        "#!/bin/sh\nset -eu\ntest -n \"$DROVER_JOIN_TOKEN\"\necho booted {{ group }} at {{ address }}\n",
    );
    req.boot_env = vec![("DROVER_JOIN_TOKEN".into(), Secret::new(token))];
    let id = client.provision(req, &Unfenced).await.unwrap();
    let log = std::fs::read_to_string(py.state.join(&id).join("boot.log")).unwrap();
    assert_eq!(
        log.trim(),
        "booted g at 127.0.99.10",
        "the plugin's address filled in"
    );
    assert!(
        files_containing(&py.state, token).is_empty(),
        "the token is on the plugin's disk"
    );
    client.destroy(&id).await.unwrap();
    assert!(!py.state.join(&id).exists());

    // A plugin that does not declare drover's extension never gets them.
    let plain_py = PythonPlugin::start(&["--no-drover"]);
    let client = plain_py.client(Timeouts::default());
    let mut req = plain("c-sec", "link-t", "true");
    req.boot_env = vec![("DROVER_JOIN_TOKEN".into(), Secret::new(token))];
    let refused = client.provision(req, &Unfenced).await;
    let Err(ProviderError::Permanent(why)) = refused else {
        panic!("{refused:?}");
    };
    assert!(
        why.contains("Drover/0.1.0") && why.contains("DROVER_JOIN_TOKEN"),
        "{why}"
    );
    assert!(!why.contains(token));
    assert!(client.describe(&cluster("c-sec")).await.unwrap().is_empty());
    // Without secrets it provisions as any InfraKit plugin would.
    let id = client
        .provision(plain("c-sec", "link-u", "true"), &Unfenced)
        .await
        .unwrap();
    client.destroy(&id).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_provision_slower_than_the_client_s_bound_makes_exactly_one_machine() {
    let py = PythonPlugin::start(&["--provision-delay", "3"]);
    let quick = Timeouts {
        change: Duration::from_secs(1),
        ..Timeouts::default()
    };
    let client = py.client(quick);
    let req = || plain("c-slow", "link-slow", "true");

    // No answer in time: "maybe done", an error worth retrying.
    let first = client.provision(req(), &Unfenced).await;
    assert!(
        matches!(&first, Err(ProviderError::Transient(m)) if m.contains("may have been done")),
        "{first:?}"
    );
    // The controller's retry while the call still runs: no second Provision.
    let retry = client.provision(req(), &Unfenced).await;
    assert!(
        matches!(&retry, Err(ProviderError::Transient(m)) if m.contains("may still be running")),
        "{retry:?}"
    );
    // Another client (a controller that took over) provisions the same
    // link meanwhile: the plugin's idempotence on the link holds.
    let other = py.client(Timeouts::default());
    let taken_over = other.provision(req(), &Unfenced).await.unwrap();

    tokio::time::sleep(Duration::from_millis(500)).await;
    let late = client.provision(req(), &Unfenced).await.unwrap();
    assert_eq!(late, taken_over, "one link, one machine");
    let all = client.describe(&cluster("c-slow")).await.unwrap();
    assert_eq!(all.len(), 1, "{all:?}");
    client.destroy(&late).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_describe_is_an_error_and_provisions_nothing() {
    let switch = support::short_dir();
    let fail = switch.path().join("fail-describe");
    let py = PythonPlugin::start(&["--fail-describe-file", fail.to_str().unwrap()]);
    let client = py.client(Timeouts::default());
    let id = client
        .provision(plain("c-f", "link-1", "true"), &Unfenced)
        .await
        .unwrap();

    std::fs::write(&fail, "").unwrap();
    let described = client.describe(&cluster("c-f")).await;
    assert!(
        matches!(&described, Err(ProviderError::Transient(m)) if m.contains("API is down")),
        "{described:?}"
    );
    // A Provision looks for its link first: it fails rather than guess.
    let refused = client
        .provision(plain("c-f", "link-2", "true"), &Unfenced)
        .await;
    assert!(refused.is_err(), "{refused:?}");

    std::fs::remove_file(&fail).unwrap();
    let all = client.describe(&cluster("c-f")).await.unwrap();
    assert_eq!(
        all.iter().map(|i| i.id.as_str()).collect::<Vec<_>>(),
        [id.as_str()]
    );
    client.destroy(&id).await.unwrap();
}
