//! The one way a desired state is written by an operator's command: only a
//! [`Committable`] (a spec that passed `validate_commit`), compare-and-swap
//! on the revision it was planned against, with its provenance. The
//! controller's own automatic rollback is the one other spec write, fenced
//! by its term (`Store::commit_rollback`), and records its provenance with
//! [`provenance`] too.

use crate::status::wall_ms;
use drover_core::spec::Committable;
use drover_spi::{Provenance, Store, StoreError};

/// Why a commit was not made.
#[derive(Debug, thiserror::Error)]
pub enum CommitError {
    /// Someone committed revision `current` after the change was planned
    /// against `expected`: nothing was written.
    #[error(
        "someone else committed revision {current} while this change was planned against {expected}: run the command again to plan against it"
    )]
    Conflict {
        /// The store's revision now.
        current: u64,
        /// The revision the change was planned against.
        expected: u64,
    },
    /// The spec's `control:` needs a store this one is not (external
    /// controllers need one they all reach): nothing was written.
    #[error(transparent)]
    Misfit(#[from] drover_core::control::Misfit),
    /// The store failed.
    #[error(transparent)]
    Store(StoreError),
}

/// Who committed, when, and why.
pub fn provenance(who: &str, message: &str) -> Provenance {
    Provenance {
        who: who.to_string(),
        at_ms: wall_ms(),
        message: message.to_string(),
    }
}

/// Commits `spec` if the desired state is still at revision `expected`
/// (0: the store holds none); `who` and `message` are its provenance.
pub async fn commit(
    store: &dyn Store,
    expected: u64,
    spec: &Committable,
    who: &str,
    message: &str,
    is_rollback: bool,
) -> Result<u64, CommitError> {
    drover_core::control::spec_fits(spec.spec(), store.reach())?;
    match store
        .commit(expected, spec.spec(), provenance(who, message), is_rollback)
        .await
    {
        Ok(rev) => Ok(rev),
        Err(StoreError::Conflict { current, .. }) => {
            Err(CommitError::Conflict { current, expected })
        }
        Err(e) => Err(CommitError::Store(e)),
    }
}
