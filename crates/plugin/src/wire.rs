//! The bytes on the wire: JSON-RPC 2.0 envelopes (as gorilla/rpc's `json2`
//! codec, which InfraKit uses, writes and reads them) and the instance
//! SPI's parameters and results with their Go field names. One set of
//! types serves both ends, so the client and the server cannot disagree;
//! the golden fixtures in `tests/fixtures/` pin them to InfraKit's shapes.
//!
//! Go writes a nil map or slice as `null`: every map and list here reads
//! `null` as empty.

use serde::{Deserialize, Deserializer, Serialize};
use serde_json::Value;
use std::collections::BTreeMap;

/// The instance interface of InfraKit's last release (`Handshake.Hello`).
pub const INSTANCE_0_6_1: &str = "Instance/0.6.1";
/// The instance interface before it (`Handshake.Implements`; its Destroy
/// carries no context).
pub const INSTANCE_0_5_0: &str = "Instance/0.5.0";
/// drover's extension, declared in the handshake by plugins that take
/// [`DroverExtension`] (the boot secrets among it) with a Provision.
pub const DROVER_0_1_0: &str = "Drover/0.1.0";

/// The `Context.Reason` of a Destroy that removes a machine for good, the
/// one drover sends (InfraKit's other is `rolling_update`; see `client.rs`).
pub const REASON_TERMINATE: &str = "terminate";

fn null_as_default<'de, D, T>(d: D) -> Result<T, D::Error>
where
    D: Deserializer<'de>,
    T: Default + Deserialize<'de>,
{
    Ok(Option::<T>::deserialize(d)?.unwrap_or_default())
}

/// A JSON-RPC 2.0 request (`params` is one object, as gorilla's json2).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Request {
    /// Always `"2.0"`.
    pub jsonrpc: String,
    /// `Service.Method`.
    pub method: String,
    /// The method's parameters.
    #[serde(default)]
    pub params: Value,
    /// The caller's id, echoed in the response.
    #[serde(default)]
    pub id: Value,
}

/// A JSON-RPC 2.0 error object.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RpcError {
    /// `-32000` for a plugin's own error (gorilla's `E_SERVER`), the
    /// JSON-RPC codes for protocol errors.
    pub code: i64,
    /// The plugin's message.
    pub message: String,
    /// Anything else the plugin attached.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data: Option<Value>,
}

/// JSON-RPC's "method not found".
pub const METHOD_NOT_FOUND: i64 = -32601;
/// JSON-RPC's "invalid params".
pub const INVALID_PARAMS: i64 = -32602;
/// JSON-RPC's "parse error".
pub const PARSE_ERROR: i64 = -32700;
/// gorilla's server error: the plugin's method returned an error.
pub const SERVER_ERROR: i64 = -32000;

/// A JSON-RPC 2.0 response: `result` or `error`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Response {
    /// Always `"2.0"`.
    pub jsonrpc: String,
    /// The answer, when the call succeeded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result: Option<Value>,
    /// Why it failed, when it did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<RpcError>,
    /// The request's id.
    #[serde(default)]
    pub id: Value,
}

/// One object behind a plugin's socket (`Name` `.` is the default one).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Object {
    /// `.` or the type's name.
    #[serde(rename = "Name")]
    pub name: String,
    /// The plugin this object proxies for, if any.
    #[serde(rename = "ProxyFor", default)]
    pub proxy_for: String,
}

/// `Handshake.Hello`'s result: objects by interface (`Instance/0.6.1`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HelloResponse {
    /// The interfaces and the objects implementing each.
    #[serde(rename = "Objects", deserialize_with = "null_as_default")]
    pub objects: BTreeMap<String, Vec<Object>>,
}

/// An interface as `Handshake.Implements` and `/info/api.json` list it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct InterfaceSpec {
    /// `Instance`.
    #[serde(rename = "Name")]
    pub name: String,
    /// `0.5.0`.
    #[serde(rename = "Version")]
    pub version: String,
    /// A "subclass" name (InfraKit from 0.6 writes it, empty; 0.5 has no
    /// such field, so `Handshake.Implements` leaves it out).
    #[serde(rename = "Sub", default, skip_serializing_if = "Option::is_none")]
    pub sub: Option<String>,
}

impl InterfaceSpec {
    /// `Name/Version` as the handshake spells it (`Instance/0.6.1`).
    pub fn parse(spec: &str, sub: Option<&str>) -> InterfaceSpec {
        let (name, version) = spec.split_once('/').unwrap_or((spec, ""));
        InterfaceSpec {
            name: name.into(),
            version: version.into(),
            sub: sub.map(str::to_string),
        }
    }
}

/// `Handshake.Implements`'s result (InfraKit 0.5).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ImplementsResponse {
    /// The interfaces the plugin implements.
    #[serde(rename = "APIs", deserialize_with = "null_as_default")]
    pub apis: Vec<InterfaceSpec>,
}

/// `Instance.Validate`'s parameters.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ValidateRequest {
    /// The typed object (`""`: the default one).
    #[serde(rename = "Type", default)]
    pub kind: String,
    /// The group's `instance.properties`.
    #[serde(rename = "Properties", default)]
    pub properties: Value,
}

/// The result of Validate, Label and Destroy.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OkResponse {
    /// The type the plugin answered for.
    #[serde(rename = "Type", default)]
    pub kind: String,
    /// True when done.
    #[serde(rename = "OK", default)]
    pub ok: bool,
}

/// A network or volume to attach (drover sends none).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Attachment {
    /// The attachment's id.
    #[serde(rename = "ID")]
    pub id: String,
    /// Its kind.
    #[serde(rename = "Type")]
    pub kind: String,
}

