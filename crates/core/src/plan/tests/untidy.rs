//! The world as it is: node status `unknown` after an election, engines
//! that lost their labels, workers promoted by hand, members leaving the
//! raft with no journal entry, held managers. Each test is a scenario that
//! made the planner break the safety contract before its fix.

use super::*;

/// Plans one pass at 0 and journals the manager roll it begins, of `victim`.
fn journal_manager_roll(c: &mut Cluster, victim: &str) -> Operation {
    let p = c.at(0);
    let op = begins(&p, MANAGERS)[0].clone();
    assert_eq!(victim_link(&op), victim, "{}", describe(&p));
    c.journal.push(op.clone());
    op
}

fn marks_destroy_done(p: &Plan) -> bool {
    has(p, |a| {
        matches!(
            a,
            Action::MarkDone {
                step: Step::Destroy,
                ..
            }
        )
    })
}

fn demotes(p: &Plan, node: &str) -> bool {
    has(
        p,
        |a| matches!(a, Action::Demote { node: n, .. } | Action::DemoteSelfAndLeave { node: n, .. } if n == node),
    )
}

fn destroys_instance(p: &Plan, id: &str) -> bool {
    has(
        p,
        |a| matches!(a, Action::Destroy { instance, .. } if instance == id),
    )
}

/// `link`'s node reads `unknown` (as every node does for seconds after an
/// election) while raft still counts it reachable.
fn unknown_but_reachable(c: &mut Cluster, link: &str) {
    c.node(link).state = NodeState::Unknown;
}

/// Manager `link`'s machine stopped: its node Down, raft-unreachable.
fn crash_manager(c: &mut Cluster, link: &str) {
    c.instances(MANAGERS)
        .iter_mut()
        .find(|i| i.link() == Some(link))
        .expect("manager")
        .running = false;
    c.node(link).state = NodeState::Down;
    raft_unreachable(c, link);
}

fn raft_unreachable(c: &mut Cluster, link: &str) {
    c.node(link).raft.as_mut().expect("member").reachable = false;
}

// ------------------------------------------------------------ flaw 1

#[test]
fn an_unknown_but_raft_reachable_manager_is_gated_as_healthy_not_demoted_past_the_quorum() {
    let mut c = Cluster::new(3, "  allocation: {size: 1}\n");
    c.outdate_one(MANAGERS, "m2");
    raft_unreachable(&mut c, "m3");
    unknown_but_reachable(&mut c, "m2");
    // Demoting m2 would leave a 2-member raft with 1 reachable: quorum lost.
    for t in [0, 5 * SEC, 200 * SEC] {
        let p = c.at(t);
        assert!(!demotes(&p, "n-m2"), "at {t}: {}", describe(&p));
    }
}

#[test]
fn a_journaled_roll_of_a_manager_reading_unknown_after_an_election_steps_aside() {
    let mut c = Cluster::new(3, "  allocation: {size: 1}\n");
    c.outdate_one(MANAGERS, "m2");
    let op = journal_manager_roll(&mut c, "m2");
    // An election: a new controller, every node unknown for a while, and m3
    // now unreachable in the raft.
    c.forget();
    raft_unreachable(&mut c, "m3");
    for l in ["m1", "m2", "m3"] {
        unknown_but_reachable(&mut c, l);
    }
    let p = c.at(SEC);
    assert!(!demotes(&p, "n-m2"), "{}", describe(&p));
    assert!(
        p.actions.contains(&Action::Complete { op: op.id.clone() }),
        "the undisrupted roll steps aside: {}",
        describe(&p)
    );
}

#[test]
fn a_scale_in_with_two_members_down_retires_an_unreachable_one_never_the_unknown_one() {
    let mut c = Cluster::new(5, "  allocation: {size: 1}\n");
    for l in ["m4", "m5"] {
        let n = c.node(l);
        n.state = NodeState::Down;
        n.raft.as_mut().expect("member").reachable = false;
    }
    unknown_but_reachable(&mut c, "m2");
    c.group_mut(MANAGERS).spec.allocation = crate::spec::Allocation::Size {
        size: 3,
        zones: Vec::new(),
    };
    let p = c.at(0);
    assert!(!demotes(&p, "n-m2"), "{}", describe(&p));
    let retired: Vec<&str> = begins(&p, MANAGERS)
        .iter()
        .filter(|o| o.kind == OpKind::Retire)
        .map(|o| victim_link(o))
        .collect();
    assert!(
        matches!(retired.as_slice(), ["m4"] | ["m5"]),
        "an unreachable member goes first (it raises fault tolerance): {}",
        describe(&p)
    );
}

// ------------------------------------------------------------ flaw 2

/// 3 current managers; `m3`'s engine restarted without drover's labels.
fn manager_lost_its_labels() -> Cluster {
    let mut c = Cluster::new(3, "  allocation: {size: 1}\n");
    lose_labels(&mut c, "m3");
    c
}

/// `link`'s engine restarted without drover's labels (its node keeps its id).
fn lose_labels(c: &mut Cluster, link: &str) {
    let n = c.node(link);
    n.link = None;
    n.cluster = None;
    n.group = None;
}

#[test]
fn a_raft_member_whose_engine_lost_its_labels_is_never_destroyed() {
    let mut c = manager_lost_its_labels();
    // Its machine reads "never joined"; past startup_timeout it used to be
    // healed: demote skipped (no node), machine destroyed, raft member lost.
    for t in [0, 301 * SEC, 400 * SEC, 1_000 * SEC] {
        let p = c.at(t);
        assert!(!destroys_instance(&p, "i-m3"), "at {t}: {}", describe(&p));
        assert!(begins(&p, MANAGERS).is_empty(), "at {t}: {}", describe(&p));
    }
    let p = c.at(1_001 * SEC);
    let why = reason(&p, MANAGERS);
    assert!(
        why.contains("cannot tell whether machine i-m3 is raft member n-m3"),
        "{why}"
    );
}

#[test]
fn a_journaled_heal_of_a_machine_that_may_be_an_unmatched_raft_member_blocks_before_destroy() {
    let mut c = manager_lost_its_labels();
    c.at(0);
    c.at(301 * SEC);
    // A heal journaled by an earlier controller, as the planner began it
    // before the unmatched-member rule: a victim without a node.
    c.journal.push(replacement_op(
        "managers-heal",
        OpKind::Heal,
        crate::spec::Role::Manager,
        "m3",
        None,
    ));
    let p = c.at(302 * SEC);
    assert!(!destroys_instance(&p, "i-m3"), "{}", describe(&p));
    assert_eq!(
        status(&p, MANAGERS).phase,
        Phase::Blocked,
        "{}",
        describe(&p)
    );
}

