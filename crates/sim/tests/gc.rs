//! Garbage collection's stops and orphans in the simulator (docs/gc.md):
//! a slot whose machines never join uses `health.max_attempts` machines and
//! then blocks; a group with too many members down at once is left alone
//! (meltdown guard); an orphan of an undeclared group is destroyed only after
//! `gc.orphan_grace`, and machines of another cluster or without drover's
//! tags survive. The oracle (crates/sim/src/runner.rs) also fails any
//! destroy of an orphan before its grace period.

use drover_core::model::tags;
use drover_core::plan::Desired;
use drover_core::spec::{ClusterSpec, Role, parse_str};
use drover_sim::{Faults, Outcome, Runner, Timings};
use std::collections::BTreeMap;
use std::time::Duration;

const HOUR: u64 = 3_600_000;

fn spec(workers: &str) -> ClusterSpec {
    let text = format!(
        "groups:
- name: managers
  role: manager
  allocation: {{size: 3}}
  instance: {{provider: sim}}
- name: workers
  role: worker
  allocation: {{size: 5}}
  instance: {{provider: sim}}
  health: {{startup_timeout: 1m, unhealthy_after: 30s{workers}}}
"
    );
    parse_str(&text).spec.expect("valid")
}

fn up(workers: &str) -> Runner {
    let mut r = Runner::new(
        Desired::of_spec("c", &spec(workers)),
        7,
        Timings::default(),
        Faults::default(),
    );
    assert_eq!(r.run_until(HOUR), Outcome::Converged);
    r
}

fn workers(r: &Runner) -> Vec<String> {
    r.world
        .instances
        .values()
        .filter(|i| i.inst.owned_by("c", "workers"))
        .map(|i| i.inst.id.clone())
        .collect()
}

/// Trace lines of `group` since `t` that start with `what`.
fn steps_since(r: &Runner, t: u64, group: &str, what: &str) -> usize {
    r.trace
        .iter()
        .filter(|l| l.at >= t && l.group.as_deref() == Some(group) && l.what.starts_with(what))
        .count()
}

#[test]
fn a_slot_whose_machines_never_join_uses_its_budget_then_blocks() {
    let mut r = up(", max_attempts: 3");
    let now = r.world.now;
    // From now on no new machine joins; one worker's engine dies.
    r.set_faults(Faults {
        never_join: 1.0,
        until: now + 10 * HOUR,
        ..Faults::default()
    });
    let victim = workers(&r)[0].clone();
    r.crash(&victim);
    let outcome = r.run_until(now + 10 * HOUR);
    assert!(r.violations.is_empty(), "{:?}", r.violations);
    let Outcome::Blocked(why) = outcome else {
        panic!("expected a block, got {outcome:?}");
    };
    assert!(why.contains("3 machines in a row never joined"), "{why}");
    // One replacement for the crash plus two retries: never a loop.
    assert_eq!(
        steps_since(&r, now, "workers", "provision workers"),
        3,
        "{:#?}",
        r.trace
    );
}

#[test]
fn the_meltdown_guard_leaves_a_group_with_most_members_down_alone() {
    let mut r = up("");
    let now = r.world.now;
    for id in workers(&r).into_iter().take(3) {
        r.crash(&id);
    }
    let outcome = r.run_until(now + HOUR);
    assert!(r.violations.is_empty(), "{:?}", r.violations);
    let Outcome::Blocked(why) = outcome else {
        panic!("expected a block, got {outcome:?}");
    };
    assert!(why.contains("meltdown guard: 3 of 5"), "{why}");
    assert_eq!(steps_since(&r, now, "workers", "destroy"), 0);
    assert_eq!(steps_since(&r, now, "workers", "provision"), 0);
    assert_eq!(workers(&r).len(), 5, "nothing destroyed");

    // Control: with a wider guard the same outage is healed.
    let mut r = up(", max_unhealthy: 60%");
    let now = r.world.now;
    for id in workers(&r).into_iter().take(3) {
        r.crash(&id);
    }
    assert_eq!(r.run_until(now + HOUR), Outcome::Converged);
    assert!(r.violations.is_empty(), "{:?}", r.violations);
    assert_eq!(steps_since(&r, now, "workers", "destroy"), 3);
}

#[test]
fn an_orphan_goes_after_its_grace_and_foreign_machines_stay() {
    let mut r = up("");
    r.desired.orphan_grace = Duration::from_secs(600);
    let now = r.world.now;
    let tagged = |cluster: Option<&str>, link: &str| {
        let mut t = BTreeMap::from([
            (tags::GROUP.to_string(), "old-workers".to_string()),
            (tags::LINK.to_string(), link.to_string()),
        ]);
        if let Some(c) = cluster {
            t.insert(tags::CLUSTER.to_string(), c.to_string());
        }
        t
    };
    let orphan = r
        .world
        .provision(tagged(Some("c"), "o-1"), Role::Plain, true);
    let other = r
        .world
        .provision(tagged(Some("another-cluster"), "o-2"), Role::Plain, true);
    let untagged = r.world.provision(tagged(None, "o-3"), Role::Plain, true);
    // Keep the simulation going past the grace period.
    r.set_faults(Faults {
        until: now + HOUR,
        ..Faults::default()
    });
    assert_eq!(r.run_until(now + 2 * HOUR), Outcome::Converged);
    assert!(r.violations.is_empty(), "{:?}", r.violations);
    assert!(!r.world.instances.contains_key(&orphan), "orphan survived");
    assert!(
        r.world.instances.contains_key(&other),
        "another cluster's machine destroyed"
    );
    assert!(
        r.world.instances.contains_key(&untagged),
        "untagged machine destroyed"
    );
    let destroyed_at = r
        .trace
        .iter()
        .find(|l| l.what.contains(&format!("destroy instance {orphan}")))
        .map(|l| l.at)
        .expect("destroy traced");
    assert!(destroyed_at >= now + 600_000, "destroyed before its grace");
}
