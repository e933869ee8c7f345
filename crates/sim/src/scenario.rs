//! Ready-made runs: bring a declared cluster up in the simulator, then roll
//! a change through it. Used by `drover sim rollout` and `drover plan --sim`.

use crate::runner::{Faults, Outcome, Runner};
use crate::world::Timings;
use drover_core::plan::Desired;
use drover_core::spec::ClusterSpec;

/// Brings `before` up from nothing, then commits `after` and rolls it
/// through. Returns the runner (trace, violations) and both outcomes.
pub fn rollout(
    before: &ClusterSpec,
    after: &ClusterSpec,
    seed: u64,
    faults: Faults,
    timings: Timings,
) -> (Runner, Outcome, Outcome) {
    let mut runner = Runner::new(
        Desired::of_spec("sim-cluster", before),
        seed,
        timings,
        Faults::default(),
    );
    let up = runner.run_until(6 * 3_600_000);
    runner.trace.clear();
    let start = runner.world.now;
    let faults = Faults {
        until: start + faults.until,
        ..faults
    };
    runner.set_faults(faults);
    runner.commit(Desired::of_spec("sim-cluster", after).groups);
    let rolled = runner.run_until(start + 24 * 3_600_000);
    (runner, up, rolled)
}
