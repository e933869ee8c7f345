//! Following the acting controller from outside it, in one loop shape:
//! a committed revision to convergence (`apply --wait`), through the store
//! only, reading the status the controller publishes with the type that
//! writes it; and a garbage collection until every item listed is gone
//! (`drover gc`), by looking at the cluster again.

use crate::context::Context;
use crate::observe::preview;
use crate::status::StatusDoc;
use drover_core::plan::{Phase, Plan};
use drover_core::spec::ClusterSpec;
use drover_spi::{Store, StoreError};
use std::time::Duration;
use tokio::time::Instant;

/// How often the store is read again.
const POLL: Duration = Duration::from_millis(500);

/// How often a collection is looked at again: each look observes the
/// cluster, which costs more than reading the store.
const COLLECTION_POLL: Duration = Duration::from_secs(2);

/// How a follow ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FollowEnd {
    /// The revision converged (or, following a collection, every item
    /// awaited was collected).
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

/// What one look at the cluster found.
enum Look {
    /// What was followed is done.
    Done,
    /// A group is blocked: following on would wait for nothing.
    Blocked {
        /// The group.
        group: String,
        /// The controller's reason.
        reason: String,
    },
    /// Not yet.
    Waiting,
}

/// The one follow loop: looks, then gives up once `timeout` has passed,
/// else looks again `every` later.
async fn until<E>(
    timeout: Duration,
    every: Duration,
    mut look: impl AsyncFnMut() -> Result<Look, E>,
) -> Result<FollowEnd, E> {
    let start = Instant::now();
    loop {
        match look().await? {
            Look::Done => return Ok(FollowEnd::Converged),
            Look::Blocked { group, reason } => return Ok(FollowEnd::Blocked { group, reason }),
            Look::Waiting => {}
        }
        if start.elapsed() >= timeout {
            return Ok(FollowEnd::TimedOut);
        }
        tokio::time::sleep(every).await;
    }
}

