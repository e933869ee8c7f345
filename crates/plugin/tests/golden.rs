//! Golden request/response fixtures (`tests/fixtures/<version>/`), written
//! from InfraKit's Go types (`pkg/rpc/instance/types.go`,
//! `pkg/spi/instance/types.go`, `pkg/rpc/handshake.go` at 0.6.1 and 0.5;
//! `*-infrakit-pet` as InfraKit's group controller sends them,
//! `info-api` as `pkg/rpc/server/info.go` writes `pkg/plugin.Info`):
//! drover's client sends exactly the fixtures' requests and reads their
//! responses; drover's server reads the fixtures' requests and answers in
//! their shapes.

mod support;

use drover_core::model::tags;
use drover_plugin::Timeouts;
use drover_spi::{InstanceProvider, ProviderError, Unfenced};
use serde_json::{Value, json};
use std::collections::BTreeMap;
use support::{FakePlugin, Reply, fixture};

/// The fixtures' Provision, as the controller asks for it.
fn provision_request(link: &str, logical_id: Option<&str>) -> drover_spi::ProvisionRequest {
    let mut req =
        drover_plugin::testkit::plain("c1", link, "#!/bin/sh\necho {{ group }} {{ address }}\n");
    req.tags.insert(tags::GROUP.into(), "web".into());
    req.boot_context.group = "web".into();
    req.properties = json!({"flavor": "small", "zone": "b"});
    if let Some(id) = logical_id {
        req.logical_id = Some(id.into());
        req.tags.insert(tags::LOGICAL_ID.into(), id.into());
    }
    req
}

/// A plugin answering with the fixtures of `version`; DescribeInstances by
/// link (the client's look before a Provision) finds nothing.
fn scripted(version: &'static str) -> FakePlugin {
    FakePlugin::start(std::sync::Arc::new(move |req: &Value| {
        let answer =
            |name: &str| Reply::Json(fixture(&format!("{version}/{name}"))["response"].clone());
        match req["method"].as_str().unwrap_or_default() {
            "Handshake.Hello" if version == "0.6.1" => answer("hello"),
            // gorilla/rpc's answer to an unknown method: a plain-text 400.
            "Handshake.Hello" => {
                Reply::Http(400, "rpc: can't find method \"Handshake.Hello\"\n".into())
            }
            "Handshake.Implements" => answer("implements"),
            "Instance.Validate" => answer("validate"),
            "Instance.Provision" if req["params"]["Spec"]["LogicalID"].is_null() => {
                answer("provision")
            }
            "Instance.Provision" => answer("provision-pet"),
            "Instance.Label" => answer("label"),
            "Instance.Destroy" => answer("destroy"),
            "Instance.DescribeInstances" if req["params"]["Tags"].get(tags::LINK).is_some() => {
                Reply::Json(fixture("0.6.1/describe-none")["response"].clone())
            }
            "Instance.DescribeInstances" => answer("describe"),
            _ => Reply::Http(400, "rpc: can't find method\n".into()),
        }
    }))
}

/// The one request for `method` equals the fixture's, but for its id.
fn sent_as_fixture(plugin: &FakePlugin, method: &str, name: &str) {
    let calls = plugin.calls(method);
    let mut want = fixture(name)["request"].clone();
    let sent = calls
        .iter()
        .find(|c| c["params"] == want["params"])
        .unwrap_or_else(|| panic!("no {method} as in {name}: sent {calls:#?}"));
    want["id"] = sent["id"].clone();
    assert_eq!(sent, &want, "{name}");
}

