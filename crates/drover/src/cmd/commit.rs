//! The one way the binary writes the desired state: a spec becomes a
//! [`Committable`] only through [`validated`] (the same validation as a
//! cluster file plus the transition rules, [`validate_commit`]), and
//! [`commit`] takes nothing else. `apply`, `adopt`, `import`, `rollback`,
//! `restart` and `destroy` all go through here; a refusal is exit 2 with
//! every problem named and nothing written. (`destroy --forget-machines`
//! and `import` of such a revision take `validate_forget`'s one exception
//! instead: `cmd::forget`, `revisions::import`.)

use crate::error::MainError;
use drover_controller::procedure::{self, commit::CommitError};
use drover_core::spec::{ClusterSpec, Committable, validate_commit};
use drover_spi::Store;

/// `next` checked against `previous` (the current revision's spec, `None`
/// when the store holds none); `what` names the command's change in the
/// refusal (e.g. `rollback of workers to revision 3`).
pub(crate) fn validated(
    previous: Option<&ClusterSpec>,
    next: ClusterSpec,
    what: &str,
) -> Result<Committable, MainError> {
    validate_commit(previous, next).map_err(|refused| MainError::Refused {
        what: what.to_string(),
        refused,
    })
}

/// Commits `spec` if the desired state is still at revision `expected`
/// (compare-and-swap: two operators never silently overwrite each other),
/// as the operator running this command.
pub(crate) async fn commit(
    store: &dyn Store,
    expected: u64,
    spec: &Committable,
    message: &str,
    is_rollback: bool,
) -> Result<u64, MainError> {
    procedure::commit::commit(store, expected, spec, &operator(), message, is_rollback)
        .await
        .map_err(|e| match e {
            CommitError::Conflict { .. } | CommitError::Misfit(_) => {
                MainError::BadInput(e.to_string())
            }
            CommitError::Store(e) => MainError::Failed(e.into()),
        })
}

/// A fresh cluster id.
pub(crate) fn new_cluster_id() -> String {
    uuid::Uuid::new_v4().simple().to_string()[..12].to_string()
}

/// Who is committing: `user@host`, as revisions and events record it.
pub(crate) fn operator() -> String {
    let user = std::env::var("USER").unwrap_or_else(|_| "root".into());
    let host = std::fs::read_to_string("/etc/hostname")
        .map(|h| h.trim().to_string())
        .unwrap_or_default();
    format!("{user}@{host}")
}
