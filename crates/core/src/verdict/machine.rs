//! "Is this machine gone?" One rule for `status`, `recover`, the heartbeats
//! and the planner. Design rule 13: a machine that cannot be reached is
//! unknown, never gone; rule 11: a lost raft member is gone for good only on
//! evidence (its provider destroyed it, or a successful describe has not
//! listed it for the bound) or on the operator's explicit word, and even the
//! operator's word does not make a machine that still runs gone.

use crate::quorum_probe::EngineAnswer;

/// What the provider says of the machine itself, asked now (for Incus, its
/// instance state; for the local provider, whether its engine's process runs).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Power {
    /// It runs (or is still being made).
    Running,
    /// It exists and is stopped: it may be started again.
    Stopped,
    /// It exists and is paused (frozen): it may resume with its raft state.
    Paused,
    /// The provider cannot say (it has no such notion, or did not answer).
    Unknown,
}

/// Where the machine stands in its provider's listings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Listing {
    /// A successful describe lists it, in this state.
    Listed(Power),
    /// Successful describes have not listed it; `bound_passed` once that
    /// lasted for the bound within which a describe may be partial.
    Unlisted {
        /// Unlisted for the whole bound.
        bound_passed: bool,
    },
    /// The operation that wanted it gone destroyed it through its provider.
    Destroyed,
    /// No machine any provider lists stands for it (a raft member drover
    /// cannot tell from a manager it never made).
    NoMachine,
}

/// Everything the machine verdict judges by.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MachineEvidence {
    /// Its provider's word.
    pub listing: Listing,
    /// What its engine said, asked now (`None`: not asked).
    pub engine: Option<EngineAnswer>,
    /// The operator named it gone for good (`drover recover --gone`).
    pub named_gone: bool,
}

impl MachineEvidence {
    /// Only the provider's word: the engine not asked, no operator's word
    /// (the planner's question about a machine it wanted destroyed).
    pub fn unasked(listing: Listing) -> MachineEvidence {
        MachineEvidence {
            listing,
            engine: None,
            named_gone: false,
        }
    }
}

/// Why a machine counts as gone for good.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GoneBy {
    /// Its provider destroyed it for the operation that wanted it gone.
    Destroyed,
    /// Successful describes have not listed it for the whole bound.
    Unlisted,
    /// The operator named it, and nothing says it still runs.
    Operator,
}

/// The answer to "is this machine gone?".
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MachineVerdict {
    /// Its engine answers.
    Answers,
    /// It does not run now (stopped, its engine not running): it cannot
    /// vote, but it may be started again, so it is not gone.
    Down(String),
    /// Gone for good.
    Gone(GoneBy),
    /// Silent, and it may still run (paused, partitioned, busy in an
    /// election, a provider that cannot tell): never gone.
    Unreachable(String),
}

impl MachineVerdict {
    /// Whether it may still vote in its raft (it may, unless it does not
    /// run or is gone).
    pub fn may_vote(&self) -> bool {
        matches!(
            self,
            MachineVerdict::Answers | MachineVerdict::Unreachable(_)
        )
    }

    /// Whether it is gone for good.
    pub fn is_gone(&self) -> bool {
        matches!(self, MachineVerdict::Gone(_))
    }
}

/// Judges `e`: see the module's rules. An engine that answers wins over
/// every other word (it runs); a machine that may still run is never gone,
/// whatever the operator says.
pub fn verdict(e: &MachineEvidence) -> MachineVerdict {
    let answers = matches!(
        e.engine,
        Some(EngineAnswer::Led | EngineAnswer::NoLeader(_) | EngineAnswer::NotAManager)
    );
    if answers {
        return MachineVerdict::Answers;
    }
    let silent = || match &e.engine {
        Some(EngineAnswer::Busy(why) | EngineAnswer::Down(why)) => why.clone(),
        _ => "its engine was not asked".into(),
    };
    match e.listing {
        Listing::Destroyed => MachineVerdict::Gone(GoneBy::Destroyed),
        Listing::Unlisted { bound_passed: true } => MachineVerdict::Gone(GoneBy::Unlisted),
        Listing::Unlisted {
            bound_passed: false,
        } => MachineVerdict::Unreachable("not listed, not yet for the bound".into()),
        Listing::NoMachine if e.named_gone => MachineVerdict::Gone(GoneBy::Operator),
        Listing::NoMachine => {
            MachineVerdict::Unreachable("on no machine the provider lists".into())
        }
        Listing::Listed(Power::Paused) => MachineVerdict::Unreachable(silent()),
        Listing::Listed(power) => {
            let down = power == Power::Stopped || matches!(e.engine, Some(EngineAnswer::Down(_)));
            match (down, e.named_gone) {
                (true, true) => MachineVerdict::Gone(GoneBy::Operator),
                (true, false) => MachineVerdict::Down(silent()),
                (false, _) => MachineVerdict::Unreachable(silent()),
            }
        }
    }
}

