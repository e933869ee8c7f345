//! The local provider's machines, their engines asked now (the provider
//! seam's [`InstanceProvider::ask_engines`](drover_spi::InstanceProvider::ask_engines)):
//! an engine whose process does not run is certainly down; any other is
//! asked over its socket on this host.

use crate::{InstanceRecord, LocalProvider, io_err};
use drover_core::model::Instance;
use drover_core::quorum_probe::EngineAnswer;
use drover_spi::{EngineReport, ProviderError};
use std::collections::BTreeMap;

impl LocalProvider {
    /// Record `r` as a describe lists it.
    pub(crate) fn instance_of(&self, r: &InstanceRecord) -> Instance {
        Instance {
            // No PID yet: its engine is still being started. That is not
            // "stopped" (which makes the planner replace it at once); if it
            // never comes up, it never joins and startup_timeout applies.
            running: (r.pid.is_none() && r.supervisor.is_none()) || self.is_running(r),
            id: r.id.clone(),
            tags: r.tags.clone().into(),
            created_ms: r.created_ms,
        }
    }

    /// Every machine carrying `tags`, its engine asked now (all at once).
    pub(crate) async fn engines_now(
        &self,
        tags: &BTreeMap<String, String>,
    ) -> Result<Vec<EngineReport>, ProviderError> {
        let records = self.records().map_err(|e| io_err("reading state dir", e))?;
        let asked = records
            .iter()
            .filter(|r| tags.iter().all(|(k, v)| r.tags.get(k) == Some(v)))
            .map(|r| async move {
                let (answer, raft) = if self.is_running(r) {
                    drover_engine::probe::ask(&r.endpoint()).await
                } else {
                    (EngineAnswer::Down("its engine is not running".into()), None)
                };
                EngineReport {
                    instance: self.instance_of(r),
                    address: r.address.clone(),
                    answer,
                    raft,
                }
            });
        Ok(futures_util::future::join_all(asked).await)
    }
}
