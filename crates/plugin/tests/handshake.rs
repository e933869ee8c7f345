//! The handshake is made once per kept agreement: not before every call
//! (a controller describes every plugin on every pass), and again only
//! after a call found the plugin's connection gone — the plugin may have
//! come back as another build. A plugin that answered with an error, or
//! that was only slow, keeps the agreement.

mod support;

use drover_core::model::tags;
use drover_plugin::Timeouts;
use drover_spi::InstanceProvider;
use serde_json::Value;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU8, Ordering};
use std::time::Duration;
use support::{FakePlugin, Reply, fixture};

/// How the fake plugin answers the next DescribeInstances.
const WELL: u8 = 0;
const ERROR: u8 = 1;
const HANG: u8 = 2;
const DIE: u8 = 3;

#[tokio::test]
async fn the_handshake_is_made_once_and_again_only_after_the_connection_broke() {
    let next = Arc::new(AtomicU8::new(WELL));
    let plugin = {
        let next = next.clone();
        FakePlugin::start(Arc::new(move |req: &Value| {
            match req["method"].as_str() {
                Some("Handshake.Hello") => {
                    return Reply::Json(fixture("0.6.1/hello")["response"].clone());
                }
                Some("Instance.DescribeInstances") => {}
                _ => return Reply::Http(400, "rpc: can't find method\n".into()),
            }
            match next.swap(WELL, Ordering::SeqCst) {
                ERROR => Reply::Json(fixture("0.6.1/error")["response"].clone()),
                HANG => Reply::Hang,
                DIE => Reply::Die,
                _ => Reply::Json(fixture("0.6.1/describe-none")["response"].clone()),
            }
        }))
    };
    let client = plugin.client(
        "fake",
        Timeouts {
            call: Duration::from_millis(300),
            attempts: 1,
            ..Timeouts::default()
        },
    );
    let ours = BTreeMap::from([(tags::CLUSTER.to_string(), "c1".to_string())]);
    let hellos = || plugin.calls("Handshake.Hello").len();
    let describes = |n: usize| {
        let (client, ours) = (&client, &ours);
        async move {
            for _ in 0..n {
                client.describe(ours).await.unwrap();
            }
        }
    };

    describes(100).await;
    assert_eq!(hellos(), 1, "one handshake for 100 describes");

    // The plugin answered (its own error), or was only slow: kept.
    for failure in [ERROR, HANG] {
        next.store(failure, Ordering::SeqCst);
        client.describe(&ours).await.expect_err("a failed describe");
        describes(10).await;
        assert_eq!(hellos(), 1, "kept after failure {failure}");
    }

    // The connection broke mid-call: the next call shakes hands again,
    // once.
    next.store(DIE, Ordering::SeqCst);
    client.describe(&ours).await.expect_err("a failed describe");
    assert_eq!(hellos(), 1, "no handshake until the next call");
    describes(50).await;
    assert_eq!(hellos(), 2, "one handshake after the broken connection");
    assert_eq!(
        plugin.calls("Instance.DescribeInstances").len(),
        100 + 2 * 11 + 1 + 50
    );
}
