//! The oracle's checks on every step and on the converged world: fault
//! tolerance floors, populations, capacity, destroys of what is not ours.

use super::*;

impl Runner {
    /// Oracle: a voluntary demotion (of a roll or a retirement) never takes
    /// the fault tolerance it found at or above the manager group's roll
    /// floor below it (issue 18; a heal may, its victim being broken).
    pub(super) fn judge_floor(&mut self, what: &str, action: &Action, ft_before: i64) {
        let (Action::Demote { op, .. }
        | Action::DemoteSelfAndLeave { op, .. }
        | Action::DemoteSelf { op, .. }) = action
        else {
            return;
        };
        let voluntary = self
            .journal
            .iter()
            .any(|o| o.id == *op && matches!(o.kind, OpKind::Roll | OpKind::Retire));
        let floor = self
            .judge_desired
            .as_ref()
            .unwrap_or(&self.desired)
            .roll_floor();
        let after = self.judged().settled_fault_tolerance();
        if voluntary && ft_before >= floor && after < floor {
            self.violations.push(format!(
                "t={} {what}: a roll took fault tolerance from {ft_before} to {after}, below its floor of {floor}",
                self.world.now
            ));
        }
    }

    /// Oracle, before a step: ownership, the leader last, the raft's own
    /// rules for removing a member (`oracle::manager_removal`), and no
    /// machine destroyed with its tasks (`oracle::tasks_moved`).
    pub(super) fn judge_before(&mut self, action: &Action) {
        if let Action::Destroy { instance, .. } = action {
            self.check_destroy(instance);
        }
        let w = self.judged();
        // Judged against what the plan was made from: an operator's request
        // that arrives after it cannot bind it.
        let desired = self.judge_desired.as_ref().unwrap_or(&self.desired);
        let found = [
            oracle::leader_last(w, desired, action),
            oracle::manager_removal(w, desired, action),
            oracle::tasks_moved(w, desired, action),
            oracle::update_in_service(w, action),
        ];
        let now = self.world.now;
        self.violations
            .extend(found.into_iter().flatten().map(|v| format!("t={now} {v}")));
    }

    /// Oracle, after a step: no voluntary step takes the raft's fault
    /// tolerance below 0, and none is one the engine itself refuses as
    /// unsafe — in the world the planner observed (`judged`); a refusal only
    /// the moved real world makes is the engine doing its job.
    pub(super) fn judge_after(&mut self, what: &str, ft_before: i64, judged: Result<(), Refusal>) {
        self.note(what.to_string(), ft_before);
        if let Err(e) = judged
            && e.guards_quorum()
        {
            self.violations.push(format!(
                "t={} {what}: the planner attempted a step the engine refuses as unsafe ({})",
                self.world.now,
                e.message()
            ));
        }
        let after = self.judged().settled_fault_tolerance();
        if ft_before >= 0 && after < 0 {
            self.violations.push(format!(
                "t={} {what}: fault tolerance went from {ft_before} to {after}",
                self.world.now
            ));
        }
    }
    pub(super) fn complete_inflight(&mut self) {
        let now = self.world.now;
        let (done, rest): (Vec<Running>, Vec<Running>) = std::mem::take(&mut self.running)
            .into_iter()
            .partition(|f| f.done_at <= now);
        self.running = rest;
        for f in done {
            match &f.action {
                Action::Provision {
                    op, role, group, ..
                } => {
                    self.acting_for = Some(group.clone());
                    self.finish_provision(&f.action, op, *role);
                    self.acting_for = None;
                }
                // A simulated hook succeeds; as the controller does, its
                // step is journaled done (nothing in the world shows it).
                Action::RunHook { op, step, .. } => self.hook_returned(op, *step),
                // Refused while still in the raft: retry, as the shell does
                // (unless the demote itself was refused: the call failed).
                Action::DemoteSelfAndLeave { node, .. }
                    if self
                        .world
                        .nodes
                        .get(node)
                        .is_some_and(|n| n.out_of_raft_at.is_some() || n.node.raft.is_none())
                        && self.world.leave(node).is_err() =>
                {
                    self.running.push(Running {
                        done_at: now + 500,
                        ..f
                    });
                }
                _ => {}
            }
        }
    }

    /// The zone that refuses `action` for lack of capacity
    /// ([`Faults::no_capacity`]) while faults are on. Draws from the seeded
    /// generator only for a zone that has a rate, so other runs keep theirs.
    pub(super) fn capacity_refusal(&mut self, action: &Action) -> Option<String> {
        let Action::Provision { zone: Some(z), .. } = action else {
            return None;
        };
        let rate = *self.faults.no_capacity.get(z)?;
        (self.world.now < self.faults.until && self.rng.chance(rate)).then(|| z.clone())
    }

