//! `update.strategy: in_place` on the simulator (issue 39): the members'
//! machines stay and are updated where they are, in Docker's order
//! (managers first, one at a time, the leader last; each out of the raft
//! and drained before its update, promoted and active after), under the
//! oracle's rules — no update of a raft member's machine among them — with
//! faults on, and the roll ends.

use drover_core::plan::Desired;
use drover_core::spec::{ClusterSpec, parse_str};
use drover_sim::{Faults, Outcome, Runner, Timings};

/// `managers` managers and 3 workers, both updated in place by `command`.
fn spec(managers: usize, command: &str) -> ClusterSpec {
    let update = format!(
        "  update:\n    strategy: in_place\n    in_place: {{command: '{command}', timeout: 5m}}\n"
    );
    let floor = if managers == 3 {
        "    min_fault_tolerance: 0\n"
    } else {
        ""
    };
    let text = format!(
        "groups:
- name: managers
  role: manager
  allocation: {{size: {managers}}}
  instance: {{provider: sim}}
{update}{floor}- name: workers
  role: worker
  allocation: {{size: 3}}
  instance: {{provider: sim}}
{update}"
    );
    let loaded = parse_str(&text);
    loaded
        .spec
        .unwrap_or_else(|| panic!("{:?}", loaded.diagnostics))
}

/// Brings `managers` + 3 up on engine v1, then rolls the v2 update through
/// under `faults`; returns the runner, its machines before the roll, and
/// the outcome.
fn roll(managers: usize, seed: u64, faults: Faults) -> (Runner, Vec<String>, Outcome) {
    let mut r = Runner::new(
        Desired::of_spec("c", &spec(managers, "apt-get install -y docker.io=20.10")),
        seed,
        Timings::default(),
        Faults::default(),
    );
    assert_eq!(r.run_until(3_600_000), Outcome::Converged);
    let before: Vec<String> = r.world.instances.keys().cloned().collect();
    r.trace.clear();
    let start = r.world.now;
    r.set_faults(Faults {
        until: start + faults.until,
        ..faults
    });
    r.commit(Desired::of_spec("c", &spec(managers, "apt-get install -y docker.io=26.1")).groups);
    let outcome = r.run_until(start + 24 * 3_600_000);
    (r, before, outcome)
}

#[test]
fn every_machine_is_updated_where_it_is_managers_first_the_leader_last() {
    let (r, before, outcome) = roll(3, 7, Faults::default());
    assert_eq!(outcome, Outcome::Converged, "{:#?}", r.trace);
    assert!(r.violations.is_empty(), "{:#?}", r.violations);
    let after: Vec<String> = r.world.instances.keys().cloned().collect();
    assert_eq!(before, after, "no machine was recreated");
    let updates: Vec<&str> = r
        .trace
        .iter()
        .filter(|l| l.what.starts_with("update instance"))
        .map(|l| l.what.as_str())
        .collect();
    assert_eq!(updates.len(), 6, "one update per machine: {updates:#?}");
    let hash = Desired::of_spec("c", &spec(3, "apt-get install -y docker.io=26.1")).groups[0]
        .hash
        .clone();
    for i in r.world.instances.values() {
        let ours = i.inst.tags.get("drover.cluster") == Some("c");
        if ours && i.inst.tags.get("drover.group") == Some("managers") {
            assert_eq!(i.inst.tags.get("drover.config"), Some(hash.as_str()));
        }
    }
    // Each manager leaves the raft before its update and comes back
    // after it: demote, update, promote, in that order, one at a time.
    let steps: Vec<&str> = r
        .trace
        .iter()
        .map(|l| l.what.as_str())
        .filter(|w| w.starts_with("demote") || w.starts_with("promote") || w.starts_with("update"))
        .collect();
    let kinds: Vec<&str> = steps
        .iter()
        .map(|w| w.split_whitespace().next().unwrap_or_default())
        .take(9)
        .collect();
    assert_eq!(
        kinds,
        [
            "demote", "update", "promote", "demote", "update", "promote", "demote", "update",
            "promote"
        ],
        "{steps:#?}"
    );
    assert!(
        steps[6].starts_with("demote self"),
        "the leader goes last, by its own demotion: {steps:#?}"
    );
}

#[test]
fn five_managers_keep_their_fault_tolerance_while_each_is_updated() {
    let (r, before, outcome) = roll(5, 11, Faults::default());
    assert_eq!(outcome, Outcome::Converged, "{:#?}", r.trace);
    assert!(r.violations.is_empty(), "{:#?}", r.violations);
    assert_eq!(
        before,
        r.world.instances.keys().cloned().collect::<Vec<_>>()
    );
    let lowest = r.trace.iter().map(|l| l.ft_after).min().unwrap_or_default();
    assert!(
        lowest >= 1,
        "fault tolerance fell to {lowest}: {:#?}",
        r.trace
    );
}

