//! Issue 21's time rules on the simulator's virtual clock: a roll starts
//! its steps only inside the maintenance windows (and resumes in the next
//! one), and machines past `health.max_age` are replaced, spread out, through
//! the same gates. The oracle judges every step as in every other run.

use drover_core::model::Time;
use drover_core::plan::Desired;
use drover_core::spec::{ClusterSpec, parse_str};
use drover_sim::{Faults, Outcome, Runner, Timings, WALL_ORIGIN};

const MIN: Time = 60_000;
const HOUR: Time = 60 * MIN;

/// 3 managers and 4 workers, surge (every roll operation starts with its
/// provision), the workers' group written with `extra` lines.
fn spec(image: &str, managers: &str, workers: &str) -> ClusterSpec {
    let text = format!(
        "groups:
- name: managers
  role: manager
  allocation: {{size: 3}}
  instance: {{provider: sim, properties: {{image: {image}}}}}
{managers}- name: workers
  role: worker
  allocation: {{size: 4}}
  instance: {{provider: sim, properties: {{image: {image}}}}}
{workers}"
    );
    parse_str(&text).spec.expect("valid")
}

/// Both groups roll 30 s at the top of each hour: shorter than the roll,
/// so it is interrupted and resumes.
const WINDOWS: &str = "  update:
    strategy: surge
    windows: [{start: '0 * * * *', duration: 30s, time_zone: UTC}]
";

fn in_window(r: &Runner, at: Time) -> bool {
    (r.world.wall_origin + at) % HOUR < 30_000
}

#[test]
fn a_roll_starts_steps_only_inside_its_windows_and_resumes_in_the_next() {
    let v1 = spec("v1", WINDOWS, WINDOWS);
    let mut r = Runner::new(
        Desired::of_spec("c", &v1),
        3,
        Timings::default(),
        Faults::default(),
    );
    // 00:10 UTC: filling the empty cluster never waits for a window.
    r.world.wall_origin = WALL_ORIGIN + 10 * MIN;
    assert_eq!(r.run_until(HOUR), Outcome::Converged);
    assert!(r.world.now < 50 * MIN, "built outside any window");
    r.trace.clear();
    let committed = r.world.now;
    r.commit(Desired::of_spec("c", &spec("v2", WINDOWS, WINDOWS)).groups);
    let outcome = r.run_until(committed + 48 * HOUR);
    assert_eq!(outcome, Outcome::Converged, "{:#?}", r.trace);
    assert!(r.violations.is_empty(), "{:#?}", r.violations);
    // Every roll operation (surge: its first step is the provision) starts
    // inside a window; an operation's later steps may run past its end.
    let starts: Vec<Time> = r
        .trace
        .iter()
        .filter(|l| l.what.starts_with("provision"))
        .map(|l| l.at)
        .collect();
    assert_eq!(starts.len(), 7, "one per member: {:#?}", r.trace);
    for at in &starts {
        assert!(
            in_window(&r, *at),
            "a step began at {at} ms, outside the windows: {:#?}",
            r.trace
        );
    }
    let windows: std::collections::BTreeSet<Time> = starts
        .iter()
        .map(|at| (r.world.wall_origin + at) / HOUR)
        .collect();
    assert!(
        windows.len() >= 2,
        "the roll resumed in a later window: {starts:?}"
    );
    assert!(
        r.trace.iter().any(|l| !in_window(&r, l.at)),
        "some operation ran past its window's end: {:#?}",
        r.trace
    );
}

/// Every group replaces its machines after 2 hours at most.
const MAX_AGE: &str = "  health: {max_age: 2h}\n";

#[test]
fn machines_past_max_age_are_replaced_spread_out_and_through_the_gates() {
    let mut r = Runner::new(
        Desired::of_spec("c", &spec("v1", MAX_AGE, MAX_AGE)),
        8,
        Timings::default(),
        Faults::default(),
    );
    assert_eq!(r.run_until(HOUR), Outcome::Converged);
    let ours = |i: &drover_sim::SimInstance| {
        i.inst.owned_by("c", "managers") || i.inst.owned_by("c", "workers")
    };
    let first: Vec<String> = r
        .world
        .instances
        .values()
        .filter(|i| ours(i))
        .map(|i| i.inst.id.clone())
        .collect();
    assert_eq!(first.len(), 7);
    r.trace.clear();
    // Twelve hours, looked at every 5 minutes as the resync would.
    let mut replaced_at = std::collections::BTreeSet::new();
    for _ in 0..(12 * 12) {
        let t = r.world.now + 5 * MIN;
        r.world.advance(t);
        let before = r.trace.len();
        assert_eq!(r.run_until(t + HOUR), Outcome::Converged, "{:#?}", r.trace);
        if r.trace[before..]
            .iter()
            .any(|l| l.what.starts_with("provision"))
        {
            replaced_at.insert(t);
        }
        let oldest = r
            .world
            .instances
            .values()
            .filter(|i| ours(i))
            .map(|i| r.world.wall_ms() - i.inst.created_ms)
            .max()
            .unwrap_or(0);
        assert!(
            oldest <= 2 * HOUR + 10 * MIN,
            "a machine {oldest} ms old at {t}"
        );
    }
    assert!(r.violations.is_empty(), "{:#?}", r.violations);
    assert!(
        first.iter().all(|id| !r.world.instances.contains_key(id)),
        "every first machine was replaced"
    );
    // The 7 machines made together came due at different times.
    assert!(
        replaced_at.len() >= 12,
        "replacements spread out: {replaced_at:?}"
    );
}
