//! drover as a plugin's client: [`PluginProvider`] is an
//! [`InstanceProvider`] whose machines an InfraKit instance plugin makes.
//!
//! # Guarantees
//! - One Provision per link at a time from this client, and none while a
//!   machine carrying the link is described: a Provision that got no answer
//!   in time is "maybe done" — its call goes on in the background (the
//!   plugin's server goes on too, as InfraKit's did after its client's 15 s
//!   timeout), its late answer is remembered for the controller's retry, and
//!   until it ends every retry for that link only looks (DescribeInstances
//!   by the link tag) and never provisions again.
//! - A failed, malformed or wrong-type DescribeInstances is an error, never
//!   "no instances"; so is an answer listing a machine without every asked
//!   tag (a plugin ignoring the filter, or rewriting drover's tags, could
//!   neither keep others' machines out nor find one again by its link).
//! - A Destroy or Label is done only on `OK: true`.
//! - Boot secrets (`boot_env`) never go into `Spec.Init`, `Spec.Tags` or
//!   `Spec.Properties`: they travel only in drover's extension, and only to
//!   a plugin whose handshake declares [`wire::DROVER_0_1_0`]; a machine
//!   that needs them is refused (permanently) by any other plugin.
//! - Every error names the plugin; nothing is destroyed on a plugin's
//!   account (a failed call is reported, never read as "gone").
//!
//! # Caveats
//! - The SPI's destroy carries no reason: Destroy's `Context.Reason` is
//!   always `terminate`. drover never reuses a destroyed machine (a roll
//!   makes a new one under a new link), so to the plugin every destroy is
//!   for good: it must release everything the machine held.
//! - A plugin's machines read as running unless its description's
//!   `Properties` say `"running": false` (drover's own server says so).

mod provision;

pub use crate::error::PluginError;
use crate::rpc::{CallError, Rpc};
use crate::wire::{self, DROVER_0_1_0, INSTANCE_0_5_0, INSTANCE_0_6_1};
use async_trait::async_trait;
use drover_core::model::{Instance, tags};
use drover_core::spec::PluginAddress;
use drover_spi::{Fence, InstanceProvider, ProviderError, ProvisionRequest};
use provision::Flights;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// How long each call may take, and how often an idempotent one is tried.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Timeouts {
    /// Handshake, Validate, DescribeInstances, Label.
    pub call: Duration,
    /// Provision and Destroy: past it the call is "maybe done".
    pub change: Duration,
    /// How long a Provision that got no answer is let run in the
    /// background before its link may be provisioned again.
    pub in_flight: Duration,
    /// Attempts of a call that could not be sent, or of an idempotent one
    /// that got no answer.
    pub attempts: u32,
}

impl Default for Timeouts {
    /// InfraKit's client's 15 s for the calls that change things; a
    /// machine's whole boot (the local provider's bound) in the background.
    fn default() -> Self {
        Timeouts {
            call: Duration::from_secs(10),
            change: Duration::from_secs(15),
            in_flight: Duration::from_secs(180),
            attempts: 3,
        }
    }
}

/// What the handshake agreed on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Api {
    /// `Instance/0.6.1` (Hello): Destroy carries a context.
    V0_6_1,
    /// `Instance/0.5.0` (Implements): Destroy takes the instance only.
    V0_5_0,
}

/// The handshake's outcome, kept until a call finds the socket gone or its
/// connection broken.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Agreed {
    /// The interface version spoken.
    pub api: Api,
    /// Whether the plugin takes drover's extension (boot secrets).
    pub drover: bool,
}

/// An instance plugin as a provider of machines.
pub struct PluginProvider {
    address: PluginAddress,
    label: String,
    socket: PathBuf,
    rpc: Rpc,
    timeouts: Timeouts,
    agreed: tokio::sync::Mutex<Option<Agreed>>,
    flights: Arc<Mutex<Flights>>,
    validated: Mutex<BTreeSet<String>>,
}

impl std::fmt::Debug for PluginProvider {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PluginProvider")
            .field("plugin", &self.label)
            .field("socket", &self.socket)
            .finish()
    }
}

/// The placeholder a boot template's `address` becomes in `Spec.Init` for
/// a machine without a logical id: the plugin's machine sets
/// `DROVER_ADDRESS` (or the script finds its address itself, as the incus
/// scripts do when it is empty). drover's own server puts its provider's
/// address back in its place.
pub const ADDRESS_PLACEHOLDER: &str = "${DROVER_ADDRESS:-}";