#[test]
fn under_faults_no_rule_is_broken_and_the_roll_ends() {
    for seed in 0..12 {
        let faults = Faults {
            crashes_per_min: 0.05,
            leader_changes_per_min: 0.1,
            controller_crash: 0.05,
            describe_failure: 0.05,
            partitions_per_min: 0.05,
            until: 20 * 60_000,
            ..Faults::default()
        };
        let (r, _, outcome) = roll(5, seed, faults);
        assert!(r.violations.is_empty(), "seed {seed}: {:#?}", r.violations);
        assert_eq!(outcome, Outcome::Converged, "seed {seed}: {:#?}", r.trace);
    }
}

/// While a manager is out of the raft for its update, another manager's
/// machine dies for good (a crash nobody restarts). The updated manager
/// is promoted back (adding a voter, within the add gate's worst case),
/// its operation ends, and the dead one is healed after it: the roll
/// converges with no rule broken. It used to deadlock: the promotion
/// waited for the heal (manager trouble) and the heal for the update's
/// operation (one manager operation at a time), until the step timeout
/// blocked the group.
#[test]
fn a_manager_that_dies_while_another_is_out_for_its_update_is_healed_after_the_promotion() {
    for seed in [3, 17, 29] {
        let mut r = Runner::new(
            Desired::of_spec("c", &spec(5, "apt-get install -y docker.io=20.10")),
            seed,
            Timings::default(),
            Faults::default(),
        );
        assert_eq!(r.run_until(3_600_000), Outcome::Converged);
        r.trace.clear();
        let start = r.world.now;
        r.commit(Desired::of_spec("c", &spec(5, "apt-get install -y docker.io=26.1")).groups);
        // Step until the first manager is out of the raft and drained
        // for its update (not yet promoted back).
        let mut t = start;
        let updated = loop {
            t += 100;
            r.run_until(t);
            let drained = r.trace.iter().any(|l| l.what.starts_with("drain node"));
            if drained {
                assert!(
                    !r.trace.iter().any(|l| l.what.starts_with("promote node")),
                    "seed {seed}: stepped past the promotion: {:#?}",
                    r.trace
                );
                let demoted = r.trace.iter().find_map(|l| {
                    l.what
                        .strip_prefix("demote node ")
                        .and_then(|w| w.split_whitespace().next())
                });
                let node = demoted.expect("a manager demoted first").to_string();
                let inst = r
                    .world
                    .instances
                    .values()
                    .find(|i| i.node.as_ref() == Some(&node));
                break inst.expect("its machine").inst.id.clone();
            }
            assert!(
                t < start + 3_600_000,
                "seed {seed}: no drain: {:#?}",
                r.trace
            );
        };
        let leader = r.world.leader_link();
        let victim = r
            .world
            .instances
            .values()
            .find(|i| {
                let voter = i
                    .node
                    .as_ref()
                    .and_then(|n| r.world.nodes.get(n))
                    .is_some_and(|n| n.engine_alive && n.node.raft.is_some());
                i.inst.tag("drover.group") == Some("managers")
                    && i.inst.running
                    && voter
                    && i.inst.id != updated
                    && i.inst.link() != leader.as_deref()
            })
            .map(|i| i.inst.id.clone())
            .expect("another follower manager");
        r.crash(&victim);
        let crashed_at = r.trace.len();
        let outcome = r.run_until(start + 24 * 3_600_000);
        assert_eq!(outcome, Outcome::Converged, "seed {seed}: {:#?}", r.trace);
        assert!(r.violations.is_empty(), "seed {seed}: {:#?}", r.violations);
        let whats: Vec<&str> = r.trace[crashed_at..]
            .iter()
            .map(|l| l.what.as_str())
            .collect();
        let promoted = whats
            .iter()
            .position(|w| w.starts_with("promote node"))
            .unwrap_or_else(|| panic!("seed {seed}: never promoted: {whats:#?}"));
        let victim_gone = whats
            .iter()
            .position(|w| w.starts_with(&format!("destroy instance {victim} ")))
            .unwrap_or_else(|| panic!("seed {seed}: {victim} never healed: {whats:#?}"));
        assert!(promoted < victim_gone, "seed {seed}: {whats:#?}");
        assert!(
            !r.world.instances.contains_key(&victim) || !r.world.instances[&victim].inst.running,
            "seed {seed}: the dead machine is gone"
        );
    }
}
