//! Heal: a member lost, unhealthy past `unhealthy_after`, or never joined
//! past `startup_timeout` is replaced, through the member gate.

use super::super::DesiredGroup;
use super::super::REASON_LINES;
use super::super::blocked::Blocked;
use super::super::gc::GarbageState;
use super::super::group::Planner;
use super::super::health::Health;
use super::super::memory::Timer;
use super::super::view::Member;
use super::super::waiting::{Unlisted, Waiting};
use super::Group;
use crate::journal::{OpKind, Target};
use crate::model::Node;
use crate::spec::{Role, Strategy};

/// What the heal stage's new operations claimed, for the stages after it:
/// the node ids and links of the members they replace (a stale node among
/// them is no longer the reap stage's).
#[derive(Debug, Default)]
pub(super) struct Healed {
    claimed: Vec<String>,
}

impl Healed {
    /// Records a heal of the member with `node` and `link`.
    fn claim(&mut self, node: Option<&Node>, link: Option<&str>) {
        self.claimed.extend(node.map(|n| n.id.clone()));
        self.claimed.extend(link.map(str::to_string));
    }

    /// A heal begun in this pass works on node `n` (by id or link).
    pub(super) fn claims(&self, n: &Node) -> bool {
        self.claimed
            .iter()
            .any(|c| *c == n.id || n.link.as_deref() == Some(c.as_str()))
    }
}

