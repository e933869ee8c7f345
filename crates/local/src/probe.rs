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

#[cfg(test)]
mod tests {
    use super::*;

    /// A machine whose engine process does not run is down (certainly not
    /// voting), with its address and group; the engine is not asked.
    #[tokio::test]
    async fn a_machine_whose_engine_does_not_run_is_down() {
        let dir = tempfile::tempdir().unwrap();
        let p = LocalProvider::new(dir.path(), ["127.0.9.1".parse().unwrap()]).unwrap();
        let r = InstanceRecord {
            id: "i1".into(),
            tags: [("drover.group".to_string(), "managers".to_string())].into(),
            logical_id: None,
            address: "127.0.9.1".into(),
            socket: dir.path().join("i1/docker.sock"),
            pid: Some(i32::MAX),
            pgid: None,
            supervisor: None,
            created_ms: 1,
            engine_dir: None,
            marked: true,
        };
        std::fs::create_dir_all(p.dir_of("i1")).unwrap();
        p.write_record(&r).unwrap();
        let reports = p.engines_now(&BTreeMap::new()).await.unwrap();
        assert_eq!(reports.len(), 1);
        let report = &reports[0];
        assert_eq!(
            report.answer,
            EngineAnswer::Down("its engine is not running".into())
        );
        assert_eq!(
            (report.address.as_str(), report.instance.tag("drover.group")),
            ("127.0.9.1", Some("managers"))
        );
        assert!(!report.instance.running && report.raft.is_none());
        let other = BTreeMap::from([("drover.group".to_string(), "workers".to_string())]);
        assert!(p.engines_now(&other).await.unwrap().is_empty());
    }
}
