//! # drover-controller
//!
//! The imperative shell around the pure planner: one pass observes the
//! providers, the swarm and the store concurrently, asks
//! [`drover_core::plan::plan`] for the next steps, writes the journal before
//! any side effect, starts each operation's next side effect as its own task
//! (at most one per operation), and publishes status and events. It wakes
//! on a finished step, on the planner's next timer, or on the resync tick —
//! never waiting for a poll when something changed.
//!
//! ## Start here
//! [`Controller::new`] with a [`Context`] (the provider, cluster and store
//! seams from `drover-spi`), then [`Controller::run`] until shutdown.
//!
//! # Guarantees
//! - Acts only while its engine's node is the swarm leader (or when no
//!   swarm exists yet, to bootstrap), and only under an epoch won from the
//!   store: a write refused as [`drover_spi::StoreError::Fenced`] stops it.
//!   Its automatic rollback is such a write (`Store::commit_rollback`).
//! - Where it stands among the store's terms is one value: following,
//!   leading, handing its engine's leadership over, or deposed, moved only
//!   by the transitions written beside it. Planning, acting, starting a
//!   side effect and every fenced write need the proof of leading that only
//!   winning a campaign builds.
//! - Plans a new term with the store as read *after* winning it, so the
//!   deposed controller's last journal writes are in the plan.
//! - Starts each side effect only once the store has confirmed, within the
//!   last second, that its term is current (`Store::check_epoch`); standing
//!   down cancels the side effects it started. What remains is written down
//!   in `docs/safety.md` §5.
//! - A `DemoteSelfAndLeave` it started runs to its end even after
//!   leadership moved away: the journal entry written before the demotion
//!   authorises exactly those steps. Meanwhile its passes observe nothing:
//!   its engine, asked while it stops its manager, holds that stop 5-8 s.
//! - Join tokens go from the cluster to the provider's boot environment
//!   only; they never reach logs, events, status or the journal.

// Production functions stay short enough to read at once (clippy.toml:
// 80 lines); tests may be long scenarios.
#![cfg_attr(not(test), deny(clippy::too_many_lines))]

mod boots;
mod context;
mod execute;
mod hook;
mod metrics;
pub(crate) mod observe;
mod outage;
mod paced;
pub mod procedure;
mod run;
mod status;
mod takeover;
mod tokens;

pub use context::{Context, Providers};
pub use execute::Failure;
pub use metrics::Metrics;
pub use observe::{Preview, preview, preview_with_rollout, snapshot};
pub use run::{Controller, PassReport, Standing, StepReport};
pub use status::{StatusDoc, status_json, wall_ms};
