//! What is done to the world: the provider's verbs (provision, destroy),
//! the engine's (promote, drain, demote, leave, node rm) with their own
//! refusals, and the faults the nemesis strikes (crashes, partitions,
//! lost labels).

use super::*;

impl World {
    /// Puts `spec`'s members, joined and current, into cluster `cluster`
    /// of this world at once (no bring-up: what a benchmark or a test of a
    /// converged cluster starts from).
    pub fn seed(&mut self, cluster: &str, spec: &drover_core::spec::ClusterSpec) {
        let join = self.timings.join;
        self.timings.join = 0;
        for g in &spec.groups {
            let hash = drover_core::hash::config_hash(g);
            for k in 0..g.allocation.size() {
                let tags = BTreeMap::from([
                    (
                        drover_core::model::tags::CLUSTER.to_string(),
                        cluster.to_string(),
                    ),
                    (drover_core::model::tags::GROUP.to_string(), g.name.clone()),
                    (
                        drover_core::model::tags::LINK.to_string(),
                        format!("seed-{}-{k}", g.name),
                    ),
                    (drover_core::model::tags::CONFIG.to_string(), hash.clone()),
                ]);
                self.provision(tags, g.role, false);
            }
        }
        let now = self.now;
        self.advance(now);
        self.timings.join = join;
    }

    /// Creates a machine (it joins after the join latency unless `never_join`).
    pub fn provision(
        &mut self,
        tags: BTreeMap<String, String>,
        role: Role,
        never_join: bool,
    ) -> String {
        let id = self.fresh_id("i-");
        let mut tags = tags;
        tags.insert("sim.role".into(), role.as_str().into());
        let join_at = (!never_join).then_some(self.now + self.timings.join);
        let inst = Instance {
            id: id.clone(),
            tags: tags.into(),
            running: true,
            created_ms: self.wall_ms(),
        };
        self.instances.insert(
            id.clone(),
            SimInstance {
                inst,
                join_at,
                node: None,
                faulted: never_join,
            },
        );
        id
    }

    /// Destroys a machine: its engine dies with it.
    pub fn destroy(&mut self, id: &str) {
        let node = self.instances.remove(id).and_then(|i| i.node);
        if let Some(n) = node.and_then(|n| self.nodes.get_mut(&n)) {
            Self::engine_died(n, self.now, self.timings.down_after);
        }
        self.advance(self.now);
    }

    pub(super) fn engine_died(n: &mut SimNode, now: Time, down_after: Time) {
        if n.engine_alive {
            n.engine_alive = false;
            if let Some(r) = &mut n.node.raft {
                r.reachable = false;
            }
            if !n.down {
                n.down_at.get_or_insert(now + down_after);
            }
        }
    }

    /// Kills a machine's engine (a fault): the provider reports it stopped.
    pub fn crash(&mut self, id: &str) {
        if let Some(i) = self.instances.get_mut(id) {
            i.inst.running = false;
            i.faulted = true;
            if let Some(n) = i.node.clone().and_then(|n| self.nodes.get_mut(&n)) {
                Self::engine_died(n, self.now, self.timings.down_after);
            }
        }
        self.advance(self.now);
    }

    /// Starts a stopped machine again (the operator's hand): its engine
    /// comes back with its node, which rejoins the raft if it was a member.
    pub fn restart(&mut self, id: &str) {
        if let Some(i) = self.instances.get_mut(id) {
            i.inst.running = true;
            if let Some(n) = i.node.clone().and_then(|n| self.nodes.get_mut(&n)) {
                n.engine_alive = true;
                n.down = false;
                n.down_at = None;
            }
        }
        self.advance(self.now);
    }

    /// Cuts manager `node` off from the other managers until `until` (a
    /// fault): raft counts it unreachable (a leader steps down and the rest
    /// elect one) while its engine lives and its status still reads Ready.
    pub fn partition(&mut self, node: &str, until: Time) {
        if let Some(n) = self.nodes.get_mut(node) {
            n.partitioned_until = Some(until);
        }
        self.advance(self.now);
    }

