//! Why the service budgets hold or block a disruption, as values: the
//! gate decides on the variant, and the text an operator reads is
//! rendered from its data.

use crate::budget::{LabelError, ServiceBudget};
use std::fmt;
use std::time::Duration;

/// Where a service's budget comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Source {
    /// The service's own label.
    Label,
    /// The disrupting group's `update.service_budget`.
    Group,
}

impl fmt::Display for Source {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Source::Label => "its label",
            Source::Group => "update.service_budget",
        })
    }
}

/// Not now: a service's tasks are down already, or unknown.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Wait {
    /// The services cannot be listed and the node runs tasks.
    ServicesUnknown {
        node: String,
        tasks: u32,
        /// Why they cannot be listed.
        error: String,
    },
    /// Disrupting the node now would take the service past its budget.
    Spent {
        service: String,
        budget: ServiceBudget,
        from: Source,
        /// Its tasks down or leaving (on other nodes).
        down: u32,
        replicas: u32,
        node: String,
        /// Its tasks on `node`.
        here: u32,
    },
}

impl fmt::Display for Wait {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Wait::ServicesUnknown { node, tasks, error } => write!(
                f,
                "node {node} runs {tasks} tasks and the services cannot be listed ({error}): their budgets are unknown"
            ),
            Wait::Spent {
                service,
                budget,
                from,
                down,
                replicas,
                node,
                here,
            } => write!(
                f,
                "service {service} ({budget}, from {from}): {down} of its {replicas} tasks are down or leaving, and node {node} runs {here} more"
            ),
        }
    }
}

/// Never as the tasks are placed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Never {
    /// The service's budget labels cannot be obeyed.
    Unreadable { service: String, error: LabelError },
    /// The node alone runs more of the service's tasks than may be down.
    TooManyHere {
        service: String,
        budget: ServiceBudget,
        from: Source,
        allowed: u32,
        replicas: u32,
        node: String,
        here: u32,
    },
}

impl fmt::Display for Never {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Never::Unreadable { service, error } => write!(
                f,
                "service {service}: {error}; its tasks stay where they are until it is fixed"
            ),
            Never::TooManyHere {
                service,
                budget,
                from,
                allowed,
                replicas,
                node,
                here,
            } => write!(
                f,
                "service {service} ({budget}, from {from}) may lose {allowed} of its {replicas} tasks at once, and node {node} runs {here} of them: draining it can never meet the budget (spread the tasks, e.g. `docker service update --force`, or change the budget)"
            ),
        }
    }
}

/// Why the budgets block the group (an operator acts).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Block {
    /// Never as the tasks are placed.
    Never(Never),
    /// Held longer than the group's `update.step_timeout`.
    HeldTooLong { why: Wait, timeout: Duration },
}

impl fmt::Display for Block {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Block::Never(why) => write!(f, "{why}"),
            Block::HeldTooLong { why, timeout } => write!(
                f,
                "{why}; held longer than update.step_timeout ({})",
                humantime::format_duration(*timeout)
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::budget::Amount;

    fn spent() -> Wait {
        Wait::Spent {
            service: "web".into(),
            budget: ServiceBudget::MaxUnavailable(Amount::Count(1)),
            from: Source::Label,
            down: 1,
            replicas: 3,
            node: "n1".into(),
            here: 1,
        }
    }

    #[test]
    fn waits_render_from_their_data() {
        assert_eq!(
            spent().to_string(),
            "service web (max unavailable 1, from its label): 1 of its 3 tasks are down or leaving, and node n1 runs 1 more"
        );
        let unknown = Wait::ServicesUnknown {
            node: "n2".into(),
            tasks: 4,
            error: "timeout".into(),
        };
        assert_eq!(
            unknown.to_string(),
            "node n2 runs 4 tasks and the services cannot be listed (timeout): their budgets are unknown"
        );
    }

    #[test]
    fn blocks_render_from_their_data() {
        let held = Block::HeldTooLong {
            why: spent(),
            timeout: Duration::from_secs(600),
        };
        assert_eq!(
            held.to_string(),
            format!("{}; held longer than update.step_timeout (10m)", spent())
        );
        let here = Block::Never(Never::TooManyHere {
            service: "db".into(),
            budget: ServiceBudget::MinAvailable(Amount::Percent(50)),
            from: Source::Group,
            allowed: 1,
            replicas: 2,
            node: "n3".into(),
            here: 2,
        });
        assert_eq!(
            here.to_string(),
            "service db (min available 50%, from update.service_budget) may lose 1 of its 2 tasks at once, and node n3 runs 2 of them: draining it can never meet the budget (spread the tasks, e.g. `docker service update --force`, or change the budget)"
        );
        let both = Block::Never(Never::Unreadable {
            service: "db".into(),
            error: LabelError::Both,
        });
        assert_eq!(
            both.to_string(),
            "service db: labels drover.max-unavailable and drover.min-available both set: keep one; its tasks stay where they are until it is fixed"
        );
    }
}
