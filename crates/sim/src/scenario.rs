//! Ready-made runs: bring a declared cluster up in the simulator, then roll
//! a change through it. Used by `drover sim rollout` and `drover plan --sim`.

use crate::runner::{Faults, Outcome, Runner};
use crate::world::Timings;
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
    let mut runner = Runner::new(
        Desired::of_spec("sim-cluster", before),
        seed,
        timings,
        Faults::default(),
    );
    runner.world.wall_origin = wall_origin;
    let up = runner.run_until(6 * 3_600_000);
    runner.trace.clear();
    let start = runner.world.now;
    let faults = Faults {
        until: start + faults.until,
        ..faults
    };
    runner.set_faults(faults);
    runner.commit(Desired::of_spec("sim-cluster", after).groups);
    // A roll may wait up to a week for its maintenance windows.
    let windows = after.groups.iter().any(|g| !g.update.windows.is_empty());
    let days = if windows { 8 } else { 1 };
    let rolled = runner.run_until(start + days * 24 * 3_600_000);
    (runner, up, rolled)
}
