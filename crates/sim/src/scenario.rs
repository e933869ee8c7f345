//! Ready-made runs: bring a declared cluster up in the simulator, then roll
//! a change through it. Used by `drover sim rollout` and `drover plan --sim`.

use crate::runner::{Faults, Outcome, Runner};
use crate::world::Timings;
use drover_core::hash::config_hash;
use drover_core::plan::{Desired, DesiredGroup};
use drover_core::spec::ClusterSpec;

/// The desired state for `spec` as a fresh store would hold it.
pub fn desired_from_spec(cluster_id: &str, spec: &ClusterSpec) -> Desired {
    Desired {
        cluster_id: cluster_id.to_string(),
        groups: spec
            .groups
            .iter()
            .map(|g| DesiredGroup {
                spec: g.clone(),
                hash: config_hash(g),
                paused: false,
                is_rollback: false,
            })
            .collect(),
        orphan_grace: spec.gc.orphan_grace,
        held: Default::default(),
        replace: Default::default(),
        skip_drain: Default::default(),
    }
}

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
        desired_from_spec("sim-cluster", before),
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
    runner.commit(desired_from_spec("sim-cluster", after).groups);
    let rolled = runner.run_until(start + 24 * 3_600_000);
    (runner, up, rolled)
}
