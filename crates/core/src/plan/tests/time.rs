//! Issue 21's time rules: maintenance windows (`update.windows`) and
//! machine lifetime (`health.max_age`).

use super::*;
use proptest::prelude::*;

const MIN: Time = 60 * SEC;
const HOUR: Time = 60 * MIN;
const DAY: Time = 24 * HOUR;

/// Three workers on the previous config; the group rolls on Saturdays
/// 02:00-06:00 UTC (the test clock starts Saturday 00:00 UTC).
fn outdated_workers_with_a_window() -> Cluster {
    let mut c = Cluster::new(
        3,
        "  allocation: {size: 3}\n  update:\n    windows:\n    - {start: '0 2 * * 6', duration: 4h, time_zone: UTC}\n",
    );
    for w in ["w1", "w2", "w3"] {
        c.add_worker(w, OLD, None);
    }
    c
}

fn rolls(p: &Plan) -> usize {
    begins(p, WORKERS)
        .iter()
        .filter(|o| o.kind == OpKind::Roll)
        .count()
}

#[test]
fn a_roll_waits_for_its_window_and_wakes_at_its_start() {
    let mut c = outdated_workers_with_a_window();
    let p = c.at(0);
    assert_eq!(rolls(&p), 0, "{}", describe(&p));
    assert!(
        reason(&p, WORKERS).contains("waits for the maintenance window at 2026-12-05 02:00 UTC"),
        "{}",
        describe(&p)
    );
    assert_eq!(
        p.wake_at,
        Some(2 * HOUR),
        "the controller wakes at the start"
    );
    assert_eq!(
        status(&p, WORKERS).window.as_deref(),
        Some("next window at 2026-12-05 02:00 UTC")
    );
    let p = c.at(2 * HOUR);
    assert_eq!(rolls(&p), 1, "{}", describe(&p));
    assert_eq!(
        status(&p, WORKERS).window.as_deref(),
        Some("window open until 2026-12-05 06:00 UTC")
    );
}

#[test]
fn an_operation_begun_in_the_window_runs_past_its_end_and_the_roll_resumes_in_the_next() {
    let mut c = outdated_workers_with_a_window();
    // The first roll step begins 30 s before the window's end.
    c.wall += 6 * HOUR - 30 * SEC;
    let mut begun_at = Vec::new();
    let mut steps_after_end = 0;
    let mut last = c.at(0);
    for s in (10..3_600).step_by(10) {
        for a in &last.actions {
            if let Action::Begin { op } = a {
                begun_at.push(c.now);
                assert_eq!(op.kind, OpKind::Roll);
            }
            if a.is_side_effect() && c.now >= 30 * SEC {
                steps_after_end += 1;
            }
            if let Action::Drain { node, .. } = a {
                c.node(node.trim_start_matches("n-")).availability = Availability::Drain;
            }
            c.apply(a, true);
        }
        last = c.at(s * SEC);
    }
    assert_eq!(begun_at, vec![0], "one step begun, in the window");
    assert!(steps_after_end > 0, "its steps go on after the end");
    assert!(
        c.journal.is_empty(),
        "the operation finished: {:?}",
        c.journal
    );
    assert!(
        reason(&last, WORKERS).contains("2026-12-12 02:00 UTC"),
        "{}",
        describe(&last)
    );
    // A week later the roll resumes.
    c.wall += 7 * DAY - 3_600 * SEC;
    assert_eq!(rolls(&c.at(3_600 * SEC)), 1);
}

#[test]
fn filling_and_healing_never_wait_for_a_window() {
    let mut c = outdated_workers_with_a_window();
    c.instances(WORKERS).retain(|i| i.link() != Some("w3"));
    c.nodes().retain(|n| n.link.as_deref() != Some("w3"));
    let p = c.at(0);
    assert!(
        begins(&p, WORKERS)
            .iter()
            .any(|o| o.kind == OpKind::Provision),
        "the missing slot is filled at once: {}",
        describe(&p)
    );
    assert_eq!(rolls(&p), 0);
}

#[test]
fn a_window_is_read_in_its_own_time_zone() {
    // 02:00 in New York is 07:00 UTC in December.
    let mut c = Cluster::new(
        3,
        "  allocation: {size: 1}\n  update:\n    windows:\n    - {start: '0 2 * * *', duration: 1h, time_zone: America/New_York}\n",
    );
    c.add_worker("w1", OLD, None);
    let p = c.at(6 * HOUR + 59 * MIN);
    assert_eq!(rolls(&p), 0);
    assert!(reason(&p, WORKERS).contains("2026-12-05 02:00 America/New_York"));
    assert_eq!(rolls(&c.at(7 * HOUR)), 1);
}