#[test]
fn a_machine_that_lost_its_link_tag_is_not_destroyed_while_its_node_is_a_raft_member() {
    let mut c = Cluster::new(3, "  allocation: {size: 1}\n");
    for i in c.instances(MANAGERS) {
        if i.link() == Some("m3") {
            i.tags.remove(tags::LINK);
        }
    }
    for t in [0, 301 * SEC, 1_000 * SEC] {
        let p = c.at(t);
        assert!(!destroys_instance(&p, "i-m3"), "at {t}: {}", describe(&p));
    }
}

// ------------------------------------------------------------ flaw 3

#[test]
fn a_worker_reading_unknown_is_drained_not_destroyed_with_its_tasks() {
    let mut c = rolling_workers("", "");
    let op = journal_first_roll(&mut c);
    let link = victim_link(&op).to_string();
    let n = c.node(&link);
    n.state = NodeState::Unknown;
    n.running_tasks = 3;
    let p = c.at(SEC);
    assert!(
        !destroys_instance(&p, &format!("i-{link}")),
        "{}",
        describe(&p)
    );
    assert!(
        has(
            &p,
            |a| matches!(a, Action::Drain { node, .. } if *node == format!("n-{link}"))
        ),
        "{}",
        describe(&p)
    );
}

#[test]
fn a_drain_timeout_with_on_timeout_block_blocks_a_worker_reading_unknown() {
    let mut c = rolling_workers("", "  drain: {timeout: 30s, on_timeout: block}\n");
    let op = journal_first_roll(&mut c);
    let link = victim_link(&op).to_string();
    let n = c.node(&link);
    n.state = NodeState::Unknown;
    n.availability = Availability::Drain;
    n.running_tasks = 3;
    c.at(SEC);
    let p = c.at(32 * SEC);
    assert!(
        !destroys_instance(&p, &format!("i-{link}")),
        "{}",
        describe(&p)
    );
    assert_eq!(
        status(&p, WORKERS).phase,
        Phase::Blocked,
        "{}",
        describe(&p)
    );
}

// ------------------------------------------------------------ flaw 4

/// 3 managers and worker `w1` promoted to manager by hand (a 4-member raft),
/// `w1` outdated and already drained.
fn promoted_worker() -> Cluster {
    let mut c = Cluster::new(3, "  allocation: {size: 1}\n  update: {canaries: 0}\n");
    add_promoted_worker(&mut c, "w1");
    c
}

/// An outdated, drained worker `link` promoted to manager by hand.
fn add_promoted_worker(c: &mut Cluster, link: &str) {
    c.add_worker(link, OLD, None);
    let n = c.node(link);
    n.manager_role = true;
    n.raft = Some(RaftMember {
        leader: false,
        reachable: true,
        addr: format!("{link}:2377"),
    });
    n.availability = Availability::Drain;
}

#[test]
fn a_worker_promoted_by_hand_is_not_destroyed_past_the_quorum_gate() {
    let mut c = promoted_worker();
    // 4 members, m3 unreachable: fault tolerance 0. Destroying w1 would
    // leave 2 of 4 reachable.
    raft_unreachable(&mut c, "m3");
    for t in [0, SEC, 2 * SEC] {
        let p = c.at(t);
        for op in begins(&p, WORKERS) {
            c.journal.push(op.clone());
        }
        assert!(!destroys_instance(&p, "i-w1"), "at {t}: {}", describe(&p));
        assert!(!demotes(&p, "n-w1"), "at {t}: {}", describe(&p));
    }
}

#[test]
fn a_worker_promoted_by_hand_is_demoted_through_the_manager_gate_before_destroy() {
    let mut c = promoted_worker();
    let p = c.at(0);
    let ops = begins(&p, WORKERS);
    assert_eq!(ops.len(), 1, "{}", describe(&p));
    c.journal.push(ops[0].clone());
    let p = c.at(SEC);
    assert!(!destroys_instance(&p, "i-w1"), "{}", describe(&p));
    assert!(demotes(&p, "n-w1"), "{}", describe(&p));
    // Demoted, still leaving the raft: still not destroyed.
    c.node("w1").manager_role = false;
    let p = c.at(2 * SEC);
    assert!(!destroys_instance(&p, "i-w1"), "{}", describe(&p));
    // Out of the raft: now it goes.
    c.node("w1").raft = None;
    let p = c.at(3 * SEC);
    assert!(destroys_instance(&p, "i-w1"), "{}", describe(&p));
}

// ------------------------------------------------------------ flaw 5

#[test]
fn a_manager_leaving_the_raft_without_a_journal_entry_counts_as_disrupted() {
    let mut c = Cluster::new(3, "  allocation: {size: 1}\n");
    c.outdate_one(MANAGERS, "m2");
    // A deposed controller demoted m3; its journal entry is not in ours.
    c.node("m3").manager_role = false;
    let p = c.at(0);
    assert!(!demotes(&p, "n-m2"), "{}", describe(&p));
    assert!(
        reason(&p, MANAGERS).contains("node n-m3 is leaving the raft"),
        "{}",
        describe(&p)
    );
}

// ------------------------------------------------------------ flaw 6

#[test]
fn the_leader_waits_for_a_held_outdated_manager() {
    let mut c = Cluster::new(3, "  allocation: {size: 1}\n");
    c.outdate_one(MANAGERS, "m1");
    c.outdate_one(MANAGERS, "m2");
    c.desired.held.insert("i-m2".into());
    for t in [0, SEC, 600 * SEC] {
        let p = c.at(t);
        assert!(!demotes(&p, "n-m1"), "at {t}: {}", describe(&p));
        assert!(begins(&p, MANAGERS).is_empty(), "at {t}: {}", describe(&p));
    }
}

#[test]
fn an_unreachable_raft_member_no_machine_carries_is_named_with_what_to_do() {
    let mut c = Cluster::new(3, "  allocation: {size: 1}\n");
    raft_unreachable(&mut c, "m3");
    c.node("m3").state = NodeState::Down;
    lose_labels(&mut c, "m3");
    c.instances(MANAGERS).retain(|i| i.link() != Some("m3"));
    let p = c.at(0);
    let why = reason(&p, MANAGERS);
    assert!(why.contains("`docker node demote n-m3` by hand"), "{why}");
    assert!(!demotes(&p, "n-m3"), "{}", describe(&p));
}

