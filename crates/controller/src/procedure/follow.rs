//! Following a committed revision from outside the controller (`apply
//! --wait`): through the store only, reading the status the acting
//! controller publishes with the type that writes it.

use crate::status::StatusDoc;
use drover_spi::{Store, StoreError};
use std::time::Duration;
use tokio::time::Instant;

/// How often the store is read again.
const POLL: Duration = Duration::from_millis(500);

/// How a follow ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FollowEnd {
    /// The revision converged.
    Converged,
    /// A group is blocked at this revision.
    Blocked {
        /// The group.
        group: String,
        /// The controller's reason.
        reason: String,
    },
    /// The bound passed first.
    TimedOut,
}

/// Follows the published status until revision `rev` converged, a group
/// blocks at it, or `timeout` passes; `seen` is shown every document read
/// (the last one, at convergence, the converged status when the controller
/// publishes it in time).
pub async fn follow(
    store: &dyn Store,
    rev: u64,
    timeout: Duration,
    mut seen: impl FnMut(&StatusDoc<'static>),
) -> Result<FollowEnd, StoreError> {
    let start = Instant::now();
    loop {
        let history = store.history().await?;
        if history.iter().any(|r| r.rev == rev && r.converged) {
            // The controller publishes the converged status right after
            // marking the revision: show it as the final frame.
            for _ in 0..8 {
                if let Some(doc) = latest(store)
                    .await?
                    .filter(|d| d.revision == rev && d.all_converged())
                {
                    seen(&doc);
                    break;
                }
                tokio::time::sleep(Duration::from_millis(250)).await;
            }
            return Ok(FollowEnd::Converged);
        }
        if let Some(doc) = latest(store).await? {
            seen(&doc);
            if let (true, Some(g)) = (doc.revision == rev, doc.blocked()) {
                return Ok(FollowEnd::Blocked {
                    group: g.name.clone(),
                    reason: g.reason.clone().unwrap_or_default(),
                });
            }
        }
        if start.elapsed() > timeout {
            return Ok(FollowEnd::TimedOut);
        }
        tokio::time::sleep(POLL).await;
    }
}

/// The last published status document, if any and readable (a document a
/// newer controller wrote is waited past, not an error).
pub async fn latest(store: &dyn Store) -> Result<Option<StatusDoc<'static>>, StoreError> {
    match StatusDoc::read(store).await {
        Ok(doc) => Ok(doc),
        Err(StoreError::Corrupt(_)) => Ok(None),
        Err(e) => Err(e),
    }
}