/// A machine's engine as its provider reports it, asked now: the
/// provider's own state of the machine first (a stopped machine's engine
/// is certainly not running; a paused one may resume), else what the
/// engine said (`asked`; `None` when this provider cannot reach it).
pub fn engine_answer(power: Power, asked: Option<EngineAnswer>) -> EngineAnswer {
    match (power, asked) {
        (Power::Stopped, _) => EngineAnswer::Down("its machine is stopped".into()),
        (Power::Paused, _) => EngineAnswer::Busy("its machine is paused".into()),
        (_, Some(answer)) => answer,
        (_, None) => EngineAnswer::Busy("this provider cannot reach its machines' engines".into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn listed(power: Power, engine: Option<EngineAnswer>, named_gone: bool) -> MachineVerdict {
        verdict(&MachineEvidence {
            listing: Listing::Listed(power),
            engine,
            named_gone,
        })
    }

    fn busy() -> Option<EngineAnswer> {
        Some(EngineAnswer::Busy("no answer within 3s".into()))
    }

    /// Rule 13: silence is unknown, never gone, even on the operator's word.
    #[test]
    fn a_silent_machine_that_may_run_is_never_gone() {
        for power in [Power::Running, Power::Paused, Power::Unknown] {
            for named in [false, true] {
                let v = listed(power, busy(), named);
                assert!(
                    matches!(v, MachineVerdict::Unreachable(_)),
                    "{power:?} {named}: {v:?}"
                );
                assert!(v.may_vote() && !v.is_gone());
            }
        }
        let paused = listed(Power::Paused, None, true);
        assert!(
            matches!(paused, MachineVerdict::Unreachable(_)),
            "{paused:?}"
        );
    }

    #[test]
    fn a_stopped_machine_cannot_vote_and_is_gone_only_on_the_operators_word() {
        let stopped = listed(Power::Stopped, None, false);
        assert!(matches!(stopped, MachineVerdict::Down(_)) && !stopped.may_vote());
        assert!(!stopped.is_gone());
        let engine_down = Some(EngineAnswer::Down("its engine is not running".into()));
        assert_eq!(
            listed(Power::Running, engine_down.clone(), false),
            MachineVerdict::Down("its engine is not running".into())
        );
        assert_eq!(
            listed(Power::Running, engine_down, true),
            MachineVerdict::Gone(GoneBy::Operator)
        );
    }

    #[test]
    fn an_engine_that_answers_runs_whatever_else_is_said() {
        for answer in [
            EngineAnswer::Led,
            EngineAnswer::NoLeader("no leader".into()),
            EngineAnswer::NotAManager,
        ] {
            let v = listed(Power::Stopped, Some(answer), true);
            assert_eq!(v, MachineVerdict::Answers);
        }
    }

    #[test]
    fn unlisted_is_gone_once_for_the_bound_and_destroyed_at_once() {
        let e = MachineEvidence::unasked;
        assert!(matches!(
            verdict(&e(Listing::Unlisted {
                bound_passed: false
            })),
            MachineVerdict::Unreachable(_)
        ));
        assert_eq!(
            verdict(&e(Listing::Unlisted { bound_passed: true })),
            MachineVerdict::Gone(GoneBy::Unlisted)
        );
        assert_eq!(
            verdict(&e(Listing::Destroyed)),
            MachineVerdict::Gone(GoneBy::Destroyed)
        );
        // A raft member on no listed machine: only the operator's word.
        assert!(verdict(&e(Listing::NoMachine)).may_vote());
        let named = MachineEvidence {
            named_gone: true,
            ..e(Listing::NoMachine)
        };
        assert_eq!(verdict(&named), MachineVerdict::Gone(GoneBy::Operator));
    }

    #[test]
    fn the_providers_state_of_the_machine_comes_before_its_engines_word() {
        assert_eq!(
            engine_answer(Power::Stopped, busy()),
            EngineAnswer::Down("its machine is stopped".into())
        );
        assert_eq!(
            engine_answer(Power::Paused, None),
            EngineAnswer::Busy("its machine is paused".into())
        );
        assert_eq!(engine_answer(Power::Running, busy()), busy().unwrap());
        assert!(matches!(
            engine_answer(Power::Unknown, None),
            EngineAnswer::Busy(_)
        ));
    }
}
