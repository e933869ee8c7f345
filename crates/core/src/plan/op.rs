//! Advancing an operation in flight: find its first step the world does not
//! show as done, and act, wait, or fail on it.

use super::Action;
use super::group::Planner;
use super::health::Health;
use super::memory::Timer;
use super::view::{Member, View};
use crate::journal::{OpKind, Operation, Step};
use crate::model::{Availability, Node, NodeState};
use crate::spec::{OnDrainTimeout, OnFailure, Role};
use std::time::Duration;

/// How long a new leader waits for the old leader's `swarm leave` to show
/// (node Down, machine stopped) before concluding it cannot and moving on.
/// swarm-facts: an ex-leader that left shows Down 27-34 s after; a demoted,
/// not-yet-left node is harmless to destroy once it is out of the raft.
pub const LEAVE_BOUND: Duration = Duration::from_secs(45);

/// How long a victim this operation never started destroying must stay
/// out of successful describes before it counts as gone: a successful
/// answer can leave a machine out (eventual consistency), and taking that
/// for a destroy would make a second machine for its slot.
pub const UNLISTED_BOUND: Duration = Duration::from_secs(30);

enum StepState<'x> {
    Done,
    Act(Action),
    Wait(Why<'x>),
    Fail(String),
    /// Nothing was disrupted yet and the op no longer makes sense: drop it.
    Abandon(String),
}

/// Why a step waits, made into text only when read: a pass has a waiting
/// step in most operations in flight and reads few of the reasons (a group
/// keeps its first; only a step that timed out quotes its own). Formatting
/// every one was a tenth of a pass over 10 000 operations.
enum Why<'x> {
    Text(String),
    Later(Box<dyn Fn() -> String + 'x>),
}

impl Why<'_> {
    fn text(self) -> String {
        match self {
            Why::Text(t) => t,
            Why::Later(f) => f(),
        }
    }
}

/// A wait whose reason `f` writes when read.
fn wait_for<'x>(f: impl Fn() -> String + 'x) -> StepState<'x> {
    StepState::Wait(Why::Later(Box::new(f)))
}

/// A wait for a fixed reason.
fn wait(why: impl Into<String>) -> StepState<'static> {
    StepState::Wait(Why::Text(why.into()))
}

/// What an operation works on, looked up once for all its steps: its
/// victim's node and instance, and the member it made.
#[derive(Clone, Copy)]
struct Subjects<'a> {
    node: Option<&'a Node>,
    victim: Option<Member<'a>>,
    replacement: Option<Member<'a>>,
}

impl<'a> Planner<'a> {
    /// Emits the next action of `op`, in `slot` of the operations in
    /// flight (or waits, blocks, completes it).
    pub(crate) fn advance(&mut self, op: &Operation, slot: usize) {
        if op.kind == OpKind::Orphan {
            return self.advance_orphan(op, slot);
        }
        // Shared, so the steps below read it while the planner acts.
        let Some(view) = self.view_rc(&op.group).cloned() else {
            self.wait(
                &op.group,
                format!("operation {} belongs to a group no longer declared", op.id),
            );
            return;
        };
        if let Err(e) = &view.described {
            let why = format!("operation {} waits: provider describe failed: {e}", op.id);
            self.wait(&op.group, why);
            return;
        }
        if op.victim.is_some() && op.role != Role::Plain && !self.world.swarm_ok() {
            // Without a node list no step on a member can be judged: "no
            // node seen" must never read as "already demoted or drained".
            let why = format!("operation {} waits: the swarm cannot be observed", op.id);
            self.wait(&op.group, why);
            return;
        }
        let step_timeout = view.d.spec.update.step_timeout;
        // What the op works on, looked up once for all its steps.
        let victim = op.victim.as_ref();
        let node =
            victim.and_then(|v| self.world.victim_node(v.link.as_deref(), v.node.as_deref()));
        let found = self.found(slot, op, &view);
        let subjects = Subjects {
            node,
            victim: view.member(found.victim).copied(),
            replacement: view.member(found.replacement).copied(),
        };
        for step in op.steps() {
            let state = self.step_state(op, step, &view, &subjects);
            let key = || Timer::Step(op.id.clone(), step);
            match state {
                StepState::Done => {
                    if !op.done.contains(&step) {
                        self.actions.push(Action::MarkDone {
                            op: op.id.clone(),
                            step,
                        });
                    }
                    continue;
                }
                StepState::Fail(why) => self.block(&op.group, why),
                StepState::Abandon(why) => {
                    self.explanation.push(format!(
                        "{}: operation {} abandoned: {why}",
                        op.group, op.id
                    ));
                    self.actions.push(Action::Complete { op: op.id.clone() });
                    self.end_op(op, slot);
                }
                StepState::Act(action) => {
                    if self.clock.elapsed(key(), step_timeout) {
                        self.step_failed(op, step, "its action kept failing".into());
                    }
                    if op.role == Role::Worker && matches!(action, Action::Demote { .. }) {
                        self.demoting.push(op.id.clone());
                    }
                    self.actions.push(action);
                }
                StepState::Wait(why) => {
                    let timed_out = self.clock.elapsed(key(), step_timeout);
                    let quoted = !self.waiting.contains_key(op.group.as_str());
                    if !timed_out && !quoted {
                        return;
                    }
                    let why = why.text();
                    if timed_out {
                        self.step_failed(op, step, why.clone());
                    }
                    if quoted {
                        self.wait(&op.group, format!("{}: {}", op.id, why));
                    }
                }
            }
            return;
        }
        self.explanation
            .push(format!("{}: operation {} complete", op.group, op.id));
        self.actions.push(Action::Complete { op: op.id.clone() });
        self.end_op(op, slot);
    }

