//! The status document the acting controller publishes (and `drover status` reads).

use crate::context::Providers;
use drover_core::control::Control;
use drover_core::plan::{GroupStatus, MemberStatus, Phase, Plan, SwarmStatus};
use drover_core::spec::Role;
use drover_spi::{StatusJson, Store, StoreError};
use serde::{Deserialize, Serialize};
use std::borrow::Cow;

/// Published status. Field names are stable (documented in docs/status.md).
///
/// One type writes and reads it: the controller serialises it borrowing
/// the pass's plan and members (no copy of every member: a
/// controller's memory grows with the fleet), a reader deserialises it owned
/// ([`StatusDoc::read`]).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct StatusDoc<'a> {
    /// When it was observed (wall clock, ms since the Unix epoch).
    pub observed_at_ms: u64,
    /// The controller that observed and acted (its identity).
    pub controller: Cow<'a, str>,
    /// Its epoch.
    pub epoch: u64,
    /// The desired revision planned against.
    pub revision: u64,
    /// Per group.
    pub groups: Cow<'a, [GroupStatus]>,
    /// The swarm's manager quorum.
    pub swarm: Cow<'a, SwarmStatus>,
    /// Per owned instance; absent in documents of older controllers.
    #[serde(default)]
    pub instances: Cow<'a, [MemberStatus]>,
    /// Operations in flight.
    pub operations: usize,
    /// Why the planner did what it did.
    pub explanation: Cow<'a, [String]>,
    /// The providers it is wired to (the keys groups name in
    /// `instance.provider`), so a command that commits a group whose
    /// provider it was not given knows whether this controller acts on it;
    /// absent in documents of older controllers (unknown).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub providers: Option<Vec<String>>,
    /// Which controllers may act, as the revision declares (`control:`);
    /// in-cluster in documents of older controllers.
    #[serde(default)]
    pub control: Control,
}

impl StatusDoc<'_> {
    /// The last status the store holds, if any. A document this version
    /// cannot read is a corrupt record, as the store reports its own.
    pub async fn read(store: &dyn Store) -> Result<Option<StatusDoc<'static>>, StoreError> {
        let Some(raw) = store.status().await? else {
            return Ok(None);
        };
        serde_json::from_value(raw)
            .map(Some)
            .map_err(|e| StoreError::Corrupt(format!("status document: {e}")))
    }

    /// Whether every group is converged.
    pub fn all_converged(&self) -> bool {
        self.groups.iter().all(|g| g.phase == Phase::Converged)
    }

    /// The first blocked group.
    pub fn blocked(&self) -> Option<&GroupStatus> {
        self.groups.iter().find(|g| g.phase == Phase::Blocked)
    }

    /// Whether the cluster has a swarm (a group other than plain ones): a
    /// cluster of plain groups only has no managers and no quorum to show.
    pub fn has_swarm(&self) -> bool {
        self.groups.iter().any(|g| g.role != Role::Plain)
    }

    /// Keeps only `group`'s group and instances.
    pub fn only_group(&mut self, group: &str) {
        self.groups.to_mut().retain(|g| g.name == group);
        self.instances.to_mut().retain(|i| i.group == group);
    }
}

/// The status document of a plan and its members, as the store takes it,
/// published by a controller wired to `providers`.
pub fn status_json(
    controller: &str,
    providers: &Providers,
    (epoch, revision): (u64, u64),
    control: Control,
    plan: &Plan,
    instances: &[MemberStatus],
    operations: usize,
) -> StatusJson {
    let doc = StatusDoc {
        observed_at_ms: wall_ms(),
        controller: Cow::Borrowed(controller),
        epoch,
        revision,
        groups: Cow::Borrowed(&plan.groups),
        swarm: Cow::Borrowed(&plan.swarm),
        instances: Cow::Borrowed(instances),
        operations,
        explanation: Cow::Borrowed(&plan.explanation),
        providers: Some(providers.keys().cloned().collect()),
        control,
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
    use super::{Control, Role, StatusDoc, status_json};
    use drover_core::plan::{GroupStatus, MemberStatus, Memory, Phase, Plan, SwarmStatus};

    #[test]
    fn the_published_text_reads_as_the_status_document() {
        let plan = Plan {
            boot_asks: Vec::new(),
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
                window: Some("next window at 2026-12-05 02:00 UTC".into()),
                behind: None,
            }],
            swarm: SwarmStatus {
                members: 3,
                ..SwarmStatus::default()
            },
            explanation: vec!["workers: roll".into()],
            memory: Memory::default(),
            wake_at: None,
            garbage: Vec::new(),
            causes: Default::default(),
            parked: Default::default(),
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
            boot: None,
        };
        let providers = crate::Providers::new();
        let json = status_json(
            "c",
            &providers,
            (3, 9),
            Control::External,
            &plan,
            std::slice::from_ref(&member),
            2,
        );
        let value = json.to_value().unwrap();
        let doc: StatusDoc = serde_json::from_value(value.clone()).unwrap();
        assert_eq!(doc.groups.as_ref(), plan.groups.as_slice());
        assert_eq!(doc.swarm.as_ref(), &plan.swarm);
        assert_eq!(doc.instances.as_ref(), std::slice::from_ref(&member));
        assert_eq!(
            (
                doc.controller.as_ref(),
                doc.epoch,
                doc.revision,
                doc.operations
            ),
            ("c", 3, 9, 2)
        );
        assert_eq!(doc.explanation.as_ref(), plan.explanation.as_slice());
        assert_eq!(doc.control, Control::External);
        assert_eq!(value["control"], "external");
        assert_eq!(value["groups"], serde_json::to_value(&plan.groups).unwrap());
        assert_eq!(value["instances"], serde_json::json!([member]));
        let fields: Vec<&str> = value
            .as_object()
            .unwrap()
            .keys()
            .map(|k| k.as_str())
            .collect();
        assert_eq!(fields.len(), 11, "{fields:?}");
        assert_eq!(doc.providers, Some(Vec::new()));
    }
}