// ------------------------------------------------------------ found by the untidy simulator

#[test]
fn a_live_node_no_listed_machine_carries_holds_provisioning_for_its_group() {
    let mut c = Cluster::new(3, "  allocation: {size: 2}\n");
    c.add_worker("w1", &c.hash(WORKERS), None);
    c.add_worker("w2", &c.hash(WORKERS), None);
    // A successful describe that left w2 out (eventual consistency).
    c.instances(WORKERS).retain(|i| i.link() != Some("w2"));
    let p = c.at(0);
    assert!(provisions(&p).is_empty(), "{}", describe(&p));
    assert!(reason(&p, WORKERS).contains("n-w2"), "{}", describe(&p));
    // Its machine is really gone: the node turns Down, the slot is filled.
    c.node("w2").state = NodeState::Down;
    let p = c.at(20 * SEC);
    assert_eq!(provisions(&p).len(), 1, "{}", describe(&p));
}

/// 3 pet managers `10.0.0.1..3` on `m1..m3` (`m1` leads), the spec now
/// declaring `10.0.0.9` instead of `10.0.0.1`, with a new config.
fn renamed_leader_pet() -> Cluster {
    let mut c = Cluster::new(3, "  allocation: {size: 1}\n");
    c.desired = desired(
        "groups:\n\
         - name: managers\n  role: manager\n  allocation: {logical_ids: [10.0.0.9, 10.0.0.2, 10.0.0.3]}\n  instance: {provider: sim}\n\
         - name: workers\n  role: worker\n  instance: {provider: sim}\n  allocation: {size: 1}\n",
    );
    for (k, i) in c.instances(MANAGERS).iter_mut().enumerate() {
        i.tags
            .insert(tags::LOGICAL_ID.into(), format!("10.0.0.{}", k + 1));
        i.tags.insert(tags::CONFIG.into(), OLD.into());
    }
    c
}

#[test]
fn an_undeclared_leader_is_retired_last_not_before_the_outdated_members() {
    let mut c = renamed_leader_pet();
    let p = c.at(0);
    assert!(
        !adds_manager(&p),
        "a new slot reads empty for a while first: {}",
        describe(&p)
    );
    let bound = crate::plan::memory::UNLISTED_BOUND.as_millis() as u64;
    let p = c.at(bound);
    let add = begins(&p, MANAGERS)
        .into_iter()
        .find(|o| o.kind == OpKind::Provision)
        .cloned()
        .expect("the new logical id is provisioned first");
    c.add_new_member(&add, true);
    for i in c.instances(MANAGERS) {
        if i.link() == Some(add.id.as_str()) {
            i.tags.insert(tags::LOGICAL_ID.into(), "10.0.0.9".into());
        }
    }
    let p = c.at(bound + SEC);
    assert!(!demotes(&p, "n-m1"), "{}", describe(&p));
    let victims: Vec<&str> = begins(&p, MANAGERS)
        .iter()
        .map(|o| victim_link(o))
        .collect();
    assert!(
        matches!(victims.as_slice(), ["m2"] | ["m3"]),
        "an outdated follower goes before the leader: {}",
        describe(&p)
    );
}

#[test]
fn the_leader_waits_for_an_outdated_worker_promoted_into_the_raft_which_rolls_first() {
    let mut c = promoted_worker();
    c.outdate_one(MANAGERS, "m1");
    let p = c.at(0);
    assert!(!demotes(&p, "n-m1"), "{}", describe(&p));
    let rolls = begins(&p, WORKERS);
    assert_eq!(rolls.len(), 1, "{}", describe(&p));
    assert_eq!(victim_link(rolls[0]), "w1");
}

#[test]
fn a_scale_in_retires_a_never_joined_member_before_an_outdated_healthy_one() {
    let mut c = Cluster::new(3, "  allocation: {size: 1}\n");
    let g = c.group_mut(MANAGERS);
    g.spec.allocation = crate::spec::Allocation::Size {
        size: 1,
        zones: Vec::new(),
    };
    g.spec.update.strategy = crate::spec::Strategy::Surge;
    c.outdate_one(MANAGERS, "m2");
    // m3's machine never joined (no node).
    c.nodes().retain(|n| n.link.as_deref() != Some("m3"));
    let p = c.at(0);
    let retired: Vec<&str> = begins(&p, MANAGERS)
        .iter()
        .filter(|o| o.kind == OpKind::Retire)
        .map(|o| victim_link(o))
        .collect();
    assert_eq!(retired, ["m3"], "{}", describe(&p));
}

#[test]
fn the_leader_waits_while_a_raft_member_is_missing_from_the_describe() {
    let mut c = Cluster::new(3, "  allocation: {size: 1}\n");
    c.outdate_one(MANAGERS, "m1");
    // A successful describe that left m3 out: it may be outdated too.
    c.instances(MANAGERS).retain(|i| i.link() != Some("m3"));
    let p = c.at(0);
    assert!(!demotes(&p, "n-m1"), "{}", describe(&p));
    assert!(begins(&p, MANAGERS).is_empty(), "{}", describe(&p));
}

// ------------------------------------------------------------ found by reading against the contract

/// A worker promoted by hand whose machine the cloud then terminated.
#[test]
fn a_dead_worker_promoted_by_hand_is_demoted_when_reaped() {
    let mut c = Cluster::new(3, "  allocation: {size: 2}\n");
    let h = c.hash(WORKERS);
    c.add_worker("w1", &h, None);
    c.add_worker("w2", &h, None);
    let n = c.node("w2");
    n.manager_role = true;
    n.state = NodeState::Down;
    n.raft = Some(RaftMember {
        leader: false,
        reachable: false,
        addr: "w2:2377".into(),
    });
    c.instances(WORKERS).retain(|i| i.link() != Some("w2"));
    let (demoted, p) = run_until(&mut c, 3_000, |p| demotes(p, "n-w2"));
    assert!(demoted, "{}", describe(&p));
}

/// m4's machine is gone (its node Down, labels intact) while a heal of the
/// never-joined i-m5 is journaled: i-m5 carries link m5, so it cannot be
/// node n-m4; nothing waits for ever.
#[test]
fn a_dead_labelled_member_does_not_make_another_machine_unmatched() {
    let mut c = Cluster::new(5, "  allocation: {size: 1}\n");
    c.nodes().retain(|n| n.link.as_deref() != Some("m5"));
    c.journal.push(replacement_op(
        "managers-heal",
        OpKind::Heal,
        crate::spec::Role::Manager,
        "m5",
        None,
    ));
    let n = c.node("m4");
    n.state = NodeState::Down;
    n.raft.as_mut().expect("member").reachable = false;
    c.instances(MANAGERS).retain(|i| i.link() != Some("m4"));
    let (demoted, p) = run_until(&mut c, 3_000, |p| demotes(p, "n-m4"));
    assert!(demoted, "{}", describe(&p));
}

