//! Lifecycle hooks: each a journaled step, called until the journal says
//! it ran, with one idempotency key per operation and point; a blocking
//! hook's failure blocks the group with the hook's own message.

use super::*;
use crate::journal::HookFailed;
use crate::spec::{HookFacts, HookPoint};

const HOOKS: &str = "  hooks:\n    pre_drain: {command: [/bin/notify, drain]}\n    pre_destroy: {http: http://127.0.0.1:9/destroy, timeout: 5s}\n    post_provision: {command: [/bin/notify, new]}\n    post_join: {command: [/bin/notify, joined], on_failure: continue}\n";

/// One outdated worker w1 of a group declaring every hook.
fn cluster() -> Cluster {
    let mut c = Cluster::new(
        1,
        &format!("  allocation: {{size: 1}}\n  update: {{canaries: 0}}\n{HOOKS}"),
    );
    c.add_worker("w1", OLD, None);
    c
}

fn hook_runs(p: &Plan) -> Vec<(Step, HookFacts)> {
    p.actions
        .iter()
        .filter_map(|a| match a {
            Action::RunHook { step, facts, .. } => Some((*step, (**facts).clone())),
            _ => None,
        })
        .collect()
}

fn side_effects(p: &Plan) -> Vec<&'static str> {
    p.actions
        .iter()
        .filter(|a| a.is_side_effect())
        .map(Action::kind)
        .collect()
}

#[test]
fn each_hook_runs_before_or_after_its_step_until_the_journal_says_it_ran() {
    let mut c = cluster();
    let p = c.at(0);
    let op = begins(&p, WORKERS)[0].clone();
    assert_eq!(side_effects(&p), ["run_hook"], "{}", describe(&p));
    let (step, facts) = hook_runs(&p).remove(0);
    assert_eq!(step, Step::PreDrainHook);
    assert_eq!(facts.instance.as_deref(), Some("i-w1"));
    assert_eq!(facts.node.as_deref(), Some("n-w1"));
    assert_eq!(facts.idempotency_key, format!("{}/pre_drain", op.id));
    c.journal.push(op.clone());
    // Not journaled yet (the call runs, or the controller died): again, same key.
    c.forget();
    let again = hook_runs(&c.at(SEC));
    assert_eq!(again.len(), 1);
    assert_eq!(again[0].1.idempotency_key, facts.idempotency_key);
    // Journaled: the drain comes.
    c.journal[0].done.insert(Step::PreDrainHook);
    let p = c.at(2 * SEC);
    assert_eq!(side_effects(&p), ["drain"], "{}", describe(&p));
    // Drained and empty: pre_destroy before the destroy.
    c.node("w1").availability = Availability::Drain;
    let p = c.at(3 * SEC);
    assert_eq!(hook_runs(&p)[0].0, Step::PreDestroyHook, "{}", describe(&p));
    assert!(!has(&p, |a| matches!(a, Action::Destroy { .. })));
    c.journal[0].done.insert(Step::PreDestroyHook);
    assert!(has(&c.at(4 * SEC), |a| matches!(a, Action::Destroy { .. })));
    // Gone; the new machine is listed: post_provision, for it.
    c.remove_member(WORKERS, "w1");
    c.add_new_member(&op, false);
    let p = c.at(5 * SEC);
    let (step, facts) = hook_runs(&p).remove(0);
    assert_eq!(step, Step::PostProvisionHook, "{}", describe(&p));
    assert_eq!(facts.instance, Some(format!("i-new-{}", op.id)));
    c.journal[0].done.insert(Step::PostProvisionHook);
    // Joined and watched: post_join, then complete.
    c.nodes().push(node(&op.id, false, false));
    c.at(6 * SEC);
    let p = c.at(60 * SEC);
    let (step, facts) = hook_runs(&p).remove(0);
    assert_eq!(step, Step::PostJoinHook, "{}", describe(&p));
    assert_eq!(facts.node, Some(format!("n-{}", op.id)));
    c.journal[0].done.insert(Step::PostJoinHook);
    let p = c.at(61 * SEC);
    assert!(
        has(&p, |a| matches!(a, Action::Complete { .. })),
        "{}",
        describe(&p)
    );
}