    fn step_failed(&mut self, op: &Operation, step: Step, why: String) {
        let Some(view) = self.view(&op.group) else {
            return;
        };
        let (policy, is_rollback) = (view.d.spec.update.on_failure, view.d.is_rollback);
        let timeout = humantime::format_duration(view.d.spec.update.step_timeout);
        let reason = format!(
            "step {} of {} exceeded step_timeout ({timeout}): {why}",
            step.as_str(),
            op.id
        );
        if policy == OnFailure::Rollback && !is_rollback && op.kind == OpKind::Roll {
            if self.rollback_requested.insert(op.group.clone()) {
                self.actions.push(Action::Rollback {
                    group: op.group.clone(),
                    reason: reason.clone(),
                });
            }
        } else if is_rollback {
            self.block(
                &op.group,
                format!("rollback failed (a rollback is never rolled back): {reason}"),
            );
        } else {
            self.block(&op.group, reason);
        }
    }

    /// With surge, the old manager goes only once its successor is a healthy
    /// member: otherwise fault tolerance would drop during the replacement.
    /// Nothing was disrupted yet, so the op steps aside (healing or scale-in
    /// take care of the failed successor).
    fn surge_member_unready(op: &Operation, replacement: Option<&Member<'_>>) -> Option<String> {
        if !op.surge {
            return None;
        }
        let healthy = replacement.is_some_and(|i| i.healthy());
        (!healthy).then(|| {
            format!(
                "the surge member of {} is not a healthy manager: the old one stays",
                op.id
            )
        })
    }

