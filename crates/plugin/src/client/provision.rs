//! A Provision, one per link at a time: the request built (secrets only in
//! drover's extension), the link held, a late answer remembered ("maybe
//! done") so a retry finds the machine instead of making a second one.

use super::{ADDRESS_PLACEHOLDER, Agreed, PluginProvider};
use crate::error::PluginError;
use crate::rpc::CallError;
use crate::wire;
use drover_core::model::tags;
use drover_spi::{Fence, ProvisionRequest};
use serde_json::Value;
use std::collections::BTreeMap;
use std::sync::Arc;

/// Provisions by link: one at a time per link, and the answers that came
/// after their caller stopped waiting.
#[derive(Debug, Default)]
pub(super) struct Flights {
    /// Held by the call provisioning the link (by its background task
    /// once the caller stopped waiting) until the plugin answers.
    locks: BTreeMap<String, Arc<tokio::sync::Mutex<()>>>,
    /// Machines made by calls whose callers had stopped waiting.
    made: BTreeMap<String, String>,
}

impl PluginProvider {
    /// The Provision's parameters: every tag in `Spec.Tags`, the rendered
    /// script in `Spec.Init`, secrets only in drover's extension.
    fn provision_request(
        &self,
        req: &ProvisionRequest,
        agreed: Agreed,
    ) -> Result<wire::ProvisionRequest, PluginError> {
        if !req.boot_env.is_empty() && !agreed.drover {
            return Err(PluginError::NoSecretChannel {
                plugin: self.label.clone(),
                names: req
                    .boot_env
                    .iter()
                    .map(|(k, _)| k.as_str())
                    .collect::<Vec<_>>()
                    .join(", "),
            });
        }
        let mut ctx = req.boot_context.clone();
        ctx.address = req
            .logical_id
            .clone()
            .unwrap_or_else(|| ADDRESS_PLACEHOLDER.to_string());
        let init = drover_core::template::render(&req.boot_template, &ctx).map_err(|e| {
            PluginError::BadRequest {
                plugin: self.label.clone(),
                detail: format!("the boot script does not render: {e}"),
            }
        })?;
        let drover = agreed.drover.then(|| wire::DroverExtension {
            role: req.boot_context.role.clone(),
            engine_labels: req.engine_labels.clone(),
            boot_env: req
                .boot_env
                .iter()
                .map(|(k, v)| (k.clone(), v.expose().to_string()))
                .collect(),
        });
        Ok(wire::ProvisionRequest {
            kind: self.kind(),
            spec: wire::Spec {
                properties: req.properties.clone(),
                tags: req.tags.clone(),
                init,
                logical_id: req.logical_id.clone(),
                attachments: Vec::new(),
            },
            drover,
        })
    }

    fn flights(&self) -> std::sync::MutexGuard<'_, Flights> {
        self.flights.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Sends the Provision in a task of its own, which holds the link's
    /// lock until the plugin answers and records a late answer for the
    /// link; waits for it at most [`Timeouts::change`].
    async fn provision_in_flight(
        &self,
        link: &str,
        params: wire::ProvisionRequest,
        held: tokio::sync::OwnedMutexGuard<()>,
    ) -> Result<String, PluginError> {
        const M: &str = "Instance.Provision";
        let params = serde_json::to_value(&params).map_err(|e| PluginError::BadRequest {
            plugin: self.label.clone(),
            detail: e.to_string(),
        })?;
        let (rpc, flights, link_owned, cap) = (
            self.rpc.clone(),
            self.flights.clone(),
            link.to_string(),
            self.timeouts.in_flight,
        );
        let task = tokio::spawn(async move {
            let answer = tokio::time::timeout(cap, rpc.call(M, params))
                .await
                .unwrap_or(Err(CallError::TimedOut(cap)));
            if let Some(id) = answer
                .as_ref()
                .ok()
                .and_then(|v| v.get("ID"))
                .and_then(Value::as_str)
            {
                let mut f = flights.lock().unwrap_or_else(|e| e.into_inner());
                f.made.insert(link_owned, id.to_string());
            }
            drop(held);
            answer
        });
        let answer = match tokio::time::timeout(self.timeouts.change, task).await {
            Ok(Ok(answer)) => {
                self.forget_if_disconnected(&answer);
                answer.map_err(|e| self.error(M, e))?
            }
            Ok(Err(join)) => {
                return Err(PluginError::Lost {
                    plugin: self.label.clone(),
                    method: M.into(),
                    detail: join.to_string(),
                });
            }
            Err(_) => {
                // Maybe done: the plugin may list it already.
                return match self.made_for(link).await {
                    Ok(Some(id)) => Ok(id),
                    _ => Err(PluginError::Lost {
                        plugin: self.label.clone(),
                        method: M.into(),
                        detail: format!(
                            "no answer within {:?}; the call goes on",
                            self.timeouts.change
                        ),
                    }),
                };
            }
        };
        self.flights().made.remove(link);
        let answer: wire::ProvisionResponse = self.decode(M, answer)?;
        self.same_type(M, &answer.kind)?;
        answer
            .id
            .filter(|id| !id.is_empty())
            .ok_or_else(|| PluginError::Malformed {
                plugin: self.label.clone(),
                method: M.into(),
                detail: "no ID".into(),
            })
    }

    /// The link's lock, waited for at most [`Timeouts::change`]: a
    /// Provision for the link that runs longer may still make the machine.
    async fn hold_link(&self, link: &str) -> Result<tokio::sync::OwnedMutexGuard<()>, PluginError> {
        let lock = self
            .flights()
            .locks
            .entry(link.to_string())
            .or_default()
            .clone();
        tokio::time::timeout(self.timeouts.change, lock.lock_owned())
            .await
            .map_err(|_| PluginError::InFlight {
                plugin: self.label.clone(),
                link: link.into(),
            })
    }

    pub(super) async fn provision_checked(
        &self,
        req: ProvisionRequest,
        fence: &dyn Fence,
    ) -> Result<String, PluginError> {
        self.fenced(fence)?;
        let link = req
            .tags
            .get(tags::LINK)
            .cloned()
            .ok_or_else(|| PluginError::BadRequest {
                plugin: self.label.clone(),
                detail: format!("a machine to provision carries no {} tag", tags::LINK),
            })?;
        let agreed = self.handshake().await?;
        let params = self.provision_request(&req, agreed)?;
        self.validate(&req.properties).await?;
        let held = self.hold_link(&link).await?;
        if let Some(id) = self.flights().made.remove(&link) {
            return Ok(id);
        }
        if let Some(id) = self.made_for(&link).await? {
            return Ok(id);
        }
        self.fenced(fence)?;
        let made = self.provision_in_flight(&link, params, held).await;
        if made.is_ok() {
            self.flights().locks.remove(&link);
        }
        made
    }
}
