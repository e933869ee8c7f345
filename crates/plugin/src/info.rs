//! `GET /info/api.json`: the description every InfraKit plugin serves of
//! itself (`pkg/rpc/server/info.go` writing `pkg/plugin.Info`), which
//! `infrakit <plugin> info api` reads. Its methods' examples are made from
//! [`wire`]'s types with empty values, as InfraKit makes them from its Go
//! types' zero values, so they show exactly what drover's server reads.

use crate::wire::{self, DROVER_0_1_0, INSTANCE_0_6_1, InterfaceSpec};
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The path InfraKit's clients ask (`rpc.URLAPI`).
pub const INFO_API: &str = "/info/api.json";

/// Who a plugin is and what it implements (`plugin.Info`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Info {
    /// The plugin's own name and version (`spi.VendorInfo`).
    #[serde(rename = "Vendor")]
    pub vendor: Option<VendorInfo>,
    /// Every interface it implements.
    #[serde(rename = "Implements")]
    pub implements: Vec<InterfaceSpec>,
    /// The interfaces with their methods (optional in InfraKit's type).
    #[serde(rename = "Interfaces", default, skip_serializing_if = "Vec::is_empty")]
    pub interfaces: Vec<InterfaceDescription>,
}

/// A plugin's vendor: a name and version, and a URL for help.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct VendorInfo {
    /// Name and version (Go embeds the spec: its fields sit at this level).
    #[serde(flatten)]
    pub spec: InterfaceSpec,
    /// Where to read more.
    #[serde(rename = "URL", default)]
    pub url: String,
}

/// One interface and its methods.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct InterfaceDescription {
    /// The interface (embedded, as in Go).
    #[serde(flatten)]
    pub spec: InterfaceSpec,
    /// Its methods, by name.
    #[serde(rename = "Methods")]
    pub methods: Vec<MethodDescription>,
}

/// One method: an example request and the response it would get.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MethodDescription {
    /// The example request.
    #[serde(rename = "Request")]
    pub request: ExampleRequest,
    /// The example response.
    #[serde(rename = "Response")]
    pub response: ExampleResponse,
}

/// A JSON-RPC request as an example (InfraKit writes the id as a string).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ExampleRequest {
    /// `2.0`.
    pub jsonrpc: String,
    /// `Instance.Provision`...
    pub method: String,
    /// The method's parameters, empty.
    pub params: Value,
    /// The example's id.
    pub id: String,
}

/// A JSON-RPC response as an example.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ExampleResponse {
    /// The method's result, empty.
    pub result: Value,
    /// The request's id.
    pub id: String,
}

/// drover's server's description of itself serving one provider.
pub fn drover_info() -> Info {
    let spec = |s| InterfaceSpec::parse(s, Some(""));
    Info {
        vendor: Some(VendorInfo {
            spec: InterfaceSpec {
                name: "drover".into(),
                version: env!("CARGO_PKG_VERSION").into(),
                sub: Some(String::new()),
            },
            url: String::new(),
        }),
        implements: vec![spec(INSTANCE_0_6_1), spec(DROVER_0_1_0)],
        interfaces: vec![InterfaceDescription {
            spec: spec(INSTANCE_0_6_1),
            methods: instance_methods(),
        }],
    }
}

/// The instance methods in Go's order (by name), each with its empty
/// request and result.
fn instance_methods() -> Vec<MethodDescription> {
    let kind = String::new;
    let ok = || wire::OkResponse {
        kind: kind(),
        ok: false,
    };
    vec![
        example(
            "DescribeInstances",
            wire::DescribeRequest {
                kind: kind(),
                tags: Default::default(),
                properties: false,
            },
            wire::DescribeResponse {
                kind: kind(),
                descriptions: Vec::new(),
            },
        ),
        example(
            "Destroy",
            wire::DestroyRequest {
                kind: kind(),
                instance: String::new(),
                context: Some(wire::Context {
                    reason: String::new(),
                }),
            },
            ok(),
        ),
        example(
            "Label",
            wire::LabelRequest {
                kind: kind(),
                instance: String::new(),
                labels: Default::default(),
            },
            ok(),
        ),
        example(
            "Provision",
            wire::ProvisionRequest {
                kind: kind(),
                spec: wire::Spec {
                    properties: Value::Null,
                    tags: Default::default(),
                    init: String::new(),
                    logical_id: None,
                    attachments: Vec::new(),
                },
                drover: None,
            },
            wire::ProvisionResponse {
                kind: kind(),
                id: None,
            },
        ),
        example(
            "Validate",
            wire::ValidateRequest {
                kind: kind(),
                properties: Value::Null,
            },
            ok(),
        ),
    ]
}

fn example(method: &str, params: impl Serialize, result: impl Serialize) -> MethodDescription {
    let id = "1".to_string();
    MethodDescription {
        request: ExampleRequest {
            jsonrpc: "2.0".into(),
            method: format!("Instance.{method}"),
            params: plain(params),
            id: id.clone(),
        },
        response: ExampleResponse {
            result: plain(result),
            id,
        },
    }
}

/// A value of plain fields, which always serialises.
fn plain(v: impl Serialize) -> Value {
    serde_json::to_value(v).unwrap_or_default()
}
