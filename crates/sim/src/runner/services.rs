//! The swarm's services as the simulated swarm lists them: none, but for
//! a lasting [`Stuck::BudgetNever`] — an operator's service with a task on
//! each member of one group and a budget no drain can meet.

use super::*;
use drover_core::budget::MIN_AVAILABLE_LABEL;
use drover_core::model::{NodeState, Service, Services, SwarmView};

impl Runner {
    /// The services a pass sees in `swarm`: with [`Stuck::BudgetNever`],
    /// one task on every Ready node of its group, and `drover.min-available`
    /// equal to the replicas (a budget that refuses every drain).
    pub(super) fn services(&self, swarm: &SwarmView) -> Services {
        let (Some(Stuck::BudgetNever(group)), SwarmView::Ok(nodes)) = (&self.faults.stuck, swarm)
        else {
            return Services::default();
        };
        let running: BTreeMap<String, u32> = nodes
            .iter()
            .filter(|n| n.group.as_deref() == Some(group.as_str()))
            .filter(|n| n.state == NodeState::Ready)
            .map(|n| (n.id.clone(), 1))
            .collect();
        let replicas = running.len() as u32;
        Services::Known(vec![Service {
            id: "pinned".into(),
            name: format!("pinned-to-{group}"),
            replicas: Some(replicas),
            labels: BTreeMap::from([(MIN_AVAILABLE_LABEL.to_string(), replicas.to_string())]),
            running,
        }])
    }
}
