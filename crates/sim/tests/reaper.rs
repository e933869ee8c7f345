//! Machines that vanish behind drover's back (deleted in the cloud console,
//! lost by the provider): the slot is refilled and the dead node — Down, no
//! machine carrying its link — is removed after the grace period, a manager
//! demoted first. Judged by the simulator's own state at convergence.

use drover_core::model::tags;
use drover_core::plan::Desired;
use drover_core::spec::{ClusterSpec, parse_str};
use drover_sim::{Faults, Outcome, Runner, Timings};

fn spec() -> ClusterSpec {
    let text = "groups:
- name: managers
  role: manager
  allocation: {size: 3}
  instance: {provider: sim}
  health: {unhealthy_after: 30s}
- name: workers
  role: worker
  allocation: {size: 3}
  instance: {provider: sim}
  health: {unhealthy_after: 30s}
";
    parse_str(text).spec.expect("valid")
}

fn up() -> Runner {
    let mut r = Runner::new(
        Desired::of_spec("c", &spec()),
        5,
        Timings::default(),
        Faults::default(),
    );
    assert_eq!(r.run_until(3_600_000), Outcome::Converged);
    r
}

fn vanish(r: &mut Runner, group: &str) -> String {
    let leader = r.world.leader_link();
    let id = r
        .world
        .instances
        .values()
        .find(|i| {
            i.inst.tag(tags::GROUP) == Some(group)
                && i.inst.tag(tags::CLUSTER) == Some("c")
                && i.inst.link().map(str::to_string) != leader
        })
        .map(|i| i.inst.id.clone())
        .expect("a member");
    let node = r.world.instances[&id].node.clone().expect("joined");
    r.world.destroy(&id);
    node
}

#[test]
fn a_vanished_workers_dead_node_is_removed_and_its_slot_refilled() {
    let mut r = up();
    let node = vanish(&mut r, "workers");
    let now = r.world.now;
    assert_eq!(r.run_until(now + 3_600_000), Outcome::Converged);
    assert!(r.violations.is_empty(), "{:?}", r.violations);
    assert!(
        !r.world.nodes.contains_key(&node),
        "dead node {node} left behind"
    );
}

#[test]
fn a_vanished_managers_dead_node_is_demoted_removed_and_the_raft_made_whole() {
    let mut r = up();
    let node = vanish(&mut r, "managers");
    let now = r.world.now;
    assert_eq!(r.run_until(now + 3_600_000), Outcome::Converged);
    assert!(r.violations.is_empty(), "{:?}", r.violations);
    assert!(
        !r.world.nodes.contains_key(&node),
        "dead manager node {node} left behind"
    );
    assert_eq!(r.world.raft(), (3, 3));
}
