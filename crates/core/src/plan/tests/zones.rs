//! Zone fallback (issue 21): a provision refused for lack of capacity in
//! its zone goes to another of the group's zones.

use super::*;
use crate::plan::ZONE_BACKOFF;
use proptest::prelude::*;

/// Workers over zones a, b, c: w1 in a, w2 in b; zone c's slot is empty.
fn zoned(workers: &str) -> Cluster {
    let mut c = Cluster::new(1, workers);
    c.add_worker("w1", &c.hash(WORKERS), Some("a"));
    c.add_worker("w2", &c.hash(WORKERS), Some("b"));
    c
}

const CATTLE: &str = "  allocation: {size: 3, zones: [a, b, c]}\n";

/// The zone of the pass's provision in `group`, if it makes one.
fn provision_zone(p: &Plan) -> Option<Option<String>> {
    p.actions.iter().find_map(|a| match a {
        Action::Provision { zone, .. } => Some(zone.clone()),
        _ => None,
    })
}

/// The fill begun at 0 (into zone c), journaled, refused in `zones`.
fn refused(c: &mut Cluster, zones: &[&str]) -> String {
    refused_at(c, 0, zones)
}

/// [`refused`], the fill begun at `t`.
fn refused_at(c: &mut Cluster, t: Time, zones: &[&str]) -> String {
    let p = c.at(t);
    assert_eq!(
        provision_zone(&p),
        Some(Some("c".into())),
        "{}",
        describe(&p)
    );
    let mut op = begins(&p, WORKERS)[0].clone();
    for z in zones {
        op.provision_failed(Some(z));
    }
    let id = op.id.clone();
    c.journal.push(op);
    id
}

/// The zone of the first provision within the next 10 minutes.
fn next_zone(c: &mut Cluster, from: Time) -> Option<String> {
    (from..from + 600)
        .step_by(5)
        .find_map(|s| provision_zone(&c.at(s * SEC)))
        .expect("a provision")
}

#[test]
fn a_capacity_refusal_moves_the_next_provision_to_another_zone() {
    let mut c = zoned(CATTLE);
    let op = refused(&mut c, &["c"]);
    let mut moved = None;
    for s in (5..600).step_by(5) {
        let p = c.at(s * SEC);
        if let Some(z) = provision_zone(&p) {
            assert!(
                p.explanation
                    .iter()
                    .any(|l| l.contains(&op) && l.contains("zone c had no capacity")),
                "{}",
                describe(&p)
            );
            moved = Some(z);
            break;
        }
    }
    assert_eq!(
        moved,
        Some(Some("a".into())),
        "fewest members, declared order"
    );
}

#[test]
fn a_pets_slot_keeps_its_zone() {
    let mut c = Cluster::new(
        1,
        "  allocation:\n    logical_ids: [{id: w1, zone: a}, {id: w2, zone: b}, {id: w3, zone: c}]\n",
    );
    for (l, z) in [("w1", "a"), ("w2", "b")] {
        c.add_worker(l, &c.hash(WORKERS), Some(z));
        let last = c.instances(WORKERS).last_mut().expect("added");
        last.tags.insert(tags::LOGICAL_ID.into(), l.into());
    }
    // A pet's empty slot is filled once it has read empty a while.
    c.at(0);
    refused_at(&mut c, 40 * SEC, &["c"]);
    assert_eq!(next_zone(&mut c, 45), Some("c".into()));
}

#[test]
fn the_group_avoids_a_short_zone_for_the_backoff_then_tries_it_again() {
    let mut c = zoned(CATTLE);
    let op = refused(&mut c, &["c"]);
    assert_eq!(next_zone(&mut c, 5), Some("a".into()));
    // That operation ends (its machine in zone a failed and was given up);
    // a new fill of zone c's slot, within the back-off, goes elsewhere too.
    c.journal.retain(|o| o.id != op);
    let p = c.at(100 * SEC);
    assert_eq!(
        provision_zone(&p),
        Some(Some("a".into())),
        "{}",
        describe(&p)
    );
    let backoff = ZONE_BACKOFF.as_secs();
    c.journal.clear();
    let p = c.at((100 + backoff) * SEC);
    assert_eq!(
        provision_zone(&p),
        Some(Some("c".into())),
        "{}",
        describe(&p)
    );
}

#[test]
fn a_new_leader_relearns_short_zones_from_the_journal() {
    let mut c = zoned(CATTLE);
    refused(&mut c, &["c"]);
    c.forget();
    assert_eq!(next_zone(&mut c, 5), Some("a".into()));
}

proptest! {
    /// Whatever zones refused an operation, its next provision avoids them
    /// all, unless every zone did (then its slot's zone again).
    #[test]
    fn a_refused_zone_is_never_tried_again_while_another_is_left(
        refusals in proptest::collection::vec(0usize..3, 1..5),
    ) {
        let names = ["a", "b", "c"];
        let zones: Vec<&str> = refusals.iter().map(|k| names[*k]).collect();
        let mut c = zoned(&format!("{CATTLE}  health: {{max_attempts: 6}}\n"));
        refused(&mut c, &zones);
        let next = next_zone(&mut c, 5).expect("zoned");
        if names.iter().all(|n| zones.contains(n)) {
            prop_assert_eq!(next, "c");
        } else {
            prop_assert!(!zones.contains(&next.as_str()), "{} after {:?}", next, zones);
        }
    }
}
