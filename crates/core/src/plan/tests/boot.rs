//! Issue 36 item 4: a machine that never joins says why. `startup_timeout`
//! counts from the machine's creation as its provider reports it; a join
//! that failed (the engine's swarm state `error`) is acted on without
//! waiting the timeout out; the machine's boot log's tail shows in the
//! never-joined evidence, the blocked reason and the waiting reason.

use super::*;
use crate::boot::{BootFacts, BootLog, JoinFailed};
use crate::plan::boot::JOIN_FAILED_FOR;

/// The one machine of the never-joining worker slot.
const W1: &str = "i-w1";

/// What an engine cut off from the manager it joined through says.
const DEADLINE: &str = "context deadline exceeded";

fn heals(p: &Plan) -> Vec<&Operation> {
    begins(p, WORKERS)
        .into_iter()
        .filter(|o| o.kind == OpKind::Heal)
        .collect()
}

fn fail_join(c: &mut Cluster, id: &str) {
    c.observed
        .boots
        .entry(id.to_string())
        .or_default()
        .join_failed = Some(JoinFailed::new(DEADLINE));
}

fn boot_log(c: &mut Cluster, id: &str, text: &str) {
    c.observed.boots.entry(id.to_string()).or_default().log = Some(BootLog::tail(text));
}

/// The machine was created 50 s before a new controller first saw it
/// (its predecessor's term ended): it is replaced at 60 s of its life, not
/// 60 s after the take-over.
#[test]
fn startup_timeout_counts_from_the_machines_creation_not_a_new_controllers_first_sighting() {
    let mut c = never_joining_worker();
    c.instances(WORKERS)[0].created_ms = WALL;
    let p = c.at(50 * SEC);
    assert!(heals(&p).is_empty(), "{}", describe(&p));
    let p = c.at(60 * SEC);
    let ops = heals(&p);
    assert_eq!(ops.len(), 1, "{}", describe(&p));
    let evidence = &ops[0].collection.as_ref().expect("collection").evidence;
    assert!(evidence.contains("1m after its creation"), "{evidence}");

    // Control: a machine whose provider reports no creation time counts
    // from this controller's first sighting, as before.
    let mut c = never_joining_worker();
    c.at(50 * SEC);
    let p = c.at(60 * SEC);
    assert!(heals(&p).is_empty(), "{}", describe(&p));
    let p = c.at(110 * SEC);
    let ops = heals(&p);
    assert_eq!(ops.len(), 1, "{}", describe(&p));
    let evidence = &ops[0].collection.as_ref().expect("collection").evidence;
    assert!(
        evidence.contains("after this controller first saw it"),
        "{evidence}"
    );
}

/// A creation time in this host's future (a provider clock ahead) is not
/// believed: the first sighting counts; one in the past never gives a
/// machine more than its timeout from the first sighting either.
#[test]
fn a_creation_time_in_the_future_counts_from_the_first_sighting() {
    let mut c = never_joining_worker();
    c.instances(WORKERS)[0].created_ms = WALL + 3_600 * SEC;
    c.at(0);
    assert!(heals(&c.at(59 * SEC)).is_empty());
    assert_eq!(heals(&c.at(60 * SEC)).len(), 1);
}

/// The engine reports its swarm state as `error`: the machine is replaced
/// once that has stayed for `JOIN_FAILED_FOR`, long before its
/// `startup_timeout` (60 s here), with the engine's words as evidence.
#[test]
fn a_failed_join_is_replaced_without_waiting_out_startup_timeout() {
    let mut c = never_joining_worker();
    fail_join(&mut c, W1);
    let p = c.at(0);
    assert!(heals(&p).is_empty(), "{}", describe(&p));
    assert_eq!(p.wake_at, Some(JOIN_FAILED_FOR.as_millis() as Time));
    let p = c.at(JOIN_FAILED_FOR.as_millis() as Time);
    let ops = heals(&p);
    assert_eq!(ops.len(), 1, "{}", describe(&p));
    assert_eq!(ops[0].target.as_ref().map(|t| t.attempt), Some(2));
    let evidence = &ops[0].collection.as_ref().expect("collection").evidence;
    assert!(
        evidence.contains("swarm state error: context deadline exceeded"),
        "{evidence}"
    );
}

/// A failure seen for a moment (a boot script clearing one attempt before
/// joining through the next manager) is not acted on: the wait starts
/// again when it shows again.
#[test]
fn a_join_failure_seen_only_between_attempts_is_left_to_the_boot_script() {
    let mut c = never_joining_worker();
    fail_join(&mut c, W1);
    c.at(0);
    c.observed.boots.clear();
    c.at(5 * SEC);
    fail_join(&mut c, W1);
    let p = c.at(10 * SEC);
    assert!(heals(&p).is_empty(), "{}", describe(&p));
    let p = c.at(24 * SEC);
    assert!(heals(&p).is_empty(), "{}", describe(&p));
    assert_eq!(heals(&c.at(25 * SEC)).len(), 1);
}