#[test]
fn a_blocking_hook_failure_blocks_the_group_with_its_message_then_calls_again() {
    let mut c = cluster();
    let op = begins(&c.at(0), WORKERS)[0].clone();
    c.journal.push(op);
    c.journal[0].hook_failure = Some(HookFailed {
        step: Step::PreDrainHook,
        message: "hook command exited with exit status: 1: change freeze until 06:00".into(),
        attempts: 1,
    });
    let p = c.at(SEC);
    assert!(side_effects(&p).is_empty(), "{}", describe(&p));
    assert_eq!(status(&p, WORKERS).phase, Phase::Blocked);
    assert!(
        reason(&p, WORKERS).contains("change freeze until 06:00"),
        "{}",
        describe(&p)
    );
    let p = c.at(SEC + 29 * SEC);
    assert!(side_effects(&p).is_empty(), "{}", describe(&p));
    let p = c.at(SEC + 30 * SEC);
    assert_eq!(side_effects(&p), ["run_hook"], "{}", describe(&p));
    // A second failure waits its own 30 s.
    c.journal[0].hook_failure.as_mut().unwrap().attempts = 2;
    assert!(side_effects(&c.at(32 * SEC)).is_empty());
    assert_eq!(side_effects(&c.at(62 * SEC)), ["run_hook"]);
}

#[test]
fn a_hook_no_longer_declared_is_not_waited_for() {
    let mut c = cluster();
    let op = begins(&c.at(0), WORKERS)[0].clone();
    c.journal.push(op);
    c.group_mut(WORKERS).spec.hooks.pre_drain = None;
    let p = c.at(SEC);
    assert_eq!(side_effects(&p), ["drain"], "{}", describe(&p));
}

#[test]
fn hooks_go_around_the_steps_of_every_kind_of_operation() {
    let hooks = {
        let mut h = crate::spec::Hooks::default();
        for p in HookPoint::ALL {
            *h.at_mut(p) = Some(crate::spec::Hook {
                call: crate::spec::HookCall::Command(vec!["x".into()]),
                timeout: std::time::Duration::from_secs(1),
                on_failure: crate::spec::HookOnFailure::Block,
            });
        }
        h
    };
    let mut op = replacement_op("o", OpKind::Roll, crate::spec::Role::Manager, "m2", None);
    assert_eq!(
        op.steps_with_hooks(&hooks),
        [
            Step::PreDrainHook,
            Step::Demote,
            Step::AwaitOutOfRaft,
            Step::PreDestroyHook,
            Step::Destroy,
            Step::RemoveNode,
            Step::Provision,
            Step::PostProvisionHook,
            Step::AwaitHealthy,
            Step::PostJoinHook,
        ]
    );
    op.surge = true;
    op.role = crate::spec::Role::Worker;
    assert_eq!(
        op.steps_with_hooks(&hooks),
        [
            Step::Provision,
            Step::PostProvisionHook,
            Step::AwaitHealthy,
            Step::PostJoinHook,
            Step::PreDrainHook,
            Step::Drain,
            Step::PreDestroyHook,
            Step::Destroy,
            Step::RemoveNode,
        ]
    );
    assert_eq!(op.steps_with_hooks(&Default::default()), op.steps());
}

#[test]
fn a_failing_hook_blocks_but_never_rolls_back() {
    let mut c = Cluster::new(
        1,
        &format!(
            "  allocation: {{size: 1}}\n  update: {{canaries: 0, step_timeout: 90s, on_failure: rollback}}\n{HOOKS}"
        ),
    );
    c.add_worker("w1", OLD, None);
    let op = begins(&c.at(0), WORKERS)[0].clone();
    c.journal.push(op);
    c.journal[0].hook_failure = Some(HookFailed {
        step: Step::PreDrainHook,
        message: "change freeze".into(),
        attempts: 1,
    });
    // Every 10 s for 20 minutes; each call fails again, as the
    // controller records it.
    let mut calls = 0;
    for t in (1..=120).map(|k| k * 10 * SEC) {
        let p = c.at(t);
        assert!(
            !has(&p, |a| matches!(a, Action::Rollback { .. })),
            "t={t}: {}",
            describe(&p)
        );
        if !hook_runs(&p).is_empty() {
            calls += 1;
            c.journal[0].hook_failure.as_mut().unwrap().attempts += 1;
        } else {
            assert!(
                reason(&p, WORKERS).contains("change freeze"),
                "{}",
                describe(&p)
            );
        }
    }
    assert!(calls >= 30, "called again every 30 s: {calls}");
}

#[test]
fn heals_and_dead_node_removals_run_no_hooks() {
    let hooks = super::super::tests::desired(&cluster_yaml(
        1,
        &format!("  allocation: {{size: 1}}\n{HOOKS}"),
    ))
    .groups[1]
        .spec
        .hooks
        .clone();
    for kind in [OpKind::Heal, OpKind::RemoveDead] {
        let op = replacement_op("o", kind, crate::spec::Role::Worker, "w1", None);
        assert_eq!(op.steps_with_hooks(&hooks), op.steps(), "{kind:?}");
    }
    let roll = replacement_op("o", OpKind::Roll, crate::spec::Role::Worker, "w1", None);
    assert_ne!(roll.steps_with_hooks(&hooks), roll.steps());
}