/// A scale-in 5 → 3 with m4, m5 current but unreachable and m2 outdated
/// but reading unknown: an unreachable one goes first, now.
#[test]
fn a_scale_in_retires_an_unreachable_current_member_before_an_outdated_unknown_one() {
    let mut c = Cluster::new(5, "  allocation: {size: 1}\n");
    for l in ["m4", "m5"] {
        let n = c.node(l);
        n.state = NodeState::Down;
        n.raft.as_mut().expect("member").reachable = false;
    }
    c.outdate_one(MANAGERS, "m2");
    unknown_but_reachable(&mut c, "m2");
    c.group_mut(MANAGERS).spec.allocation = crate::spec::Allocation::Size {
        size: 3,
        zones: Vec::new(),
    };
    let p = c.at(0);
    let retired: Vec<&str> = begins(&p, MANAGERS)
        .iter()
        .filter(|o| o.kind == OpKind::Retire)
        .map(|o| victim_link(o))
        .collect();
    assert!(
        matches!(retired.as_slice(), ["m4"] | ["m5"]),
        "{}",
        describe(&p)
    );
}

/// A member stuck with the manager role outside the raft is healed: its
/// own membership change does not hold its own replacement.
#[test]
fn a_member_stuck_joining_the_raft_is_healed_not_held_by_itself() {
    let mut c = Cluster::new(3, "  allocation: {size: 1}\n");
    c.node("m3").raft = None;
    let (healed, p) = run_until(&mut c, 1_000, |p| !begins(p, MANAGERS).is_empty());
    assert!(healed, "{}", describe(&p));
}

/// A manager joined by hand, with no drover labels at all, does not hold
/// the leader's roll for ever (it carries no cluster label: it may not be
/// drover's): only for `UNLISTED_BOUND`, in which a describe that left its
/// machine out would have listed it.
#[test]
fn a_manager_without_drover_labels_does_not_hold_the_leaders_roll() {
    let mut c = Cluster::new(3, "  allocation: {size: 1}\n");
    let mut f = node("x", true, false);
    f.id = "n-foreign".into();
    f.link = None;
    f.cluster = None;
    f.group = None;
    c.nodes().push(f);
    c.outdate_one(MANAGERS, "m1");
    let p = c.at(0);
    assert!(!demotes(&p, "n-m1"), "{}", describe(&p));
    let p = c.at(crate::plan::memory::UNLISTED_BOUND.as_millis() as u64);
    assert!(demotes(&p, "n-m1"), "{}", describe(&p));
}

/// A worker promoted by hand whose engine lost drover's labels, its machine
/// left out of a describe: the leader does not take it for a foreigner.
#[test]
fn the_leader_waits_for_an_unlabelled_member_whose_machine_a_describe_left_out() {
    let mut c = promoted_worker();
    lose_labels(&mut c, "w1");
    c.instances(WORKERS).clear();
    c.outdate_one(MANAGERS, "m1");
    let p = c.at(0);
    assert!(!demotes(&p, "n-m1"), "{}", describe(&p));
}

// ------------------------------------------- simulator findings, second round

fn adds_manager(p: &Plan) -> bool {
    has(
        p,
        |a| matches!(a, Action::Provision { group, .. } if group == MANAGERS),
    )
}

/// N7: a partial describe leaves out the machine of a raft member whose
/// engine lost drover's labels: its slot reads empty, and nothing says the
/// member is still there but the unlabelled live node.
#[test]
fn no_manager_is_added_while_a_live_raft_member_carries_no_labels() {
    let mut c = manager_lost_its_labels();
    c.instances(MANAGERS).retain(|i| i.link() != Some("m3"));
    let p = c.at(0);
    assert!(!adds_manager(&p), "{}", describe(&p));
    assert!(begins(&p, MANAGERS).is_empty(), "{}", describe(&p));
    assert!(
        reason(&p, MANAGERS).contains("raft member n-m3 carries no drover.link"),
        "{}",
        describe(&p)
    );
    // Down and out of reach: no longer "live"; now the add-manager gate
    // speaks (an unreachable member drover cannot heal), with what to do.
    let n = c.nodes().iter_mut().find(|n| n.id == "n-m3").expect("n-m3");
    n.state = NodeState::Down;
    n.raft.as_mut().expect("member").reachable = false;
    let p = c.at(SEC);
    assert!(!adds_manager(&p), "{}", describe(&p));
    assert!(
        reason(&p, MANAGERS).contains("docker node demote n-m3"),
        "{}",
        describe(&p)
    );
}

/// N9: a promoted worker's roll waiting to demote it has touched nothing in
/// the raft; a crashed manager's heal goes first instead of both waiting on
/// each other for ever.
#[test]
fn a_crashed_manager_is_healed_while_a_promoted_workers_roll_waits_to_demote_it() {
    let mut c = promoted_worker();
    let p = c.at(0);
    let ops = begins(&p, WORKERS);
    assert_eq!(ops.len(), 1, "{}", describe(&p));
    c.journal.push(ops[0].clone());
    crash_manager(&mut c, "m3");
    let p = c.at(SEC);
    assert!(!demotes(&p, "n-w1"), "{}", describe(&p));
    let heals: Vec<&str> = begins(&p, MANAGERS)
        .iter()
        .filter(|o| o.kind == OpKind::Heal)
        .map(|o| victim_link(o))
        .collect();
    assert_eq!(heals, ["m3"], "{}", describe(&p));
}

/// [`promoted_worker`] whose roll journaled its demote's intent (whether
/// the demote landed, each test says).
fn promoted_worker_with_demote_intent() -> Cluster {
    let mut c = promoted_worker();
    let p = c.at(0);
    let mut op = begins(&p, WORKERS)[0].clone();
    op.intent = Some(crate::journal::Intent {
        step: Step::Demote,
        epoch: 1,
    });
    c.journal.push(op);
    c
}

/// Once the promoted worker's demotion started, it is a raft change in
/// flight: nothing else changes the raft until it is over.
#[test]
fn a_promoted_workers_started_demotion_holds_other_manager_changes() {
    let mut c = promoted_worker_with_demote_intent();
    c.outdate_one(MANAGERS, "m2");
    let p = c.at(SEC);
    assert!(begins(&p, MANAGERS).is_empty(), "{}", describe(&p));
    assert!(!demotes(&p, "n-m2"), "{}", describe(&p));
}