/// The controller is asked to look at every machine not joined yet, and
/// to fetch its boot log once it has waited half its startup_timeout or
/// its join failed.
#[test]
fn machines_not_joined_are_asked_about_their_boot_log_from_half_their_timeout() {
    let mut c = never_joining_worker();
    let p = c.at(0);
    let ask = |p: &Plan| p.boot_asks.iter().find(|a| a.instance == W1).cloned();
    let first = ask(&p).expect("the pending machine is asked about");
    assert_eq!((first.group.as_str(), first.log), (WORKERS, false));
    assert_eq!(first.provider, "sim");
    assert!(!ask(&c.at(29 * SEC)).expect("asked").log);
    assert!(ask(&c.at(30 * SEC)).expect("asked").log);
    // Joined machines are not asked about.
    let p = c.at(31 * SEC);
    assert!(p.boot_asks.iter().all(|a| !a.instance.starts_with("i-m")));

    let mut c = never_joining_worker();
    fail_join(&mut c, W1);
    c.at(0);
    let p = c.at(JOIN_FAILED_FOR.as_millis() as Time);
    assert!(ask(&p).is_some_and(|a| a.log), "{:?}", p.boot_asks);
}

/// The boot log's last lines, redacted, reach the never-joined evidence
/// (the event) and the blocked reason (status), the true cause beside the
/// wait.
#[test]
fn the_boot_logs_last_lines_show_in_the_evidence_and_the_blocked_reason() {
    let log = "starting\ndrover: joining through 10.0.0.1:2377 failed: connection refused\nSWMTKN-1-secret in a trace\n";
    let mut c = never_joining_worker();
    boot_log(&mut c, W1, log);
    c.at(0);
    let p = c.at(60 * SEC);
    let ops = heals(&p);
    let evidence = &ops[0].collection.as_ref().expect("collection").evidence;
    assert!(
        evidence.contains("its boot log ends: starting | drover: joining through 10.0.0.1:2377 failed: connection refused | <redacted> in a trace"),
        "{evidence}"
    );

    let mut c = never_joining_worker();
    for i in c.instances(WORKERS) {
        i.tags.insert(tags::ATTEMPT.into(), "2".into());
    }
    boot_log(&mut c, W1, log);
    c.at(0);
    let p = c.at(60 * SEC);
    let why = blocked_not_rolled_back(&p, WORKERS);
    assert!(why.contains("2 machines in a row never joined"), "{why}");
    assert!(why.contains("failed: connection refused"), "{why}");
    assert!(!why.contains("SWMTKN"), "{why}");

    // Without a log, the engine's failed join is what it says.
    let mut c = never_joining_worker();
    for i in c.instances(WORKERS) {
        i.tags.insert(tags::ATTEMPT.into(), "2".into());
    }
    fail_join(&mut c, W1);
    c.at(0);
    let p = c.at(JOIN_FAILED_FOR.as_millis() as Time);
    let why = blocked_not_rolled_back(&p, WORKERS);
    assert!(
        why.contains("swarm state error: context deadline exceeded"),
        "{why}"
    );
}

/// A roll's new member that has not joined: the wait shows its boot log's
/// tail; a failed join ends the wait at once (handed to healing).
#[test]
fn a_rolls_new_member_waiting_to_join_shows_its_boot_log_and_a_failed_join_ends_the_wait() {
    let mut c = rolling_workers("", "");
    let op = journal_first_roll(&mut c);
    c.remove_member(WORKERS, victim_link(&op));
    c.add_new_member(&op, false);
    let new = format!("i-new-{}", op.id);
    boot_log(
        &mut c,
        &new,
        "apt-get: unable to locate package docker.io\n",
    );
    let p = c.at(10 * SEC);
    let why = reason(&p, WORKERS);
    assert!(
        why.contains("to join; its boot log ends: apt-get: unable to locate package docker.io"),
        "{why}"
    );
    assert_eq!(status(&p, WORKERS).phase, Phase::Rolling);

    fail_join(&mut c, &new);
    c.at(11 * SEC);
    let p = c.at(11 * SEC + JOIN_FAILED_FOR.as_millis() as Time);
    // The step is done and healing replaces the machine, long before the
    // step_timeout (60 s) or the startup_timeout (5 m) run out.
    assert!(
        heals(&p)
            .iter()
            .any(|h| h.victim.as_ref().and_then(|v| v.instance.as_deref()) == Some(&new)),
        "{}",
        describe(&p)
    );
    assert_ne!(
        status(&p, WORKERS).phase,
        Phase::Blocked,
        "{}",
        describe(&p)
    );
}

/// The facts are what the status document shows under the member.
#[test]
fn a_pending_members_status_carries_its_boot_facts() {
    let mut c = never_joining_worker();
    boot_log(&mut c, W1, "one\ntwo\n");
    let members = crate::plan::member_status(&c.desired, &c.observed);
    let w1 = members.iter().find(|m| m.id == W1).expect("w1");
    assert_eq!(
        w1.boot
            .as_ref()
            .and_then(|b| b.log.as_ref())
            .map(BootLog::lines),
        Some(&["one".to_string(), "two".to_string()][..])
    );
    let m1 = members.iter().find(|m| m.id == "i-m1").expect("m1");
    assert_eq!(m1.boot, None::<BootFacts>);
}