#[tokio::test]
async fn the_client_speaks_0_6_1_as_the_fixtures() {
    let plugin = scripted("0.6.1");
    let client = plugin.client("fake", Timeouts::default());

    let id = client
        .provision(provision_request("op-7", None), &Unfenced)
        .await
        .unwrap();
    assert_eq!(id, "vm-0001");
    let id = client
        .provision(provision_request("op-8", Some("10.0.0.5")), &Unfenced)
        .await
        .unwrap();
    assert_eq!(id, "vm-0002");
    sent_as_fixture(&plugin, "Handshake.Hello", "0.6.1/hello");
    sent_as_fixture(&plugin, "Instance.Validate", "0.6.1/validate");
    sent_as_fixture(&plugin, "Instance.Provision", "0.6.1/provision");
    sent_as_fixture(&plugin, "Instance.Provision", "0.6.1/provision-pet");
    assert_eq!(plugin.calls("Handshake.Hello").len(), 1, "one handshake");
    assert_eq!(
        plugin.calls("Instance.Validate").len(),
        1,
        "one validation per properties"
    );

    let labels = BTreeMap::from([(tags::CONFIG.to_string(), "h2".to_string())]);
    client.label("vm-0001", &labels, &Unfenced).await.unwrap();
    sent_as_fixture(&plugin, "Instance.Label", "0.6.1/label");
    client.destroy("vm-0001").await.unwrap();
    sent_as_fixture(&plugin, "Instance.Destroy", "0.6.1/destroy");

    let ours = BTreeMap::from([(tags::CLUSTER.to_string(), "c1".to_string())]);
    let listed = client.describe(&ours).await.unwrap();
    sent_as_fixture(&plugin, "Instance.DescribeInstances", "0.6.1/describe");
    assert_eq!(listed.len(), 2);
    assert_eq!(
        (
            listed[0].id.as_str(),
            listed[0].running,
            listed[0].created_ms
        ),
        ("vm-0001", true, 0)
    );
    assert_eq!(listed[1].logical_id(), Some("10.0.0.5"));
    assert_eq!(
        (listed[1].running, listed[1].created_ms),
        (false, 1_700_000_000_000)
    );
}

#[tokio::test]
async fn the_client_falls_back_to_0_5_0_whose_destroy_has_no_context() {
    let plugin = scripted("0.5.0");
    let client = plugin.client("fake", Timeouts::default());
    let id = client
        .provision(provision_request("op-7", None), &Unfenced)
        .await
        .unwrap();
    assert_eq!(id, "vm-0001");
    sent_as_fixture(&plugin, "Handshake.Implements", "0.5.0/implements");
    sent_as_fixture(&plugin, "Instance.Provision", "0.5.0/provision");
    client.destroy("vm-0001").await.unwrap();
    sent_as_fixture(&plugin, "Instance.Destroy", "0.5.0/destroy");
    let ours = BTreeMap::from([(tags::CLUSTER.to_string(), "c1".to_string())]);
    assert_eq!(client.describe(&ours).await.unwrap().len(), 2);
    sent_as_fixture(&plugin, "Instance.DescribeInstances", "0.5.0/describe");
}

#[tokio::test]
async fn a_plugin_error_object_is_a_transient_error_naming_the_plugin() {
    let plugin = FakePlugin::start(std::sync::Arc::new(|req: &Value| {
        match req["method"].as_str().unwrap_or_default() {
            "Handshake.Hello" => Reply::Json(fixture("0.6.1/hello")["response"].clone()),
            _ => Reply::Json(fixture("0.6.1/error")["response"].clone()),
        }
    }));
    let client = plugin.client("fake", Timeouts::default());
    let labels = BTreeMap::from([(tags::CONFIG.to_string(), "h2".to_string())]);
    let e = client
        .label("vm-0001", &labels, &Unfenced)
        .await
        .unwrap_err();
    sent_as_fixture(&plugin, "Instance.Label", "0.6.1/error");
    assert!(matches!(e, ProviderError::Transient(_)), "{e:?}");
    let text = e.to_string();
    assert!(
        text.contains("plugin fake (") && text.contains("quota exceeded"),
        "{text}"
    );
}

