//! Service availability budgets: how many of a replicated service's tasks
//! a roll may take away at once.
//!
//! A drain stops a node's tasks before the swarm starts them elsewhere
//! (drains ignore a service's `start-first` update order), so every node a
//! roll disrupts costs the services running there one task each for a
//! while. A budget bounds that cost, as Kubernetes' disruption budgets do:
//! from the service's own label (`drover.max-unavailable` or
//! `drover.min-available`, a count or a percentage) or, for a service
//! without one, from the disrupting group's `update.service_budget`.
//! Percentages round up, as a disruption budget's do: `max-unavailable:
//! 10%` of 3 replicas allows 1, `min-available: 50%` of 3 keeps 2.

use serde::{Deserialize, Serialize};
use std::fmt;

/// The service label bounding how many of its tasks may be down at once.
pub const MAX_UNAVAILABLE_LABEL: &str = "drover.max-unavailable";
/// The service label saying how many of its tasks must stay running.
pub const MIN_AVAILABLE_LABEL: &str = "drover.min-available";

/// A number of tasks, absolute or as a share of the desired replicas.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Amount {
    /// This many tasks.
    Count(u32),
    /// This percentage (0–100) of the desired replicas, rounded up.
    Percent(u32),
}

impl Amount {
    /// The amount of `replicas` tasks (a percentage rounded up).
    pub fn of(self, replicas: u32) -> u32 {
        match self {
            Amount::Count(n) => n,
            Amount::Percent(p) => (u64::from(replicas) * u64::from(p)).div_ceil(100) as u32,
        }
    }
}

impl fmt::Display for Amount {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Amount::Count(n) => write!(f, "{n}"),
            Amount::Percent(p) => write!(f, "{p}%"),
        }
    }
}

/// Why a budget's text is not one.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AmountError {
    /// Neither a whole number nor a percentage.
    #[error("expected a whole number of tasks (e.g. 1) or a percentage (e.g. 80%), found {0:?}")]
    NotAnAmount(String),
    /// A percentage over 100.
    #[error("a percentage is at most 100%, found {0:?}")]
    OverHundred(String),
}

impl std::str::FromStr for Amount {
    type Err = AmountError;
    fn from_str(s: &str) -> Result<Amount, AmountError> {
        let t = s.trim();
        let bad = || AmountError::NotAnAmount(s.to_string());
        match t.strip_suffix('%') {
            Some(p) => {
                let p: u32 = p.trim().parse().map_err(|_| bad())?;
                if p > 100 {
                    return Err(AmountError::OverHundred(s.to_string()));
                }
                Ok(Amount::Percent(p))
            }
            None => t.parse().map(Amount::Count).map_err(|_| bad()),
        }
    }
}

/// A service's availability budget during a roll.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ServiceBudget {
    /// At most this many tasks down at once.
    MaxUnavailable(Amount),
    /// At least this many tasks running at all times.
    MinAvailable(Amount),
}

impl ServiceBudget {
    /// How many of `replicas` desired tasks may be down at once.
    pub fn allowed_unavailable(self, replicas: u32) -> u32 {
        match self {
            ServiceBudget::MaxUnavailable(a) => a.of(replicas),
            ServiceBudget::MinAvailable(a) => replicas.saturating_sub(a.of(replicas)),
        }
    }

    /// True when the budget lets no task go whatever the replicas
    /// (`max_unavailable: 0` or `0%`, `min_available: 100%`): no node
    /// running one of the service's tasks could ever be drained. A spec
    /// may not declare one (`validate` refuses it); a service label may,
    /// to pin a service's tasks, and blocks the roll saying so.
    pub fn blocks_every_drain(self) -> bool {
        matches!(
            self,
            ServiceBudget::MaxUnavailable(Amount::Count(0) | Amount::Percent(0))
                | ServiceBudget::MinAvailable(Amount::Percent(100))
        )
    }

    /// The budget a service's labels declare: `None` without one, an
    /// error naming the label when it cannot be read or both are set.
    pub fn from_labels<'l>(
        mut label: impl FnMut(&str) -> Option<&'l str>,
    ) -> Result<Option<ServiceBudget>, LabelError> {
        let parse = |key: &str, v: &str| {
            v.parse::<Amount>().map_err(|e| LabelError::Unreadable {
                label: key.to_string(),
                reason: e,
            })
        };
        match (label(MAX_UNAVAILABLE_LABEL), label(MIN_AVAILABLE_LABEL)) {
            (Some(_), Some(_)) => Err(LabelError::Both),
            (Some(v), None) => Ok(Some(ServiceBudget::MaxUnavailable(parse(
                MAX_UNAVAILABLE_LABEL,
                v,
            )?))),
            (None, Some(v)) => Ok(Some(ServiceBudget::MinAvailable(parse(
                MIN_AVAILABLE_LABEL,
                v,
            )?))),
            (None, None) => Ok(None),
        }
    }
}