impl PluginProvider {
    /// A client of the plugin object `address`, listening on `socket`.
    pub fn new(address: PluginAddress, socket: &Path, timeouts: Timeouts) -> PluginProvider {
        PluginProvider {
            label: format!("{address} ({})", socket.display()),
            address,
            socket: socket.to_path_buf(),
            rpc: Rpc::new(socket),
            timeouts,
            agreed: tokio::sync::Mutex::new(None),
            flights: Arc::default(),
            validated: Mutex::default(),
        }
    }

    fn kind(&self) -> String {
        self.address.kind_or_default().to_string()
    }

    fn error(&self, method: &str, e: CallError) -> PluginError {
        let (plugin, method) = (self.label.clone(), method.to_string());
        match e {
            CallError::NotSent { detail, .. } => PluginError::Unreachable {
                plugin,
                method,
                detail,
            },
            CallError::Lost(detail) => PluginError::Lost {
                plugin,
                method,
                detail,
            },
            e @ CallError::TimedOut(_) => PluginError::Lost {
                plugin,
                method,
                detail: e.to_string(),
            },
            CallError::Rpc(e) => PluginError::Refused {
                plugin,
                method,
                message: format!("{} (code {})", e.message, e.code),
            },
            CallError::Malformed(detail) => PluginError::Malformed {
                plugin,
                method,
                detail,
            },
        }
    }

    /// One call bounded by `within`, its answer decoded; a call that was
    /// not sent, or (when `idempotent`) got no answer, is tried again up to
    /// [`Timeouts::attempts`] times.
    async fn call<T: DeserializeOwned>(
        &self,
        method: &str,
        params: &impl Serialize,
        idempotent: bool,
    ) -> Result<T, PluginError> {
        let params = serde_json::to_value(params).map_err(|e| PluginError::BadRequest {
            plugin: self.label.clone(),
            detail: e.to_string(),
        })?;
        let mut attempt = 1;
        loop {
            let answer =
                tokio::time::timeout(self.timeouts.call, self.rpc.call(method, params.clone()))
                    .await
                    .unwrap_or(Err(CallError::TimedOut(self.timeouts.call)));
            self.forget_if_disconnected(&answer);
            let retry = match &answer {
                Err(CallError::NotSent { .. }) => true,
                Err(CallError::Lost(_) | CallError::TimedOut(_)) => idempotent,
                _ => false,
            };
            if retry && attempt < self.timeouts.attempts {
                attempt += 1;
                tokio::time::sleep(Duration::from_millis(200 * u64::from(attempt))).await;
                continue;
            }
            return self.decode(method, answer.map_err(|e| self.error(method, e))?);
        }
    }

    /// Ends the kept agreement after a call that could not be sent or
    /// whose connection broke: the plugin may come back as another build
    /// (another version, without drover's extension), so the next call
    /// shakes hands again. A plugin that answered, even with an error, or
    /// that is only slow keeps it: a pass over a healthy plugin sends no
    /// handshake, and a hung one is not asked to shake hands as well. The
    /// handshake itself holds the agreement while it runs (and sets it only
    /// on success), so its own calls leave it alone.
    fn forget_if_disconnected(&self, answer: &Result<Value, CallError>) {
        if matches!(answer, Err(CallError::NotSent { .. } | CallError::Lost(_)))
            && let Ok(mut agreed) = self.agreed.try_lock()
        {
            *agreed = None;
        }
    }

    fn decode<T: DeserializeOwned>(&self, method: &str, v: Value) -> Result<T, PluginError> {
        serde_json::from_value(v).map_err(|e| PluginError::Malformed {
            plugin: self.label.clone(),
            method: method.into(),
            detail: e.to_string(),
        })
    }

    fn same_type(&self, method: &str, got: &str) -> Result<(), PluginError> {
        if got == self.address.kind_or_default() {
            return Ok(());
        }
        Err(PluginError::Malformed {
            plugin: self.label.clone(),
            method: method.into(),
            detail: format!(
                "it answered for type {got:?}, drover asked {:?}",
                self.address.kind_or_default()
            ),
        })
    }

