//! drover as a plugin: any [`InstanceProvider`] served as an InfraKit
//! instance plugin on a unix socket (the default object `.` only).
//!
//! It answers `Handshake.Hello` (`Instance/0.6.1` and drover's extension)
//! and `Handshake.Implements` (`Instance/0.5.0`: every call reads both
//! versions' shapes), the five instance methods, and `GET /info/api.json`
//! ([`crate::info`]). A provider call runs
//! in a task of its own, so a client that stops waiting (InfraKit's timed
//! out after 15 s) does not cancel a machine half made.
//!
//! `Spec.Init` is run as given, except that the client's
//! [`ADDRESS_PLACEHOLDER`](crate::ADDRESS_PLACEHOLDER) becomes the address
//! the provider allocated. Requests are never logged: drover's extension
//! carries boot secrets.

use crate::wire::{self, DROVER_0_1_0, INSTANCE_0_5_0, INSTANCE_0_6_1};
use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::routing::{get, post};
use drover_core::model::tags;
use drover_core::template::BootContext;
use drover_spi::{InstanceProvider, ProviderError, ProvisionRequest, Secret, Unfenced};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::future::Future;
use std::os::unix::fs::{FileTypeExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use tokio::net::UnixListener;

/// Why the server could not start.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    /// Another process answers on the socket.
    #[error("{0} is in use by a running plugin")]
    InUse(PathBuf),
    /// Something that is not a socket is in the way: a file the operator
    /// meant to keep, never replaced.
    #[error(
        "{0} exists and is not a socket; only a stale socket is replaced: remove it or name another path"
    )]
    NotASocket(PathBuf),
    /// The socket could not be made or served.
    #[error("{0}: {1}")]
    Io(PathBuf, std::io::Error),
}

/// Removes the socket file when dropped (the server's exit, also on an
/// error).
#[derive(Debug)]
pub struct SocketGuard(PathBuf);

