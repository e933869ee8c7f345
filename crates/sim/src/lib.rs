//! # drover-sim
//!
//! A simulated cloud and swarm on a virtual clock, with the timings measured
//! on real engines and injectable faults (provision failures and delays,
//! machines that never join, engine crashes, leader changes and the
//! `unknown` window after them, partitions, `disconnected` nodes, controller
//! crashes, pauses and stale journals, provider outages and partial
//! describes, engines restarted without labels, hand promotions, operator
//! holds, replaces and pauses mid-roll).
//!
//! [`Runner`] drives drover's real planner against it the way the controller
//! does, and checks every voluntary step against the world's own raft and
//! cloud state: the independent oracle of the property tests. The
//! [`liveness`] oracle checks the other half: every roll ends.

// Production functions stay short enough to read at once (clippy.toml:
// 80 lines); tests may be long scenarios.
#![cfg_attr(not(test), deny(clippy::too_many_lines))]

mod cloud;
pub mod liveness;
mod oracle;
mod rng;
mod runner;
mod scenario;
mod world;

pub use cloud::SimCloud;
pub use liveness::Stuck;
pub use rng::Rng;
pub use runner::{Faults, Outcome, RESYNC, Runner, TraceLine, WindowWait};
pub use scenario::{Rollout, horizon, rollout, rollout_with};
pub use world::{SimInstance, SimNode, Timings, WALL_ORIGIN, World};
