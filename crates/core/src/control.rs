//! Who may act for a cluster: the controllers next to its managers, the
//! external ones off the cluster, or both (the cluster file's `control:`,
//! docs/control.md). One rule for every controller and for `apply`'s check
//! of the store: a controller asks [`turn`] before it campaigns, `apply`
//! asks [`fits`] before it commits.
//!
//! Every controller's writes are fenced by the store's epoch wherever it
//! runs (design rule 12): what this module decides is only *who tries*.
//! A manager's controller campaigns while its engine leads the swarm and
//! takes the term from whoever holds it; an external controller acquires
//! the term only while nobody holds the store's lease, so any number of
//! them can stand by and exactly one acts.

use serde::{Deserialize, Serialize};

/// Which controllers may act for the cluster (`control:`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Control {
    /// Only the controllers on the swarm's managers (the leader's acts);
    /// an external controller waits. Today's shape, and the default of a
    /// cluster with a manager group.
    #[default]
    InCluster,
    /// Only external controllers, one at a time by the store's lease; the
    /// managers' controllers report and never act. The default of a
    /// cluster of plain groups only (nothing runs inside it).
    External,
    /// External controllers act while no manager's controller holds the
    /// term (before a swarm exists, while its controllers are down); once
    /// a manager's controller leads it takes over, preferred.
    Both,
}

impl Control {
    /// The spelling in cluster files and output.
    pub fn as_str(self) -> &'static str {
        match self {
            Control::InCluster => "in-cluster",
            Control::External => "external",
            Control::Both => "both",
        }
    }

    /// Every spelling with its value, as the decoder offers them.
    pub const CHOICES: [(&'static str, Control); 3] = [
        ("in-cluster", Control::InCluster),
        ("external", Control::External),
        ("both", Control::Both),
    ];

    /// Whether external controllers may act at all.
    pub fn admits_external(self) -> bool {
        !matches!(self, Control::InCluster)
    }
}

/// Where a controller runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Seat {
    /// Next to a manager's engine: it may act only while that engine leads.
    Manager,
    /// Off the cluster (an admin host), one of any number standing by.
    External,
}

/// What a controller that holds no term may do about one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Turn {
    /// Campaign and take the term from whoever holds it (a manager's
    /// controller whose engine leads the swarm).
    Take,
    /// Campaign only while nobody holds the store's lease.
    Acquire,
    /// Not this controller's turn under the declared control: hold no
    /// term (give up one it holds) and say why.
    Wait(Waits),
}

/// Why a controller may not act under the declared control.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum Waits {
    /// A manager's controller under `control: external`.
    #[error(
        "the cluster file declares control: external: only external controllers act; this \
         manager's controller reports and waits (declare control: both or in-cluster to let it act)"
    )]
    ExternalOnly,
    /// An external controller under `control: in-cluster`.
    #[error(
        "the cluster file declares control: in-cluster: only the managers' own controllers act; \
         this external controller waits (declare control: both or external to let it act)"
    )]
    InClusterOnly,
    /// An external controller that reaches none of the swarm's engines,
    /// for a cluster with a swarm: it could neither see the swarm nor act
    /// on it safely (a swarm it cannot see is no swarm absent).
    #[error(
        "this external controller reaches none of the swarm's engines (give it --local-dir or \
         --incus-engines): it acts only for clusters of plain groups; the managers' own \
         controllers act for this one"
    )]
    Blind,
}

/// What a controller at `seat` may do under `control`; `blind` when it
/// is an external controller that reaches none of the engines of a
/// cluster that has a swarm.
pub fn turn(control: Control, seat: Seat, blind: bool) -> Turn {
    if blind && seat == Seat::External && control.admits_external() {
        return Turn::Wait(Waits::Blind);
    }
    match (seat, control) {
        (Seat::Manager, Control::InCluster | Control::Both) => Turn::Take,
        (Seat::Manager, Control::External) => Turn::Wait(Waits::ExternalOnly),
        (Seat::External, Control::External | Control::Both) => Turn::Acquire,
        (Seat::External, Control::InCluster) => Turn::Wait(Waits::InClusterOnly),
    }
}