    /// The handshake: `Handshake.Hello` (0.6.1), else `Handshake.Implements`
    /// (0.5.0); done once per kept agreement: again only after a call found
    /// the socket gone or its connection broken
    /// (`forget_if_disconnected`).
    pub async fn handshake(&self) -> Result<Agreed, PluginError> {
        let mut agreed = self.agreed.lock().await;
        if let Some(a) = *agreed {
            return Ok(a);
        }
        let made = match self
            .call::<wire::HelloResponse>("Handshake.Hello", &serde_json::json!({}), true)
            .await
        {
            Ok(hello) => self.agree_hello(&hello)?,
            Err(e @ PluginError::Unreachable { .. }) => return Err(e),
            Err(hello) => match self
                .call::<wire::ImplementsResponse>(
                    "Handshake.Implements",
                    &serde_json::json!({}),
                    true,
                )
                .await
            {
                Ok(implements) => self.agree_implements(&implements)?,
                Err(implements) => {
                    return Err(PluginError::NotAPlugin {
                        plugin: self.label.clone(),
                        hello: hello.call_detail(),
                        implements: implements.call_detail(),
                    });
                }
            },
        };
        *agreed = Some(made);
        Ok(made)
    }

    fn agree_hello(&self, hello: &wire::HelloResponse) -> Result<Agreed, PluginError> {
        let Some(objects) = hello.objects.get(INSTANCE_0_6_1) else {
            let offered = hello.objects.keys().cloned().collect::<Vec<_>>();
            // A plugin of the older version answers Hello only if it is a
            // newer build: Implements is for those that do not.
            return Err(PluginError::Version {
                plugin: self.label.clone(),
                offered: format!("{offered:?}"),
            });
        };
        let want = self.address.kind.as_deref().unwrap_or(".");
        if !objects.iter().any(|o| o.name == want) {
            return Err(PluginError::NoSuchType {
                plugin: self.label.clone(),
                kind: want.into(),
                offered: format!("{:?}", objects.iter().map(|o| &o.name).collect::<Vec<_>>()),
            });
        }
        Ok(Agreed {
            api: Api::V0_6_1,
            drover: hello.objects.contains_key(DROVER_0_1_0),
        })
    }

    fn agree_implements(
        &self,
        implements: &wire::ImplementsResponse,
    ) -> Result<Agreed, PluginError> {
        let has = |spec: &str| {
            implements
                .apis
                .iter()
                .any(|a| format!("{}/{}", a.name, a.version) == spec)
        };
        if !has(INSTANCE_0_5_0) {
            let offered: Vec<String> = implements
                .apis
                .iter()
                .map(|a| format!("{}/{}", a.name, a.version))
                .collect();
            return Err(PluginError::Version {
                plugin: self.label.clone(),
                offered: format!("{offered:?}"),
            });
        }
        // 0.5.0 lists no objects: a wrong type shows in the first call.
        Ok(Agreed {
            api: Api::V0_5_0,
            drover: has(DROVER_0_1_0),
        })
    }

    /// `Instance.Validate` of `properties`; each distinct value is asked
    /// once per client (before its first Provision).
    pub async fn validate(&self, properties: &Value) -> Result<(), PluginError> {
        let key = properties.to_string();
        if self
            .validated
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .contains(&key)
        {
            return Ok(());
        }
        self.handshake().await?;
        let req = wire::ValidateRequest {
            kind: self.kind(),
            properties: properties.clone(),
        };
        let ok: wire::OkResponse = self.call("Instance.Validate", &req, true).await?;
        self.done("Instance.Validate", &ok)?;
        self.validated
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(key);
        Ok(())
    }

    /// An answer of the right type that says `OK: true`: anything else
    /// (`false`, or no `OK` at all) is not done.
    fn done(&self, method: &str, ok: &wire::OkResponse) -> Result<(), PluginError> {
        self.same_type(method, &ok.kind)?;
        if ok.ok {
            return Ok(());
        }
        Err(PluginError::Refused {
            plugin: self.label.clone(),
            method: method.into(),
            message: "it did not answer OK: true".into(),
        })
    }

