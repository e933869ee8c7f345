//! The nemesis: faults struck from the seeded schedule (crashes,
//! partitions, leadership moves, hand promotions) and operator events.

use super::*;

impl Runner {
    pub(super) fn fault_time(&self) -> Option<Time> {
        if self.world.now >= self.faults.until {
            return None;
        }
        let active = self.faults.nemeses().iter().any(|(rate, _)| *rate > 0.0);
        // Wake when the next fault may strike, or at least when faults end.
        Some(if active {
            self.next_fault.max(self.world.now + 1)
        } else {
            self.faults.until
        })
    }

    pub(super) fn inject_faults(&mut self) {
        if self.world.now < self.next_fault || self.world.now >= self.faults.until {
            return;
        }
        self.next_fault = self.world.now + 1_000;
        for (per_min, kind) in self.faults.nemeses() {
            if self.rng.chance(per_min / 60.0) {
                self.strike(kind);
            }
        }
    }

    /// One fault of a kind the schedule has on, if any (the one that
    /// strikes between a stale observation and its plan's steps).
    pub(super) fn strike_any(&mut self) {
        let on: Vec<Nemesis> = self
            .faults
            .nemeses()
            .into_iter()
            .filter(|(rate, _)| *rate > 0.0)
            .map(|(_, k)| k)
            .collect();
        if !on.is_empty() {
            let k = on[self.rng.between(0, on.len() as u64 - 1) as usize];
            self.strike(k);
        }
    }

    pub(super) fn strike(&mut self, kind: Nemesis) {
        let ft = self.world.settled_fault_tolerance();
        match kind {
            Nemesis::Crash => self.crash_random_machine(),
            Nemesis::LeaderChange => {
                self.world.change_leader();
                self.note("fault: leadership moved".into(), ft);
            }
            Nemesis::Partition => {
                // As with crashes: only while the quorum survives it.
                let Some(node) = self.pick_node(|n| n.node.raft.is_some() && n.in_contact()) else {
                    return;
                };
                if ft < 1 {
                    return;
                }
                let until = self.world.now + self.rng.between(3_000, 12_000);
                self.world.partition(&node, until);
                self.note(format!("fault: {node} partitioned from the raft"), ft);
            }
            Nemesis::Disconnect => {
                let Some(node) = self.pick_node(|n| !n.down) else {
                    return;
                };
                let until = self.world.now + self.rng.between(2_000, 10_000);
                self.world.disconnect(&node, until);
                self.note(format!("fault: {node} reads disconnected"), ft);
            }
            Nemesis::LoseLabels => {
                let Some(node) = self.pick_node(|n| n.node.link.is_some() && n.serving()) else {
                    return;
                };
                // The engine's restart costs a member its raft contact briefly.
                if self.world.nodes[&node].node.raft.is_some() && ft < 1 {
                    return;
                }
                self.fault_in_group_of(&node);
                self.world.lose_labels(&node);
                self.note(
                    format!("fault: engine of {node} restarted without drover's labels"),
                    ft,
                );
            }
            Nemesis::Promote => {
                // A worker group's node (a manager-group machine demoted
                // mid-roll is drover's to replace, not a recovery spare).
                let workers: BTreeSet<String> = self
                    .world
                    .instances
                    .values()
                    .filter(|i| i.inst.tag("sim.role") == Some("worker"))
                    .filter_map(|i| i.node.clone())
                    .collect();
                let Some(node) = self.pick_node(|n| {
                    n.node.raft.is_none()
                        && !n.node.manager_role
                        && n.serving()
                        && workers.contains(&n.node.id)
                }) else {
                    return;
                };
                self.fault_in_group_of(&node);
                if self.world.promote(&node).is_ok() {
                    self.promoted.insert(node.clone());
                    self.note(format!("fault: worker {node} promoted by hand"), ft);
                }
            }
            Nemesis::Operator => self.operator_event(),
        }
    }

    /// A random node of this cluster matching `pick`.
    pub(super) fn pick_node(
        &mut self,
        pick: impl Fn(&crate::world::SimNode) -> bool,
    ) -> Option<String> {
        let cluster = self.desired.cluster_id.as_str();
        let ids: Vec<String> = self
            .world
            .nodes
            .values()
            .filter(|n| pick(n))
            .filter(|n| {
                let labelled = n.lost_labels.as_ref().map_or(&n.node.cluster, |l| &l[1]);
                labelled.as_deref() == Some(cluster)
            })
            .map(|n| n.node.id.clone())
            .collect();
        (!ids.is_empty()).then(|| ids[self.rng.between(0, ids.len() as u64 - 1) as usize].clone())
    }

