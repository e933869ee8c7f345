//! The status document the acting controller publishes (and `drover status` reads).

use drover_core::plan::{MemberStatus, Plan};
use serde::{Deserialize, Serialize};

/// Published status. Field names are stable (documented in docs/status.md).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct StatusDoc {
    /// When it was observed (wall clock, ms since the Unix epoch).
    pub observed_at_ms: u64,
    /// The controller that observed and acted (its identity).
    pub controller: String,
    /// Its epoch.
    pub epoch: u64,
    /// The desired revision planned against.
    pub revision: u64,
    /// Per group.
    pub groups: serde_json::Value,
    /// The swarm's manager quorum.
    pub swarm: serde_json::Value,
    /// Per owned instance (`MemberStatus`); absent in documents of older controllers.
    #[serde(default)]
    pub instances: serde_json::Value,
    /// Operations in flight.
    pub operations: usize,
    /// Why the planner did what it did.
    pub explanation: Vec<String>,
}

impl StatusDoc {
    /// Builds the document from a plan's status parts and its members.
    pub fn new(
        controller: &str,
        epoch: u64,
        revision: u64,
        plan: &Plan,
        instances: &[MemberStatus],
        operations: usize,
    ) -> Self {
        StatusDoc {
            observed_at_ms: wall_ms(),
            controller: controller.to_string(),
            epoch,
            revision,
            groups: serde_json::to_value(&plan.groups).unwrap_or_default(),
            swarm: serde_json::to_value(&plan.swarm).unwrap_or_default(),
            instances: serde_json::to_value(instances).unwrap_or_default(),
            operations,
            explanation: plan.explanation.clone(),
        }
    }
}

impl StatusDoc {
    /// The document as the store takes it: what `serde_json::to_value`
    /// gives, without copying the member list (the largest part of a large
    /// cluster's document) a second time.
    pub fn into_value(self) -> serde_json::Value {
        use serde_json::Value;
        let fields = [
            ("observed_at_ms", Value::from(self.observed_at_ms)),
            ("controller", Value::from(self.controller)),
            ("epoch", Value::from(self.epoch)),
            ("revision", Value::from(self.revision)),
            ("groups", self.groups),
            ("swarm", self.swarm),
            ("instances", self.instances),
            ("operations", Value::from(self.operations)),
            ("explanation", Value::from(self.explanation)),
        ];
        Value::Object(
            fields
                .into_iter()
                .map(|(k, v)| (k.to_string(), v))
                .collect(),
        )
    }
}

/// Wall-clock ms since the Unix epoch (for records read by humans and other hosts).
pub fn wall_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

#[cfg(test)]
mod tests {
    use super::StatusDoc;

    #[test]
    fn into_value_is_the_serialised_document() {
        let doc = StatusDoc {
            observed_at_ms: 7,
            controller: "c".into(),
            epoch: 3,
            revision: 9,
            groups: serde_json::json!([{"name": "workers", "phase": "rolling"}]),
            swarm: serde_json::json!({"members": 3}),
            instances: serde_json::json!([{"id": "i-1", "healthy": true}]),
            operations: 2,
            explanation: vec!["workers: roll".into()],
        };
        let expected = serde_json::to_value(&doc).unwrap();
        assert_eq!(doc.into_value(), expected);
    }
}