/// A replace request for another member arriving while the leader's own
/// roll waits to demote it: the leader's op steps aside (nothing was
/// disrupted) and the requested member goes first.
#[test]
fn the_leaders_journaled_roll_steps_aside_for_a_replace_request_that_arrives() {
    let mut c = Cluster::new(3, "  allocation: {size: 1}\n");
    c.outdate_one(MANAGERS, "m1");
    let op = journal_manager_roll(&mut c, "m1");
    c.desired.replace.insert("i-m2".into());
    let p = c.at(SEC);
    assert!(!demotes(&p, "n-m1"), "{}", describe(&p));
    assert!(
        p.actions.contains(&Action::Complete { op: op.id.clone() }),
        "{}",
        describe(&p)
    );
}

/// A manager surge adds first and demotes after; with a raft member
/// unreachable (and no machine of the group unhealthy) the demotion would wait (heal first), so the addition
/// waits too instead of adding a member and stepping aside again and again.
#[test]
fn a_manager_surge_adds_nothing_while_a_raft_member_is_unreachable() {
    let mut c = Cluster::new(5, "  allocation: {size: 1}\n");
    c.group_mut(MANAGERS).spec.update.strategy = crate::spec::Strategy::Surge;
    c.outdate_one(MANAGERS, "m2");
    // The machine of an earlier surge's member vanished: its node is a
    // Down, unreachable raft member no machine carries (reaped later).
    let mut dead = node("m6", true, false);
    dead.state = NodeState::Down;
    dead.raft.as_mut().expect("member").reachable = false;
    c.nodes().push(dead);
    let p = c.at(0);
    assert!(!adds_manager(&p), "{}", describe(&p));
    assert!(begins(&p, MANAGERS).is_empty(), "{}", describe(&p));
}

/// [`manager_lost_its_labels`], plus an older incarnation of m3's node
/// still listed: Down, out of the raft, carrying m3's link.
fn lost_labels_beside_a_stale_node() -> Cluster {
    let mut c = manager_lost_its_labels();
    let mut old = node("m3", false, false);
    old.id = "n-m3-old".into();
    old.state = NodeState::Down;
    old.raft = None;
    c.nodes().push(old);
    c
}

/// A running machine whose engine lost drover's labels, while an older
/// node under its link reads Down out of the raft: the machine reads
/// unhealthy, but its engine may be the unlabelled raft member.
#[test]
fn a_machine_matched_to_a_stale_down_node_is_not_destroyed_while_a_member_is_unmatched() {
    let mut c = lost_labels_beside_a_stale_node();
    let (destroyed, p) = run_until(&mut c, 1_000, |p| destroys_instance(p, "i-m3"));
    assert!(!destroyed, "{}", describe(&p));
}

/// The same for the leader: an outdated worker promoted by hand whose
/// engine lost drover's labels is an unlabelled raft member, and its
/// machine has no node; the leader waits for it.
#[test]
fn the_leader_waits_for_an_unlabelled_member_while_a_machine_of_ours_has_no_node() {
    let mut c = promoted_worker();
    lose_labels(&mut c, "w1");
    c.outdate_one(MANAGERS, "m1");
    let p = c.at(0);
    assert!(!demotes(&p, "n-m1"), "{}", describe(&p));
}

/// A successful describe that leaves out the victim of a journaled heal
/// this operation never destroyed: not taken for a destroy (a second
/// machine for the slot) until it stays unlisted for `UNLISTED_BOUND`.
#[test]
fn a_victim_missing_from_one_describe_is_not_taken_for_destroyed() {
    let mut c = Cluster::new(3, "  allocation: {size: 1}\n");
    crash_manager(&mut c, "m3");
    let p = c.at(0);
    let heal = begins(&p, MANAGERS)[0].clone();
    assert_eq!(victim_link(&heal), "m3");
    c.journal.push(heal);
    let stopped = c.instances(MANAGERS).clone();
    c.instances(MANAGERS).retain(|i| i.link() != Some("m3"));
    c.node("m3").manager_role = false;
    c.node("m3").raft = None;
    let p = c.at(SEC);
    assert!(!adds_manager(&p), "{}", describe(&p));
    assert!(
        reason(&p, MANAGERS).contains("not listed"),
        "{}",
        describe(&p)
    );
    // Listed again: it is destroyed by the heal, as it should be.
    *c.instances(MANAGERS) = stopped;
    let p = c.at(2 * SEC);
    assert!(destroys_instance(&p, "i-m3"), "{}", describe(&p));
    // Unlisted for the whole bound: gone (it vanished), the heal goes on.
    c.instances(MANAGERS).retain(|i| i.link() != Some("m3"));
    c.at(3 * SEC);
    let p = c.at(3 * SEC + crate::plan::memory::UNLISTED_BOUND.as_millis() as u64);
    assert!(marks_destroy_done(&p), "{}", describe(&p));
}

/// Two workers promoted by hand whose engines then lost drover's labels
/// (their nodes are found by the ids their operations recorded): their
/// rolls reach the raft step in one pass, and only one demotes.
#[test]
fn two_unlabelled_promoted_workers_are_demoted_one_at_a_time() {
    let mut c = Cluster::new(
        5,
        "  allocation: {size: 2}\n  update: {canaries: 0, max_in_flight: 2}\n",
    );
    for w in ["w1", "w2"] {
        add_promoted_worker(&mut c, w);
    }
    // The planner begins one at a time; a deposed controller's second one,
    // as the journal may hold it.
    let p = c.at(0);
    let first = begins(&p, WORKERS)[0].clone();
    let mut second = first.clone();
    let other = if victim_link(&first) == "w1" {
        "w2"
    } else {
        "w1"
    };
    second.id = format!("{}-second", first.id);
    second.victim = Some(crate::journal::Victim {
        instance: Some(format!("i-{other}")),
        link: Some(other.into()),
        node: Some(format!("n-{other}")),
        ..first.victim.clone().expect("a victim")
    });
    c.journal.extend([first, second]);
    for w in ["w1", "w2"] {
        lose_labels(&mut c, w);
    }
    let p = c.at(SEC);
    let demoted = ["n-w1", "n-w2"].iter().filter(|n| demotes(&p, n)).count();
    assert_eq!(demoted, 1, "{}", describe(&p));
}