/// The machine to make (`instance.Spec`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Spec {
    /// The group's opaque `instance.properties`.
    #[serde(rename = "Properties", default)]
    pub properties: Value,
    /// Every drover tag (cluster, group, link, config...).
    #[serde(rename = "Tags", default, deserialize_with = "null_as_default")]
    pub tags: BTreeMap<String, String>,
    /// The rendered boot script, secrets never in it.
    #[serde(rename = "Init", default, deserialize_with = "null_as_default")]
    pub init: String,
    /// The slot's logical id (pets).
    #[serde(rename = "LogicalID", default)]
    pub logical_id: Option<String>,
    /// Attachments (always empty from drover).
    #[serde(rename = "Attachments", default, deserialize_with = "null_as_default")]
    pub attachments: Vec<Attachment>,
}

/// drover's extension of a Provision, sent only to plugins that declare
/// [`DROVER_0_1_0`]: what drover's own providers need beyond the
/// InfraKit spec. `BootEnv` holds secrets: a plugin must put them in the
/// boot script's environment only, never on disk, in logs or in argv.
#[derive(Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct DroverExtension {
    /// `manager`, `worker` or `plain`.
    #[serde(rename = "Role", default)]
    pub role: String,
    /// Labels the machine's engine must carry (`drover.link` among them).
    #[serde(rename = "EngineLabels", default, deserialize_with = "null_as_default")]
    pub engine_labels: BTreeMap<String, String>,
    /// The boot script's secret environment (`DROVER_JOIN_TOKEN`...).
    #[serde(rename = "BootEnv", default, deserialize_with = "null_as_default")]
    pub boot_env: BTreeMap<String, String>,
}

impl std::fmt::Debug for DroverExtension {
    /// Names the secret variables, never their values.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DroverExtension")
            .field("role", &self.role)
            .field("engine_labels", &self.engine_labels)
            .field("boot_env", &self.boot_env.keys().collect::<Vec<_>>())
            .finish()
    }
}

/// `Instance.Provision`'s parameters.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ProvisionRequest {
    /// The typed object.
    #[serde(rename = "Type", default)]
    pub kind: String,
    /// The machine.
    #[serde(rename = "Spec")]
    pub spec: Spec,
    /// drover's extension (only to plugins that declare it).
    #[serde(rename = "Drover", default, skip_serializing_if = "Option::is_none")]
    pub drover: Option<DroverExtension>,
}

/// `Instance.Provision`'s result.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProvisionResponse {
    /// The type the plugin answered for.
    #[serde(rename = "Type", default)]
    pub kind: String,
    /// The new machine's id (`null` only on error).
    #[serde(rename = "ID", default)]
    pub id: Option<String>,
}

/// `Instance.Label`'s parameters.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LabelRequest {
    /// The typed object.
    #[serde(rename = "Type", default)]
    pub kind: String,
    /// The machine's id.
    #[serde(rename = "Instance")]
    pub instance: String,
    /// Tags to add or change.
    #[serde(rename = "Labels", default, deserialize_with = "null_as_default")]
    pub labels: BTreeMap<String, String>,
}

/// Why a machine is destroyed (0.6.1).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Context {
    /// [`REASON_TERMINATE`] or `rolling_update`.
    #[serde(rename = "Reason", default)]
    pub reason: String,
}

/// `Instance.Destroy`'s parameters; `Context` is absent in 0.5.0.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DestroyRequest {
    /// The typed object.
    #[serde(rename = "Type", default)]
    pub kind: String,
    /// The machine's id.
    #[serde(rename = "Instance")]
    pub instance: String,
    /// Why (0.6.1 only).
    #[serde(rename = "Context", default, skip_serializing_if = "Option::is_none")]
    pub context: Option<Context>,
}

/// `Instance.DescribeInstances`'s parameters.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DescribeRequest {
    /// The typed object.
    #[serde(rename = "Type", default)]
    pub kind: String,
    /// Every machine carrying all of these tags.
    #[serde(rename = "Tags", default, deserialize_with = "null_as_default")]
    pub tags: BTreeMap<String, String>,
    /// Whether to include each machine's `Properties`.
    #[serde(rename = "Properties", default)]
    pub properties: bool,
}

/// One machine as a plugin describes it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Description {
    /// Its id.
    #[serde(rename = "ID")]
    pub id: String,
    /// Its logical id, if any.
    #[serde(rename = "LogicalID", default)]
    pub logical_id: Option<String>,
    /// Its tags.
    #[serde(rename = "Tags", default, deserialize_with = "null_as_default")]
    pub tags: BTreeMap<String, String>,
    /// Plugin-specific detail; drover reads [`DescribedState`] from it.
    #[serde(
        rename = "Properties",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub properties: Option<Value>,
}

/// What drover reads from a description's `Properties` when present (its
/// own server writes them): whether the machine runs, when it was made.
/// A plugin that says nothing has its machines read as running.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct DescribedState {
    /// False when the plugin knows the machine stopped.
    #[serde(default = "yes")]
    pub running: bool,
    /// Creation time, ms since the Unix epoch.
    #[serde(default)]
    pub created_ms: u64,
}

fn yes() -> bool {
    true
}

/// `Instance.DescribeInstances`'s result. `Descriptions` must be there
/// (`null` is Go's empty list): an answer without it is not "none".
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DescribeResponse {
    /// The type the plugin answered for.
    #[serde(rename = "Type", default)]
    pub kind: String,
    /// The machines.
    #[serde(rename = "Descriptions", deserialize_with = "null_as_default")]
    pub descriptions: Vec<Description>,
}
