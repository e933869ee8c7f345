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
        if let Some(page) = web_page_title(&m) {
            // Something else answers there (a web server, a proxy): its
            // whole page in an error message helps nobody.
            return EngineError::Other(format!(
                "HTTP {status} with a web page ({page}), not a docker engine's answer: \
                 check that the address is a docker engine's"
            ));
        }
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
                // Its innermost cause is the one to show: "Connection refused
                // (os error 111)", not "client error (Connect)".
                if s.contains("connect") || s.contains("Connection") || s.contains("client error") {
                    EngineError::Unavailable(root_cause(&other).unwrap_or(s))
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

/// The innermost cause of `e`, when it has one.
fn root_cause(e: &(dyn std::error::Error + 'static)) -> Option<String> {
    let mut inner = e.source()?;
    while let Some(next) = inner.source() {
        inner = next;
    }
    Some(inner.to_string())
}

/// The most characters of someone else's page an error message repeats.
const PAGE_SUMMARY: usize = 80;

/// When `body` is an HTML page (or any multi-line text no engine sends as
/// an error): its title, else its first non-empty line, without tags,
/// whitespace collapsed, at most [`PAGE_SUMMARY`] characters, quoted.
fn web_page_title(body: &str) -> Option<String> {
    let html = body.starts_with('<');
    if !html && !body.contains('\n') {
        return None;
    }
    let lower = body.to_ascii_lowercase();
    let title = lower
        .find("<title>")
        .map(|start| start + "<title>".len())
        .and_then(|start| {
            let end = start + lower[start..].find("</title>")?;
            Some(&body[start..end])
        });
    let text = title.unwrap_or_else(|| {
        body.lines()
            .map(strip_tags)
            .find(|l| !l.trim().is_empty())
            .map_or("", |l| l)
    });
    let text = strip_tags(text);
    let mut words = text.split_whitespace().collect::<Vec<_>>().join(" ");
    if words.chars().count() > PAGE_SUMMARY {
        words = words.chars().take(PAGE_SUMMARY).collect::<String>() + "…";
    }
    Some(format!("{words:?}"))
}

/// `text` up to its first tag, or the text between tags on a tagged line.
fn strip_tags(line: &str) -> &str {
    let mut rest = line;
    while let Some(after) = rest.strip_prefix('<') {
        rest = after.split_once('>').map_or("", |(_, r)| r);
    }
    rest.split('<').next().unwrap_or("")
}

#[cfg(test)]
mod page_tests {
    use super::*;

    #[test]
    fn a_web_page_is_summarised_by_its_title_bounded() {
        let page = format!(
            "<!DOCTYPE html>\n<html><head><title>404 Not Found</title></head>\n<body>{}</body></html>",
            "x".repeat(5000)
        );
        let e = EngineError::classify(404, &page).to_string();
        assert!(
            e.contains("HTTP 404") && e.contains("\"404 Not Found\""),
            "{e}"
        );
        assert!(e.len() < 250 && !e.contains('<'), "{e}");
        let untitled = format!("<html><body><h1>{}</h1></body></html>", "y".repeat(500));
        let e = EngineError::classify(502, &untitled).to_string();
        assert!(
            e.contains("HTTP 502") && e.contains('…') && e.len() < 250,
            "{e}"
        );
    }

    #[test]
    fn an_engine_message_is_kept_verbatim() {
        let e = EngineError::classify(404, "node xyz not found");
        assert!(matches!(e, EngineError::NotFound(m) if m == "node xyz not found"));
    }
}