/// The keys of `v`'s objects, recursively, but inside maps whose keys are
/// data (tags, labels, objects by interface, properties); an empty list is
/// `null`, as Go writes a nil slice.
fn shape(v: &Value) -> Value {
    const DATA: &[&str] = &["Tags", "Labels", "Properties", "Objects"];
    match v {
        Value::Object(m) => Value::Object(
            m.iter()
                .map(|(k, v)| {
                    let inner = if DATA.contains(&k.as_str()) {
                        Value::Null
                    } else {
                        shape(v)
                    };
                    (k.clone(), inner)
                })
                .collect(),
        ),
        Value::Array(a) if a.is_empty() => Value::Null,
        Value::Array(a) => Value::Array(a.iter().take(1).map(shape).collect()),
        _ => Value::Null,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn drover_s_server_reads_the_fixtures_and_answers_in_their_shapes() {
    let served = support::ServedSim::start();
    let post = |name: &'static str| {
        let socket = served.socket.clone();
        async move {
            let f = fixture(name);
            let (status, answer) = support::post(&socket, &f["request"]).await;
            assert_eq!(status, 200, "{name}: {answer}");
            assert_eq!(answer["id"], f["request"]["id"], "{name}");
            (f, answer)
        }
    };
    let (_, hello) = post("0.6.1/hello").await;
    assert_eq!(
        hello["result"]["Objects"]["Instance/0.6.1"],
        json!([{"Name": ".", "ProxyFor": ""}])
    );
    assert_eq!(
        hello["result"]["Objects"]["Drover/0.1.0"],
        json!([{"Name": ".", "ProxyFor": ""}])
    );
    let (_, implements) = post("0.5.0/implements").await;
    assert_eq!(
        implements["result"]["APIs"][0],
        json!({"Name": "Instance", "Version": "0.5.0"})
    );

    for name in ["0.6.1/validate", "0.6.1/provision"] {
        let (f, answer) = post(name).await;
        assert_eq!(shape(&answer), shape(&f["response"]), "{name}: {answer}");
    }
    let (f, described) = post("0.6.1/describe").await;
    assert_eq!(
        shape(&described["result"]["Descriptions"][0]),
        shape(&f["response"]["result"]["Descriptions"][1])
    );
    let id = described["result"]["Descriptions"][0]["ID"]
        .as_str()
        .unwrap()
        .to_string();
    assert_eq!(
        described["result"]["Descriptions"][0]["Tags"][tags::LINK],
        "op-7"
    );
    assert_eq!(
        described["result"]["Descriptions"][0]["Properties"]["running"],
        true
    );

    // Label and both Destroy shapes, on the machine the sim made.
    for name in ["0.6.1/label", "0.5.0/destroy", "0.6.1/destroy"] {
        let mut f = fixture(name);
        f["request"]["params"]["Instance"] = json!(id);
        let (status, answer) = support::post(&served.socket, &f["request"]).await;
        assert_eq!(
            (status, shape(&answer)),
            (200, shape(&f["response"])),
            "{name}: {answer}"
        );
        assert_eq!(answer["result"]["OK"], true, "{name}");
    }
    let (_, after) = post("0.6.1/describe-none").await;
    assert_eq!(after["result"]["Descriptions"], json!([]));
}

/// InfraKit's group makes a pet with `Spec.LogicalID` (and its own
/// `infrakit.logical_id` tag, `pkg/controller/group/scaled.go`) and finds
/// it again by the `LogicalID` its plugin describes: drover's server gives
/// it back, with every tag it was given.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn drover_s_server_gives_back_the_logical_id_infrakit_s_group_provisioned_with() {
    let served = support::ServedSim::start();
    let made = fixture("0.6.1/provision-infrakit-pet");
    let (status, answer) = support::post(&served.socket, &made["request"]).await;
    assert_eq!(
        (status, shape(&answer)),
        (200, shape(&made["response"])),
        "{answer}"
    );
    let id = answer["result"]["ID"].clone();

    let f = fixture("0.6.1/describe-infrakit-pet");
    let (status, described) = support::post(&served.socket, &f["request"]).await;
    assert_eq!(status, 200, "{described}");
    let want = &f["response"]["result"]["Descriptions"][0];
    let got = &described["result"]["Descriptions"][0];
    assert_eq!(shape(got), shape(want), "{described}");
    assert_eq!(
        described["result"]["Descriptions"].as_array().map(Vec::len),
        Some(1)
    );
    assert_eq!(got["ID"], id);
    assert_eq!(got["LogicalID"], want["LogicalID"], "{described}");
    for (k, v) in want["Tags"].as_object().unwrap() {
        assert_eq!(&got["Tags"][k], v, "tag {k}: {described}");
    }
}

