//! A machine's engine asked through its provider: the provider knows how
//! to reach its machines' engines (a socket on this host, a proxy device)
//! and what state the machine itself is in (stopped, paused), so the
//! quorum verdict and `recover` work for every provider alike.

use drover_core::model::Instance;
use drover_core::quorum_probe::EngineAnswer;
use drover_core::recover::Raft;
use drover_core::verdict::machine::{Power, engine_answer};

/// One machine of a provider, its engine asked now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EngineReport {
    /// The machine, as a fresh describe lists it.
    pub instance: Instance,
    /// The address its engine advertises, when the provider knows it
    /// (empty otherwise: no raft member is matched to it).
    pub address: String,
    /// What its engine said, the provider's state of the machine first
    /// ([`engine_answer`]).
    pub answer: EngineAnswer,
    /// For a manager without a leader: its raft as it reports it.
    pub raft: Option<Raft>,
}

impl EngineReport {
    /// A machine whose engine this provider cannot reach: silent, which
    /// is unknown and never gone (design rule 13).
    pub fn unreachable(instance: Instance) -> EngineReport {
        EngineReport {
            instance,
            address: String::new(),
            answer: engine_answer(Power::Unknown, None),
            raft: None,
        }
    }
}
