//! A new configuration whose machines never join must not walk through the
//! whole group: once the first replacement fails, the roll stops (healing
//! owns the failed slot) and every other member keeps serving on the old
//! configuration. Found by review: the health gate used to hand a failed
//! replacement to healing and let the roll carry on to the next member.

use drover_core::hash::config_hash;
use drover_core::plan::Desired;
use drover_core::spec::{ClusterSpec, parse_str};
use drover_sim::{Faults, Outcome, Runner, Timings};

fn spec(image: &str, strategy: &str) -> ClusterSpec {
    spec_with(image, image, strategy)
}

fn spec_with(manager_image: &str, image: &str, strategy: &str) -> ClusterSpec {
    // Replaced in place, 3 managers roll at fault tolerance 0: accepted.
    let floor = if strategy == "replace" {
        ", min_fault_tolerance: 0"
    } else {
        ""
    };
    let text = format!(
        "groups:
- name: managers
  role: manager
  allocation: {{size: 3}}
  instance: {{provider: sim, properties: {{image: {manager_image}}}}}
  update: {{strategy: {strategy}{floor}}}
  health: {{startup_timeout: 1m}}
- name: workers
  role: worker
  allocation: {{size: 5}}
  instance: {{provider: sim, properties: {{image: {image}}}}}
  update: {{max_in_flight: 1, canaries: 1}}
  health: {{startup_timeout: 1m}}
"
    );
    parse_str(&text).spec.expect("valid")
}

/// Brings `v1` up, then rolls to `v2` while every new machine fails to join,
/// for `minutes`; returns the runner and the old configs per group.
fn broken_rollout(strategy: &str, minutes: u64) -> (Runner, ClusterSpec) {
    broken_rollout_to(spec("v2", strategy), strategy, minutes)
}

fn broken_rollout_to(v2: ClusterSpec, strategy: &str, minutes: u64) -> (Runner, ClusterSpec) {
    let v1 = spec("v1", strategy);
    let mut r = Runner::new(
        Desired::of_spec("c", &v1),
        11,
        Timings::default(),
        Faults::default(),
    );
    assert_eq!(r.run_until(3_600_000), Outcome::Converged);
    let now = r.world.now;
    r.set_faults(Faults {
        never_join: 1.0,
        until: now + minutes * 60_000,
        ..Faults::default()
    });
    r.commit(Desired::of_spec("c", &v2).groups);
    let _ = r.run_until(now + minutes * 60_000);
    (r, v1)
}

fn serving_old(r: &Runner, v1: &ClusterSpec, group: &str) -> usize {
    let old = config_hash(v1.group(group).unwrap());
    r.world
        .instances
        .values()
        .filter(|i| {
            i.inst.owned_by("c", group) && i.inst.config() == Some(old.as_str()) && i.node.is_some()
        })
        .count()
}

#[test]
fn a_config_whose_machines_never_join_replaces_at_most_one_member() {
    let (r, v1) = broken_rollout("replace", 20);
    assert!(r.violations.is_empty(), "{:?}", r.violations);
    // Managers roll first; with replace, one manager slot is given up (FT 0),
    // never a second one: the raft is not walked down.
    assert!(
        serving_old(&r, &v1, "managers") >= 2,
        "managers walked down"
    );
    let (members, reachable) = r.world.raft();
    assert!(members >= 2 && reachable >= 2, "raft {members}/{reachable}");
}

#[test]
fn surge_keeps_every_old_manager_while_its_successor_never_joins() {
    let (r, v1) = broken_rollout("surge", 20);
    assert!(r.violations.is_empty(), "{:?}", r.violations);
    assert_eq!(
        serving_old(&r, &v1, "managers"),
        3,
        "an old manager left before its successor joined"
    );
    assert_eq!(r.world.raft(), (3, 3));
}

#[test]
fn workers_stop_rolling_after_the_first_replacement_fails() {
    let (r, v1) = broken_rollout_to(spec_with("v1", "v2", "replace"), "replace", 30);
    assert!(r.violations.is_empty(), "{:?}", r.violations);
    // One canary slot is given up; the four other workers keep serving.
    assert!(
        serving_old(&r, &v1, "workers") >= 4,
        "the roll walked through the group: {} old workers left",
        serving_old(&r, &v1, "workers")
    );
}