/// 5 current pet managers `10.0.0.1..5` on `m1..m5`.
pub(super) fn five_pets() -> Cluster {
    let mut c = Cluster::new(5, "  allocation: {size: 1}\n");
    c.desired = desired(
        "groups:\n\
         - name: managers\n  role: manager\n  allocation: {logical_ids: [10.0.0.1, 10.0.0.2, 10.0.0.3, 10.0.0.4, 10.0.0.5]}\n  instance: {provider: sim}\n\
         - name: workers\n  role: worker\n  instance: {provider: sim}\n  allocation: {size: 1}\n",
    );
    let hash = c.hash(MANAGERS);
    for (k, i) in c.instances(MANAGERS).iter_mut().enumerate() {
        i.tags
            .insert(tags::LOGICAL_ID.into(), format!("10.0.0.{}", k + 1));
        i.tags.insert(tags::CONFIG.into(), hash.clone());
    }
    c
}

/// `m3` died (Down, raft-unreachable) and a describe left its stopped
/// machine out.
fn dead_pet_left_out(c: &mut Cluster) {
    c.instances(MANAGERS).retain(|i| i.link() != Some("m3"));
    let n = c.nodes().iter_mut().find(|n| n.id == "n-m3").expect("n-m3");
    n.state = NodeState::Down;
    n.raft.as_mut().expect("member").reachable = false;
}

/// Pets: a member whose engine lost drover's labels and then died, its
/// stopped machine left out of a describe. Its slot is not refilled: a new
/// machine would share the stopped one's logical id.
#[test]
fn a_pet_slot_is_not_refilled_while_an_unlabelled_dead_member_may_hold_it() {
    let mut c = five_pets();
    lose_labels(&mut c, "m3");
    dead_pet_left_out(&mut c);
    for t in [0, SEC, 100 * SEC] {
        let p = c.at(t);
        assert!(!adds_manager(&p), "at {t}: {}", describe(&p));
    }
}

/// The same with its labels: its Down node holds the slot until it is
/// reaped (unmatched for the whole grace period, which one partial
/// describe cannot fake).
#[test]
fn a_pet_slot_is_not_refilled_while_its_down_node_is_unmatched_and_not_reaped() {
    let mut c = five_pets();
    dead_pet_left_out(&mut c);
    for t in [0, SEC] {
        let p = c.at(t);
        assert!(!adds_manager(&p), "at {t}: {}", describe(&p));
        assert!(reason(&p, MANAGERS).contains("n-m3"), "{}", describe(&p));
    }
}

/// The leader's own machine left out of a describe does not let its
/// journaled self-demotion skip leader-last: a worker promoted by hand,
/// whose machine is also left out, may still be outdated.
#[test]
fn the_leader_goes_last_even_when_its_own_machine_is_missing_from_the_describe() {
    let mut c = Cluster::new(3, "  allocation: {size: 1}\n");
    c.outdate_one(MANAGERS, "m1");
    journal_manager_roll(&mut c, "m1");
    let mut promoted = node("w9", true, false);
    promoted.group = Some(WORKERS.into());
    c.nodes().push(promoted);
    c.instances(MANAGERS).retain(|i| i.link() != Some("m1"));
    let p = c.at(SEC);
    assert!(!demotes(&p, "n-m1"), "{}", describe(&p));
}

/// A victim this operation destroyed, whose intent has moved on to the
/// node removal, is gone at once (no wait for `UNLISTED_BOUND`).
#[test]
fn a_victim_destroyed_by_its_operation_is_gone_once_the_intent_moved_past_the_destroy() {
    let mut c = Cluster::new(3, "  allocation: {size: 1}\n");
    c.outdate_one(MANAGERS, "m2");
    let p = c.at(0);
    let mut op = begins(&p, MANAGERS)[0].clone();
    assert_eq!(victim_link(&op), "m2");
    op.intent = Some(crate::journal::Intent {
        step: Step::RemoveNode,
        epoch: 1,
    });
    c.journal.push(op);
    c.instances(MANAGERS).retain(|i| i.link() != Some("m2"));
    let n = c.node("m2");
    n.manager_role = false;
    n.raft = None;
    let p = c.at(SEC);
    assert!(marks_destroy_done(&p), "{}", describe(&p));
}

/// ... and while the group that may hold its machine cannot be described.
#[test]
fn the_leader_waits_for_an_unlabelled_member_while_a_group_cannot_be_described() {
    let mut c = promoted_worker();
    lose_labels(&mut c, "w1");
    c.outdate_one(MANAGERS, "m1");
    c.observed
        .instances
        .insert(WORKERS.into(), Described::Failed("throttled".into()));
    let p = c.at(0);
    assert!(!demotes(&p, "n-m1"), "{}", describe(&p));
}

/// A pet machine that never joined leaves no node; a describe that leaves
/// it out makes its slot read empty. The slot is refilled only once it has
/// read empty for `UNLISTED_BOUND`.
#[test]
fn a_pet_slot_that_reads_empty_once_is_not_refilled_at_once() {
    let mut c = five_pets();
    c.instances(MANAGERS).retain(|i| i.link() != Some("m3"));
    c.nodes().retain(|n| n.id != "n-m3");
    let p = c.at(0);
    assert!(!adds_manager(&p), "{}", describe(&p));
    assert!(
        reason(&p, MANAGERS).contains("slot 10.0.0.3 reads empty"),
        "{}",
        describe(&p)
    );
    let p = c.at(crate::plan::memory::UNLISTED_BOUND.as_millis() as u64);
    assert!(adds_manager(&p), "{}", describe(&p));
}

/// An older incarnation of the machine's node reading `unknown` after an
/// election (not Down) is still no proof that the running engine, which lost
/// drover's labels, is out of the raft: the destroy blocks the same way.
#[test]
fn a_machine_matched_to_a_stale_node_reading_unknown_is_not_destroyed_while_a_member_is_unmatched()
{
    let mut c = lost_labels_beside_a_stale_node();
    let (destroyed, _) = run_until(&mut c, 400, |p| destroys_instance(p, "i-m3"));
    assert!(!destroyed);
    let old = c
        .nodes()
        .iter_mut()
        .find(|n| n.id == "n-m3-old")
        .expect("old");
    old.state = NodeState::Unknown;
    let p = c.at(401 * SEC);
    assert!(!destroys_instance(&p, "i-m3"), "{}", describe(&p));
}