/// Who a store can serve: what decides which control it allows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reach {
    /// One host's file: only processes on that host open it, one writer
    /// at a time (the file store).
    OneHost,
    /// Inside the swarm's own raft, reached through a manager's engine
    /// (the swarm store): off the cluster nothing reaches it.
    InRaft,
    /// A service on the network every controller reaches, with leases
    /// (etcd; the memory store in tests).
    Network,
}

impl Reach {
    /// The store kind as an operator names it.
    pub fn named(self) -> &'static str {
        match self {
            Reach::OneHost => "a file store is one host's",
            Reach::InRaft => {
                "the swarm store lives in the swarm's raft, out of reach off the cluster"
            }
            Reach::Network => "a network store",
        }
    }
}

/// Why a control does not fit the store.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "control: {control} needs a store that controllers off the cluster reach, with leases: \
     etcd (--store etcd://HOST:PORT); {why}: {remedy}"
)]
pub struct Misfit {
    /// The declared control, as written.
    pub control: &'static str,
    /// What the store is.
    pub why: &'static str,
    /// What to do about it.
    pub remedy: &'static str,
}

/// Whether `spec`'s control can be served by a store of `reach`
/// ([`fits`]).
pub fn spec_fits(spec: &crate::spec::ClusterSpec, reach: Reach) -> Result<(), Misfit> {
    let managers = spec
        .groups
        .iter()
        .any(|g| g.role == crate::spec::Role::Manager);
    fits(spec.control, reach, managers)
}

/// Whether `control` can be served by a store of `reach`: external
/// controllers need one they all reach and a lease to take turns by.
/// `managers`: whether the cluster has a manager group (only then can its
/// own controllers act instead).
pub fn fits(control: Control, reach: Reach, managers: bool) -> Result<(), Misfit> {
    match (control.admits_external(), reach) {
        (false, _) | (true, Reach::Network) => Ok(()),
        (true, other) => Err(Misfit {
            control: control.as_str(),
            why: other.named(),
            remedy: match managers {
                true => {
                    "declare control: in-cluster, or move the cluster to etcd (drover export | \
                     drover import)"
                }
                false => {
                    "a cluster of plain groups only is controlled from outside: keep it in etcd \
                     (drover export | drover import)"
                }
            },
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_managers_controller_takes_unless_control_is_external() {
        assert_eq!(turn(Control::InCluster, Seat::Manager, false), Turn::Take);
        assert_eq!(turn(Control::Both, Seat::Manager, false), Turn::Take);
        assert_eq!(
            turn(Control::External, Seat::Manager, false),
            Turn::Wait(Waits::ExternalOnly)
        );
    }

    #[test]
    fn an_external_controller_only_ever_acquires_a_free_lease() {
        assert_eq!(
            turn(Control::External, Seat::External, false),
            Turn::Acquire
        );
        assert_eq!(turn(Control::Both, Seat::External, false), Turn::Acquire);
        assert_eq!(
            turn(Control::InCluster, Seat::External, false),
            Turn::Wait(Waits::InClusterOnly)
        );
    }

    #[test]
    fn an_external_controller_blind_to_the_swarm_never_acts_for_it() {
        for control in [Control::External, Control::Both] {
            assert_eq!(
                turn(control, Seat::External, true),
                Turn::Wait(Waits::Blind)
            );
        }
        assert_eq!(turn(Control::Both, Seat::Manager, true), Turn::Take);
    }

    #[test]
    fn external_control_needs_a_network_store() {
        for reach in [Reach::OneHost, Reach::InRaft, Reach::Network] {
            assert_eq!(fits(Control::InCluster, reach, true), Ok(()));
        }
        assert_eq!(fits(Control::External, Reach::Network, false), Ok(()));
        assert_eq!(fits(Control::Both, Reach::Network, true), Ok(()));
        let e = fits(Control::External, Reach::OneHost, true).unwrap_err();
        assert!(e.to_string().contains("file store is one host's"), "{e}");
        assert!(e.to_string().contains("control: external"), "{e}");
        assert!(e.to_string().contains("declare control: in-cluster"), "{e}");
        assert!(fits(Control::Both, Reach::InRaft, true).is_err());
        // No advice a cluster without managers could follow.
        let plain = fits(Control::External, Reach::OneHost, false).unwrap_err();
        assert!(!plain.to_string().contains("in-cluster"), "{plain}");
    }
}