    pub(super) fn finish_provision(&mut self, action: &Action, op: &str, role: Role) {
        if self
            .world
            .instances
            .values()
            .any(|i| i.inst.link() == Some(op))
        {
            return; // idempotent on the link: a re-issued call finds the machine
        }
        let short = self.capacity_refusal(action);
        let refused = matches!(&self.faults.stuck, Some(Stuck::ProvisionFails(g)) if action_group(action) == Some(g));
        if short.is_some()
            || refused
            || (self.rng.chance(self.faults.provision_failure)
                && self.world.now < self.faults.until)
        {
            let why = short
                .as_ref()
                .map_or_else(|| "failed".into(), |z| format!("no capacity in zone {z}"));
            self.note(
                format!("{} -> {why} (simulated)", action.describe()),
                self.world.settled_fault_tolerance(),
            );
            // As the controller does: a failed call uses the slot's budget.
            if let Some(o) = self.journal.iter_mut().find(|o| o.id == op) {
                o.provision_failed(short.as_deref());
            }
            return;
        }
        let tags = plan::instance_tags(&self.desired.cluster_id, action);
        if let Action::Provision {
            group,
            logical_id: Some(l),
            ..
        } = action
        {
            let dup = self.world.instances.values().any(|i| {
                i.inst.tag(tags::GROUP) == Some(group.as_str())
                    && i.inst.logical_id() == Some(l.as_str())
            });
            if dup {
                self.violations.push(format!(
                    "t={} duplicate logical id {l} in {group}",
                    self.world.now
                ));
            }
        }
        let never_join = (self.world.now < self.faults.until
            && self.rng.chance(self.faults.never_join))
            || matches!(&self.faults.stuck, Some(Stuck::NeverJoins(g)) if action_group(action) == Some(g));
        if let (true, Action::Provision { group, .. }) = (never_join, action) {
            self.faulted_groups.insert(group.clone());
        }
        let ft = self.world.settled_fault_tolerance();
        self.world.provision(tags, role, never_join);
        self.count_made(op);
        self.note(action.describe(), ft);
        self.check_population(action);
    }

    /// Oracle: a failed or partial describe never causes a provisioning storm.
    pub(super) fn check_population(&mut self, action: &Action) {
        let Action::Provision { group, .. } = action else {
            return;
        };
        self.see_unlabelled(group);
        let Some(g) = self.group_of(group) else {
            return;
        };
        // Managers: one addition at a time, plus the temporary member of a
        // spare slot while pets roll.
        let slack = if g.spec.role == Role::Manager {
            1 + usize::from(!g.spec.spares.is_empty())
        } else {
            g.spec.update.max_in_flight.max(g.spec.update.canaries) as usize
        };
        // A scale-in still holds the machines of the previous size.
        let before = self
            .previous
            .get(group)
            .map_or(0, |p| p.spec.allocation.size());
        let unlabelled = self
            .unlabelled_seen
            .iter()
            .filter_map(|id| self.world.instances.get(id))
            .filter(|i| i.inst.running && i.inst.owned_by(&self.desired.cluster_id, group))
            .count();
        let limit = g.spec.allocation.size().max(before) + slack + unlabelled;
        // Crashed machines awaiting their heal are dead weight, not a
        // storm; so are machines that never joined within their
        // `startup_timeout` (awaiting their retirement or their heal: a
        // surge worker roll whose new machine never joins goes on with the
        // old member, and the slot is filled again before the machine that
        // never joined is retired). The liveness oracle bounds those per
        // slot (`max_attempts` × zones).
        let wall = self.world.wall_ms();
        let startup = g.spec.health.startup_timeout.as_millis() as u64;
        let never_joined = |i: &crate::world::SimInstance| {
            i.node.is_none() && wall.saturating_sub(i.inst.created_ms) > startup
        };
        let alive = self
            .world
            .instances
            .values()
            .filter(|i| i.inst.running && i.inst.owned_by(&self.desired.cluster_id, group))
            .filter(|i| !never_joined(i))
            .count();
        if alive > limit {
            self.violations.push(format!(
                "t={} {group} has {alive} machines, more than size + slack = {limit}",
                self.world.now
            ));
        }
    }

    /// A worker whose engine lost drover's labels is, to drover, a worker
    /// it did not make (operators join those by hand): while a describe
    /// also leaves its machine out, its slot reads empty and is refilled
    /// (cattle have no identity), and the surplus stays until the excess is
    /// retired, after the operations in flight (a roll's surge may still
    /// add its machine). Managers hold instead (the raft is at stake), so
    /// only a worker group's machines are noted: those read unlabelled in
    /// the world a provisioning plan observed, for as long as they run.
    pub(super) fn see_unlabelled(&mut self, group: &str) {
        if self.group_of(group).map(|g| g.spec.role) != Some(Role::Worker) {
            return;
        }
        let seen = self.judged();
        let ids: Vec<String> = seen
            .instances
            .values()
            .filter(|i| i.inst.running && i.inst.owned_by(&self.desired.cluster_id, group))
            .filter(|i| {
                i.node
                    .as_ref()
                    .and_then(|n| seen.nodes.get(n))
                    .is_some_and(|n| n.lost_labels.is_some())
            })
            .map(|i| i.inst.id.clone())
            .collect();
        self.unlabelled_seen.extend(ids);
    }