/// Follows the published status until revision `rev` converged, a group
/// blocks at it, or `timeout` passes; `seen` is shown every document read,
/// or `None` at every look that found none (so a follower can say that
/// nobody acts: [`acting::unattended`](super::acting::unattended)). The
/// last one, at convergence, is the converged status when the controller
/// publishes it in time.
pub async fn follow(
    store: &dyn Store,
    rev: u64,
    timeout: Duration,
    mut seen: impl FnMut(Option<&StatusDoc<'static>>),
) -> Result<FollowEnd, StoreError> {
    until(timeout, POLL, async || {
        let history = store.history().await?;
        if history.iter().any(|r| r.rev == rev && r.converged) {
            // The controller publishes the converged status right after
            // marking the revision: show it as the final frame.
            for _ in 0..8 {
                if let Some(doc) = latest(store)
                    .await?
                    .filter(|d| d.revision == rev && d.all_converged())
                {
                    seen(Some(&doc));
                    break;
                }
                tokio::time::sleep(Duration::from_millis(250)).await;
            }
            return Ok(Look::Done);
        }
        let doc = latest(store).await?;
        seen(doc.as_ref());
        if let Some(doc) = doc
            && let (true, Some(g)) = (doc.revision == rev, doc.blocked())
        {
            return Ok(Look::Blocked {
                group: g.name.clone(),
                reason: g.reason.clone().unwrap_or_default(),
            });
        }
        Ok(Look::Waiting)
    })
    .await
}

/// Follows a garbage collection from outside the controller (`drover gc`):
/// looks at the cluster again (one observation, one planning pass, as
/// `drover plan --store`) until none of the items `waiting` names is still
/// `awaited` by the plan of `spec`, a group blocks, or `timeout` passes.
/// `waiting` is left holding what was not collected. A group blocked in
/// the first look (`first`, already made) is waited past: the
/// collection may be what unblocks it. `seen` is shown, at every look,
/// what is still awaited and the acting controller's last status (so a
/// follower can say that nobody collects).
pub async fn collection(
    ctx: &Context,
    spec: &ClusterSpec,
    waiting: &mut Vec<String>,
    awaited: impl Fn(&Plan) -> Vec<String>,
    timeout: Duration,
    mut seen: impl FnMut(&[String], Option<&StatusDoc<'static>>),
) -> Result<FollowEnd, StoreError> {
    let mut first = true;
    until(timeout, COLLECTION_POLL, async || {
        seen(waiting, latest(ctx.store.as_ref()).await?.as_ref());
        if !std::mem::take(&mut first) {
            let plan = preview(ctx, spec).await?;
            let still = awaited(&plan);
            waiting.retain(|item| still.contains(item));
            if let Some(g) = plan.groups.iter().find(|g| g.phase == Phase::Blocked) {
                return Ok(Look::Blocked {
                    group: g.name.clone(),
                    reason: g.reason.clone().unwrap_or_default(),
                });
            }
        }
        Ok(if waiting.is_empty() {
            Look::Done
        } else {
            Look::Waiting
        })
    })
    .await
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

#[cfg(test)]
mod tests {
    use super::*;
    use drover_spi::Provenance;
    use drover_store::MemStore;

    const EVERY: Duration = Duration::from_secs(2);

    /// Looks answered in turn from `looks` (then `Waiting`), counting them.
    async fn run(looks: Vec<Look>, timeout: Duration) -> (FollowEnd, usize, Duration) {
        let mut looks = looks.into_iter();
        let mut asked = 0;
        let start = Instant::now();
        let end = until(timeout, EVERY, async || {
            asked += 1;
            Ok::<_, StoreError>(looks.next().unwrap_or(Look::Waiting))
        })
        .await
        .unwrap();
        (end, asked, start.elapsed())
    }

    #[tokio::test(start_paused = true)]
    async fn a_follow_looks_again_every_interval_until_done() {
        let (end, asked, took) = run(
            vec![Look::Waiting, Look::Waiting, Look::Done],
            Duration::from_secs(60),
        )
        .await;
        assert_eq!(end, FollowEnd::Converged);
        assert_eq!(asked, 3);
        assert_eq!(took, EVERY * 2);
    }

    #[tokio::test(start_paused = true)]
    async fn a_blocked_group_ends_the_follow_at_once() {
        let blocked = Look::Blocked {
            group: "workers".into(),
            reason: "stuck".into(),
        };
        let (end, asked, _) = run(vec![Look::Waiting, blocked], Duration::from_secs(60)).await;
        assert_eq!(
            end,
            FollowEnd::Blocked {
                group: "workers".into(),
                reason: "stuck".into()
            }
        );
        assert_eq!(asked, 2);
    }

    #[tokio::test(start_paused = true)]
    async fn a_follow_gives_up_after_its_bound_having_looked_at_the_end() {
        let (end, asked, took) = run(Vec::new(), Duration::from_secs(5)).await;
        assert_eq!(end, FollowEnd::TimedOut);
        // Looks at 0, 2, 4 and 6 s: the last one past the bound.
        assert_eq!(asked, 4);
        assert_eq!(took, EVERY * 3);
    }

    #[tokio::test(start_paused = true)]
    async fn a_revision_is_followed_through_the_store_to_its_convergence() {
        let store = MemStore::default();
        store.init_cluster("c1").await.unwrap();
        let spec = drover_core::spec::parse_str(
            "groups:\n- name: m\n  role: manager\n  allocation: {size: 1}\n  instance: {provider: sim}\n",
        )
        .spec
        .unwrap();
        let who = Provenance {
            who: "test".into(),
            at_ms: 0,
            message: "test".into(),
        };
        let rev = store.commit(0, &spec, who, false).await.unwrap();
        let end = follow(&store, rev, Duration::from_secs(3), |_| {}).await;
        assert_eq!(end.unwrap(), FollowEnd::TimedOut);
        let epoch = store.campaign("controller").await.unwrap();
        store.mark_converged(epoch, rev).await.unwrap();
        let end = follow(&store, rev, Duration::from_secs(3), |_| {}).await;
        assert_eq!(end.unwrap(), FollowEnd::Converged);
    }
}