impl Planner<'_> {
    /// Heals `g`'s members: what the heals claimed, or why the group
    /// blocks (nothing else may start in it this pass).
    pub(super) fn heal(&mut self, g: &Group<'_, '_>) -> Result<Healed, Blocked> {
        let mut healed = Healed::default();
        let (d, name) = (g.d(), g.name());
        let (is_manager, by_count, filling) = (g.is_manager(), g.by_count(), g.filling);
        let (excess_ids, left_out) = (&g.excess_ids, g.left_out);
        for inst in &g.free {
            if is_manager && self.manager_op_in_flight() {
                break;
            }
            if self.facts.world.is_self(inst.link()) {
                continue;
            }
            let judged = inst.health;
            let why = self.needs_heal(g, inst);
            let Some(why) = why else { continue };
            let gate = self.node_in_doubt(inst);
            if let Some(no) = gate.or_else(|| self.member_gate(d.spec.role, inst, 0)) {
                let member = inst.id.clone();
                self.wait(name, Waiting::CannotHeal { member, no });
                break;
            }
            let never_joined = self.never_joined_evidence(d, inst, judged);
            // Over the size, retiring the excess (the retire stage) comes before a heal
            // that adds yet another machine: for a member that never joined
            // and is the excess, or, in a group sized by count where zones
            // pick another as the excess, once the group is back at its
            // size (a pet in a declared slot is its slot's only machine);
            // and while a slot fill is in flight (a describe left a member
            // out, then listed it again, stopped).
            // A surge's own new member that never joined is the exception:
            // it is the surge's next attempt (see `surge_retries`).
            let over = !excess_ids.is_empty();
            let excess = excess_ids.contains(&inst.id) || (over && by_count);
            let retired = never_joined.is_some() && excess && !self.surge_retries(g, inst);
            if retired || (filling && over) {
                continue;
            }
            // Nor while the describe may have left a member out: the group
            // may be over its size without showing it. A machine that never
            // joined serves nothing; its heal can wait for a full answer.
            if let Some(n) = left_out.filter(|_| never_joined.is_some() && by_count) {
                let (member, node) = (inst.id.clone(), Unlisted::of(n));
                self.wait(name, Waiting::HealAfterUnlisted { member, node });
                continue;
            }
            let (attempt, collection) = if let Some(evidence) = never_joined {
                match self.next_attempt(d, inst) {
                    Ok(a) => (a, Some(Self::never_joined(d, inst, evidence))),
                    Err(why) => return Err(self.saying_why(why, &inst.id)),
                }
            } else {
                (1, None)
            };
            let target = Target {
                logical_id: inst.logical_id().map(str::to_string),
                zone: inst.zone().map(str::to_string),
                attempt,
            };
            let mut op = self.make_op(d, OpKind::Heal, Some(inst), Some(target));
            if let Some(c) = collection {
                self.note_garbage(name, &c, GarbageState::Collecting(None));
                op.collection = Some(c);
            }
            self.begin(op, format!("heal: replace {} ({why})", inst.id));
            // A heal its first step already ended claims nothing.
            if self.ops.last_in_flight() {
                healed.claim(inst.node, inst.link());
            }
        }
        Ok(healed)
    }

    /// `inst`, which never joined, is the new member of a manager surge
    /// roll that stepped aside for it: the manager group, on the spec `inst`
    /// was built from, surges, still holds members due for replacement
    /// (whatever the reason: config, request, age) and is exactly
    /// one over its size. It is healed (the slot's next attempt, through
    /// `health.max_attempts`) instead of retired: retiring it, the roll
    /// would surge again at attempt 1 and a machine that never joins would
    /// be provisioned without end where a replacement's would block the
    /// group. (Workers keep retiring it: there "never joined" may be a
    /// member whose engine lost its labels, and a group over its size heals
    /// none of those — see docs/safety.md §10.)
    fn surge_retries(&self, g: &Group<'_, '_>, inst: &Member<'_>) -> bool {
        let d = g.d();
        g.is_manager()
            && d.spec.update.strategy == Strategy::Surge
            && inst.config() == Some(d.hash.as_str())
            && g.live.iter().any(|m| self.due(d, m).is_some())
            && g.live.len() + g.pending.len() == d.spec.allocation.size() + 1
    }

    /// What shows that `inst`, judged `judged`, never joined, if it did
    /// not: no node carries its link past `startup_timeout`, or its machine
    /// stopped before one did (failing to join too: it uses the slot's
    /// attempt budget the same way).
    fn never_joined_evidence(
        &self,
        d: &DesiredGroup,
        inst: &Member<'_>,
        judged: Health,
    ) -> Option<String> {
        let link = inst.link().unwrap_or("(none)");
        let seen = match judged {
            Health::Pending => match self.join_failed(&inst.id) {
                Some(failed) => {
                    format!("{failed}, and no swarm node carries its link {link}")
                }
                None => format!(
                    "no swarm node carries its link {link} {} after {}",
                    humantime::format_duration(d.spec.health.startup_timeout),
                    if self.creation_known(inst) {
                        "its creation"
                    } else {
                        "this controller first saw it"
                    }
                ),
            },
            Health::Unhealthy("machine not running")
                if d.spec.role != Role::Plain
                    && self.facts.world.swarm_ok()
                    && inst.node.is_none() =>
            {
                "its machine stopped before a swarm node carried its link".into()
            }
            _ => return None,
        };
        Some(match self.boot_log(&inst.id) {
            Some(log) => format!("{seen}; its boot log ends: {}", log.last(REASON_LINES)),
            None => seen,
        })
    }

    /// Why `inst` needs healing now, if it does: its machine stopped, or it
    /// has been unhealthy longer than `unhealthy_after` (as this
    /// controller's clock saw it), or has not joined within
    /// `startup_timeout` of its creation, or its engine's join failed.
    fn needs_heal(&mut self, g: &Group<'_, '_>, inst: &Member<'_>) -> Option<String> {
        let health = &g.d().spec.health;
        match inst.health {
            Health::Unhealthy("machine not running") => Some("machine not running".to_string()),
            Health::Unhealthy(what) => self
                .clock
                .elapsed(Timer::Unhealthy(inst.id.clone()), health.unhealthy_after)
                .then(|| {
                    format!(
                        "{what} for {}",
                        humantime::format_duration(health.unhealthy_after)
                    )
                }),
            Health::Pending => {
                let over = self.startup_over(inst, health.startup_timeout);
                if let Some(failed) = self.join_failed(&inst.id) {
                    // Seen at once: swarmkit never retries a first join
                    // that failed, so waiting out the timeout gains nothing.
                    return Some(failed.to_string());
                }
                over.then(|| {
                    format!(
                        "never joined within {}",
                        humantime::format_duration(health.startup_timeout)
                    )
                })
            }
            Health::Healthy | Health::Unknown => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Healed;
    use crate::model::Node;
    use crate::plan::tests::node;

    /// The reap stage leaves alone every node a heal of this pass works
    /// on: its victim's node by id, and any node under the victim's link.
    #[test]
    fn a_heal_claims_its_victims_node_by_id_or_link() {
        let victim = node("w1", false, false);
        let other = node("w2", false, false);
        let mut healed = Healed::default();
        assert!(!healed.claims(&victim));
        healed.claim(Some(&victim), victim.link.as_deref());
        assert!(healed.claims(&victim));
        let older = Node {
            id: "n-older".into(),
            ..victim.clone()
        };
        assert!(healed.claims(&older));
        assert!(!healed.claims(&other));
        // A machine whose node cannot be found claims by its link alone.
        healed.claim(None, Some("w2"));
        assert!(healed.claims(&other));
    }
}
