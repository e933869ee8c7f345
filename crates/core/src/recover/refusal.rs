//! Why a recovery is refused, and the operator input it cannot act on:
//! each reason a type carrying the sentence the operator reads.

use serde::Serialize;

/// Why a recovery is refused (nothing is changed).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, thiserror::Error)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Refusal {
    /// An engine knows a leader: the quorum holds.
    #[error("the quorum is not lost: the engine of {machine} knows a leader; nothing to recover")]
    QuorumHeld {
        /// The machine whose engine knows a leader.
        machine: String,
    },
    /// No manager's engine answers (without a leader).
    #[error(
        "no manager's engine answers: nothing to recover from (for ~20 s after losing its peers a manager's engine answers no swarm call; try again then)"
    )]
    NoSurvivor,
    /// Enough members may still vote: an election, not a loss.
    #[error(
        "the quorum is not known to be lost: {may_vote} of {members} raft members may still vote (quorum {quorum}); a member whose engine does not answer may be busy in an election, or paused"
    )]
    NotLost {
        /// Members that answer without a leader or do not answer in time.
        may_vote: usize,
        /// Raft members.
        members: usize,
        /// Their quorum.
        quorum: usize,
    },
    /// A lost member's machine is still listed by the provider.
    #[error(
        "{machine} ({addr}, raft member {node_id}) may still be running: {why}; a new cluster beside it could make two swarms. Bring it back (it rejoins by itself) or destroy it through its provider; only if its engine is not running and you know it is gone for good, name it with --gone {machine}"
    )]
    MayStillRun {
        /// The machine.
        machine: String,
        /// Its member's node id.
        node_id: String,
        /// Its member's raft address.
        addr: String,
        /// What the provider and its engine said.
        why: String,
    },
    /// A lost member is on no machine the provider lists, unnamed.
    #[error(
        "raft member {node_id} ({addr}) is on no machine the provider lists: drover cannot tell a machine destroyed from a manager it never made (joined by hand, another provider or state dir), which may still run; a new cluster beside it could make two swarms. If it is gone for good, name it with --gone {host}"
    )]
    Unaccounted {
        /// Its node id.
        node_id: String,
        /// Its raft address.
        addr: String,
        /// Its address without the port (what `--gone` takes).
        host: String,
    },
    /// A lost member is on no machine whose address is known, while the
    /// provider lists a machine that may run and whose address it could
    /// not read: the member may be on it, whatever the operator names.
    #[error(
        "raft member {node_id} ({addr}) is on no listed machine whose address is known, and the provider lists {machines} whose address it could not read and which may still run: the member may be on it; nothing is taken for gone until the provider tells its address (or the machine is destroyed)"
    )]
    AddressUnknown {
        /// Its node id.
        node_id: String,
        /// Its raft address.
        addr: String,
        /// The machines of unknown address that may run.
        machines: String,
    },
    /// A recovery recorded as started a moment ago may still be forming
    /// its new cluster: no second force-new-cluster meanwhile.
    #[error(
        "a recovery from {survivor} was recorded as started {ago_s}s ago and no engine knows a leader yet: its force-new-cluster may still be forming the new cluster, and a second one would break it; run drover recover again in {wait_s}s (it finishes the recovery if the new cluster formed, else judges afresh)"
    )]
    MayStillBeForming {
        /// The recorded survivor.
        survivor: String,
        /// How long ago it started, s.
        ago_s: u64,
        /// How long until the evidence is judged afresh, s.
        wait_s: u64,
    },
    /// Several managers survive and the operator named none.
    #[error(
        "{} managers survive ({}): the engines do not say which holds the most recent raft state; name the one to recover from with --from MACHINE",
        candidates.len(),
        candidates.join(", ")
    )]
    SeveralSurvivors {
        /// The surviving managers' machines.
        candidates: Vec<String>,
    },
}

/// Operator input that names something it cannot (exit 2 before anything).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BadInput {
    /// `--gone` or `--from` names no machine the provider lists.
    #[error(
        "{flag} {machine}: the provider lists no machine {machine} (machines: {known}), and no lost raft member on no listed machine has that address or node id"
    )]
    UnknownMachine {
        /// `--gone` or `--from`.
        flag: &'static str,
        /// The name given.
        machine: String,
        /// The machines there are.
        known: String,
    },
    /// `--gone` names a machine whose engine answers as a manager.
    #[error("--gone {machine}: its engine answers as a manager; it is not lost")]
    GoneAnswers {
        /// The machine.
        machine: String,
    },
    /// `--gone` names a machine whose engine is running but silent.
    #[error(
        "--gone {machine}: its engine is running but does not answer ({why}): paused or partitioned, not gone; destroy it through its provider first (or bring it back: it rejoins by itself)"
    )]
    GoneStillRuns {
        /// The machine.
        machine: String,
        /// What asking its engine gave.
        why: String,
    },
    /// `--gone` names a machine that is no lost raft member's.
    #[error(
        "--gone {machine}: it is no lost raft member's machine (its address {address} is not a manager the survivors list)"
    )]
    GoneNotAMember {
        /// The machine.
        machine: String,
        /// Its address.
        address: String,
    },
    /// While a recorded recovery is finished, `--gone` names a member the
    /// record does not.
    #[error(
        "--gone {name}: the recovery being finished (started at {at_ms} ms since the epoch) named only {recorded} gone; drover removes no other node entry (check that it is gone, then docker node rm it yourself)"
    )]
    NotRecorded {
        /// The name given.
        name: String,
        /// When the recovery started.
        at_ms: u64,
        /// The members it named, by address.
        recorded: String,
    },
    /// While a recorded recovery is finished, `--from` names another survivor.
    #[error(
        "--from {machine}: the recovery being finished (started at {at_ms} ms since the epoch) forced a new cluster on {survivor}"
    )]
    FromNotRecorded {
        /// The name given.
        machine: String,
        /// When the recovery started.
        at_ms: u64,
        /// The recorded survivor.
        survivor: String,
    },
    /// `--from` names a machine whose engine is not a manager without a leader.
    #[error(
        "--from {machine}: its engine is not a surviving manager (it says: {said}); name a machine whose engine answers as a manager without a leader"
    )]
    FromNotASurvivor {
        /// The machine.
        machine: String,
        /// What its engine said.
        said: String,
    },
}