#[test]
fn a_hook_steps_intent_stands_where_its_hook_runs() {
    let mut op = replacement_op("o", OpKind::Roll, crate::spec::Role::Worker, "w1", None);
    let at = |op: &mut Operation, step| {
        op.intent = Some(crate::journal::Intent { step, epoch: 1 });
    };
    at(&mut op, Step::PreDrainHook);
    assert!(!op.reached(Step::Drain), "before the drain");
    at(&mut op, Step::PreDestroyHook);
    assert!(op.reached(Step::Drain) && !op.reached(Step::Destroy));
    at(&mut op, Step::PostProvisionHook);
    assert!(op.reached(Step::Provision) && !op.reached(Step::AwaitHealthy));
    at(&mut op, Step::PostJoinHook);
    assert!(op.reached(Step::AwaitHealthy));
}

/// A hook calling `argv`, blocking on failure.
fn hook(argv: &str) -> Option<crate::spec::Hook> {
    Some(crate::spec::Hook {
        call: crate::spec::HookCall::Command(vec![argv.into()]),
        timeout: std::time::Duration::from_secs(5),
        on_failure: crate::spec::HookOnFailure::Block,
    })
}

/// Three managers, m2 outdated, the group declaring `pre_drain` (and
/// `on_abort` when `on_abort`): m2's roll journaled with its pre_drain
/// hook called.
fn manager_roll_told(on_abort: bool) -> Cluster {
    let mut c = Cluster::new(3, "  allocation: {size: 1}\n");
    let hooks = &mut c.group_mut(MANAGERS).spec.hooks;
    hooks.pre_drain = hook("/bin/lb-out");
    hooks.on_abort = if on_abort { hook("/bin/lb-in") } else { None };
    c.outdate_one(MANAGERS, "m2");
    let p = c.at(0);
    let op = begins(&p, MANAGERS)[0].clone();
    assert_eq!(hook_runs(&p)[0].0, Step::PreDrainHook, "{}", describe(&p));
    c.journal.push(op);
    c.journal[0].done.insert(Step::PreDrainHook);
    c
}

fn completes(p: &Plan) -> bool {
    has(p, |a| matches!(a, Action::Complete { .. }))
}

/// Issue 36: a roll whose pre_drain hook ran, then stepped aside (another
/// manager became unreachable: demoting m2 is unsafe, nothing was
/// disrupted), calls `on_abort` for the member before it ends, so what
/// the outside world was told is undone; once called, the operation only
/// ends, even if the world moved back meanwhile.
#[test]
fn a_roll_that_steps_aside_after_its_pre_drain_hook_calls_on_abort_before_it_ends() {
    let mut c = manager_roll_told(true);
    let op = c.journal[0].id.clone();
    c.node("m3").raft.as_mut().expect("member").reachable = false;
    let p = c.at(SEC);
    assert!(!completes(&p), "{}", describe(&p));
    assert!(!has(&p, is_demote), "{}", describe(&p));
    let runs = hook_runs(&p);
    assert_eq!(runs.len(), 1, "{}", describe(&p));
    let (step, facts) = &runs[0];
    assert_eq!(*step, Step::OnAbortHook);
    assert_eq!(facts.hook, HookPoint::OnAbort);
    assert_eq!(facts.instance.as_deref(), Some("i-m2"));
    assert_eq!(facts.node.as_deref(), Some("n-m2"));
    assert_eq!(facts.idempotency_key, format!("{op}/on_abort"));
    // The call started (its intent journaled); m3 is back meanwhile: the
    // operation does not demote m2 after telling the world it aborted.
    c.journal[0].intent = Some(crate::journal::Intent {
        step: Step::OnAbortHook,
        epoch: 1,
    });
    c.node("m3").raft.as_mut().expect("member").reachable = true;
    let p = c.at(2 * SEC);
    assert!(!has(&p, is_demote), "{}", describe(&p));
    assert_eq!(hook_runs(&p)[0].0, Step::OnAbortHook, "{}", describe(&p));
    // A blocking failure blocks the group with the hook's message.
    c.journal[0].hook_failure = Some(HookFailed {
        step: Step::OnAbortHook,
        message: "lb unreachable".into(),
        attempts: 1,
    });
    let p = c.at(3 * SEC);
    assert!(
        reason(&p, MANAGERS).contains("lb unreachable"),
        "{}",
        describe(&p)
    );
    assert!(!has(&p, is_demote), "{}", describe(&p));
    // Called: the operation ends.
    c.journal[0].hook_failure = None;
    c.journal[0].done.insert(Step::OnAbortHook);
    let p = c.at(4 * SEC);
    assert!(completes(&p), "{}", describe(&p));
    assert!(
        hook_runs(&p).iter().all(|(s, _)| *s != Step::OnAbortHook),
        "{}",
        describe(&p)
    );
}

