//! Groups roll one after another (managers first): a group waiting behind
//! one that is blocked or paused says so, with that group's reason (issue
//! 36, item 5), in its status reason and its `behind` field.

use super::*;

/// Outdated managers and workers: the managers roll first, the workers
/// wait behind them.
fn both_outdated() -> Cluster {
    let mut c = Cluster::new(3, "  allocation: {size: 1}\n");
    let hash = c.hash(WORKERS);
    c.add_worker("w1", &hash, None);
    c.outdate(MANAGERS);
    c.outdate(WORKERS);
    c
}

#[test]
fn a_group_waiting_behind_a_blocked_one_says_why_that_one_is_blocked() {
    let mut c = both_outdated();
    // Control: behind a rolling manager group, the workers only wait.
    let p = c.at(0);
    let why = reason(&p, WORKERS);
    assert!(why.contains("waiting for group managers"), "{why}");
    assert!(!why.contains("blocked"), "{why}");
    assert_eq!(status(&p, WORKERS).behind, None);
    // Two machines carry m2's link: the managers block.
    let mut twin = c.instances(MANAGERS)[1].clone();
    twin.id = "i-m2-twin".into();
    c.instances(MANAGERS).push(twin);
    c.forget();
    let p = c.at(SEC);
    assert_eq!(
        status(&p, MANAGERS).phase,
        Phase::Blocked,
        "{}",
        describe(&p)
    );
    let blocked = reason(&p, MANAGERS);
    let why = reason(&p, WORKERS);
    assert_eq!(
        why,
        format!(
            "waiting for group managers to finish its rollout (groups roll one after another, managers first); managers is blocked: {blocked}"
        ),
        "{}",
        describe(&p)
    );
    assert_eq!(status(&p, WORKERS).behind.as_deref(), Some(MANAGERS));
    assert!(begins(&p, WORKERS).is_empty(), "{}", describe(&p));
}

#[test]
fn a_group_waiting_behind_a_paused_one_says_it_is_paused() {
    let mut c = both_outdated();
    c.group_mut(MANAGERS).paused = true;
    let p = c.at(0);
    assert_eq!(
        status(&p, MANAGERS).phase,
        Phase::Paused,
        "{}",
        describe(&p)
    );
    let why = reason(&p, WORKERS);
    assert!(
        why.ends_with("; managers is paused by an operator"),
        "{why}"
    );
    assert_eq!(status(&p, WORKERS).behind.as_deref(), Some(MANAGERS));
}

/// Surge workers in one zone, `z0`, whose roll of `w1` spent its slot's
/// provision attempts: blocked, its operation journaled (it holds zone
/// `z0`). Then `managers` members (zoneless) are outdated.
fn workers_blocked_in_z0(c: &mut Cluster, managers: &[&str]) {
    c.add_worker("w1", &c.hash(WORKERS), Some("z0"));
    c.outdate(WORKERS);
    let p = c.at(0);
    let mut op = begins(&p, WORKERS)[0].clone();
    assert_eq!(op.kind, OpKind::Roll, "{}", describe(&p));
    op.provision_failures = 2;
    c.journal.push(op);
    for m in managers {
        c.outdate_one(MANAGERS, m);
    }
}

const SURGE_IN_Z0: &str = "  allocation: {size: 1, zones: [z0]}\n  update: {strategy: surge}\n  health: {max_attempts: 2}\n";

/// Issue 36: a blocked group's parked roll keeps its zone (released, it
/// could take its member out once unblocked while another zone's roll is
/// under way), so the managers may not roll; they say they wait behind the
/// blocked workers and why, never only "zone z0 is being disrupted".
#[test]
fn a_group_kept_out_of_a_zone_by_a_blocked_groups_operation_says_it_waits_behind_it() {
    let mut c = Cluster::new(3, SURGE_IN_Z0);
    workers_blocked_in_z0(&mut c, &["m1", "m2", "m3"]);
    let p = c.at(SEC);
    assert_eq!(
        status(&p, WORKERS).phase,
        Phase::Blocked,
        "{}",
        describe(&p)
    );
    let blocked = reason(&p, WORKERS);
    assert!(blocked.contains("health.max_attempts"), "{blocked}");
    let why = reason(&p, MANAGERS);
    assert!(
        why.starts_with("waiting for group workers")
            && why.ends_with(&format!("; workers is blocked: {blocked}")),
        "{}",
        describe(&p)
    );
    assert_eq!(status(&p, MANAGERS).behind.as_deref(), Some(WORKERS));
    // The zone stays held: nothing of the managers' is disrupted.
    assert!(begins(&p, MANAGERS).is_empty(), "{}", describe(&p));
    // Control: once the workers' operation is gone, the managers roll.
    c.journal.clear();
    c.group_mut(WORKERS).paused = true;
    let p = c.at(2 * SEC);
    assert!(!begins(&p, MANAGERS).is_empty(), "{}", describe(&p));
}

/// Issue 36: the leader (m1, in a slot no longer declared) is retired
/// last, after m2, whose roll waits behind the blocked workers' zone: the
/// managers say they wait behind the blocked workers, not only that "the
/// leader goes last".
#[test]
fn the_leader_waiting_for_a_member_held_behind_a_blocked_group_names_that_group() {
    let mut c = Cluster::new(3, SURGE_IN_Z0);
    workers_blocked_in_z0(&mut c, &[]);
    let slot = |id: &str| crate::spec::Slot {
        logical_id: Some(id.into()),
        zone: None,
    };
    let g = c.group_mut(MANAGERS);
    g.spec.allocation = crate::spec::Allocation::LogicalIds(vec![slot("m2"), slot("m3")]);
    for i in c.instances(MANAGERS) {
        let link = i.link().unwrap_or_default().to_string();
        i.tags.insert(tags::LOGICAL_ID.into(), link);
    }
    c.outdate_one(MANAGERS, "m2");
    let p = c.at(SEC);
    assert_eq!(
        status(&p, WORKERS).phase,
        Phase::Blocked,
        "{}",
        describe(&p)
    );
    let why = reason(&p, MANAGERS);
    assert!(
        why.starts_with("waiting for group workers") && why.contains("; workers is blocked: "),
        "{}",
        describe(&p)
    );
    assert!(begins(&p, MANAGERS).is_empty(), "{}", describe(&p));
}
