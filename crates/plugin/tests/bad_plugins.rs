//! Plugins that are not, or misbehave: each is a clear error naming the
//! plugin, and none is ever read as "no machines" (so nothing is destroyed
//! on its account).

mod support;

use drover_core::model::tags;
use drover_plugin::Timeouts;
use drover_spi::{InstanceProvider, ProviderError, Unfenced};
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};
use support::{FakePlugin, Reply, fixture};

fn ours() -> BTreeMap<String, String> {
    BTreeMap::from([(tags::CLUSTER.to_string(), "c1".to_string())])
}

fn hello() -> Reply {
    Reply::Json(fixture("0.6.1/hello")["response"].clone())
}

fn result(v: Value) -> Reply {
    Reply::Json(json!({"jsonrpc": "2.0", "result": v}))
}

/// A plugin answering the handshake well and everything else by `rest`.
fn after_hello(rest: impl Fn(&Value) -> Reply + Send + Sync + 'static) -> FakePlugin {
    FakePlugin::start(Arc::new(move |req: &Value| match req["method"].as_str() {
        Some("Handshake.Hello") => hello(),
        _ => rest(req),
    }))
}

/// `describe` fails permanently or transiently, naming the plugin, and
/// nothing asked the plugin to destroy anything.
async fn describe_fails(
    plugin: &FakePlugin,
    client: &dyn InstanceProvider,
    want: &str,
) -> ProviderError {
    let e = client
        .describe(&ours())
        .await
        .expect_err("never an empty list");
    let text = e.to_string();
    assert!(
        text.contains("plugin fake") && text.contains(want),
        "{text}"
    );
    assert!(plugin.calls("Instance.Destroy").is_empty());
    e
}

#[tokio::test]
async fn a_socket_that_is_not_a_plugin() {
    let plugin = FakePlugin::start(Arc::new(|_: &Value| {
        Reply::Garbage("SSH-2.0-OpenSSH_9.6\r\n")
    }));
    let client = plugin.client("fake", Timeouts::default());
    let e = describe_fails(&plugin, &client, "is not an InfraKit plugin").await;
    assert!(matches!(e, ProviderError::Permanent(_)), "{e:?}");
}

#[tokio::test]
async fn a_wrong_handshake_and_a_version_mismatch() {
    let flavor = FakePlugin::start(Arc::new(|_: &Value| {
        result(json!({"Objects": {"Flavor/0.6.1": [{"Name": ".", "ProxyFor": ""}]}}))
    }));
    let e = describe_fails(
        &flavor,
        &flavor.client("fake", Timeouts::default()),
        "implements [\"Flavor/0.6.1\"], not Instance/0.6.1",
    )
    .await;
    assert!(matches!(e, ProviderError::Permanent(_)), "{e:?}");

    let old = FakePlugin::start(Arc::new(|req: &Value| match req["method"].as_str() {
        Some("Handshake.Implements") => {
            result(json!({"APIs": [{"Name": "Instance", "Version": "0.4.0"}]}))
        }
        _ => Reply::Http(400, "rpc: can't find method\n".into()),
    }));
    describe_fails(
        &old,
        &old.client("fake", Timeouts::default()),
        "implements [\"Instance/0.4.0\"]",
    )
    .await;
}

#[tokio::test]
async fn malformed_json_in_the_handshake_or_an_answer() {
    let garbled = FakePlugin::start(Arc::new(|_: &Value| {
        Reply::Http(200, "{\"jsonrpc\": \"2.0\", \"res".into())
    }));
    describe_fails(
        &garbled,
        &garbled.client("fake", Timeouts::default()),
        "Handshake.Implements answered malformed",
    )
    .await;

    // Descriptions missing is not "none"; a machine listed twice is garbled.
    let partial = after_hello(|_| result(json!({"Type": ""})));
    let e = describe_fails(
        &partial,
        &partial.client("fake", Timeouts::default()),
        "missing field `Descriptions`",
    )
    .await;
    assert!(matches!(e, ProviderError::Permanent(_)), "{e:?}");
    let twice = after_hello(|_| {
        result(
            json!({"Type": "", "Descriptions": [{"ID": "a", "Tags": {"drover.cluster": "c1"}}, {"ID": "a", "Tags": {"drover.cluster": "c1"}}]}),
        )
    });
    describe_fails(
        &twice,
        &twice.client("fake", Timeouts::default()),
        "listed twice",
    )
    .await;
}

#[tokio::test]
async fn a_plugin_that_ignores_the_filter_or_rewrites_tags_is_a_failed_describe() {
    // Listing another cluster's machine (the filter ignored), or drover's
    // machine under rewritten tags: either way the plugin cannot be trusted
    // to find a machine again by its link, so the answer is no answer.
    let sloppy = after_hello(|_| {
        result(json!({"Type": "", "Descriptions": [
            {"ID": "mine", "Tags": {"drover.cluster": "c1"}},
            {"ID": "theirs", "Tags": {"drover.cluster": "c2"}}
        ]}))
    });
    let client = sloppy.client("fake", Timeouts::default());
    describe_fails(&sloppy, &client, "without the tags asked for").await;
}

