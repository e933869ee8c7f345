//! What the liveness oracle needs from a run (`crate::liveness`): the join
//! tokens the acting controller places and rotates (the shell's rule,
//! `controller/src/tokens.rs`, over core's `join_token`), the machines made
//! per slot, a hook that always fails, and a ghost raft member left by an
//! engine restarted mid-demotion.

use super::*;
use drover_core::join_token::awaiting_after;
use drover_core::journal::{HookFailed, Step};
use drover_core::model::SwarmView;
use drover_core::spec::Allocation;

impl Runner {
    /// A new controller term assumes both roles' tokens exposed: the
    /// simulated provider keeps the boot environment readable, as EC2's
    /// user data does.
    pub(super) fn new_term_tokens(&mut self) {
        self.tokens = Tokens::assume_exposed([Role::Manager, Role::Worker], self.world.now);
    }

    /// A provision call starts: its machine's boot environment holds its
    /// role's current token (the simulator's truth, and the controller's
    /// record).
    pub(super) fn place_token(&mut self, role: Role) {
        if role == Role::Plain {
            return;
        }
        let now = self.world.now;
        self.tokens.placed(role, now);
        self.token_placed.entry(role).or_insert(now);
    }

    /// As the controller does each pass before acting: rotates every
    /// role's token that core's rule says is due.
    pub(super) fn rotate_tokens(&mut self, plan: &Plan, swarm: &SwarmView) {
        let now = self.world.now;
        let Some(waiting) = awaiting_after(plan, self.journal.iter(), swarm) else {
            return;
        };
        for role in self.tokens.due(&waiting, now) {
            if self.world.leader.is_none() {
                self.tokens.failed(role, now);
                continue;
            }
            // Not traced: a rotation changes nothing a step is judged by,
            // and `drover sim` shows the roll's steps.
            self.tokens.rotated(role, now);
            self.token_placed.remove(&role);
        }
    }

    /// Oracle: the roles whose token sits valid in some machine's boot
    /// environment although no machine of the role is on its way to join
    /// with it (by the simulator's truth: running, not joined, and going
    /// to), nor may yet by what the controller can know: made within its
    /// group's `startup_timeout` (a machine that will never join is told
    /// from a slow one only then: `drover_core::plan::Plan::parked`).
    pub fn tokens_left_valid(&self) -> Vec<Role> {
        let now = self.world.wall_ms();
        let may_join = |i: &crate::world::SimInstance| {
            i.join_at.is_some()
                || i.inst
                    .tag(tags::GROUP)
                    .and_then(|g| self.group_of(g))
                    .is_some_and(|g| {
                        let limit = g.spec.health.startup_timeout.as_millis() as Time;
                        now < i.inst.created_ms.saturating_add(limit)
                    })
        };
        let booting = |role: Role| {
            self.world.instances.values().any(|i| {
                i.inst.running
                    && i.node.is_none()
                    && may_join(i)
                    && i.inst.tag("sim.role") == Some(role.as_str())
            })
        };
        self.token_placed
            .keys()
            .copied()
            .filter(|role| !booting(*role))
            .collect()
    }

    /// The controller goes on for `ms` after the run ended, a pass per
    /// resync, so that what falls due at the end (a token's rotation) is
    /// done before the oracle looks; then, for at most [`LINGER_PROVISION`]
    /// more, until no provision is in flight: a provision started in the
    /// last pass placed the token in a machine the oracle must see booting,
    /// not judge before it exists.
    pub fn linger(&mut self, ms: Time) {
        let end = self.world.now + ms;
        while self.world.now < end {
            self.world.advance((self.world.now + RESYNC).min(end));
            self.complete_inflight();
            self.pass();
        }
        let cap = self.world.now + LINGER_PROVISION;
        while self.world.now < cap && self.provisioning() {
            let next = self.running.iter().map(|f| f.done_at).min();
            let next = next.map_or(RESYNC, |at| at.saturating_sub(self.world.now));
            self.world
                .advance((self.world.now + next.clamp(1, RESYNC)).min(cap));
            self.complete_inflight();
            self.pass();
        }
    }

    /// A provision call is in flight.
    fn provisioning(&self) -> bool {
        self.running
            .iter()
            .any(|f| matches!(f.action, Action::Provision { .. }))
    }

    /// A machine was made for operation `op` once the transient faults
    /// stopped (a crash may rightly cost a slot a machine before): counted
    /// against its slot (the member it replaces, else the operation's own).
    /// A slot given more machines than `health.max_attempts` per zone of its
    /// group churns.
    pub(super) fn count_made(&mut self, op: &str) {
        if self.world.now < self.faults.until {
            return;
        }
        let Some(o) = self.journal.iter().find(|o| o.id == op) else {
            return;
        };
        let slot = match o.victim.as_ref().and_then(|v| v.instance.as_ref()) {
            Some(victim) => format!("{}: the replacement of {victim}", o.group),
            None => format!("{}: operation {}", o.group, o.id),
        };
        let Some(g) = self.group_of(&o.group) else {
            return;
        };
        let zones = match &g.spec.allocation {
            Allocation::Size { zones, .. } => zones.len(),
            Allocation::LogicalIds(slots) => slots
                .iter()
                .filter_map(|s| s.zone.as_ref())
                .collect::<BTreeSet<_>>()
                .len(),
        };
        let (attempts, zones) = (g.spec.health.max_attempts, zones.max(1) as u32);
        let made = self.made.entry(slot.clone()).or_default();
        *made += 1;
        if *made == attempts * zones + 1 {
            let made = *made;
            self.liveness.push(format!(
                "t={} {slot}: {made} machines made, more than max_attempts ({attempts}) x zones ({zones})",
                self.world.now
            ));
        }
    }

    /// A hook call of `op` returned: recorded as the controller does, done,
    /// or failed when a stuck fault makes its group's hooks fail.
    pub(super) fn hook_returned(&mut self, op: &str, step: Step) {
        let stuck = match &self.faults.stuck {
            Some(Stuck::HookFails(g)) => Some(g.as_str()),
            _ => None,
        };
        let Some(o) = self.journal.iter_mut().find(|o| o.id == op) else {
            return;
        };
        if stuck == Some(o.group.as_str()) {
            let before = o.hook_failure.as_ref().filter(|f| f.step == step);
            o.hook_failure = Some(HookFailed {
                step,
                message: "simulated: the hook's endpoint refuses every call".into(),
                attempts: before.map_or(0, |f| f.attempts) + 1,
            });
        } else {
            o.done.insert(step);
            o.hook_failure = None;
        }
    }

    /// The leader's engine restarts right after its self-demotion was
    /// accepted (a fault, while faults are on): it comes back with its old
    /// manager state, rejoins the raft under a new raft id and stops its
    /// manager, leaving a ghost member (`World::leave_ghost`).
    pub(super) fn restart_mid_demotion(&mut self, action: &Action) {
        let Action::DemoteSelfAndLeave { node, .. } = action else {
            return;
        };
        if self.world.now >= self.faults.until || !self.rng.chance(self.faults.ghost) {
            return;
        }
        // As with crashes, only while the quorum survives the extra
        // unreachable member: this tests healing, not a quorum loss.
        let ft = self.world.settled_fault_tolerance();
        if ft < 1 {
            return;
        }
        if self.world.leave_ghost(node) {
            self.note(
                format!(
                    "fault: the engine of {node} restarted right after its self-demotion: a ghost raft member stays"
                ),
                ft,
            );
        }
    }
}