    /// DescribeInstances, checked: the right type, no id twice, only
    /// machines carrying every asked tag (a plugin that lists others, or
    /// rewrites drover's tags, cannot be trusted to find a machine again
    /// by its link: its answer is a failed describe, never "none").
    async fn describe_checked(
        &self,
        filter: &BTreeMap<String, String>,
    ) -> Result<Vec<Instance>, PluginError> {
        self.handshake().await?;
        let req = wire::DescribeRequest {
            kind: self.kind(),
            tags: filter.clone(),
            properties: true,
        };
        const M: &str = "Instance.DescribeInstances";
        // Once per call: a pass waits for every provider's describe, and
        // the next pass asks again anyway (a hung plugin holds each pass
        // for one bound, not for every retry of it).
        let answer: wire::DescribeResponse = self.call(M, &req, false).await?;
        self.same_type(M, &answer.kind)?;
        let mut seen = BTreeSet::new();
        let mut out = Vec::new();
        for d in answer.descriptions {
            if !seen.insert(d.id.clone()) {
                return Err(PluginError::Malformed {
                    plugin: self.label.clone(),
                    method: M.into(),
                    detail: format!("machine {} is listed twice", d.id),
                });
            }
            if !filter.iter().all(|(k, v)| d.tags.get(k) == Some(v)) {
                return Err(PluginError::Malformed {
                    plugin: self.label.clone(),
                    method: M.into(),
                    detail: format!(
                        "machine {} is listed without the tags asked for (the plugin must filter on, and keep, every tag drover gives)",
                        d.id
                    ),
                });
            }
            let state = d
                .properties
                .and_then(|p| serde_json::from_value::<wire::DescribedState>(p).ok())
                .unwrap_or(wire::DescribedState {
                    running: true,
                    created_ms: 0,
                });
            out.push(Instance {
                id: d.id,
                tags: d.tags.into(),
                running: state.running,
                created_ms: state.created_ms,
            });
        }
        Ok(out)
    }

    /// The machine carrying `link`, if the plugin lists one.
    async fn made_for(&self, link: &str) -> Result<Option<String>, PluginError> {
        let filter = BTreeMap::from([(tags::LINK.to_string(), link.to_string())]);
        Ok(self
            .describe_checked(&filter)
            .await?
            .into_iter()
            .next()
            .map(|i| i.id))
    }

    fn fenced(&self, fence: &dyn Fence) -> Result<(), PluginError> {
        fence.check().map_err(|source| PluginError::Fenced {
            plugin: self.label.clone(),
            source,
        })
    }

    async fn destroy_checked(&self, instance: &str, fence: &dyn Fence) -> Result<(), PluginError> {
        const M: &str = "Instance.Destroy";
        let agreed = self.handshake().await?;
        let req = wire::DestroyRequest {
            kind: self.kind(),
            instance: instance.into(),
            context: (agreed.api == Api::V0_6_1).then(|| wire::Context {
                reason: wire::REASON_TERMINATE.into(),
            }),
        };
        let params = serde_json::to_value(&req).map_err(|e| PluginError::BadRequest {
            plugin: self.label.clone(),
            detail: e.to_string(),
        })?;
        self.fenced(fence)?;
        let answer = tokio::time::timeout(self.timeouts.change, self.rpc.call(M, params))
            .await
            .unwrap_or(Err(CallError::TimedOut(self.timeouts.change)));
        self.forget_if_disconnected(&answer);
        match answer {
            Ok(v) => {
                let ok: wire::OkResponse = self.decode(M, v)?;
                self.done(M, &ok)
            }
            // A plugin's "not found" is a string of its own, and a describe
            // without drover's cluster tag may be partial: the error stands,
            // and the next pass's describe (by the cluster tag, trusted as
            // any provider's) shows whether the machine is gone.
            Err(e) => Err(self.error(M, e)),
        }
    }

    async fn label_checked(
        &self,
        instance: &str,
        labels: &BTreeMap<String, String>,
        fence: &dyn Fence,
    ) -> Result<(), PluginError> {
        const M: &str = "Instance.Label";
        self.handshake().await?;
        let req = wire::LabelRequest {
            kind: self.kind(),
            instance: instance.into(),
            labels: labels.clone(),
        };
        self.fenced(fence)?;
        let ok: wire::OkResponse = self.call(M, &req, true).await?;
        self.done(M, &ok)
    }
}

#[async_trait]
impl InstanceProvider for PluginProvider {
    async fn provision(
        &self,
        req: ProvisionRequest,
        fence: &dyn Fence,
    ) -> Result<String, ProviderError> {
        Ok(self.provision_checked(req, fence).await?)
    }

    async fn destroy_fenced(&self, instance: &str, fence: &dyn Fence) -> Result<(), ProviderError> {
        Ok(self.destroy_checked(instance, fence).await?)
    }

    async fn describe(
        &self,
        tags: &BTreeMap<String, String>,
    ) -> Result<Vec<Instance>, ProviderError> {
        Ok(self.describe_checked(tags).await?)
    }

    async fn label(
        &self,
        instance: &str,
        labels: &BTreeMap<String, String>,
        fence: &dyn Fence,
    ) -> Result<(), ProviderError> {
        Ok(self.label_checked(instance, labels, fence).await?)
    }
}