/// `infrakit <plugin> info api` reads `GET /info/api.json` as Go's
/// `plugin.Info`: drover's server answers in its shape, describing every
/// instance method InfraKit's plugins describe, each request and result
/// keyed as theirs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn drover_s_server_describes_itself_at_info_api_json_as_infrakit_plugins_do() {
    let served = support::ServedSim::start();
    let f = fixture("0.6.1/info-api");
    let path = f["request"]["path"].as_str().unwrap();
    let (status, info) = support::get(&served.socket, path).await;
    assert_eq!(status, 200, "{info}");
    let want = &f["response"];
    assert_eq!(shape(&info), shape(want), "{info:#}");
    assert_eq!(info["Vendor"]["Name"], "drover");
    assert_eq!(info["Implements"][0], want["Implements"][0]);
    assert_eq!(
        info["Implements"][1],
        json!({"Name": "Drover", "Version": "0.1.0", "Sub": ""})
    );
    let methods = |v: &Value| v["Interfaces"][0]["Methods"].as_array().unwrap().clone();
    let (got, wanted) = (methods(&info), methods(want));
    let names = |m: &[Value]| {
        m.iter()
            .map(|d| d["Request"]["method"].clone())
            .collect::<Vec<_>>()
    };
    assert_eq!(names(&got), names(&wanted));
    for (g, w) in got.iter().zip(&wanted) {
        assert_eq!(shape(g), shape(w), "{}", w["Request"]["method"]);
        // Go reads the ids into strings.
        assert!(g["Request"]["id"].is_string() && g["Response"]["id"].is_string());
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn drover_s_server_answers_bad_requests_with_json_rpc_errors() {
    let served = support::ServedSim::start();
    let call = |method: &str, params: Value| json!({"jsonrpc": "2.0", "method": method, "params": params, "id": 9});
    let (_, a) = support::post(&served.socket, &call("Instance.Nope", json!({}))).await;
    assert_eq!(a["error"]["code"], -32601, "{a}");
    let (_, a) = support::post(
        &served.socket,
        &call("Instance.Provision", json!({"Spec": 3})),
    )
    .await;
    assert_eq!(a["error"]["code"], -32602, "{a}");
    let (_, a) = support::post(
        &served.socket,
        &call("Instance.DescribeInstances", json!({"Type": "large"})),
    )
    .await;
    assert_eq!(a["error"]["message"], "no-plugin:large", "{a}");
    assert_eq!(a["id"], 9);
}

#[tokio::test]
async fn secrets_travel_only_in_drover_s_extension_never_in_the_spec() {
    let plugin = FakePlugin::start(std::sync::Arc::new(|req: &Value| {
        match req["method"].as_str().unwrap_or_default() {
            "Handshake.Hello" => Reply::Json(json!({"jsonrpc": "2.0", "result": {"Objects": {
                "Instance/0.6.1": [{"Name": ".", "ProxyFor": ""}],
                "Drover/0.1.0": [{"Name": ".", "ProxyFor": ""}]
            }}})),
            "Instance.Validate" => Reply::Json(fixture("0.6.1/validate")["response"].clone()),
            "Instance.Provision" => Reply::Json(fixture("0.6.1/provision")["response"].clone()),
            _ => Reply::Json(fixture("0.6.1/describe-none")["response"].clone()),
        }
    }));
    let client = plugin.client("fake", Timeouts::default());
    let token = "SWMTKN-1-golden-secret";
    let mut req = provision_request("op-7", None);
    req.boot_template = "#!/bin/sh\ntest -n \"$DROVER_JOIN_TOKEN\"\n".into();
    req.boot_env = vec![("DROVER_JOIN_TOKEN".into(), drover_spi::Secret::new(token))];
    client.provision(req, &Unfenced).await.unwrap();
    let sent = &plugin.calls("Instance.Provision")[0]["params"];
    assert!(!sent["Spec"].to_string().contains(token), "{sent}");
    assert_eq!(sent["Drover"]["BootEnv"]["DROVER_JOIN_TOKEN"], token);
    assert_eq!(sent["Drover"]["EngineLabels"][tags::LINK], "op-7");
    assert_eq!(sent["Drover"]["Role"], "plain");
}
