//! Why a member must go: the one rule every stage reads. A member is due
//! for replacement when it was built from another config, when an
//! operator asked for it (`drover replace`), or when it is past its
//! group's `health.max_age`. The roll stage replaces due members, the
//! spare stage brings the temporary manager for them, a surge's new
//! machine that never joined is the next attempt for them, the leader
//! waits for them, the group that rolls first is the first holding one,
//! and `status` calls such a group rolling. Before this rule each stage
//! wrote its own test: the spare stage knew no `max_age`, so an aged pet
//! waited for ever behind a floor the operator never set; the surge
//! retry counted only a config change, so an aged or requested member's
//! surge churned machines that never joined without end.

use super::DesiredGroup;
use super::group::Planner;
use super::view::Member;

/// Why a member must go (the first that holds, in this order).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Due<'a> {
    /// An operator asked for its replacement (`drover replace`).
    Requested,
    /// It was built from another config (`None`: it carries none).
    Config(Option<&'a str>),
    /// It is past its group's `health.max_age`.
    Aged,
}

impl Due<'_> {
    /// What a roll's line says of the reason (the config change itself is
    /// shown apart, with both hashes).
    pub(crate) fn note(self) -> &'static str {
        match self {
            Due::Requested => " (requested by an operator)",
            Due::Aged => " (past health.max_age)",
            Due::Config(_) => "",
        }
    }
}

impl Planner<'_> {
    /// Why `m`, a member of `d`, must be replaced, if it must.
    pub(crate) fn due<'m>(&self, d: &DesiredGroup, m: &Member<'m>) -> Option<Due<'m>> {
        if self.facts.input.desired.replace.contains(&m.id) {
            Some(Due::Requested)
        } else if !m.current() {
            Some(Due::Config(m.config()))
        } else if self.expired(&d.spec, m) {
            Some(Due::Aged)
        } else {
            None
        }
    }
}
