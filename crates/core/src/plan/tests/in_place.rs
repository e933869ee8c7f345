//! In-place updates of managers, and a heal that comes while one runs.

use super::*;
use crate::in_place::InPlace;
use crate::journal::Intent;
use crate::spec::{Allocation, Slot, Strategy};
use std::time::Duration;

/// `n` managers updated in place (`m1` leads) and one current worker;
/// with `spare`, the managers are pets `m1..mN` whose spare slot `m9`
/// holds a temporary manager already (a raft of `n + 1`).
fn in_place_managers(n: usize, spare: bool) -> Cluster {
    let mut c = Cluster::new(n, "  allocation: {size: 1}\n");
    let workers = c.hash(WORKERS);
    c.add_worker("w1", &workers, None);
    let g = c.group_mut(MANAGERS);
    g.spec.update.strategy = Strategy::InPlace;
    g.spec.update.in_place = Some(InPlace {
        command: "apt-get install -y docker.io".into(),
        timeout: Duration::from_secs(300),
    });
    g.spec.update.step_timeout = Duration::from_secs(600);
    g.spec.update.min_fault_tolerance = None;
    if spare {
        let slot = |id: String| Slot {
            logical_id: Some(id),
            zone: None,
        };
        g.spec.allocation =
            Allocation::LogicalIds((1..=n).map(|i| slot(format!("m{i}"))).collect());
        g.spec.spares = vec![slot("m9".into())];
    }
    let hash = c.hash(MANAGERS);
    if spare {
        c.instances(MANAGERS)
            .push(instance(MANAGERS, "m9", &hash, None));
        c.nodes().push(node("m9", true, false));
    }
    for i in c.instances(MANAGERS) {
        let link = i.link().unwrap_or_default().to_string();
        if spare {
            i.tags.insert(tags::LOGICAL_ID.into(), link);
        }
        i.tags.insert(tags::CONFIG.into(), hash.clone());
    }
    c
}

/// Rolls `m3` of `c` in place until its machine is updated (out of the
/// raft, drained, updated): the time then, and its operation.
fn until_m3_is_updated(c: &mut Cluster) -> (Time, Operation) {
    c.outdate_one(MANAGERS, "m3");
    let mut now = 0;
    loop {
        let p = c.at(now);
        apply(c, &p);
        now += SEC;
        let updated = c
            .instances(MANAGERS)
            .iter()
            .all(|i| i.tags.get(tags::CONFIG) != Some(OLD));
        if updated {
            let op = c.journal.iter().find(|o| o.in_place).cloned();
            let op = op.expect("the update's operation");
            assert_eq!(victim_link(&op), "m3");
            assert!(!c.node("m3").manager_role, "out of the raft");
            return (now, op);
        }
        assert!(now < 60 * SEC, "the update never ran: {}", describe(&p));
    }
}

/// Carries out `p` as a controller and a swarm would: the journal writes,
/// then each side effect on the world (an update succeeds).
fn apply(c: &mut Cluster, p: &Plan) {
    let hash = c.hash(MANAGERS);
    for a in &p.actions {
        match a {
            Action::Begin { op } => c.journal.push((**op).clone()),
            Action::MarkDone { op, step } => {
                if let Some(o) = c.journal.iter_mut().find(|o| o.id == *op) {
                    o.done.insert(*step);
                }
            }
            Action::Complete { op } => c.journal.retain(|o| o.id != *op),
            _ => {}
        }
        let (op, step) = match a {
            Action::Demote { op, node } => {
                let n = c.nodes().iter_mut().find(|n| n.id == *node).expect("node");
                n.manager_role = false;
                n.raft = None;
                (op, Step::Demote)
            }
            Action::Drain { op, node } => {
                let n = c.nodes().iter_mut().find(|n| n.id == *node).expect("node");
                n.availability = Availability::Drain;
                (op, Step::Drain)
            }
            Action::RunUpdate { op, instance, .. } => {
                let i = c
                    .instances(MANAGERS)
                    .iter_mut()
                    .find(|i| i.id == *instance)
                    .expect("machine");
                i.tags.insert(tags::CONFIG.into(), hash.clone());
                (op, Step::Update)
            }
            Action::Promote { op, node } => {
                let link = {
                    let n = c.nodes().iter_mut().find(|n| n.id == *node).expect("node");
                    n.manager_role = true;
                    n.link.clone().unwrap_or_default()
                };
                c.node(&link).raft = Some(RaftMember {
                    leader: false,
                    reachable: true,
                    addr: format!("{link}:2377"),
                });
                (op, Step::Promote)
            }
            Action::Activate { op, node } => {
                let n = c.nodes().iter_mut().find(|n| n.id == *node).expect("node");
                n.availability = Availability::Active;
                (op, Step::Activate)
            }
            _ => continue,
        };
        if let Some(o) = c.journal.iter_mut().find(|o| o.id == *op) {
            o.intent = Some(Intent { step, epoch: 1 });
        }
    }
}

