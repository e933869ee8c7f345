//! What a machine that has not joined its swarm shows of its boot: the
//! tail of its boot log and whether its engine's join already failed.
//! A machine that never joins says why only there (a refused connection to
//! the manager's port, a failed package step); its provider hands drover
//! the tail where it can, the controller fetches it for the machines the
//! planner asks about ([`crate::plan::Plan::boot_asks`]), and the planner
//! shows it where it reports the machine (status, the never-joined event,
//! the blocked reason). Every text here was redacted
//! ([`crate::redact::redact_text`]) before it left the provider's adapter.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// The most lines of a boot log drover keeps.
pub const TAIL_LINES: usize = 20;
/// The most bytes of a boot log drover keeps (of its last lines): what a
/// status document or an event can carry for every machine in trouble.
pub const TAIL_BYTES: usize = 4096;
/// The most bytes of an engine's own join error kept.
const ERROR_BYTES: usize = 512;

/// The last lines of a machine's boot log, bounded and redacted.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct BootLog {
    lines: Vec<String>,
}

impl BootLog {
    /// The tail of `raw`: its last [`TAIL_LINES`] non-empty lines within
    /// [`TAIL_BYTES`], each redacted (a line longer than the byte bound
    /// keeps its end: where an error message is).
    pub fn tail(raw: &str) -> BootLog {
        let mut lines = Vec::new();
        let mut bytes = 0;
        for line in raw
            .lines()
            .rev()
            .map(str::trim_end)
            .filter(|l| !l.is_empty())
        {
            if lines.len() == TAIL_LINES || bytes >= TAIL_BYTES {
                break;
            }
            let shown = crate::redact::redact_text(line);
            let room = TAIL_BYTES - bytes;
            let kept = end_within(&shown, room);
            bytes += kept.len() + 1;
            lines.push(kept.to_string());
        }
        lines.reverse();
        BootLog { lines }
    }

    /// Its lines, oldest first.
    pub fn lines(&self) -> &[String] {
        &self.lines
    }

    /// True when the log had nothing to show.
    pub fn is_empty(&self) -> bool {
        self.lines.is_empty()
    }

    /// The last `n` lines, joined by ` | ` for a one-line reason.
    pub fn last(&self, n: usize) -> String {
        let from = self.lines.len().saturating_sub(n);
        self.lines[from..].join(" | ")
    }
}

/// The end of `s` within `max` bytes, cut on a character boundary.
fn end_within(s: &str, max: usize) -> &str {
    if s.len() <= max {
        return s;
    }
    let mut from = s.len() - max;
    while !s.is_char_boundary(from) {
        from += 1;
    }
    &s[from..]
}

/// An engine that reports its swarm state as `error` before it ever
/// joined (`docker info`: `Swarm.LocalNodeState` = `error`): its join
/// failed, and swarmkit does not retry a first join that failed (measured
/// on Incus: it stayed so after the partition that caused it healed).
/// Carries the engine's `Swarm.Error`, redacted and bounded.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct JoinFailed(String);

impl JoinFailed {
    /// The engine's own words (`Swarm.Error`), redacted and bounded.
    pub fn new(error: &str) -> JoinFailed {
        let shown = crate::redact::redact_text(error.trim());
        let mut cut = shown.len().min(ERROR_BYTES);
        while !shown.is_char_boundary(cut) {
            cut -= 1;
        }
        JoinFailed(shown[..cut].to_string())
    }
}

impl std::fmt::Display for JoinFailed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.0.is_empty() {
            f.write_str("its engine reports swarm state error")
        } else {
            write!(f, "its engine reports swarm state error: {}", self.0)
        }
    }
}

/// What is known of one machine's boot (by instance id).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct BootFacts {
    /// Its boot log's tail, when its provider offers one and it was asked.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub log: Option<BootLog>,
    /// Its engine's join failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub join_failed: Option<JoinFailed>,
}

/// Boot facts of the machines the planner asked about, by instance id.
pub type Boots = BTreeMap<String, BootFacts>;

#[cfg(test)]
mod tests {
    use super::*;

    /// The tail keeps the last lines within both bounds, newest last,
    /// redacted: a token in the log never reaches a status document.
    #[test]
    fn a_tail_is_bounded_and_redacted() {
        let raw: String = (1..=50)
            .map(|i| format!("line {i}\n"))
            .chain(["\n".to_string(), "join SWMTKN-1-abc-def failed\n".into()])
            .collect();
        let t = BootLog::tail(&raw);
        assert_eq!(t.lines().len(), TAIL_LINES);
        assert_eq!(t.lines()[0], "line 32");
        assert_eq!(t.last(2), "line 50 | join <redacted> failed");
        let long = format!("start\n{}END", "x".repeat(3 * TAIL_BYTES));
        let t = BootLog::tail(&long);
        assert_eq!(t.lines().len(), 1);
        assert!(t.lines()[0].ends_with("END") && t.lines()[0].len() == TAIL_BYTES);
        assert!(BootLog::tail("\n\n").is_empty());
    }

    #[test]
    fn a_join_failure_shows_the_engines_words_redacted() {
        let f = JoinFailed::new(" context deadline exceeded (SWMTKN-1-x) ");
        assert_eq!(
            f.to_string(),
            "its engine reports swarm state error: context deadline exceeded (<redacted>)"
        );
        assert_eq!(
            JoinFailed::new("").to_string(),
            "its engine reports swarm state error"
        );
    }
}