    /// `node` reads `disconnected` until `until` (a fault; raft unaffected).
    pub fn disconnect(&mut self, node: &str, until: Time) {
        if let Some(n) = self.nodes.get_mut(node) {
            n.disconnected_until = Some(until);
        }
        self.refresh_raft_flags();
    }

    /// `node`'s engine restarted without drover's labels (configuration
    /// management rewrote `daemon.json`): same node, same raft membership,
    /// but nothing links it to its machine any more. The restart costs a
    /// manager its raft contact for a second.
    pub fn lose_labels(&mut self, node: &str) {
        let Some(n) = self.nodes.get_mut(node) else {
            return;
        };
        if n.lost_labels.is_none() {
            n.lost_labels = Some([
                n.node.link.take(),
                n.node.cluster.take(),
                n.node.group.take(),
            ]);
        }
        let back = self.now + 1_000;
        if n.node.raft.is_some() {
            n.partitioned_until = Some(back);
        }
        self.advance(self.now);
    }

    /// Puts back labels lost by [`World::lose_labels`] (the operator fixed the
    /// engine's configuration and restarted it).
    pub fn restore_labels(&mut self) {
        for n in self.nodes.values_mut() {
            if let Some([link, cluster, group]) = n.lost_labels.take() {
                n.node.link = link;
                n.node.cluster = cluster;
                n.node.group = group;
            }
        }
    }

    /// `node promote` by hand (outside drover): a worker becomes a raft member.
    pub fn promote(&mut self, node: &str) -> Result<(), Refusal> {
        let n = self.nodes.get_mut(node).ok_or(Refusal::NoSuchNode)?;
        if n.node.raft.is_some() || !n.serving() {
            return Err(Refusal::NotAHealthyWorker);
        }
        n.node.manager_role = true;
        n.node.raft = Some(RaftMember {
            leader: false,
            reachable: true,
            addr: format!("{node}:2377"),
        });
        self.refresh_raft_flags();
        Ok(())
    }

    /// `node`'s engine restarts right after its self-demotion was accepted
    /// (a fault): it leaves a ghost raft member (see [`SimNode::ghost`]).
    /// False when no demotion of `node` is under way.
    pub fn leave_ghost(&mut self, node: &str) -> bool {
        let Some(n) = self.nodes.get_mut(node) else {
            return false;
        };
        if n.out_of_raft_at.is_none() {
            return false;
        }
        n.ghost = true;
        // Its own engine runs no manager (`info`: ControlAvailable false).
        n.node.engine_no_manager = true;
        self.refresh_raft_flags();
        true
    }

    /// `Cluster::heal_ghost`: a promote then a demote of the node's spec,
    /// sent only while the node is a worker by spec in the raft; swarmkit
    /// then removes the stale member ([`World::heal_ghost`]).
    pub fn update_ghost(&mut self, node: &str) -> Result<(), Refusal> {
        let n = self.nodes.get(node).ok_or(Refusal::NoSuchNode)?;
        if n.node.raft.is_some() && !n.node.manager_role {
            self.heal_ghost(node);
        }
        Ok(())
    }

    /// Any update of a ghost's node spec makes swarmkit's role reconciler
    /// look at it again and remove the stale raft member (measured: issue
    /// 36). True when `node` was a ghost.
    pub fn heal_ghost(&mut self, node: &str) -> bool {
        let Some(n) = self.nodes.get_mut(node) else {
            return false;
        };
        if !n.ghost || n.out_of_raft_at.is_some() {
            return false;
        }
        n.ghost = false;
        n.node.raft = None;
        n.node.engine_no_manager = false;
        self.advance(self.now);
        true
    }

