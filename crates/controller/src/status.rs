//! The status document the acting controller publishes (and `drover status` reads).

use drover_core::plan::{GroupStatus, MemberStatus, Plan, SwarmStatus};
use drover_spi::StatusJson;
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

/// The published document, borrowed from the pass that planned it and
/// serialised straight to text: no `serde_json::Value` tree of every member
/// is built (issue 7, controller memory). The same fields as [`StatusDoc`],
/// which is how readers take it.
#[derive(Serialize)]
struct Published<'a> {
    observed_at_ms: u64,
    controller: &'a str,
    epoch: u64,
    revision: u64,
    groups: &'a [GroupStatus],
    swarm: &'a SwarmStatus,
    instances: &'a [MemberStatus],
    operations: usize,
    explanation: &'a [String],
}

/// The status document of a plan and its members, as the store takes it.
pub fn status_json(
    controller: &str,
    epoch: u64,
    revision: u64,
    plan: &Plan,
    instances: &[MemberStatus],
    operations: usize,
) -> StatusJson {
    let doc = Published {
        observed_at_ms: wall_ms(),
        controller,
        epoch,
        revision,
        groups: &plan.groups,
        swarm: &plan.swarm,
        instances,
        operations,
        explanation: &plan.explanation,
    };
    // String keys and plain fields: serialising cannot fail.
    StatusJson::new(&doc).unwrap_or_else(|e| unreachable!("status document: {e}"))
}

/// Wall-clock ms since the Unix epoch (for records read by humans and other hosts).
pub fn wall_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

#[cfg(test)]
mod tests {
    use super::{StatusDoc, status_json};
    use drover_core::plan::{GroupStatus, MemberStatus, Memory, Phase, Plan, SwarmStatus};
    use drover_core::spec::Role;

    #[test]
    fn the_published_text_reads_as_the_status_document() {
        let plan = Plan {
            actions: Vec::new(),
            groups: vec![GroupStatus {
                name: "workers".into(),
                role: Role::Worker,
                phase: Phase::Blocked,
                reason: Some("meltdown guard".into()),
                desired_hash: "h".into(),
                desired: 2,
                members: 2,
                current: 1,
                healthy: 1,
                in_flight: 1,
            }],
            swarm: SwarmStatus {
                members: 3,
                ..SwarmStatus::default()
            },
            explanation: vec!["workers: roll".into()],
            memory: Memory::default(),
            wake_at: None,
            garbage: Vec::new(),
        };
        let member = MemberStatus {
            id: "i-1".into(),
            group: "workers".into(),
            logical_id: None,
            node_id: Some("n-1".into()),
            role: "worker".into(),
            leader: false,
            health: "healthy".into(),
            health_reason: None,
            current: true,
            created_ms: 5,
            held: false,
        };
        let json = status_json("c", 3, 9, &plan, std::slice::from_ref(&member), 2);
        let value = json.to_value().unwrap();
        let doc: StatusDoc = serde_json::from_value(value.clone()).unwrap();
        assert_eq!(
            (
                doc.controller.as_str(),
                doc.epoch,
                doc.revision,
                doc.operations
            ),
            ("c", 3, 9, 2)
        );
        assert_eq!(doc.explanation, plan.explanation);
        assert_eq!(doc.groups, serde_json::to_value(&plan.groups).unwrap());
        assert_eq!(doc.swarm, serde_json::to_value(&plan.swarm).unwrap());
        assert_eq!(doc.instances, serde_json::json!([member]));
        let fields: Vec<&str> = value
            .as_object()
            .unwrap()
            .keys()
            .map(|k| k.as_str())
            .collect();
        assert_eq!(fields.len(), 9, "{fields:?}");
    }
}
