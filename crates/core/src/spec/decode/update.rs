//! How a group changes: `update` (strategy, budgets, floors),
//! `health`, `drain` and `rollout`.

use super::*;

impl Decoder<'_> {
    pub(super) fn update(
        &mut self,
        node: Option<&Node>,
        path: &str,
        role: Option<Role>,
        slots: Option<(&Allocation, &[Slot])>,
        group_pos: Pos,
    ) -> Option<UpdatePolicy> {
        let (alloc, spares) = (slots.map(|(a, _)| a), slots.map_or(&[][..], |(_, s)| s));
        // Defaults can be wrong for the group (a lone pets manager), so an
        // absent section points at the group, never at 0:0.
        let empty = Node::Map {
            entries: Vec::new(),
            pos: group_pos,
        };
        let f = self.fields(node.unwrap_or(&empty), path, UPDATE_FIELDS)?;
        let strategy = self.strategy(&f, path, role, alloc);
        let max_in_flight = f
            .get("max_in_flight")
            .map_or(Some(defaults::MAX_IN_FLIGHT), |n| {
                self.count(n, &join(path, "max_in_flight"), 1)
            });
        let canaries = f.get("canaries").map_or(Some(defaults::CANARIES), |n| {
            self.count(n, &join(path, "canaries"), 0)
        });
        let watch = self.duration(
            f.get("watch"),
            &join(path, "watch"),
            defaults::watch(role.unwrap_or(Role::Worker)),
        );
        let step_timeout = self.duration(
            f.get("step_timeout"),
            &join(path, "step_timeout"),
            defaults::STEP_TIMEOUT,
        );
        let on_failure = self.choice(
            f.get("on_failure"),
            &join(path, "on_failure"),
            &[
                ("pause", OnFailure::Pause),
                ("rollback", OnFailure::Rollback),
            ],
            OnFailure::Pause,
        );

        let windows = self.windows(f.get("windows"), &join(path, "windows"));
        if let (Some(ws), Some(w)) = (&windows, watch) {
            self.window_lengths(f.get("windows"), &join(path, "windows"), ws, w);
        }
        let min_fault_tolerance = f
            .get("min_fault_tolerance")
            .and_then(|n| self.count(n, &join(path, "min_fault_tolerance"), 0));
        let service_budget = match f.get("service_budget") {
            None => Some(None),
            Some(n) => self
                .service_budget(n, &join(path, "service_budget"))
                .map(Some),
        };
        let in_place = self.in_place(f.get("in_place"), &join(path, "in_place"));
        let draft = UpdateDraft {
            strategy,
            min_fault_tolerance,
            max_in_flight,
            canaries,
            watch,
            step_timeout,
        };
        self.update_rules(&f, path, role, alloc, spares, &draft);
        self.in_place_rules(&f, path, strategy, in_place.as_ref());
        role?;
        Some(UpdatePolicy {
            strategy: strategy?,
            min_fault_tolerance,
            max_in_flight: max_in_flight?,
            canaries: canaries?,
            watch: watch?,
            step_timeout: step_timeout?,
            on_failure: on_failure?,
            windows: windows?,
            service_budget: service_budget?,
            in_place: in_place?,
        })
    }

    /// `update.in_place`: the command (a template over
    /// [`UpdateContext`](crate::in_place::UpdateContext), checked by
    /// rendering it with example facts) and its timeout. `Some(None)` when
    /// absent; `None` when refused (already reported).
    fn in_place(&mut self, node: Option<&Node>, path: &str) -> Option<Option<InPlace>> {
        let Some(node) = node else { return Some(None) };
        let f = self.fields(node, path, IN_PLACE_FIELDS)?;
        let field = join(path, "command");
        let command = match f.get("command") {
            None => {
                self.error(f.pos, &field, "expected the command that updates a member's machine (a shell script run as root), e.g. `apt-get install -y docker.io`");
                None
            }
            Some(n) => self.string(n, &field).and_then(|text| {
                if text.trim().is_empty() {
                    self.error(
                        n.pos(),
                        &field,
                        "is empty: give the command that updates a member's machine",
                    );
                    return None;
                }
                match crate::template::render_value(
                    &text,
                    &crate::in_place::UpdateContext::example(),
                ) {
                    Ok(_) => Some(text),
                    Err(e) => {
                        self.error(
                            n.pos(),
                            &field,
                            format!(
                                "{e}; the command may use {}",
                                crate::in_place::TEMPLATE_VARIABLES
                            ),
                        );
                        None
                    }
                }
            }),
        };
        let timeout = self.duration(
            f.get("timeout"),
            &join(path, "timeout"),
            crate::in_place::DEFAULT_TIMEOUT,
        );
        if let (Some(t), Some(n)) = (timeout, f.get("timeout"))
            && t.is_zero()
        {
            self.error(
                n.pos(),
                &join(path, "timeout"),
                "must be longer than zero: an update takes time; try 15m",
            );
            return None;
        }
        Some(Some(InPlace {
            command: command?,
            timeout: timeout?,
        }))
    }

    /// `strategy: in_place` needs a provider that runs commands on the
    /// machines it keeps ([`IN_PLACE_PROVIDERS`]).
    pub(super) fn in_place_provider(
        &mut self,
        group: &Node,
        path: &str,
        provider: &str,
        update: &UpdatePolicy,
    ) {
        if update.strategy != Strategy::InPlace || IN_PLACE_PROVIDERS.contains(&provider) {
            return;
        }
        let at = field_pos(group, &["update", "strategy"]).unwrap_or_else(|| group.pos());
        self.error(at, &join(path, "update.strategy"), format!(
            "provider `{provider}` cannot run an update on a machine it keeps (in_place works with {}); use strategy: replace or surge",
            IN_PLACE_PROVIDERS.join(", ")
        ));
    }

    /// `strategy: in_place` and `in_place` go together.
    fn in_place_rules(
        &mut self,
        f: &Fields<'_>,
        path: &str,
        strategy: Option<Strategy>,
        in_place: Option<&Option<InPlace>>,
    ) {
        match (strategy, in_place) {
            (Some(Strategy::InPlace), Some(None)) => {
                let at = f.get("strategy").map_or(f.pos, Node::pos);
                self.error(at, &join(path, "in_place"), "strategy: in_place needs in_place.command: the command that updates a member's machine (e.g. in_place: {command: \"apt-get install -y docker.io\"})");
            }
            (Some(s), Some(Some(_))) if s != Strategy::InPlace => {
                let at = f.get("in_place").map_or(f.pos, Node::pos);
                self.error(at, &join(path, "in_place"), "applies to strategy: in_place only; set strategy: in_place, or remove in_place");
            }
            _ => {}
        }
    }

    /// `update.service_budget`: exactly one of `max_unavailable` and
    /// `min_available`, a count or a percentage (as the service labels).
    /// `update.strategy`, by default `surge` for cattle managers. They add
    /// each successor before removing its predecessor, so a roll keeps the
    /// group's fault tolerance (and a lone manager can only be rolled that
    /// way). Pets cannot: two machines cannot hold one address.
    fn strategy(
        &mut self,
        f: &Fields<'_>,
        path: &str,
        role: Option<Role>,
        alloc: Option<&Allocation>,
    ) -> Option<Strategy> {
        let cattle_managers =
            role == Some(Role::Manager) && matches!(alloc, Some(Allocation::Size { .. }));
        let default_strategy = if cattle_managers {
            Strategy::Surge
        } else {
            Strategy::Replace
        };
        self.choice(
            f.get("strategy"),
            &join(path, "strategy"),
            &[
                ("replace", Strategy::Replace),
                ("surge", Strategy::Surge),
                ("in_place", Strategy::InPlace),
            ],
            default_strategy,
        )
    }

    pub(super) fn service_budget(&mut self, node: &Node, path: &str) -> Option<ServiceBudget> {
        let f = self.fields(node, path, &["max_unavailable", "min_available"])?;
        let amount = |d: &mut Self, key: &str| {
            let n = f.get(key)?;
            let field = join(path, key);
            let text = d.string(n, &field)?;
            text.parse::<Amount>()
                .map_err(|e| d.error(n.pos(), &field, e.to_string()))
                .ok()
        };
        let budget = match (f.get("max_unavailable"), f.get("min_available")) {
            (Some(_), Some(_)) => {
                self.error(
                    f.pos,
                    path,
                    "set max_unavailable or min_available, not both",
                );
                None
            }
            (Some(_), None) => amount(self, "max_unavailable").map(ServiceBudget::MaxUnavailable),
            (None, Some(_)) => amount(self, "min_available").map(ServiceBudget::MinAvailable),
            (None, None) => {
                self.error(
                    f.pos,
                    path,
                    "expected max_unavailable or min_available (a count like 1 or a percentage like 80%)",
                );
                None
            }
        }?;
        if budget.blocks_every_drain() {
            let key = match budget {
                ServiceBudget::MaxUnavailable(_) => "max_unavailable",
                ServiceBudget::MinAvailable(_) => "min_available",
            };
            let at = f.get(key).map_or(f.pos, Node::pos);
            self.error(at, &join(path, key), format!(
                "{budget} lets no task go: no node running a replica could ever be drained, so the roll would block on the first one; allow at least one (max_unavailable: 1), or leave service_budget out and label the services that need it"
            ));
            return None;
        }
        Some(budget)
    }

    /// The fault-tolerance floor of a manager group's roll: at most its
    /// converged fault tolerance, and no higher than its strategy can hold
    /// (a replacement in place spends one unit — two machines cannot hold a
    /// pet's address — unless a spare slot adds a temporary member first);
    /// replacing in place without a floor is warned about.
    pub(super) fn floor_rules(
        &mut self,
        f: &Fields<'_>,
        path: &str,
        role: Option<Role>,
        alloc: Option<&Allocation>,
        spares: &[Slot],
        draft: &UpdateDraft,
    ) {
        let at = f.get("min_fault_tolerance").map_or(f.pos, Node::pos);
        let field = join(path, "min_fault_tolerance");
        let (Some(role), Some(a)) = (role, alloc) else {
            return;
        };
        if role != Role::Manager {
            if draft.min_fault_tolerance.is_some() {
                self.error(at, &field, "applies to manager groups only (it bounds the raft's fault tolerance during a roll); remove it");
            }
            return;
        }
        let n = a.size();
        let converged = quorum::tolerance_when_whole(n);
        let in_place = if spares.is_empty() {
            quorum::tolerance_when_whole(n.saturating_sub(1))
        } else {
            converged
        };
        let fix = if a.is_pets() {
            ", or declare allocation.spare_ids (a temporary member holds it)"
        } else {
            ", or strategy: surge"
        };
        match (draft.min_fault_tolerance, draft.strategy) {
            (Some(m), _) if m > converged => self.error(at, &field, format!("{m} is more than a group of {n} managers tolerates when whole ({converged}); use at most {converged}")),
            (Some(m), Some(Strategy::Replace | Strategy::InPlace)) if m > in_place && n > 1 => self.error(at, &field, format!("{m} cannot be held while a member is replaced in place ({n} managers run at {in_place} then): the roll could never start; use at most {in_place}{fix}")),
            (None, Some(s @ (Strategy::Replace | Strategy::InPlace))) if n > 1 && in_place < converged => {
                let why = if s == Strategy::InPlace {
                    "each member leaves the raft for its update and no spare slot is declared (allocation.spare_ids)"
                } else if a.is_pets() {
                    "each pet is replaced in place (two machines cannot hold one address) and no spare slot is declared (allocation.spare_ids)"
                } else {
                    "each member is replaced in place (strategy: surge would add its successor first)"
                };
                self.warn(at, &field, format!("{why}: the roll runs at fault tolerance {in_place}, below the {converged} of {n} managers; set min_fault_tolerance: {in_place} to accept it"));
            }
            _ => {}
        }
    }

    /// The rules between `update`'s fields, and between them and the
    /// group's role and allocation: each broken one is an error (or a
    /// warning) at the field to change.
    pub(super) fn update_rules(
        &mut self,
        f: &Fields<'_>,
        path: &str,
        role: Option<Role>,
        alloc: Option<&Allocation>,
        spares: &[Slot],
        draft: &UpdateDraft,
    ) {
        let at = |key: &str| f.get(key).map_or(f.pos, Node::pos);
        if let (Some(Strategy::Surge), Some(Allocation::LogicalIds(_))) = (draft.strategy, alloc) {
            self.error(at("strategy"), &join(path, "strategy"), "surge cannot be used with logical_ids: the replacement would need the logical id (address) the old member still holds; use strategy: replace");
        }
        if let (Some(s @ (Strategy::Replace | Strategy::InPlace)), Some(a)) =
            (draft.strategy, alloc)
            && role == Some(Role::Manager)
            && a.size() == 1
        {
            let why = if s == Strategy::InPlace {
                "a single manager cannot be updated in place: its demotion would leave the swarm without a manager; run 3 managers"
            } else if a.is_pets() {
                "a single manager cannot be replaced in place: the swarm would have no manager while its replacement starts; declare 3 logical ids, or use size: 1 with strategy: surge"
            } else {
                "a single manager cannot be replaced in place: the swarm would have no manager while its replacement starts; use strategy: surge (adds the new manager first) or run 3 managers"
            };
            self.error(at("strategy"), &join(path, "strategy"), why);
        }
        self.floor_rules(f, path, role, alloc, spares, draft);
        if role == Some(Role::Manager) && draft.max_in_flight.is_some_and(|m| m != 1) {
            self.error(
                at("max_in_flight"),
                &join(path, "max_in_flight"),
                "managers are always rolled one at a time; remove max_in_flight or set it to 1",
            );
        }
        if role == Some(Role::Manager) && draft.watch.is_some_and(|w| w.is_zero()) {
            self.error(at("watch"), &join(path, "watch"), "managers need a non-zero watch so a rollout never outruns raft stabilisation; try 10s");
        }
        // Without a role, an absent watch has no known default to compare.
        if let (Some(w), Some(t)) = (draft.watch, draft.step_timeout)
            && t <= w
            && (role.is_some() || f.get("watch").is_some())
        {
            self.error(
                at("step_timeout"),
                &join(path, "step_timeout"),
                format!(
                    "must be longer than watch ({}), or every step would time out",
                    format_duration(w)
                ),
            );
        }
        if let (Some(c), Some(a)) = (draft.canaries, alloc)
            && c as usize > a.size()
        {
            self.warn(
                at("canaries"),
                &join(path, "canaries"),
                format!(
                    "{c} canaries in a group of {}: every member will be a canary",
                    a.size()
                ),
            );
        }
    }

    pub(super) fn health(&mut self, node: Option<&Node>, path: &str) -> Option<HealthPolicy> {
        let empty = Node::Map {
            entries: Vec::new(),
            pos: Pos::default(),
        };
        let f = self.fields(node.unwrap_or(&empty), path, HEALTH_FIELDS)?;
        let startup = self.duration(
            f.get("startup_timeout"),
            &join(path, "startup_timeout"),
            defaults::STARTUP_TIMEOUT,
        );
        let unhealthy = self.duration(
            f.get("unhealthy_after"),
            &join(path, "unhealthy_after"),
            defaults::UNHEALTHY_AFTER,
        );
        for (key, d, why) in [
            (
                "startup_timeout",
                startup,
                "a new member needs time to boot and join before it is judged",
            ),
            (
                "unhealthy_after",
                unhealthy,
                "a member would be replaced at its first failed health check",
            ),
        ] {
            if d.is_some_and(|d| d.is_zero()) {
                let at = f.get(key).map_or(f.pos, Node::pos);
                self.error(
                    at,
                    &join(path, key),
                    format!("must be longer than zero: {why}"),
                );
            }
        }
        let max_attempts = f
            .get("max_attempts")
            .map_or(Some(defaults::MAX_ATTEMPTS), |n| {
                self.count(n, &join(path, "max_attempts"), 1)
            });
        let max_unhealthy =
            self.max_unhealthy(f.get("max_unhealthy"), &join(path, "max_unhealthy"));
        let max_age = self.max_age(f.get("max_age"), &join(path, "max_age"));
        Some(HealthPolicy {
            startup_timeout: startup?,
            unhealthy_after: unhealthy?,
            max_attempts: max_attempts?,
            max_unhealthy: max_unhealthy?,
            max_age: max_age?,
        })
    }

    pub(super) fn drain(&mut self, node: Option<&Node>, path: &str) -> Option<DrainPolicy> {
        let empty = Node::Map {
            entries: Vec::new(),
            pos: Pos::default(),
        };
        let f = self.fields(node.unwrap_or(&empty), path, DRAIN_FIELDS)?;
        let timeout = self.duration(
            f.get("timeout"),
            &join(path, "timeout"),
            defaults::DRAIN_TIMEOUT,
        );
        let on_timeout = self.choice(
            f.get("on_timeout"),
            &join(path, "on_timeout"),
            &[
                ("force", OnDrainTimeout::Force),
                ("block", OnDrainTimeout::Block),
            ],
            OnDrainTimeout::Block,
        );
        Some(DrainPolicy {
            timeout: timeout?,
            on_timeout: on_timeout?,
        })
    }

    pub(super) fn rollout(&mut self, node: Option<&Node>, path: &str) -> Option<Option<u64>> {
        let Some(node) = node else { return Some(None) };
        let f = self.fields(node, path, ROLLOUT_FIELDS)?;
        let Some(after) = f.get("after") else {
            return Some(None);
        };
        let text = self.string(after, &join(path, "after"))?;
        match humantime::parse_rfc3339_weak(&text) {
            Ok(t) => Some(Some(
                t.duration_since(std::time::UNIX_EPOCH)
                    .map_or(0, |d| d.as_millis() as u64),
            )),
            Err(_) => {
                self.error(
                    after.pos(),
                    &join(path, "after"),
                    format!("`{text}` is not a time; write RFC 3339, e.g. 2026-12-01T00:00:00Z"),
                );
                None
            }
        }
    }
}