    /// Where `step` of `op` stands, given what it works on.
    fn step_state<'o>(
        &mut self,
        op: &'o Operation,
        step: Step,
        view: &View<'a>,
        subjects: &Subjects<'a>,
    ) -> StepState<'o>
    where
        'a: 'o,
    {
        let Subjects {
            node,
            victim: victim_inst,
            replacement,
        } = *subjects;
        let victim_inst = victim_inst.as_ref();
        let d = view.d;
        let victim = op.victim.as_ref();
        let vlink = victim.and_then(|v| v.link.as_deref());
        match step {
            Step::Provision => {
                if replacement.is_some() {
                    return StepState::Done;
                }
                if op.role != Role::Plain
                    && !self.world.swarm_ok()
                    && !matches!(self.world.observed.swarm, crate::model::SwarmView::Absent)
                {
                    return wait("waiting for the swarm to have a leader before provisioning");
                }
                let add_gate = (op.role == Role::Manager && self.world.swarm_ok())
                    .then(|| self.add_manager_gate());
                if let Some(Some(no)) = add_gate {
                    // Only additions remain: hand the slot back to the
                    // missing-slot logic so healing (which waits for no
                    // manager op) can go first.
                    return StepState::Abandon(no);
                }
                let target = op.target.clone().unwrap_or(crate::journal::Target {
                    logical_id: None,
                    zone: None,
                    attempt: 1,
                });
                let attempt = target.attempt + op.provision_failures;
                match self.provision_gate(d, op, attempt) {
                    Err(why) => return StepState::Fail(why),
                    Ok(Some(why)) => return wait(why),
                    Ok(None) => {}
                }
                StepState::Act(Action::Provision {
                    op: op.id.clone(),
                    group: op.group.clone(),
                    role: op.role,
                    logical_id: target.logical_id,
                    zone: target.zone,
                    config: d.hash.clone(),
                    attempt,
                })
            }
            Step::AwaitHealthy => {
                let Some(new) = replacement else {
                    // Provisioned, then lost: the slot is judged afresh next pass.
                    return StepState::Done;
                };
                if new.config() != Some(d.hash.as_str()) {
                    // Superseded by a newer spec: the roll will replace it.
                    return StepState::Done;
                }
                match new.health {
                    Health::Healthy => {
                        let watch = d.spec.update.watch;
                        let timer = Timer::Healthy(new.id.clone());
                        if self.clock.elapsed(timer.clone(), watch) {
                            StepState::Done
                        } else {
                            let so_far = self.clock.running_for(&timer).as_secs();
                            wait_for(move || {
                                format!(
                                    "watching {}: healthy for {so_far}s of {}s",
                                    new.id,
                                    watch.as_secs()
                                )
                            })
                        }
                    }
                    // A new member that died, stayed unhealthy or never
                    // joined is handed to healing (same timers, so it does
                    // not wait twice); the op does not wait on it forever.
                    Health::Unhealthy("machine not running") => StepState::Done,
                    Health::Unhealthy(why) => {
                        let limit = d.spec.health.unhealthy_after;
                        if self.clock.elapsed(Timer::Unhealthy(new.id.clone()), limit) {
                            StepState::Done
                        } else {
                            wait_for(move || format!("new member {} is unhealthy: {why}", new.id))
                        }
                    }
                    Health::Pending => {
                        let limit = d.spec.health.startup_timeout;
                        if self.clock.elapsed(Timer::Pending(new.id.clone()), limit) {
                            StepState::Done
                        } else {
                            wait_for(move || format!("waiting for {} to join", new.id))
                        }
                    }
                    Health::Unknown => {
                        wait_for(move || format!("cannot tell yet whether {} joined", new.id))
                    }
                }
            }
            Step::Drain => {
                let Some(n) = node else {
                    return StepState::Done;
                };
                if victim
                    .and_then(|v| v.instance.as_ref())
                    .is_some_and(|id| self.input.desired.skip_drain.contains(id))
                {
                    return StepState::Done;
                }
                if n.state == NodeState::Down {
                    // Gone: the swarm reschedules a Down node's tasks itself.
                    // Any other status (`unknown` for seconds after every
                    // election, `disconnected`) is not "drained".
                    return StepState::Done;
                }
                if n.availability != Availability::Drain {
                    return StepState::Act(Action::Drain {
                        op: op.id.clone(),
                        node: n.id.clone(),
                    });
                }
                if n.running_tasks == 0 {
                    return StepState::Done;
                }
                if self
                    .clock
                    .elapsed(Timer::Drain(op.id.clone()), d.spec.drain.timeout)
                {
                    return match d.spec.drain.on_timeout {
                        OnDrainTimeout::Force => StepState::Done,
                        OnDrainTimeout::Block => StepState::Fail(format!(
                            "drain of node {} timed out with {} tasks still running (drain.on_timeout: block)",
                            n.id, n.running_tasks
                        )),
                    };
                }
                wait_for(move || {
                    format!(
                        "node {} draining: {} tasks still running",
                        n.id, n.running_tasks
                    )
                })
            }
            Step::Demote => {
                let Some(n) = node else {
                    return StepState::Done;
                };
                if !n.manager_role {
                    return StepState::Done;
                }
                if let Some(why) = Self::surge_member_unready(op, replacement.as_ref()) {
                    return StepState::Abandon(why);
                }
                if let Some(why) = self.leader_goes_last(op, step, n) {
                    return why;
                }
                match self.removal_gate(Some(n), Some(&op.id)) {
                    Some(no) if undisrupted(op, step) => {
                        // E.g. a manager became unreachable, or the surge
                        // member never joined: healing comes first and waits
                        // for no other manager op, so step aside (nothing
                        // was disrupted yet).
                        StepState::Abandon(format!("demotion of {} no longer safe: {no}", n.id))
                    }
                    Some(no) => wait_for(move || format!("demote of {} waits: {no}", n.id)),
                    None => StepState::Act(Action::Demote {
                        op: op.id.clone(),
                        node: n.id.clone(),
                    }),
                }
            }
            Step::AwaitOutOfRaft => match node {
                Some(n) if n.raft.is_some() => {
                    wait_for(move || format!("waiting for node {} to leave the raft", n.id))
                }
                _ => StepState::Done,
            },
            Step::DemoteSelfAndLeave => {
                let Some(n) = node else {
                    return StepState::Done;
                };
                if let Some(why) = n
                    .manager_role
                    .then(|| Self::surge_member_unready(op, replacement.as_ref()))
                    .flatten()
                {
                    return StepState::Abandon(why);
                }
                if self.world.is_self(vlink) {
                    if let Some(why) = self.leader_goes_last(op, step, n) {
                        return why;
                    }
                    let gate = n
                        .manager_role
                        .then(|| self.healthy_manager_gate(Some(&op.id), Some(n)));
                    if let Some(Some(no)) = gate {
                        if undisrupted(op, step) {
                            return StepState::Abandon(format!(
                                "self-demotion no longer safe: {no}"
                            ));
                        }
                        return wait_for(move || format!("self-demotion waits: {no}"));
                    }
                    return StepState::Act(Action::DemoteSelfAndLeave {
                        op: op.id.clone(),
                        node: n.id.clone(),
                    });
                }
                // Another controller: the old leader journaled this, then
                // either demoted itself or crashed before it could.
                if n.raft.is_some() && !n.manager_role {
                    return wait_for(move || {
                        format!("waiting for former leader {} to leave the raft", n.id)
                    });
                }
                if n.manager_role {
                    return match self.removal_gate(Some(n), Some(&op.id)) {
                        Some(no) if undisrupted(op, step) => StepState::Abandon(format!(
                            "demotion of former leader {} no longer safe: {no}",
                            n.id
                        )),
                        Some(no) => wait_for(move || {
                            format!("demote of former leader {} waits: {no}", n.id)
                        }),
                        None => StepState::Act(Action::Demote {
                            op: op.id.clone(),
                            node: n.id.clone(),
                        }),
                    };
                }
                let left =
                    n.left || n.state == NodeState::Down || victim_inst.is_none_or(|i| !i.running);
                if left || self.clock.elapsed(Timer::Leave(op.id.clone()), LEAVE_BOUND) {
                    StepState::Done
                } else {
                    // The swarm lists a node that left Ready for another
                    // 27-34 s: its leave is learnt by asking its engine,
                    // once per question interval, so look again then rather
                    // than at the next resync.
                    self.clock.wake_within(crate::own_engine::ASK_EVERY);
                    wait_for(move || {
                        format!(
                            "waiting (at most {}s) for former leader {} to leave",
                            LEAVE_BOUND.as_secs(),
                            n.id
                        )
                    })
                }
            }
            Step::Destroy => {
                let Some(id) = victim.and_then(|v| v.instance.clone()) else {
                    return StepState::Done;
                };
                if self.world.is_self(vlink) {
                    return wait("standing down: the next leader destroys this machine");
                }
                if victim_inst.is_some() {
                    if let Some(state) = self.out_of_raft_first(op, node, &id) {
                        return state;
                    }
                    return StepState::Act(Action::Destroy {
                        op: op.id.clone(),
                        instance: id,
                    });
                }
                if view.foreign.contains(id.as_str()) {
                    return StepState::Fail(format!(
                        "instance {id} no longer carries this cluster's and group's tags: not destroying it"
                    ));
                }
                if op.reached(Step::Destroy)
                    || self
                        .clock
                        .elapsed(Timer::Unlisted(op.id.clone()), UNLISTED_BOUND)
                {
                    StepState::Done
                } else {
                    wait_for(move || {
                        format!(
                            "{id} is not listed but was not destroyed by this operation: gone only once unlisted for {}s (a describe can be partial)",
                            UNLISTED_BOUND.as_secs()
                        )
                    })
                }
            }
            Step::RemoveNode => {
                let Some(n) = node else {
                    return StepState::Done;
                };
                if n.in_raft() {
                    return wait_for(move || {
                        format!("node {} is still a manager: demote first", n.id)
                    });
                }
                StepState::Act(Action::RemoveNode {
                    op: op.id.clone(),
                    node: n.id.clone(),
                    force: n.state == NodeState::Ready,
                })
            }
        }
    }
}