/// A promoted worker's roll journaled its demote's intent, but the demote
/// never landed (the controller died, the call failed); then a manager
/// crashes. The heal goes first: an intent alone is not a raft change.
#[test]
fn a_demote_intent_that_never_landed_does_not_hold_a_managers_heal() {
    let mut c = promoted_worker_with_demote_intent();
    crash_manager(&mut c, "m3");
    let p = c.at(SEC);
    let heals = begins(&p, MANAGERS)
        .iter()
        .filter(|o| o.kind == OpKind::Heal)
        .count();
    assert_eq!(heals, 1, "{}", describe(&p));
}

/// A worker whose engine crashed is left out of one describe: its slot
/// reads empty and is filled. Listed again (its machine stopped), it is
/// over the size: retired, not healed with yet another machine (the
/// untidy simulator found 8 machines for 5 workers with max_in_flight 2).
#[test]
fn a_stopped_member_listed_again_after_its_slot_was_filled_is_retired_not_replaced() {
    let mut c = Cluster::new(3, "  allocation: {size: 2}\n");
    let h = c.hash(WORKERS);
    c.add_worker("w1", &h, None);
    c.add_worker("w2", &h, None);
    c.node("w2").state = NodeState::Down;
    let mut w2 = c
        .instances(WORKERS)
        .iter()
        .find(|i| i.link() == Some("w2"))
        .cloned()
        .unwrap();
    c.instances(WORKERS).retain(|i| i.link() != Some("w2"));
    let p = c.at(0);
    assert_eq!(provisions(&p).len(), 1, "{}", describe(&p));
    for a in &p.actions {
        if let Action::Begin { op } = a {
            c.journal.push((**op).clone());
        }
    }
    let fill = c.journal[0].clone();
    c.add_new_member(&fill, false);
    w2.running = false;
    c.instances(WORKERS).push(w2);
    let p = c.at(5 * SEC);
    assert!(
        provisions(&p).iter().all(|(op, _)| *op == fill.id),
        "a second machine for the slot: {}",
        describe(&p)
    );
    let retired = p.actions.iter().any(|a| {
        matches!(a, Action::Begin { op } if op.kind == OpKind::Retire
            && op.victim.as_ref().and_then(|v| v.link.as_deref()) == Some("w2"))
    });
    assert!(retired, "{}", describe(&p));
}

/// A surge's first machine vanished behind drover's back (its node not yet
/// Down) and the operation provisioned again under the same link: two live
/// nodes carry it. Rolling that machine waits until one is Down, rather
/// than drain one node and destroy the machine of the other (the untidy
/// simulator found the older node drained, the newer one's tasks killed).
#[test]
fn a_member_whose_link_two_live_nodes_carry_waits_until_one_is_down() {
    let mut c = Cluster::new(3, "  allocation: {size: 2}\n");
    let h = c.hash(WORKERS);
    c.add_worker("w1", &h, None);
    c.add_worker("w2", &h, None);
    c.desired.replace.insert("i-w2".into());
    let mut older = node("w2", false, false);
    older.id = "n-w2-older".into();
    older.running_tasks = 2;
    c.nodes().push(older);
    let p = c.at(0);
    assert!(begins(&p, WORKERS).is_empty(), "{}", describe(&p));

    c.nodes()
        .iter_mut()
        .find(|n| n.id == "n-w2-older")
        .unwrap()
        .state = NodeState::Down;
    let p = c.at(20 * SEC);
    let rolled = begins(&p, WORKERS);
    assert_eq!(rolled.len(), 1, "{}", describe(&p));
    let victim = rolled[0].victim.as_ref().and_then(|v| v.node.as_deref());
    assert_eq!(victim, Some("n-w2"), "{}", describe(&p));
}

/// A worker's roll is journaled with its node n-w2, which then reads
/// `disconnected` (still running its tasks) while a stale Down entry of an
/// earlier incarnation carries the same link. The drain is judged on n-w2,
/// not on the stale entry (which reads drained): the untidy simulator found
/// the machine destroyed with n-w2's tasks.
#[test]
fn a_drain_is_judged_on_the_victims_node_not_a_stale_entry_with_its_link() {
    let mut c = Cluster::new(3, "  allocation: {size: 2}\n");
    let h = c.hash(WORKERS);
    c.add_worker("w1", &h, None);
    c.add_worker("w2", &h, None);
    c.desired.replace.insert("i-w2".into());
    let p = c.at(0);
    let op = begins(&p, WORKERS)[0].clone();
    assert_eq!(victim_link(&op), "w2", "{}", describe(&p));
    c.journal.push(op.clone());
    let n = c.node("w2");
    n.state = NodeState::Disconnected;
    n.running_tasks = 2;
    let mut stale = node("w2", false, false);
    stale.id = "n-0w2".into();
    stale.state = NodeState::Down;
    c.nodes().insert(0, stale);
    let p = c.at(SEC);
    let drained_done = p
        .actions
        .iter()
        .any(|a| matches!(a, Action::MarkDone { op: o, step: Step::Drain } if *o == op.id));
    assert!(!drained_done, "{}", describe(&p));
    assert!(!destroys_instance(&p, "i-w2"), "{}", describe(&p));
}

#[test]
fn workers_promoted_by_hand_do_not_make_the_raft_whole_for_a_leader_roll() {
    // Three pets declared, two of them gone (their slots read empty for a
    // while before they are refilled: a describe can be partial), two
    // workers promoted by hand: a 3-member raft, but only the leader runs a
    // controller. Its self-demotion would hand the swarm to nodes that
    // finish nothing.
    let mut c = Cluster::new(3, "  allocation: {size: 2}\n  update: {canaries: 0}\n");
    c.desired = desired(
        "groups:\n\
         - name: managers\n  role: manager\n  allocation: {logical_ids: [10.0.0.1, 10.0.0.2, 10.0.0.3]}\n  instance: {provider: sim}\n\
         - name: workers\n  role: worker\n  instance: {provider: sim}\n  allocation: {size: 2}\n  update: {canaries: 0}\n",
    );
    for (k, i) in c.instances(MANAGERS).iter_mut().enumerate() {
        i.tags
            .insert(tags::LOGICAL_ID.into(), format!("10.0.0.{}", k + 1));
    }
    c.outdate_one(MANAGERS, "m1");
    c.remove_member(MANAGERS, "m2");
    c.remove_member(MANAGERS, "m3");
    let current = c.hash(WORKERS);
    for w in ["w1", "w2"] {
        c.add_worker(w, &current, None);
        let n = c.node(w);
        n.manager_role = true;
        n.raft = Some(RaftMember {
            leader: false,
            reachable: true,
            addr: format!("{w}:2377"),
        });
    }
    let bound = crate::plan::memory::UNLISTED_BOUND.as_millis() as u64;
    for t in [0, SEC, bound] {
        let p = c.at(t);
        assert!(!demotes(&p, "n-m1"), "at {t}: {}", describe(&p));
        assert!(
            begins(&p, MANAGERS).iter().all(|o| o.victim.is_none()),
            "at {t}: {}",
            describe(&p)
        );
    }
    // Once the empty slot has read empty long enough, it is refilled.
    assert!(adds_manager(&c.at(bound)), "{}", describe(&c.at(bound)));
}

