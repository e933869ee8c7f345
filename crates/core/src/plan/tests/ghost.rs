//! Ghost raft members (`plan::ghost`): a worker by spec still in the raft,
//! unreachable, with no manager behind it, healed through swarmkit's own
//! reconciliation under the gate every raft change passes; the hand-over's
//! wait for the former leader ends on it.

use super::*;
use crate::plan::{GHOST_BOUND, Ghost, GhostEvidence};

const BOUND: Time = GHOST_BOUND.as_millis() as Time;

fn heals(p: &Plan) -> Vec<(String, Step, String)> {
    p.actions
        .iter()
        .filter_map(|a| match a {
            Action::HealGhost { op, step, node } => Some((op.clone(), *step, node.clone())),
            _ => None,
        })
        .collect()
}

/// The former leader's node as the issue measured it: its engine was
/// restarted right after its self-demotion, rejoined the raft under a new
/// raft id and stopped its manager: a worker by spec, Ready, still a raft
/// member, unreachable; its engine says it runs no manager.
fn ghost_of_the_former_leader() -> (Cluster, Operation) {
    let (mut c, op) = leader_demoted_itself();
    let m1 = c.node("m1");
    m1.raft.as_mut().expect("member").reachable = false;
    m1.engine_no_manager = true;
    (c, op)
}

/// Issue 36 item 3: the next leader's controller waited "for former leader
/// … to leave the raft" for ever at fault tolerance 0. Once the member has
/// been a ghost for the bound, its heal is planned for the hand-over's
/// step, at most once per bound, status shows it, and once swarmkit removed
/// the member the hand-over goes on (its bounded wait for the leave).
#[test]
fn the_former_leaders_ghost_is_healed_and_the_hand_over_goes_on() {
    let (mut c, op) = ghost_of_the_former_leader();
    let p = c.at(SEC);
    assert!(heals(&p).is_empty(), "{}", describe(&p));
    assert!(p.swarm.ghosts.is_empty());
    assert!(
        reason(&p, MANAGERS).contains("waiting for former leader n-m1 to leave the raft"),
        "{}",
        describe(&p)
    );
    assert!(
        p.wake_at.is_some_and(|w| w <= SEC + BOUND),
        "{:?}",
        p.wake_at
    );

    let p = c.at(SEC + BOUND);
    assert_eq!(
        heals(&p),
        [(op.id.clone(), Step::DemoteSelfAndLeave, "n-m1".to_string())],
        "{}",
        describe(&p)
    );
    assert_eq!(
        p.swarm.ghosts,
        [Ghost {
            node: "n-m1".into(),
            evidence: GhostEvidence::EngineNoManager,
            seen_s: BOUND / SEC,
        }]
    );
    assert!(
        p.explanation
            .iter()
            .any(|l| l.starts_with("swarm: ghost raft member n-m1: a worker by spec")),
        "{}",
        describe(&p)
    );

    // Not again before the bound: swarmkit removes the member in seconds.
    let p = c.at(2 * SEC + BOUND);
    assert!(heals(&p).is_empty(), "{}", describe(&p));
    assert!(
        reason(&p, MANAGERS).contains("ghost raft member, healed"),
        "{}",
        describe(&p)
    );
    let p = c.at(SEC + 2 * BOUND);
    assert_eq!(heals(&p).len(), 1, "{}", describe(&p));

    // Swarmkit removed the member: no ghost; the hand-over waits (bounded)
    // for the leave, then destroys the machine.
    c.node("m1").raft = None;
    let p = c.at(2 * SEC + 2 * BOUND);
    assert!(heals(&p).is_empty() && p.swarm.ghosts.is_empty());
    assert!(
        reason(&p, MANAGERS).contains("to leave"),
        "{}",
        describe(&p)
    );
    let leave = crate::plan::memory::LEAVE_BOUND.as_millis() as Time;
    let p = c.at(2 * SEC + 2 * BOUND + leave);
    assert!(
        has(
            &p,
            |a| matches!(a, Action::Destroy { op: o, .. } if *o == op.id)
        ),
        "{}",
        describe(&p)
    );
}

