//! The `took-over` audit event: a controller's first action after it wins
//! an epoch. Without it the audit log shows when the former leader demoted
//! itself and when the next controller's first step started, but not when
//! the next controller started acting — the failover gap could not
//! be told apart from the steps' own waits.

use crate::status::wall_ms;
use drover_core::model::SwarmView;
use drover_spi::{Epoch, Event, EventAction};

/// The event `identity` writes under `epoch`, the epoch it just won, naming
/// the swarm leader it saw (the node it acts for) as the target.
pub(crate) fn event(identity: &str, epoch: Epoch, swarm: &SwarmView) -> Event {
    let leader = match swarm {
        SwarmView::Ok(nodes) => nodes
            .iter()
            .find(|n| n.raft.as_ref().is_some_and(|r| r.leader)),
        _ => None,
    };
    let reason = match (swarm, leader) {
        (_, Some(n)) => format!(
            "swarm leader: node {} (link {})",
            n.id,
            n.link.as_deref().unwrap_or("none")
        ),
        (SwarmView::Absent, _) => "no swarm yet: bootstrap".into(),
        (SwarmView::Ok(_), None) => "no leader in the node list".into(),
        (SwarmView::NoQuorum(why) | SwarmView::Unavailable(why), _) => {
            format!("swarm not observed: {why}")
        }
    };
    Event {
        at_ms: wall_ms(),
        controller: identity.into(),
        group: None,
        op: None,
        action: EventAction::TookOver,
        target: leader.map(|n| n.id.clone()),
        outcome: format!("epoch {epoch}"),
        reason,
    }
}