/// Workers of size 2 holding three machines: w1, which never joined (no
/// node; `startup_timeout` 60 s), and w2 and w3, joined.
fn over_by_one_with_w1_never_joined() -> Cluster {
    let mut c = Cluster::new(
        1,
        "  allocation: {size: 2}\n  health: {startup_timeout: 60s}\n",
    );
    let hash = c.hash(WORKERS);
    c.instances(WORKERS)
        .push(instance(WORKERS, "w1", &hash, None));
    for w in ["w2", "w3"] {
        c.add_worker(w, &hash, None);
    }
    c
}

#[test]
fn over_its_size_a_group_retires_the_machine_that_never_joined_not_a_disconnected_one() {
    // Size 2; w1 never joined (no node), w2 and w3 joined, w3 the newest
    // and reading `disconnected` for a moment. Retiring w3 and healing w1
    // would add a machine to a group already over its size.
    let mut c = over_by_one_with_w1_never_joined();
    for i in c.instances(WORKERS) {
        if i.link() == Some("w3") {
            i.created_ms = 30 * SEC;
        }
    }
    c.node("w3").state = NodeState::Disconnected;
    c.at(0);
    let p = c.at(60 * SEC);
    let ops = begins(&p, WORKERS);
    assert_eq!(ops.len(), 1, "{}", describe(&p));
    assert_eq!(ops[0].kind, OpKind::Retire, "{}", describe(&p));
    assert_eq!(victim_link(ops[0]), "w1", "{}", describe(&p));
    assert!(provisions(&p).is_empty(), "{}", describe(&p));
}

#[test]
fn a_machine_that_never_joined_is_not_healed_while_a_describe_left_a_live_member_out() {
    // Size 2: w1 never joined, w2 listed, w3 left out of this describe
    // while its node is live. The group may already hold three machines
    // (w3's slot was refilled by w1 while w3 was left out before): healing
    // w1 would keep the surplus. A full describe shows w1 as the excess.
    let mut c = over_by_one_with_w1_never_joined();
    let hash = c.hash(WORKERS);
    c.instances(WORKERS).retain(|i| i.link() != Some("w3"));
    c.at(0);
    let p = c.at(60 * SEC);
    assert!(begins(&p, WORKERS).is_empty(), "{}", describe(&p));
    assert!(
        reason(&p, WORKERS).contains("cannot heal i-w1 yet"),
        "{}",
        describe(&p)
    );
    // Listed again: the group is over its size, and w1 is retired.
    c.instances(WORKERS)
        .push(instance(WORKERS, "w3", &hash, None));
    let p = c.at(61 * SEC);
    let ops = begins(&p, WORKERS);
    assert_eq!(ops.len(), 1, "{}", describe(&p));
    assert_eq!(ops[0].kind, OpKind::Retire, "{}", describe(&p));
    assert_eq!(victim_link(ops[0]), "w1", "{}", describe(&p));
}

/// A manager surge whose new machines never join: the machine that stepped
/// aside is the surge's next attempt, so the group blocks once
/// `health.max_attempts` machines in a row never joined. Without that, the
/// never-joined member was retired as excess and the roll surged again at
/// attempt 1, provisioning without end. `due` makes the members due
/// for replacement (a config change, a replace request, an age).
fn a_surge_whose_machines_never_join(due: impl FnOnce(&mut Cluster)) {
    let mut c = Cluster::new(3, "  allocation: {size: 1}\n");
    let g = c.group_mut(MANAGERS);
    g.spec.update.strategy = crate::spec::Strategy::Surge;
    g.spec.health.max_attempts = 2;
    g.spec.health.startup_timeout = std::time::Duration::from_secs(60);
    due(&mut c);
    let provisioned = std::cell::RefCell::new(std::collections::BTreeSet::new());
    let (_, p) = run_machines(&mut c, 3_000, false, |p, _| {
        for a in &p.actions {
            if let Action::Provision { op, group, .. } = a
                && group == MANAGERS
            {
                provisioned.borrow_mut().insert(op.clone());
            }
        }
        false
    });
    assert_eq!(
        status(&p, MANAGERS).phase,
        Phase::Blocked,
        "{}",
        describe(&p)
    );
    let why = reason(&p, MANAGERS);
    assert!(why.contains("2 machines in a row never joined"), "{why}");
    assert_eq!(provisioned.borrow().len(), 2, "{:?}", provisioned.borrow());
    // Nothing that was there was removed: the three managers stay.
    let kept = c
        .instances(MANAGERS)
        .iter()
        .filter(|i| ["i-m1", "i-m2", "i-m3"].contains(&i.id.as_str()))
        .count();
    assert_eq!(kept, 3, "{}", describe(&p));
}

#[test]
fn a_surge_whose_machines_never_join_blocks_after_max_attempts() {
    a_surge_whose_machines_never_join(|c| c.outdate(MANAGERS));
}

/// Issue 36: the same bound when the member rolled has a current config
/// and is due only because an operator asked (`drover replace`).
#[test]
fn a_requested_replacements_surge_that_never_joins_blocks_after_max_attempts() {
    a_surge_whose_machines_never_join(|c| {
        c.desired.replace.insert("i-m2".into());
    });
}

/// Issue 36: the same bound when the members are due only by age
/// (`health.max_age`): before, each new machine that never joined was
/// retired as excess and the roll surged again at attempt 1 (the
/// simulator made 38 machines in 50 minutes with `max_attempts: 2`).
#[test]
fn an_aged_members_surge_that_never_joins_blocks_after_max_attempts() {
    a_surge_whose_machines_never_join(|c| {
        let day = std::time::Duration::from_secs(86_400);
        c.group_mut(MANAGERS).spec.health.max_age = Some(30 * day);
        let old = c.wall - 40 * 86_400 * SEC;
        for i in c.instances(MANAGERS) {
            i.created_ms = old;
        }
    });
}
