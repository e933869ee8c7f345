//! Ready-made runs: bring a declared cluster up in the simulator, then roll
//! a change through it. Used by `drover sim rollout` and `drover plan --sim`.

use crate::runner::{Faults, Outcome, Runner};
use crate::world::{Timings, WALL_ORIGIN};
use drover_core::model::Time;
use drover_core::plan::Desired;
use drover_core::spec::ClusterSpec;

/// Brings `before` up from nothing, then commits `after` and rolls it
/// through, the virtual clock starting at wall-clock time `wall_origin`
/// (epoch ms: maintenance windows open when they would from then). Returns
/// the runner (trace, violations) and both outcomes.
pub fn rollout(
    before: &ClusterSpec,
    after: &ClusterSpec,
    seed: u64,
    faults: Faults,
    timings: Timings,
    wall_origin: Time,
) -> (Runner, Outcome, Outcome) {
    rollout_with(
        before,
        after,
        seed,
        faults,
        Rollout {
            timings,
            wall_origin,
            ..Rollout::default()
        },
    )
}

/// How a [`rollout_with`] runs besides its specs, seed and faults.
#[derive(Debug, Clone)]
pub struct Rollout {
    /// Latencies.
    pub timings: Timings,
    /// Wall-clock time (epoch ms) at virtual time 0.
    pub wall_origin: Time,
    /// How long the converged cluster idles before `after` is committed
    /// (ms): its machines age (`health.max_age`).
    pub idle: Time,
    /// How long after the faults stop the roll may take before it is timed
    /// out (ms); `None`: a day, or eight when a group has windows.
    pub within: Option<Time>,
}

impl Default for Rollout {
    /// Measured latencies, from [`WALL_ORIGIN`], no idling, the default deadline.
    fn default() -> Self {
        Rollout {
            timings: Timings::default(),
            wall_origin: WALL_ORIGIN,
            idle: 0,
            within: None,
        }
    }
}

/// [`rollout`] with the rest of its settings in `how`.
pub fn rollout_with(
    before: &ClusterSpec,
    after: &ClusterSpec,
    seed: u64,
    faults: Faults,
    how: Rollout,
) -> (Runner, Outcome, Outcome) {
    let mut runner = Runner::new(
        Desired::of_spec("sim-cluster", before),
        seed,
        how.timings,
        Faults::default(),
    );
    runner.world.wall_origin = how.wall_origin;
    let up = runner.run_until(6 * 3_600_000);
    let idle_until = runner.world.now + how.idle;
    runner.world.advance(idle_until);
    runner.trace.clear();
    runner.window_waits.clear();
    let start = runner.world.now;
    let faults = Faults {
        until: start + faults.until,
        ..faults
    };
    let until = faults.until;
    runner.set_faults(faults);
    runner.commit(Desired::of_spec("sim-cluster", after).groups);
    let deadline = how.within.map_or(start + horizon(after), |w| until + w);
    let rolled = runner.run_until(deadline);
    (runner, up, rolled)
}

/// How long [`rollout`] lets the roll to `after` run (virtual ms): a day,
/// or 8 with maintenance windows (a roll may wait up to a week for them).
/// A roll not done by then ends [`Outcome::TimedOut`].
pub fn horizon(after: &ClusterSpec) -> Time {
    let windows = after.groups.iter().any(|g| !g.update.windows.is_empty());
    let days = if windows { 8 } else { 1 };
    days * 24 * 3_600_000
}