    pub(super) fn group_of(&self, name: &str) -> Option<&DesiredGroup> {
        self.desired.groups.iter().find(|g| g.spec.name == name)
    }

    /// Oracle: only machines tagged with this cluster and a declared group are destroyed.
    pub(super) fn check_destroy(&mut self, id: &str) {
        let Some(i) = self.judged().instances.get(id) else {
            return;
        };
        let ours = i.inst.tag(tags::CLUSTER) == Some(self.desired.cluster_id.as_str());
        let declared = i
            .inst
            .tag(tags::GROUP)
            .is_some_and(|g| self.group_of(g).is_some());
        // An orphan (undeclared group) may go, but only after gc.orphan_grace.
        let orphan_due = i.inst.tag(tags::GROUP).is_some()
            && !declared
            && i.inst.created_ms + self.desired.orphan_grace.as_millis() as u64
                <= self.world.wall_ms();
        let owned = ours && (declared || orphan_due);
        if !owned || self.foreign.iter().any(|f| f == id) {
            self.violations.push(format!(
                "t={} destroyed {id}, which lacks this cluster's and group's tags",
                self.world.now
            ));
        }
    }

    /// Oracle: at most max(max_in_flight, canaries) workers out of service
    /// through drover's own steps (checked for groups no fault touched).
    pub(super) fn check_capacity(&mut self, node: &str) {
        let Some(group) = self
            .judged()
            .nodes
            .get(node)
            .and_then(|n| n.node.group.clone())
        else {
            return;
        };
        let Some(g) = self.group_of(&group) else {
            return;
        };
        if g.spec.role != Role::Worker
            || self.faulted_groups.contains(&group)
            || !self.full_once.contains(&group)
        {
            return;
        }
        let limit = g.spec.update.max_in_flight.max(g.spec.update.canaries) as usize;
        // Scaled mid-roll: the group was full at its previous size, and a
        // scale-out's new members are not missing capacity drover took away.
        let size = self
            .previous
            .get(&group)
            .map_or(usize::MAX, |p| p.spec.allocation.size())
            .min(g.spec.allocation.size());
        let serving = oracle::serving(self.judged(), &group);
        if size.saturating_sub(serving) > limit {
            self.violations.push(format!(
                "t={} {group}: {} of {size} workers out of service (limit {limit})",
                self.world.now,
                size - serving
            ));
        }
    }

    /// Records which groups reached full strength (capacity checks start then).
    pub(super) fn mark_full_groups(&mut self) {
        let full: Vec<String> = self
            .desired
            .groups
            .iter()
            .filter(|g| oracle::serving(&self.world, &g.spec.name) >= g.spec.allocation.size())
            .map(|g| g.spec.name.clone())
            .collect();
        self.full_once.extend(full);
    }

    /// Oracle checks once converged: shape, config, no orphan, no stale node.
    pub(super) fn check_converged(&mut self) {
        let now = self.world.now;
        let mut problems = Vec::new();
        for g in &self.desired.groups {
            let members: Vec<_> = self
                .world
                .instances
                .values()
                .filter(|i| i.inst.owned_by(&self.desired.cluster_id, &g.spec.name))
                .collect();
            if members.len() != g.spec.allocation.size() {
                problems.push(format!(
                    "{} has {} machines, declared {}",
                    g.spec.name,
                    members.len(),
                    g.spec.allocation.size()
                ));
            }
            if let Some(i) = members
                .iter()
                .find(|i| i.inst.config() != Some(g.hash.as_str()))
            {
                problems.push(format!(
                    "{} member {} is not on config {}",
                    g.spec.name, i.inst.id, g.hash
                ));
            }
        }
        for n in self.world.nodes.values() {
            let backed = self.world.instances.values().any(|i| {
                i.inst.running && i.inst.link().is_some() && i.inst.link() == n.node.link.as_deref()
            });
            // By the simulator's truth: a node reading `unknown` after the
            // last hand-over is not stale.
            if !backed || !n.serving() {
                problems.push(format!(
                    "stale node {} ({:?}, link {:?})",
                    n.node.id, n.node.state, n.node.link
                ));
            }
        }
        // A worker promoted by hand that drover kept (it was current) is an
        // operator's extra member, not drover's.
        let promoted = self.promoted_in_raft().count();
        let desired_managers = oracle::declared_managers(&self.desired) + promoted;
        let (members, reachable) = self.world.raft();
        if members != desired_managers || reachable != members {
            problems.push(format!(
                "raft has {members} members ({reachable} reachable), declared {desired_managers}"
            ));
        }
        for f in &self.foreign {
            if !self.world.instances.contains_key(f) {
                problems.push(format!("foreign machine {f} was destroyed"));
            }
        }
        self.violations.extend(
            problems
                .into_iter()
                .map(|p| format!("t={now} after convergence: {p}")),
        );
    }
}

/// The group a provision is for.
fn action_group(action: &Action) -> Option<&String> {
    match action {
        Action::Provision { group, .. } => Some(group),
        _ => None,
    }
}