impl fmt::Display for ServiceBudget {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ServiceBudget::MaxUnavailable(a) => write!(f, "max unavailable {a}"),
            ServiceBudget::MinAvailable(a) => write!(f, "min available {a}"),
        }
    }
}

/// A service's budget labels that cannot be obeyed. The roll then keeps
/// every task of that service where it is (never "no budget").
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LabelError {
    /// A label's value is not an amount.
    #[error("label {label}: {reason}")]
    Unreadable {
        /// The label.
        label: String,
        /// What is wrong with its value.
        reason: AmountError,
    },
    /// Both labels are set.
    #[error("labels {MAX_UNAVAILABLE_LABEL} and {MIN_AVAILABLE_LABEL} both set: keep one")]
    Both,
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn amounts_read_as_written() {
        assert_eq!("1".parse(), Ok(Amount::Count(1)));
        assert_eq!(" 80% ".parse(), Ok(Amount::Percent(80)));
        assert!(matches!(
            "101%".parse::<Amount>(),
            Err(AmountError::OverHundred(_))
        ));
        assert!(matches!(
            "-1".parse::<Amount>(),
            Err(AmountError::NotAnAmount(_))
        ));
        assert!(matches!(
            "one".parse::<Amount>(),
            Err(AmountError::NotAnAmount(_))
        ));
    }

    #[test]
    fn percentages_round_up_as_disruption_budgets_do() {
        let max = |p| ServiceBudget::MaxUnavailable(Amount::Percent(p));
        let min = |p| ServiceBudget::MinAvailable(Amount::Percent(p));
        assert_eq!(max(10).allowed_unavailable(3), 1);
        assert_eq!(max(0).allowed_unavailable(3), 0);
        assert_eq!(min(50).allowed_unavailable(3), 1);
        assert_eq!(min(80).allowed_unavailable(5), 1);
        assert_eq!(min(100).allowed_unavailable(5), 0);
        let at_least = ServiceBudget::MinAvailable(Amount::Count(4));
        assert_eq!(at_least.allowed_unavailable(3), 0);
    }

    #[test]
    fn budgets_that_let_no_task_go_are_known_whatever_the_replicas() {
        let max = |a| ServiceBudget::MaxUnavailable(a);
        let min = |a| ServiceBudget::MinAvailable(a);
        for b in [
            max(Amount::Count(0)),
            max(Amount::Percent(0)),
            min(Amount::Percent(100)),
        ] {
            assert!(b.blocks_every_drain(), "{b}");
            assert!((1..50).all(|r| b.allowed_unavailable(r) == 0), "{b}");
        }
        for b in [
            max(Amount::Count(1)),
            max(Amount::Percent(1)),
            min(Amount::Percent(99)),
            min(Amount::Count(3)),
        ] {
            assert!(!b.blocks_every_drain(), "{b}");
        }
    }

    #[test]
    fn labels_name_what_is_wrong() {
        let labels = |max: Option<&'static str>, min: Option<&'static str>| {
            ServiceBudget::from_labels(move |k| match k {
                MAX_UNAVAILABLE_LABEL => max,
                MIN_AVAILABLE_LABEL => min,
                _ => None,
            })
        };
        assert_eq!(labels(None, None), Ok(None));
        assert_eq!(
            labels(Some("2"), None),
            Ok(Some(ServiceBudget::MaxUnavailable(Amount::Count(2))))
        );
        assert_eq!(labels(Some("1"), Some("1")), Err(LabelError::Both));
        let e = labels(None, Some("most")).unwrap_err().to_string();
        assert!(
            e.contains(MIN_AVAILABLE_LABEL) && e.contains("\"most\""),
            "{e}"
        );
    }

    proptest! {
        /// A budget never allows more than all tasks down, and a
        /// min-available budget always keeps what it names (when there are
        /// that many).
        #[test]
        fn allowed_stays_within_the_replicas(replicas in 0u32..10_000, n in 0u32..20_000, p in 0u32..=100) {
            for b in [
                ServiceBudget::MaxUnavailable(Amount::Percent(p)),
                ServiceBudget::MinAvailable(Amount::Percent(p)),
                ServiceBudget::MinAvailable(Amount::Count(n)),
            ] {
                prop_assert!(b.allowed_unavailable(replicas) <= replicas);
            }
            let keep = ServiceBudget::MinAvailable(Amount::Percent(p));
            let kept = replicas - keep.allowed_unavailable(replicas);
            prop_assert!(u64::from(kept) * 100 >= u64::from(replicas) * u64::from(p));
        }
    }
}