impl<'a> Planner<'a> {
    /// What must happen before machine `id`, whose node is `node`, may be
    /// destroyed: no machine is destroyed while its node is a raft member
    /// (or may be one), whatever group declared it. A manager group's own
    /// steps demote first; this catches a worker promoted by hand (demoted
    /// here, through the manager gate) and a node that cannot be matched.
    fn out_of_raft_first<'o>(
        &self,
        op: &'o Operation,
        node: Option<&'a Node>,
        id: &str,
    ) -> Option<StepState<'o>>
    where
        'a: 'o,
    {
        if op.role == Role::Plain {
            return None;
        }
        // No node, or one that may be an older incarnation under the
        // machine's link while the running engine, having lost drover's
        // labels, is an unmatched raft member: a manager machine's node out
        // of the raft (whatever its status: `unknown` after an election
        // proves nothing), or a worker machine's Down node. A worker's live
        // node out of the raft is the worker itself.
        let incarnation =
            |n: &Node| !n.in_raft() && (op.role == Role::Manager || n.state == NodeState::Down);
        let n = match node {
            Some(n) if !incarnation(n) => n,
            _ => {
                let link = op.victim.as_ref().and_then(|v| v.link.as_deref());
                return self.unmatched_member(id, link).map(StepState::Fail);
            }
        };
        if n.manager_role {
            return Some(match self.removal_gate(Some(n), Some(&op.id)) {
                Some(no) => wait_for(move || {
                    format!("node {} is a manager: its demotion waits: {no}", n.id)
                }),
                None => StepState::Act(Action::Demote {
                    op: op.id.clone(),
                    node: n.id.clone(),
                }),
            });
        }
        n.raft
            .is_some()
            .then(|| wait_for(move || format!("waiting for node {} to leave the raft", n.id)))
    }

    /// The leader's (or this controller's own) demotion, when another raft
    /// member still has to be rolled first (not current and healthy, asked
    /// to be replaced, held, or unmatched): leadership moved onto the victim
    /// after the op was written, or the other member's state changed since
    /// (an operator's replace request arrived). Nothing was disrupted yet
    /// and the leader goes last, so the op steps aside.
    fn leader_goes_last<'o>(&self, op: &Operation, step: Step, n: &Node) -> Option<StepState<'o>> {
        // The journal's record, not the describe: a partial describe may
        // leave the leader's own machine out.
        let victim = op.victim.as_ref()?;
        let leads = n.raft.as_ref().is_some_and(|r| r.leader);
        if !(leads || self.world.is_self(victim.link.as_deref())) || !undisrupted(op, step) {
            return None;
        }
        let other = self.manager_before_leader(victim.instance.as_deref().unwrap_or_default())?;
        Some(StepState::Abandon(format!(
            "node {} leads and {other} is not current and healthy yet: the leader goes last",
            n.id
        )))
    }
}

/// True when no step before `step` disrupted anything (only additions ran).
fn undisrupted(op: &Operation, step: Step) -> bool {
    op.steps()
        .iter()
        .take_while(|s| **s != step)
        .all(|s| matches!(s, Step::Provision | Step::AwaitHealthy))
}