    /// Exempts the group of `node`'s machine from the capacity oracle.
    pub(super) fn fault_in_group_of(&mut self, node: &str) {
        let group = self
            .world
            .instances
            .values()
            .find(|i| i.node.as_deref() == Some(node))
            .and_then(|i| i.inst.tag(tags::GROUP));
        if let Some(g) = group {
            self.faulted_groups.insert(g.to_string());
        }
    }

    /// An operator acting mid-roll: hold or release a machine, ask for one
    /// to be replaced, pause or resume a group.
    pub(super) fn operator_event(&mut self) {
        let ids: Vec<String> = self
            .world
            .instances
            .values()
            .filter(|i| {
                i.inst.running
                    && self
                        .desired
                        .groups
                        .iter()
                        .any(|g| i.inst.owned_by(&self.desired.cluster_id, &g.spec.name))
            })
            .map(|i| i.inst.id.clone())
            .collect();
        let ft = self.world.settled_fault_tolerance();
        let groups = self.desired.groups.len() as u64;
        let what = match self.rng.between(0, 3) {
            0 | 1 if ids.is_empty() => return,
            0 => {
                let id = ids[self.rng.between(0, ids.len() as u64 - 1) as usize].clone();
                let what = format!("operator: hold {id}");
                self.desired.held.insert(id);
                what
            }
            1 => {
                let id = ids[self.rng.between(0, ids.len() as u64 - 1) as usize].clone();
                let what = format!("operator: replace {id}");
                self.desired.replace.insert(id);
                what
            }
            2 => match self.desired.held.pop_first() {
                Some(id) => format!("operator: release {id}"),
                None => return,
            },
            _ => {
                let g = &mut self.desired.groups[self.rng.between(0, groups - 1) as usize];
                g.paused = !g.paused;
                let verb = if g.paused { "pause" } else { "resume" };
                format!("operator: {verb} {}", g.spec.name)
            }
        };
        self.note(what, ft);
    }

    /// `id` is the only manager-group machine whose node is a raft member.
    pub(super) fn last_controller_host(&self, id: &str) -> bool {
        let in_raft = |i: &crate::world::SimInstance| {
            i.node
                .as_ref()
                .and_then(|n| self.world.nodes.get(n))
                .is_some_and(|n| n.node.raft.is_some())
        };
        let hosts: Vec<&String> = self
            .world
            .instances
            .iter()
            .filter(|(_, i)| i.inst.tag("sim.role") == Some("manager") && in_raft(i))
            .map(|(k, _)| k)
            .collect();
        hosts.len() == 1 && hosts[0] == id
    }

    pub(super) fn crash_random_machine(&mut self) {
        let alive: Vec<String> = self
            .world
            .instances
            .iter()
            .filter(|(id, i)| {
                i.inst.running
                    && !self.foreign.contains(id)
                    && i.inst.tag(tags::CLUSTER) == Some(self.desired.cluster_id.as_str())
            })
            .map(|(id, _)| id.clone())
            .collect();
        if alive.is_empty() {
            return;
        }
        let id = alive[self.rng.between(0, alive.len() as u64 - 1) as usize].clone();
        let is_member = self.world.instances[&id]
            .node
            .as_ref()
            .and_then(|n| self.world.nodes.get(n))
            .is_some_and(|n| n.node.raft.is_some() && n.in_contact());
        // Only crash a manager when the swarm keeps its quorum: this tests
        // healing, not the (unrecoverable without an operator) quorum loss.
        if is_member && self.world.settled_fault_tolerance() < 1 {
            return;
        }
        // Nor the last manager-group member of a raft that workers promoted
        // by hand keep alive: only manager-group machines run a controller,
        // so none would be left to heal it (sim-findings N4, a design gap
        // an operator must close by hand; not a planner decision).
        if self.last_controller_host(&id) {
            return;
        }
        let group = self.world.instances[&id]
            .inst
            .tag(tags::GROUP)
            .unwrap_or_default()
            .to_string();
        self.faulted_groups.insert(group);
        let ft = self.world.settled_fault_tolerance();
        if self.rng.chance(self.faults.vanish_share) {
            self.world.destroy(&id);
            self.note(
                format!("fault: machine {id} vanished behind drover's back"),
                ft,
            );
        } else {
            self.world.crash(&id);
            self.note(format!("fault: engine of {id} crashed"), ft);
        }
    }

    pub(super) fn note(&mut self, what: String, ft_before: i64) {
        self.trace.push(TraceLine {
            at: self.world.now,
            group: self.acting_for.clone(),
            what,
            ft_before,
            ft_after: self.world.settled_fault_tolerance(),
            leader: self.world.leader_link(),
        });
    }

    /// A different controller acts from now on (another leader's, or the
    /// same restarted): a new epoch and empty memory.
    pub(super) fn take_over(&mut self) {
        self.memory = Memory::default();
        self.epoch += 1;
        self.new_term_tokens();
    }
}