/// A ghost only on evidence: a worker's unreachable member whose engine
/// says nothing (it may be partitioned with its manager running) is left
/// to swarmkit; one whose engine left, or whose node is Down, is a ghost;
/// a manager by spec, or a reachable member, never is.
#[test]
fn a_ghost_needs_evidence_that_no_manager_runs_behind_it() {
    let (mut c, _) = ghost_of_the_former_leader();
    c.node("m1").engine_no_manager = false;
    c.at(0);
    let p = c.at(5 * BOUND);
    assert!(
        heals(&p).is_empty() && p.swarm.ghosts.is_empty(),
        "{}",
        describe(&p)
    );

    for (evidence, set) in [
        (
            GhostEvidence::EngineLeft,
            (|n: &mut Node| n.left = true) as fn(&mut Node),
        ),
        (GhostEvidence::NodeDown, |n: &mut Node| {
            n.state = NodeState::Down
        }),
    ] {
        let (mut c, _) = ghost_of_the_former_leader();
        c.node("m1").engine_no_manager = false;
        set(c.node("m1"));
        c.at(0);
        let p = c.at(BOUND);
        assert_eq!(heals(&p).len(), 1, "{evidence:?}: {}", describe(&p));
        assert_eq!(p.swarm.ghosts[0].evidence, evidence);
    }

    for change in [
        (|n: &mut Node| n.manager_role = true) as fn(&mut Node),
        |n: &mut Node| n.raft.as_mut().expect("member").reachable = true,
    ] {
        let (mut c, _) = ghost_of_the_former_leader();
        change(c.node("m1"));
        c.at(0);
        let p = c.at(BOUND);
        assert!(
            heals(&p).is_empty() && p.swarm.ghosts.is_empty(),
            "{}",
            describe(&p)
        );
    }
}

/// A ghost no operation works on (a demotion by hand) is healed on its own,
/// under `ghost-<node>`, through the raft-change gate: not while another
/// operation changes the raft, which the ghost's heal then waits for,
/// saying so.
#[test]
fn a_ghost_no_operation_works_on_is_healed_once_no_other_raft_change_is_in_flight() {
    let mut c = Cluster::new(3, "  allocation: {size: 1}\n");
    let w = c.hash(WORKERS);
    c.add_worker("w1", &w, None);
    let mut ghost = node("g1", false, false);
    ghost.group = Some(MANAGERS.into());
    ghost.raft = Some(RaftMember {
        leader: false,
        reachable: false,
        addr: "g1:2377".into(),
    });
    ghost.engine_no_manager = true;
    // Another manager's demotion in flight (by a journaled roll of m3).
    c.outdate_one(MANAGERS, "m3");
    let roll = Operation {
        intent: Some(crate::journal::Intent {
            step: Step::Demote,
            epoch: 1,
        }),
        ..replacement_op_of(&mut c, "m3")
    };
    c.journal.push(roll);
    c.node("m3").manager_role = false;
    c.nodes().push(ghost);
    c.at(0);
    let p = c.at(BOUND);
    assert!(heals(&p).is_empty(), "{}", describe(&p));
    assert!(
        p.explanation
            .iter()
            .any(|l| l.starts_with("swarm: ghost raft member n-g1: its heal waits")),
        "{}",
        describe(&p)
    );
    // The other demotion is over and its operation done.
    c.journal.clear();
    c.remove_member(MANAGERS, "m3");
    let p = c.at(BOUND + SEC);
    assert_eq!(
        heals(&p),
        [(
            "ghost-n-g1".to_string(),
            Step::AwaitOutOfRaft,
            "n-g1".to_string()
        )],
        "{}",
        describe(&p)
    );
}

/// The roll a test journals by hand for `link`'s member (a manager roll,
/// replace strategy: demote first).
fn replacement_op_of(c: &mut Cluster, link: &str) -> Operation {
    let p = c.at(0);
    let op = begins(&p, MANAGERS)
        .into_iter()
        .find(|o| victim_link(o) == link)
        .unwrap_or_else(|| panic!("no roll of {link}: {}", describe(&p)))
        .clone();
    c.memory = Memory::default();
    op
}

/// A manager demoted by its operation whose member turned into a ghost
/// (its engine restarted mid-demotion) is healed by that operation's wait
/// out of the raft.
#[test]
fn a_demoted_managers_ghost_is_healed_by_its_operations_wait_out_of_the_raft() {
    let mut c = Cluster::new(3, "  allocation: {size: 1}\n");
    let w = c.hash(WORKERS);
    c.add_worker("w1", &w, None);
    c.outdate_one(MANAGERS, "m3");
    let op = replacement_op_of(&mut c, "m3");
    c.journal.push(op.clone());
    let m3 = c.node("m3");
    m3.manager_role = false;
    m3.raft.as_mut().expect("member").reachable = false;
    m3.engine_no_manager = true;
    let p = c.at(0);
    assert!(
        reason(&p, MANAGERS).contains("to leave the raft"),
        "{}",
        describe(&p)
    );
    let p = c.at(BOUND);
    assert_eq!(
        heals(&p),
        [(op.id.clone(), Step::AwaitOutOfRaft, "n-m3".to_string())],
        "{}",
        describe(&p)
    );
}