proptest! {
    /// A daily window `MM HH * * *` UTC of `hours`: a roll step begins at
    /// `t` exactly when `t` falls within `hours` after a start (checked by
    /// arithmetic, not by the cron library).
    #[test]
    fn a_roll_begins_only_inside_a_window(
        hour in 0u64..24, minute in 0u64..60, hours in 1u64..30, t in 0u64..(9 * DAY / MIN),
    ) {
        let mut c = Cluster::new(3, &format!(
            "  allocation: {{size: 1}}\n  update:\n    windows:\n    - {{start: '{minute} {hour} * * *', duration: {hours}h, time_zone: UTC}}\n"
        ));
        c.add_worker("w1", OLD, None);
        let t = t * MIN;
        let start = hour * HOUR + minute * MIN;
        let inside = (t + DAY * 2 - start) % DAY < hours * HOUR || hours >= 24;
        let p = c.at(t);
        prop_assert_eq!(rolls(&p) == 1, inside, "{}", describe(&p));
        if !inside {
            let wait = p.wake_at.expect("a wake-up at the next start") - t;
            prop_assert_eq!((t + wait + DAY - start) % DAY, 0);
            prop_assert!(wait <= DAY);
        }
    }
}

/// Workers `w1..w3` on the current config, made `ages` days before the
/// test clock's start, with `health.max_age: 30d`.
fn aging_workers(ages: [u64; 3]) -> Cluster {
    let mut c = Cluster::new(3, "  allocation: {size: 3}\n  health: {max_age: 30d}\n");
    let hash = c.hash(WORKERS);
    for (k, age) in ages.iter().enumerate() {
        c.add_worker(&format!("w{}", k + 1), &hash, None);
        c.instances(WORKERS)[k].created_ms = WALL - age * DAY;
    }
    c
}

#[test]
fn a_machine_past_max_age_is_rolled_like_an_outdated_one() {
    let mut c = aging_workers([31, 1, 2]);
    let p = c.at(0);
    let ops = begins(&p, WORKERS);
    assert_eq!(ops.len(), 1, "{}", describe(&p));
    assert_eq!(ops[0].kind, OpKind::Roll);
    assert_eq!(victim_link(ops[0]), "w1");
    assert!(
        p.explanation
            .iter()
            .any(|l| l.contains("past health.max_age 30d") && l.contains("i-w1 (due 2026-11")),
        "{}",
        describe(&p)
    );
    assert!(
        p.explanation
            .iter()
            .any(|l| l.contains("next machine due") && l.contains(" at 2026-12-")),
        "{}",
        describe(&p)
    );
}

#[test]
fn aged_machines_pass_the_roll_gates_one_at_a_time_and_in_windows() {
    let mut c = aging_workers([31, 32, 33]);
    let p = c.at(0);
    assert_eq!(rolls(&p), 1, "max_in_flight 1: {}", describe(&p));
    let mut c = aging_workers([31, 32, 33]);
    c.group_mut(WORKERS).spec.update.windows = vec![
        crate::spec::Window::new(crate::spec::WindowText {
            start: "0 2 * * 6".into(),
            duration: std::time::Duration::from_secs(4 * 3600),
            time_zone: "UTC".into(),
        })
        .expect("window"),
    ];
    let p = c.at(0);
    assert_eq!(rolls(&p), 0, "{}", describe(&p));
    assert_eq!(p.wake_at, Some(2 * HOUR));
}

#[test]
fn the_next_expiry_wakes_the_controller() {
    let mut c = aging_workers([1, 2, 3]);
    let p = c.at(0);
    assert_eq!(rolls(&p), 0);
    let wake = p.wake_at.expect("a wake-up at the first expiry");
    let oldest = c.instances(WORKERS)[2].clone();
    let due = crate::plan::lifetime::due_at(&c.desired.groups[1].spec, &oldest).expect("due");
    assert_eq!(WALL + wake, due, "w3, the oldest, is due first");
    assert_eq!(rolls(&c.at(wake)), 1);
}

proptest! {
    /// A machine is rolled exactly once its age reaches its due time, and
    /// that is never before 3/4 of max_age nor after max_age.
    #[test]
    fn a_machine_is_due_between_three_quarters_of_max_age_and_max_age(
        age_h in 0u64..(40 * 24), id in "[a-z0-9-]{1,20}",
    ) {
        let mut c = aging_workers([0, 0, 0]);
        c.instances(WORKERS)[0].id = id;
        c.instances(WORKERS)[0].created_ms = WALL - age_h * HOUR;
        let p = c.at(0);
        let rolled = rolls(&p) == 1;
        if age_h < 30 * 24 * 3 / 4 {
            prop_assert!(!rolled);
        }
        if age_h >= 30 * 24 {
            prop_assert!(rolled);
        }
        let first = c.instances(WORKERS)[0].clone();
        let due = crate::plan::lifetime::due_at(&c.desired.groups[1].spec, &first).expect("due");
        prop_assert_eq!(rolled, due <= WALL);
    }
}