impl Drop for SocketGuard {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// Binds `socket` (owner-only: Provisions carry boot secrets), replacing
/// only a stale socket that no process answers on: a regular file, a
/// directory or a symbolic link at that path is left as it is.
pub fn bind(socket: &Path) -> Result<(UnixListener, SocketGuard), ServeError> {
    let io = |e| ServeError::Io(socket.to_path_buf(), e);
    if let Ok(meta) = std::fs::symlink_metadata(socket) {
        if !meta.file_type().is_socket() {
            return Err(ServeError::NotASocket(socket.to_path_buf()));
        }
        if std::os::unix::net::UnixStream::connect(socket).is_ok() {
            return Err(ServeError::InUse(socket.to_path_buf()));
        }
        std::fs::remove_file(socket).map_err(io)?;
    }
    let listener = UnixListener::bind(socket).map_err(io)?;
    let guard = SocketGuard(socket.to_path_buf());
    std::fs::set_permissions(socket, std::fs::Permissions::from_mode(0o600)).map_err(io)?;
    Ok((listener, guard))
}

/// Serves `provider` on `listener` until `shutdown` completes.
pub async fn serve(
    provider: Arc<dyn InstanceProvider>,
    listener: UnixListener,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let app = Router::new()
        .route("/", post(handle))
        .route(crate::info::INFO_API, get(info_api))
        .with_state(provider);
    axum::serve(listener, app)
        .with_graceful_shutdown(shutdown)
        .await
}

type Provider = Arc<dyn InstanceProvider>;

/// A JSON body, as gorilla's json2 writes it.
type JsonBody = ([(axum::http::HeaderName, &'static str); 1], Vec<u8>);

fn json_body(r: &impl Serialize) -> JsonBody {
    // A body of plain values always serialises.
    let bytes = serde_json::to_vec(r).unwrap_or_default();
    (
        [(axum::http::header::CONTENT_TYPE, "application/json")],
        bytes,
    )
}

async fn handle(State(p): State<Provider>, body: Bytes) -> JsonBody {
    let req: wire::Request = match serde_json::from_slice(&body) {
        Ok(r) => r,
        Err(e) => return json_body(&failure(Value::Null, wire::PARSE_ERROR, e.to_string())),
    };
    let id = req.id.clone();
    // In a task: a client that hangs up does not cancel the provider call.
    let answer = tokio::spawn(dispatch(p, req.method, req.params))
        .await
        .unwrap_or_else(|e| Err((wire::SERVER_ERROR, format!("the call failed: {e}"))));
    json_body(&match answer {
        Ok(result) => wire::Response {
            jsonrpc: "2.0".into(),
            result: Some(result),
            error: None,
            id,
        },
        Err((code, message)) => failure(id, code, message),
    })
}

/// InfraKit's description of a plugin, which `infrakit <plugin> info api`
/// reads.
async fn info_api() -> JsonBody {
    json_body(&crate::info::drover_info())
}

fn failure(id: Value, code: i64, message: String) -> wire::Response {
    wire::Response {
        jsonrpc: "2.0".into(),
        result: None,
        error: Some(wire::RpcError {
            code,
            message,
            data: None,
        }),
        id,
    }
}

type Answer = Result<Value, (i64, String)>;

fn params<T: DeserializeOwned>(v: Value) -> Result<T, (i64, String)> {
    serde_json::from_value(v).map_err(|e| (wire::INVALID_PARAMS, e.to_string()))
}

fn ok(v: impl Serialize) -> Answer {
    serde_json::to_value(v).map_err(|e| (wire::SERVER_ERROR, e.to_string()))
}

fn provider_error(e: ProviderError) -> (i64, String) {
    (wire::SERVER_ERROR, e.to_string())
}

/// Only the default object is served; InfraKit answers another type so.
fn default_type(kind: &str) -> Result<(), (i64, String)> {
    if kind.is_empty() {
        Ok(())
    } else {
        Err((wire::SERVER_ERROR, format!("no-plugin:{kind}")))
    }
}

async fn dispatch(p: Provider, method: String, v: Value) -> Answer {
    match method.as_str() {
        "Handshake.Hello" => hello(),
        "Handshake.Implements" => implements(),
        "Instance.Validate" => validate(params(v)?),
        "Instance.Provision" => provision(&p, params(v)?).await,
        "Instance.Label" => label(&p, params(v)?).await,
        "Instance.Destroy" => destroy(&p, params(v)?).await,
        "Instance.DescribeInstances" => describe(&p, params(v)?).await,
        other => Err((
            wire::METHOD_NOT_FOUND,
            format!("rpc: can't find method {other}"),
        )),
    }
}

fn hello() -> Answer {
    let objects = vec![wire::Object {
        name: ".".into(),
        proxy_for: String::new(),
    }];
    ok(wire::HelloResponse {
        objects: BTreeMap::from([
            (INSTANCE_0_6_1.to_string(), objects.clone()),
            (DROVER_0_1_0.to_string(), objects),
        ]),
    })
}

fn implements() -> Answer {
    let spec = |s| wire::InterfaceSpec::parse(s, None);
    ok(wire::ImplementsResponse {
        apis: vec![spec(INSTANCE_0_5_0), spec(DROVER_0_1_0)],
    })
}

fn validate(req: wire::ValidateRequest) -> Answer {
    default_type(&req.kind)?;
    // drover's providers check their properties when the spec is
    // decoded; here only the shape is theirs to refuse.
    if !(req.properties.is_object() || req.properties.is_null()) {
        return Err((wire::SERVER_ERROR, "Properties must be an object".into()));
    }
    ok(wire::OkResponse {
        kind: req.kind,
        ok: true,
    })
}

async fn provision(p: &Provider, req: wire::ProvisionRequest) -> Answer {
    default_type(&req.kind)?;
    let kind = req.kind.clone();
    let id = p
        .provision(to_provision(req)?, &Unfenced)
        .await
        .map_err(provider_error)?;
    ok(wire::ProvisionResponse { kind, id: Some(id) })
}

async fn label(p: &Provider, req: wire::LabelRequest) -> Answer {
    default_type(&req.kind)?;
    p.label(&req.instance, &req.labels, &Unfenced)
        .await
        .map_err(provider_error)?;
    ok(wire::OkResponse {
        kind: req.kind,
        ok: true,
    })
}

/// A machine already gone is destroyed: InfraKit's callers retry a destroy.
async fn destroy(p: &Provider, req: wire::DestroyRequest) -> Answer {
    default_type(&req.kind)?;
    match p.destroy(&req.instance).await {
        Ok(()) | Err(ProviderError::NotFound(_)) => ok(wire::OkResponse {
            kind: req.kind,
            ok: true,
        }),
        Err(e) => Err(provider_error(e)),
    }
}

async fn describe(p: &Provider, req: wire::DescribeRequest) -> Answer {
    default_type(&req.kind)?;
    // Its caller plans on it as a look of its own (a plugin's
    // client has no listing of its own to lay its changes over).
    let list = p.describe_fresh(&req.tags).await.map_err(provider_error)?;
    let descriptions = list
        .into_iter()
        .map(|i| wire::Description {
            logical_id: i.logical_id().map(str::to_string),
            tags: i.tags.iter().map(|(k, v)| (k.into(), v.into())).collect(),
            properties: req.properties.then(|| {
                json!(wire::DescribedState {
                    running: i.running,
                    created_ms: i.created_ms,
                })
            }),
            id: i.id,
        })
        .collect();
    ok(wire::DescribeResponse {
        kind: req.kind,
        descriptions,
    })
}

/// The provider's request from a Provision: the script as a template whose
/// only variable is the address, the context from drover's tags and
/// extension.
fn to_provision(req: wire::ProvisionRequest) -> Result<ProvisionRequest, (i64, String)> {
    const RAW_END: &str = "{% endraw %}";
    let init = &req.spec.init;
    if init.contains(RAW_END) {
        return Err((
            wire::SERVER_ERROR,
            format!("Spec.Init may not contain {RAW_END}"),
        ));
    }
    let boot_template = format!(
        "{{% raw %}}{}{RAW_END}",
        init.replace(
            crate::ADDRESS_PLACEHOLDER,
            &format!("{RAW_END}{{{{ address }}}}{{% raw %}}")
        )
    );
    let ext = req.drover.unwrap_or_default();
    let spec_tags = tags_with_logical_id(req.spec.tags, req.spec.logical_id.as_deref())?;
    let tag = |k: &str| spec_tags.get(k).cloned().unwrap_or_default();
    let boot_context = BootContext {
        role: if ext.role.is_empty() {
            "plain".into()
        } else {
            ext.role.clone()
        },
        cluster_id: tag(tags::CLUSTER),
        group: tag(tags::GROUP),
        link: tag(tags::LINK),
        logical_id: req.spec.logical_id.clone().unwrap_or_default(),
        address: String::new(),
        join_addr: String::new(),
        join_addrs: String::new(),
        init: false,
        engine_labels: ext.engine_labels.clone(),
        drover_url: String::new(),
        drover_sha256: String::new(),
    };
    let properties = match req.spec.properties {
        Value::Null => Value::Object(Default::default()),
        p => p,
    };
    Ok(ProvisionRequest {
        tags: spec_tags,
        logical_id: req.spec.logical_id,
        properties,
        engine_labels: ext.engine_labels,
        boot_template,
        boot_context,
        boot_env: ext
            .boot_env
            .into_iter()
            .map(|(k, v)| (k, Secret::new(v)))
            .collect(),
    })
}

/// The Spec's tags with its `LogicalID` among them as drover's
/// logical-id tag: drover's providers keep a machine's tags, and a
/// description's `LogicalID` is read back from that tag. InfraKit's own
/// plugins keep the whole Spec, and its group finds its pets by the
/// `LogicalID` they describe, so a plugin must give it back. A tag that
/// contradicts the `LogicalID` is refused; an empty `LogicalID` is none.
fn tags_with_logical_id(
    mut spec_tags: BTreeMap<String, String>,
    logical_id: Option<&str>,
) -> Result<BTreeMap<String, String>, (i64, String)> {
    let Some(id) = logical_id.filter(|id| !id.is_empty()) else {
        return Ok(spec_tags);
    };
    match spec_tags.get(tags::LOGICAL_ID) {
        Some(tagged) if tagged != id => Err((
            wire::INVALID_PARAMS,
            format!(
                "Spec.LogicalID {id:?} and Spec.Tags[{:?}] {tagged:?} differ: give one logical id (or leave the tag out)",
                tags::LOGICAL_ID
            ),
        )),
        Some(_) => Ok(spec_tags),
        None => {
            spec_tags.insert(tags::LOGICAL_ID.to_string(), id.to_string());
            Ok(spec_tags)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn provision(init: &str) -> wire::ProvisionRequest {
        wire::ProvisionRequest {
            kind: String::new(),
            spec: wire::Spec {
                properties: Value::Null,
                tags: BTreeMap::from([(tags::LINK.to_string(), "op-1".to_string())]),
                init: init.into(),
                logical_id: None,
                attachments: Vec::new(),
            },
            drover: None,
        }
    }

    #[test]
    fn the_script_is_kept_verbatim_but_for_the_address_the_provider_fills_in() {
        let init = "#!/bin/sh\necho {{ not a template }} ${DROVER_ADDRESS:-}:2377 {% x %}";
        let req = to_provision(provision(init)).unwrap();
        let mut ctx = req.boot_context.clone();
        ctx.address = "127.0.0.9".into();
        let script = drover_core::template::render(&req.boot_template, &ctx).unwrap();
        assert_eq!(
            script,
            "#!/bin/sh\necho {{ not a template }} 127.0.0.9:2377 {% x %}"
        );
        assert_eq!(
            (
                req.boot_context.role.as_str(),
                req.boot_context.link.as_str()
            ),
            ("plain", "op-1")
        );
        assert!(req.properties.is_object());
        assert!(to_provision(provision("{% endraw %}")).is_err());
    }

    #[test]
    fn a_logical_id_is_kept_as_drover_s_tag_and_a_contradicting_tag_refused() {
        let mut req = provision("true");
        req.spec.logical_id = Some("10.0.0.5".into());
        let kept = to_provision(req.clone()).unwrap();
        assert_eq!(
            kept.tags.get(tags::LOGICAL_ID).map(String::as_str),
            Some("10.0.0.5")
        );
        assert_eq!(kept.logical_id.as_deref(), Some("10.0.0.5"));
        assert_eq!(kept.boot_context.logical_id, "10.0.0.5");

        req.spec
            .tags
            .insert(tags::LOGICAL_ID.into(), "10.0.0.6".into());
        let (code, message) = to_provision(req).unwrap_err();
        assert_eq!(code, wire::INVALID_PARAMS);
        assert_eq!(
            message,
            "Spec.LogicalID \"10.0.0.5\" and Spec.Tags[\"drover.logical-id\"] \"10.0.0.6\" differ: give one logical id (or leave the tag out)"
        );

        let mut none = provision("true");
        none.spec.logical_id = Some(String::new());
        assert!(
            !to_provision(none)
                .unwrap()
                .tags
                .contains_key(tags::LOGICAL_ID)
        );
    }

    /// Binds `socket` inside a runtime (the listener needs its reactor).
    fn bind_in_runtime(socket: &Path) -> Result<(), ServeError> {
        tokio::runtime::Builder::new_current_thread()
            .enable_io()
            .build()
            .unwrap()
            .block_on(async { bind(socket).map(drop) })
    }

    #[test]
    fn what_is_not_a_socket_is_refused_and_left_as_it_was() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("notes.txt");
        std::fs::write(&file, "keep me").unwrap();
        let sub = dir.path().join("sub");
        std::fs::create_dir(&sub).unwrap();
        let link = dir.path().join("link");
        std::os::unix::fs::symlink(&file, &link).unwrap();
        for path in [&file, &sub, &link] {
            let e = bind_in_runtime(path).unwrap_err();
            assert!(matches!(e, ServeError::NotASocket(_)), "{e}");
            assert_eq!(
                e.to_string(),
                format!(
                    "{} exists and is not a socket; only a stale socket is replaced: remove it or name another path",
                    path.display()
                )
            );
        }
        assert_eq!(std::fs::read_to_string(&file).unwrap(), "keep me");
        assert!(sub.is_dir());
        assert!(
            std::fs::symlink_metadata(&link)
                .unwrap()
                .file_type()
                .is_symlink()
        );
    }

    #[test]
    fn a_stale_socket_is_replaced_and_removed_on_exit() {
        let dir = tempfile::tempdir().unwrap();
        let socket = dir.path().join("p.sock");
        drop(std::os::unix::net::UnixListener::bind(&socket).unwrap());
        assert!(socket.exists(), "a stale socket no process answers on");
        bind_in_runtime(&socket).unwrap();
        assert!(!socket.exists(), "the guard removes what the server made");
    }
}