#[tokio::test]
async fn a_plugin_that_hangs_is_given_up_on_in_bounded_time() {
    let hung = after_hello(|_| Reply::Hang);
    let quick = Timeouts {
        call: Duration::from_millis(300),
        change: Duration::from_millis(300),
        attempts: 2,
        ..Timeouts::default()
    };
    let client = hung.client("fake", quick);
    let t0 = Instant::now();
    let e = describe_fails(&hung, &client, "got no answer").await;
    assert!(e.is_transient(), "{e:?}");
    assert!(t0.elapsed() < Duration::from_secs(3), "{:?}", t0.elapsed());
    assert_eq!(
        hung.calls("Instance.DescribeInstances").len(),
        1,
        "a describe that got no answer is the pass's answer: the next pass asks again"
    );
    let e = client.destroy("vm-1").await.unwrap_err();
    assert!(
        e.is_transient() && e.to_string().contains("may have been done"),
        "{e}"
    );
    assert_eq!(
        hung.calls("Instance.Destroy").len(),
        1,
        "a Destroy is not sent blind twice"
    );
}

#[tokio::test]
async fn a_plugin_that_dies_mid_call() {
    let dying = after_hello(|_| Reply::Die);
    let client = dying.client(
        "fake",
        Timeouts {
            attempts: 1,
            ..Timeouts::default()
        },
    );
    describe_fails(&dying, &client, "got no answer").await;
    let e = client.destroy("vm-1").await.unwrap_err();
    assert!(
        e.is_transient() && e.to_string().contains("plugin fake"),
        "{e}"
    );
}

#[tokio::test]
async fn a_plugin_that_answers_for_the_wrong_type() {
    let other = after_hello(|req| {
        result(json!({"Type": "other", "Descriptions": [], "ID": "x", "OK": true, "r": req["id"]}))
    });
    let client = other.client("fake", Timeouts::default());
    describe_fails(&other, &client, "answered for type \"other\"").await;
    let labels = BTreeMap::from([("x".to_string(), "y".to_string())]);
    assert!(client.label("vm-1", &labels, &Unfenced).await.is_err());

    // A typed object the plugin does not have.
    let typed = other.client("fake/large", Timeouts::default());
    let e = typed.describe(&ours()).await.unwrap_err();
    assert!(
        e.to_string().contains("has no instance object \"large\""),
        "{e}"
    );
}

#[tokio::test]
async fn a_destroy_is_done_only_when_the_plugin_says_ok() {
    // An error (even for a machine no longer listed: a describe without the
    // cluster's tag proves nothing), `OK: false`, or no `OK` at all: not
    // done. The next pass's describe shows whether the machine is gone.
    for answer in [
        fixture("0.6.1/error")["response"].clone(),
        json!({"jsonrpc": "2.0", "result": {"Type": "", "OK": false}, "id": 1}),
        json!({"jsonrpc": "2.0", "result": {}, "id": 1}),
    ] {
        let plugin = after_hello(move |req| match req["method"].as_str() {
            Some("Instance.Destroy") => Reply::Json(answer.clone()),
            _ => result(json!({"Type": "", "Descriptions": null})),
        });
        let client = plugin.client("fake", Timeouts::default());
        let e = client.destroy("vm-0001").await.expect_err("not done");
        assert!(e.to_string().contains("plugin fake"), "{e}");
    }
    let ok = after_hello(|_| result(json!({"Type": "", "OK": true})));
    ok.client("fake", Timeouts::default())
        .destroy("vm-0001")
        .await
        .unwrap();
}

#[tokio::test]
async fn no_socket_is_a_transient_error_naming_the_plugin() {
    let dir = support::short_dir();
    let client = drover_plugin::PluginProvider::new(
        drover_core::spec::PluginAddress::parse("gone").unwrap(),
        &dir.path().join("gone"),
        Timeouts {
            attempts: 1,
            ..Timeouts::default()
        },
    );
    let e = client.describe(&ours()).await.unwrap_err();
    assert!(
        e.is_transient() && e.to_string().contains("plugin gone"),
        "{e}"
    );
}

/// Issue 37: InfraKit's protocol cannot say whether a plugin's listing
/// may leave a machine out, so an empty pet slot must read empty for a
/// while before it is filled.
#[test]
fn a_plugins_listing_is_not_taken_as_complete() {
    let dir = support::short_dir();
    let client = drover_plugin::PluginProvider::new(
        drover_core::spec::PluginAddress::parse("any").unwrap(),
        &dir.path().join("any"),
        Timeouts::default(),
    );
    assert!(!client.listing_is_complete());
}