    /// `node promote` by drover (an in-place update's manager coming
    /// back): a worker already promoted is left as it is.
    pub fn promote_back(&mut self, node: &str) -> Result<(), Refusal> {
        let n = self.nodes.get(node).ok_or(Refusal::NoSuchNode)?;
        if n.node.manager_role && n.node.raft.is_some() {
            return Ok(());
        }
        self.promote(node)
    }

    /// `node update --availability active`.
    pub fn activate(&mut self, node: &str) -> Result<(), Refusal> {
        let n = self.nodes.get_mut(node).ok_or(Refusal::NoSuchNode)?;
        n.node.availability = Availability::Active;
        n.drained_at = None;
        Ok(())
    }

    /// An in-place update of machine `id` ran and succeeded: the machine
    /// now carries `config`.
    pub fn updated(&mut self, id: &str, config: &str) {
        if let Some(i) = self.instances.get_mut(id) {
            i.inst.tags.insert(
                drover_core::model::tags::CONFIG.to_string(),
                config.to_string(),
            );
        }
    }

    /// `node update --availability drain`.
    pub fn drain(&mut self, node: &str) -> Result<(), Refusal> {
        self.heal_ghost(node);
        let drain_after = self.timings.drain;
        let n = self.nodes.get_mut(node).ok_or(Refusal::NoSuchNode)?;
        if n.node.availability != Availability::Drain {
            n.node.availability = Availability::Drain;
            if n.node.running_tasks > 0 {
                n.drained_at = Some(self.now + drain_after);
            }
        }
        Ok(())
    }

    /// `node demote`, with the engine's own precondition.
    pub fn demote(&mut self, node: &str) -> Result<(), Refusal> {
        // Raft applies membership changes one after another: a member whose
        // removal is under way no longer counts.
        if self.heal_ghost(node) {
            return Ok(()); // a node update: the ghost member goes
        }
        let (members, reachable) = self.settled_raft();
        let n = self.nodes.get(node).ok_or(Refusal::NoSuchNode)?;
        if n.out_of_raft_at.is_some() {
            return Ok(()); // already leaving the raft
        }
        let Some(r) = &n.node.raft else {
            self.nodes.get_mut(node).expect("present").node.manager_role = false;
            return Ok(());
        };
        let after = if r.reachable && n.in_contact() {
            reachable - 1
        } else {
            reachable
        };
        if members <= 1 {
            return Err(Refusal::LastManager);
        }
        if after < quorum::quorum(members - 1) {
            return Err(Refusal::QuorumLoss);
        }
        let out_at = self.now + self.timings.out_of_raft;
        let n = self.nodes.get_mut(node).expect("present");
        n.node.manager_role = false;
        n.out_of_raft_at = Some(out_at);
        if self.leader.as_deref() == Some(node) {
            self.hand_over(node);
        }
        self.refresh_raft_flags();
        Ok(())
    }

    /// `swarm leave` on the node's own engine (after its demotion).
    pub fn leave(&mut self, node: &str) -> Result<(), Refusal> {
        let down_after = 2 * self.timings.down_after;
        let Some(n) = self.nodes.get_mut(node) else {
            return Ok(()); // already removed by the next leader: nothing to leave
        };
        if n.node.raft.is_some() {
            return Err(Refusal::LeavingManager);
        }
        if !n.down && n.down_at.is_none() {
            n.down_at = Some(self.now + down_after);
        }
        // Its own engine knows at once (drover's swarm adapter asks it).
        n.node.left = true;
        Ok(())
    }

    /// `node rm`, with the engine's preconditions.
    pub fn remove_node(&mut self, node: &str, force: bool) -> Result<(), Refusal> {
        let Some(n) = self.nodes.get(node) else {
            return Ok(());
        };
        if n.node.raft.is_some() || n.node.manager_role {
            return Err(Refusal::NotDemoted);
        }
        if n.node.state == NodeState::Ready && !force {
            return Err(Refusal::NotDown);
        }
        self.nodes.remove(node);
        Ok(())
    }
}