/// `link`'s engine died for good: its node Down, unreachable in the raft;
/// its machine is still listed (the provider says it runs).
fn engine_dies(c: &mut Cluster, link: &str) {
    let n = c.node(link);
    n.state = NodeState::Down;
    if let Some(r) = n.raft.as_mut() {
        r.reachable = false;
    }
}

/// The deadlock the review found: while m3 is out of the raft for its
/// update, m2's engine dies. The promotion of m3 back (an added voter:
/// the raft goes from 4 members with 3 reachable, fault tolerance 0, to 5
/// with 4, fault tolerance 1; 5 with 3, still 0, if it never caught up)
/// waited for m2's heal (manager trouble), and the heal waited for m3's
/// operation (one manager operation at a time): the operation blocked at
/// its step timeout. Now m3 is promoted back first, its operation ends,
/// and m2 is healed after it, never both at once.
#[test]
fn a_manager_that_dies_while_another_is_out_for_its_update_does_not_hold_its_promotion() {
    let mut c = in_place_managers(5, false);
    let (mut now, op) = until_m3_is_updated(&mut c);
    engine_dies(&mut c, "m2");
    let mut promoted = None;
    let mut healed = None;
    let mut last = String::new();
    while now < 30 * 60 * SEC {
        let p = c.at(now);
        assert_ne!(
            status(&p, MANAGERS).phase,
            Phase::Blocked,
            "{}",
            describe(&p)
        );
        if has(
            &p,
            |a| matches!(a, Action::Promote { node, .. } if node == "n-m3"),
        ) {
            promoted.get_or_insert(now);
        }
        if has(
            &p,
            |a| matches!(a, Action::Demote { node, .. } if node == "n-m2"),
        ) {
            // Never while m3's operation is in flight.
            assert!(
                !c.journal.iter().any(|o| o.id == op.id),
                "the heal began while the update's operation was in flight: {}",
                describe(&p)
            );
            healed.get_or_insert(now);
        }
        last = describe(&p);
        apply(&mut c, &p);
        if healed.is_some() {
            break;
        }
        now += 5 * SEC;
    }
    let (Some(promoted), Some(healed)) = (promoted, healed) else {
        panic!("m3 promoted at {promoted:?}, m2 healed at {healed:?}: {last}");
    };
    assert!(promoted < 60 * SEC, "promoted at {promoted}");
    assert!(promoted < healed);
}

/// Where adding the member back could cost the quorum, it is not added:
/// three pets and the temporary manager of their spare slot, m3 out for
/// its update and m2 dead, leave 3 members with 2 reachable; promoted and
/// never caught up, m3 would make it 4 with 2, no quorum. The promotion waits, saying why, and the operation ends blocked
/// at its step timeout with that reason (nothing else is touched), rather
/// than waiting for ever.
#[test]
fn a_promotion_that_could_cost_the_quorum_waits_and_blocks_at_the_step_timeout_saying_why() {
    let mut c = in_place_managers(3, true);
    let (mut now, _) = until_m3_is_updated(&mut c);
    engine_dies(&mut c, "m2");
    let waits = "promotion of n-m3 back into the raft waits: adding a manager while 1 of 3 members are unreachable could leave fault tolerance at -1";
    let blocked = loop {
        let p = c.at(now);
        assert!(
            !has(&p, |a| matches!(
                a,
                Action::Promote { .. } | Action::Demote { .. } | Action::Destroy { .. }
            )),
            "{}",
            describe(&p)
        );
        if status(&p, MANAGERS).phase == Phase::Blocked {
            break blocked_not_rolled_back(&p, MANAGERS);
        }
        assert!(
            p.explanation.iter().any(|l| l.contains(waits)),
            "{}",
            describe(&p)
        );
        apply(&mut c, &p);
        assert!(now < 60 * 60 * SEC, "never blocked: {}", describe(&p));
        now += 30 * SEC;
    };
    assert!(blocked.contains(waits), "{blocked}");
    assert!(
        blocked.contains("drover heals it only after this operation: bring it back, or demote it by hand with `docker node demote`"),
        "{blocked}"
    );
    assert!(now <= 20 * 60 * SEC, "blocked at {now}");
    // The operator demotes the dead member by hand: the raft is 2 of 2,
    // and the promotion goes on.
    let m2 = c.node("m2");
    m2.manager_role = false;
    m2.raft = None;
    let p = c.at(now + 30 * SEC);
    assert!(
        has(
            &p,
            |a| matches!(a, Action::Promote { node, .. } if node == "n-m3")
        ),
        "{}",
        describe(&p)
    );
}