/// The controls: without `on_abort` declared, or with no pre hook called
/// (the group's `pre_drain` removed before its step came), the operation
/// steps aside at once, calling nothing.
#[test]
fn a_roll_steps_aside_at_once_without_on_abort_or_before_its_pre_hook() {
    let mut c = manager_roll_told(false);
    c.node("m3").raft.as_mut().expect("member").reachable = false;
    let p = c.at(SEC);
    assert!(completes(&p), "{}", describe(&p));
    assert!(hook_runs(&p).is_empty(), "{}", describe(&p));

    let mut c = manager_roll_told(true);
    c.journal[0].done.clear();
    c.group_mut(MANAGERS).spec.hooks.pre_drain = None;
    c.node("m3").raft.as_mut().expect("member").reachable = false;
    let p = c.at(SEC);
    assert!(completes(&p), "{}", describe(&p));
    assert!(hook_runs(&p).is_empty(), "{}", describe(&p));
}

/// Issue 36: a blocking `post_provision` hook's failure blocks the group
/// while the machine its operation made still boots. That machine may yet
/// join with the current token: within `startup_timeout` its operation is
/// not parked and holds back the role's token's rotation; past it, the
/// operation is parked (the machine can no longer join) and holds back
/// nothing, so a blocked group never keeps an exposed token valid for ever.
#[test]
fn a_blocked_groups_booting_machine_holds_back_rotation_until_its_startup_timeout() {
    let mut c = Cluster::new(
        1,
        &format!(
            "  allocation: {{size: 1}}\n  update: {{canaries: 0}}\n  health: {{startup_timeout: 60s}}\n{HOOKS}"
        ),
    );
    c.add_worker("w1", OLD, None);
    let mut op = begins(&c.at(0), WORKERS)[0].clone();
    for step in [
        Step::PreDrainHook,
        Step::Drain,
        Step::PreDestroyHook,
        Step::Destroy,
        Step::Provision,
    ] {
        op.done.insert(step);
    }
    op.hook_failure = Some(HookFailed {
        step: Step::PostProvisionHook,
        message: "hook command exited with exit status: 1: inventory down".into(),
        attempts: 1,
    });
    c.remove_member(WORKERS, "w1");
    c.add_new_member(&op, false);
    c.journal.push(op.clone());
    let awaits = |c: &mut Cluster, now: Time| {
        let (phase, roles) = awaiting_at(c, now);
        assert_eq!(phase, Phase::Blocked);
        roles
    };
    assert_eq!(awaits(&mut c, SEC), [crate::spec::Role::Worker].into());
    assert_eq!(awaits(&mut c, 29 * SEC), [crate::spec::Role::Worker].into());
    // The hook was called again at 31 s and failed again: blocked anew.
    c.journal[0].hook_failure.as_mut().unwrap().attempts = 2;
    assert!(awaits(&mut c, 62 * SEC).is_empty());
}

/// Issue 36: the same machine past its `startup_timeout` holds back no
/// rotation in a pass that calls the hook again either, where the group
/// does not read blocked (nor while it waits for its window): a rule read
/// from the group's phase kept the token valid for good in the simulator
/// (seed 13359442953840262064).
#[test]
fn a_machine_past_its_startup_timeout_holds_back_no_rotation_when_its_group_does_not_read_blocked()
{
    let mut c = Cluster::new(
        1,
        &format!(
            "  allocation: {{size: 1}}\n  update: {{canaries: 0}}\n  health: {{startup_timeout: 60s}}\n{HOOKS}"
        ),
    );
    let mut op = begins(&c.at(0), WORKERS)[0].clone();
    op.done.insert(Step::Provision);
    c.add_new_member(&op, false);
    c.journal.push(op.clone());
    let awaits = |c: &mut Cluster, now: Time| {
        let (phase, roles) = awaiting_at(c, now);
        assert_ne!(phase, Phase::Blocked);
        roles
    };
    assert_eq!(awaits(&mut c, SEC), [crate::spec::Role::Worker].into());
    assert!(awaits(&mut c, 62 * SEC).is_empty());
}

/// A pass at `now`: the workers' phase, and the roles whose token its
/// journal and parked operations hold back from rotation.
fn awaiting_at(
    c: &mut Cluster,
    now: Time,
) -> (Phase, std::collections::BTreeSet<crate::spec::Role>) {
    let p = c.at(now);
    let parked = p.parked.iter().map(String::as_str).collect();
    let nodes = c.nodes().clone();
    let none = std::collections::BTreeSet::new();
    let roles = crate::join_token::awaiting(&c.journal, &none, &parked, Some(&nodes)).unwrap();
    (status(&p, WORKERS).phase, roles)
}
