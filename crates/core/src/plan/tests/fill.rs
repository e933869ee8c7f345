//! Empty pet slots (issue 37): filled at once where the provider's listing
//! cannot leave a machine out, else once the slot has read empty for
//! `UNLISTED_BOUND` — counted across the manager operations that hold the
//! fill back, not restarted after each.

use super::untidy::five_pets;
use super::*;
use crate::plan::memory::UNLISTED_BOUND;

fn provisioned_slots(p: &Plan) -> Vec<String> {
    p.actions
        .iter()
        .filter_map(|a| match a {
            Action::Provision {
                group, logical_id, ..
            } if group == MANAGERS => logical_id.clone(),
            _ => None,
        })
        .collect()
}

/// Five pets, `m4` and `m5` gone with their nodes: slots 10.0.0.4 and
/// 10.0.0.5 read empty.
fn two_empty_slots() -> Cluster {
    let mut c = five_pets();
    for link in ["m4", "m5"] {
        c.instances(MANAGERS).retain(|i| i.link() != Some(link));
        c.nodes().retain(|n| n.link.as_deref() != Some(link));
    }
    c
}

#[test]
fn an_empty_pet_slot_is_filled_at_once_where_the_listing_is_complete() {
    let mut c = two_empty_slots();
    c.observed.complete_listings.insert(MANAGERS.into());
    let p = c.at(0);
    assert_eq!(provisioned_slots(&p), ["10.0.0.4"], "{}", describe(&p));
}

#[test]
fn an_empty_pet_slot_waits_where_the_listing_may_leave_a_machine_out() {
    let mut c = two_empty_slots();
    let p = c.at(0);
    assert!(provisioned_slots(&p).is_empty(), "{}", describe(&p));
    assert!(
        reason(&p, MANAGERS).contains("slot 10.0.0.4 reads empty"),
        "{}",
        describe(&p)
    );
    // Another group's complete listing says nothing about this one.
    c.observed.complete_listings.insert(WORKERS.into());
    let p = c.at(SEC);
    assert!(provisioned_slots(&p).is_empty(), "{}", describe(&p));
}

/// The second slot has read empty since 0: once the first slot's
/// operation ends (at 40 s), it is filled at once — its wait ran while
/// that operation was in flight (it used to restart after each one, 33 s
/// between a bootstrap's managers).
#[test]
fn an_empty_slots_wait_runs_while_another_manager_operation_is_in_flight() {
    let mut c = two_empty_slots();
    c.at(0);
    let bound = UNLISTED_BOUND.as_millis() as u64;
    let p = c.at(bound);
    assert_eq!(provisioned_slots(&p), ["10.0.0.4"], "{}", describe(&p));
    let op = begins(&p, MANAGERS)[0].clone();
    c.journal.push(op.clone());
    let p = c.at(bound + SEC);
    assert!(
        !provisioned_slots(&p).contains(&"10.0.0.5".to_string()),
        "one manager operation at a time: {}",
        describe(&p)
    );
    // The first slot's machine joined; its operation ended.
    c.add_new_member(&op, true);
    c.journal.clear();
    let p = c.at(bound + 10 * SEC);
    assert_eq!(provisioned_slots(&p), ["10.0.0.5"], "{}", describe(&p));
}
