//! The engine's answers, classified.

use drover_spi::{ClusterError, LeaseExpired};

/// Why an engine call failed, classified by what the caller can do about it.
#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    /// Stale node version ("update out of sequence"): re-read and retry.
    #[error("update out of sequence: {0}")]
    OutOfSequence(String),
    /// The engine refused on a precondition (must be demoted first, would
    /// lose quorum, last manager, still participating as a manager, node not
    /// down). The engine's message is kept verbatim.
    #[error("refused by the engine: {0}")]
    Refused(String),
    /// "The swarm does not have a leader".
    #[error("the swarm has no leader: {0}")]
    NoLeader(String),
    /// Connection refused, socket missing, timeout.
    #[error("engine unavailable: {0}")]
    Unavailable(String),
    /// 404: no such node / object.
    #[error("not found: {0}")]
    NotFound(String),
    /// The engine is not part of a swarm, or not a manager, for a call that needs it.
    #[error("not a swarm manager: {0}")]
    NotManager(String),
    /// The endpoint, its TLS setting or its certificate directory cannot
    /// work (not retryable: the message says what to fix).
    #[error("{0}")]
    BadAddress(String),
    /// Anything else.
    #[error("engine error: {0}")]
    Other(String),
    /// Nothing was sent: the caller's fence refused right before the request.
    #[error("not sent: {0}")]
    Fenced(#[from] LeaseExpired),
}

/// The refusal messages dockerd gives on precondition failures.
const REFUSALS: &[&str] = &[
    "must be demoted to worker before removal",
    "this would result in a loss of quorum",
    "can't remove member from the raft",
    "last manager",
    "participating as a manager",
    "is not down and can't be removed",
    "FailedPrecondition",
];

impl EngineError {
    /// True when the same call may succeed later.
    pub fn is_transient(&self) -> bool {
        matches!(
            self,
            EngineError::OutOfSequence(_) | EngineError::NoLeader(_) | EngineError::Unavailable(_)
        )
    }

    /// True for exactly the "update out of sequence" answer.
    pub fn is_out_of_sequence(&self) -> bool {
        matches!(self, EngineError::OutOfSequence(_))
    }

    /// True for the refusal `swarm leave` gives while the node still
    /// participates as a manager (the demote → leave race).
    pub fn is_still_manager_refusal(&self) -> bool {
        matches!(self, EngineError::Refused(m) if m.contains("participating as a manager"))
    }

    /// Classifies an engine answer from its status code and message.
    pub fn classify(status: u16, message: &str) -> EngineError {
        let m = message.trim().to_string();
        if m.contains("update out of sequence") {
            EngineError::OutOfSequence(m)
        } else if m.contains("does not have a leader") {
            EngineError::NoLeader(m)
        } else if REFUSALS.iter().any(|r| m.contains(r)) {
            EngineError::Refused(m)
        } else if status == 404 {
            EngineError::NotFound(m)
        } else if status == 503
            && (m.contains("not a swarm manager") || m.contains("not part of a swarm"))
        {
            EngineError::NotManager(m)
        } else {
            EngineError::Other(format!("HTTP {status}: {m}"))
        }
    }
}

impl From<bollard::errors::Error> for EngineError {
    fn from(e: bollard::errors::Error) -> Self {
        use bollard::errors::Error as B;
        match e {
            B::DockerResponseServerError {
                status_code,
                message,
            } => EngineError::classify(status_code, &message),
            B::RequestTimeoutError => EngineError::Unavailable("request timed out".into()),
            B::SocketNotFoundError(p) => EngineError::Unavailable(format!("no socket at {p}")),
            B::IOError { err } => EngineError::Unavailable(err.to_string()),
            B::HyperResponseError { err } => EngineError::Unavailable(err.to_string()),
            other => {
                let s = other.to_string();
                // hyper-util's legacy client error (connect refused etc.)
                // has no public variant worth matching on; its text does.
                if s.contains("connect") || s.contains("Connection") || s.contains("client error") {
                    EngineError::Unavailable(s)
                } else {
                    EngineError::Other(s)
                }
            }
        }
    }
}

impl From<EngineError> for ClusterError {
    fn from(e: EngineError) -> Self {
        match e {
            EngineError::OutOfSequence(m) => ClusterError::OutOfSequence(m),
            EngineError::Refused(m) => ClusterError::Refused(m),
            EngineError::NoLeader(m) => ClusterError::NoLeader(m),
            EngineError::Unavailable(m) => ClusterError::Unavailable(m),
            EngineError::NotFound(m) => ClusterError::NotFound(m),
            EngineError::NotManager(m) => ClusterError::Unavailable(m),
            EngineError::BadAddress(m) | EngineError::Other(m) => ClusterError::Other(m),
            EngineError::Fenced(e) => ClusterError::Fenced(e),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classifies_engine_messages() {
        let c = |s, m| EngineError::classify(s, m);
        assert!(
            c(
                500,
                "rpc error: code = Unknown desc = update out of sequence"
            )
            .is_out_of_sequence()
        );
        assert!(matches!(
            c(400, "rpc error: code = FailedPrecondition desc = node abc must be demoted to worker before removal"),
            EngineError::Refused(m) if m.contains("demoted")
        ));
        assert!(matches!(
            c(
                500,
                "can't remove member from the raft: this would result in a loss of quorum"
            ),
            EngineError::Refused(_)
        ));
        assert!(c(503, "You are attempting to leave the swarm on a node that is participating as a manager. ...").is_still_manager_refusal());
        assert!(matches!(
            c(
                500,
                "rpc error: code = Unknown desc = The swarm does not have a leader. It's possible that too few managers are online."
            ),
            EngineError::NoLeader(_)
        ));
        assert!(matches!(
            c(404, "node xyz not found"),
            EngineError::NotFound(_)
        ));
        assert!(matches!(
            c(503, "This node is not a swarm manager."),
            EngineError::NotManager(_)
        ));
        assert!(c(500, "update out of sequence").is_transient());
        assert!(!c(404, "x").is_transient());
        let ce: ClusterError = c(500, "The swarm does not have a leader").into();
        assert!(matches!(ce, ClusterError::NoLeader(_)));
    }
}
