//! Zone fallback (issue 21) on the simulator: a zone out of capacity
//! (the provider's `Capacity` refusal, injected per zone) is skipped, and
//! the group's other provisions avoid it for the back-off.

use drover_core::model::Time;
use drover_core::plan::Desired;
use drover_core::spec::parse_str;
use drover_sim::{Faults, Outcome, Runner, Timings};

const MIN: Time = 60_000;
const HOUR: Time = 60 * MIN;

#[test]
fn a_zone_out_of_capacity_is_skipped_and_the_group_fills_elsewhere() {
    let text = "groups:
- name: managers
  role: manager
  allocation: {size: 1}
  instance: {provider: sim}
- name: workers
  role: worker
  allocation: {size: 6, zones: [a, b, c]}
  instance: {provider: sim}
";
    let spec = parse_str(text).spec.expect("valid");
    let mut r = Runner::new(
        Desired::of_spec("c", &spec),
        4,
        Timings::default(),
        Faults {
            no_capacity: [("c".to_string(), 1.0)].into(),
            until: 3 * HOUR,
            ..Faults::default()
        },
    );
    // While zone c has no capacity the run is not judged (the deadline
    // ends it): the world is.
    let _ = r.run_until(30 * MIN);
    let workers = |r: &Runner| -> Vec<String> {
        r.world
            .instances
            .values()
            .filter(|i| i.inst.owned_by("c", "workers"))
            .filter_map(|i| i.inst.zone().map(str::to_string))
            .collect()
    };
    let refusals = |r: &Runner| {
        r.trace
            .iter()
            .filter(|l| l.what.contains("no capacity in zone c"))
            .count()
    };
    // Both slots of zone c were tried there once (in one pass), then moved.
    assert_eq!(refusals(&r), 2, "{:#?}", r.trace);
    let zones = workers(&r);
    assert_eq!(zones.len(), 6);
    assert!(!zones.iter().any(|z| z == "c"), "{zones:?}");
    // A machine vanishes: its refill would go to the emptiest zone, c, but
    // the group avoids c for the back-off: no refusal this time.
    let gone = r
        .world
        .instances
        .values()
        .find(|i| i.inst.owned_by("c", "workers"))
        .map(|i| i.inst.id.clone())
        .expect("a worker");
    r.world.destroy(&gone);
    let now = r.world.now;
    let _ = r.run_until(now + 5 * MIN);
    assert_eq!(refusals(&r), 2, "{:#?}", r.trace);
    let zones = workers(&r);
    assert_eq!(zones.len(), 6);
    assert!(!zones.iter().any(|z| z == "c"), "{zones:?}");
    assert_eq!(r.run_until(4 * HOUR), Outcome::Converged);
    assert!(r.violations.is_empty(), "{:#?}", r.violations);
}