/// Found by the in-place crash matrix (`e2e_crash_in_place`): a manager's
/// engine restarted by its update before its worker certificate came back
/// with its old manager state and rejoined the raft under a new raft id, a
/// worker by spec. Promoted then, it was given that member's raft id back
/// with an empty log, and its engine panicked at every start
/// ("tocommit(99) is out of range [lastIndex(0)]"): the roll blocked on a
/// member down, for ever, at fault tolerance 0. The promotion waits while
/// the node still has a raft member; once the member is a ghost it is
/// healed as the promotion's step; once it is gone the node is promoted.
#[test]
fn an_updated_manager_back_in_the_raft_by_itself_is_not_promoted_until_its_member_is_gone() {
    let mut c = Cluster::new(3, "  allocation: {size: 1}\n");
    c.desired = desired(
        "groups:\n\
         - name: managers\n  role: manager\n  allocation: {size: 3}\n  instance: {provider: sim}\n  \
         update: {strategy: in_place, min_fault_tolerance: 0, in_place: {command: upgrade}}\n\
         - name: workers\n  role: worker\n  allocation: {size: 1}\n  instance: {provider: sim}\n",
    );
    let new = c.hash(MANAGERS);
    let w = c.hash(WORKERS);
    c.add_worker("w1", &w, None);
    // The roll runs until the first manager's update: each step as the
    // shell and the swarm would make it.
    let mut updated = None;
    for t in 0..40 {
        let p = c.at(t * SEC);
        assert!(
            !has(&p, |a| matches!(a, Action::Promote { .. })),
            "{}",
            describe(&p)
        );
        for a in &p.actions {
            match a {
                Action::MarkDone { op, step } => {
                    let o = c.journal.iter_mut().find(|o| o.id == *op).expect("op");
                    o.done.insert(*step);
                }
                Action::Drain { node, .. } => {
                    let n = c.nodes().iter_mut().find(|n| n.id == *node).expect("node");
                    n.availability = Availability::Drain;
                }
                Action::RunUpdate { op, instance, .. } => {
                    updated = Some((op.clone(), instance.clone()));
                }
                a => c.apply(a, true),
            }
        }
        if updated.is_some() {
            break;
        }
    }
    let (op, instance) = updated.expect("an update was planned");
    let link = instance
        .strip_prefix("i-")
        .expect("a test machine")
        .to_string();
    // The update ran and tagged the machine; its engine's restart brought
    // its old manager state back into the raft: a worker by spec, Ready,
    // with a reachable raft member (its manager still runs, for now).
    for i in c.instances(MANAGERS) {
        if i.id == instance {
            i.tags.insert(tags::CONFIG.into(), new.clone());
        }
    }
    c.node(&link).raft = Some(RaftMember {
        leader: false,
        reachable: true,
        addr: format!("{link}:2377"),
    });
    let promotes = |p: &Plan| has(p, |a| matches!(a, Action::Promote { .. }));
    let t0 = 100 * SEC;
    let p = c.at(t0);
    assert!(
        !promotes(&p),
        "promoted with a raft member: {}",
        describe(&p)
    );
    assert!(
        reason(&p, MANAGERS).contains(&format!("n-{link}")),
        "{}",
        describe(&p)
    );
    // Its manager stops (it is a worker by spec): a ghost, healed as the
    // promotion's step once it has been one for the bound.
    let n = c.node(&link);
    n.raft.as_mut().expect("member").reachable = false;
    n.engine_no_manager = true;
    let p = c.at(t0 + SEC);
    assert!(!promotes(&p) && heals(&p).is_empty(), "{}", describe(&p));
    let p = c.at(t0 + SEC + BOUND);
    assert!(!promotes(&p), "{}", describe(&p));
    assert_eq!(
        heals(&p),
        [(op.clone(), Step::Promote, format!("n-{link}"))],
        "{}",
        describe(&p)
    );
    // The member gone, the node is promoted.
    let n = c.node(&link);
    n.raft = None;
    n.engine_no_manager = false;
    let p = c.at(t0 + 2 * SEC + BOUND);
    assert!(
        has(
            &p,
            |a| matches!(a, Action::Promote { op: o, node } if *o == op && *node == format!("n-{link}"))
        ),
        "{}",
        describe(&p)
    );
}
