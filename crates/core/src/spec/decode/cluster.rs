//! The cluster and its groups: `gc`, the meltdown guard's
//! `max_unhealthy`, each group's fields, and the checks across groups.

use super::allocation::AddressRule;
use super::*;

impl Decoder<'_> {
    pub(super) fn cluster(&mut self, root: &Node) -> Option<ClusterSpec> {
        if !matches!(root, Node::Map { .. }) {
            let found = if root.is_null() {
                "the file is empty".to_string()
            } else {
                format!("found {}", root.kind())
            };
            self.error(
                root.pos(),
                "(document)",
                format!("a cluster file is a mapping with a `groups:` list; {found}"),
            );
            return None;
        }
        let top = self.fields(root, "", &["groups", "gc", "control"])?;
        let gc = self.gc(top.get("gc"));
        let control = self.choice(
            top.get("control"),
            "control",
            &Control::CHOICES,
            Control::InCluster,
        );
        let groups_node = self.required(&top, "groups", "", "a list of groups")?;
        let Node::Seq { items, .. } = groups_node else {
            self.error(
                groups_node.pos(),
                "groups",
                format!("expected a list of groups, found {}", groups_node.kind()),
            );
            return None;
        };
        if items.is_empty() {
            self.error(groups_node.pos(), "groups", "declare at least one group");
        }
        if items.len() > MAX_GROUPS {
            self.error(
                groups_node.pos(),
                "groups",
                format!(
                    "declares {} groups, more than the {MAX_GROUPS} a cluster may have",
                    items.len()
                ),
            );
            return None;
        }
        let decoded: Vec<Option<GroupSpec>> = items
            .iter()
            .enumerate()
            .map(|(i, g)| self.group(g, &format!("groups[{i}]")))
            .collect();
        self.cross_group_checks(items, &decoded);
        let groups: Option<Vec<GroupSpec>> = decoded.into_iter().collect();
        let groups = groups?;
        let control = self.control(top.get("control"), control?, &groups);
        Some(ClusterSpec {
            groups,
            gc: gc?,
            control: control?,
        })
    }

    /// `control:` as declared, or its default: in-cluster where a manager
    /// group runs controllers, external where nothing runs inside (plain
    /// groups only). In-cluster control of a cluster without managers is
    /// refused: no controller could ever act for it.
    fn control(
        &mut self,
        node: Option<&Node>,
        declared: Control,
        groups: &[GroupSpec],
    ) -> Option<Control> {
        let swarm = groups.iter().any(|g| g.role != Role::Plain);
        let Some(node) = node else {
            return Some(if swarm {
                Control::InCluster
            } else {
                Control::External
            });
        };
        let managers = groups.iter().any(|g| g.role == Role::Manager);
        if declared == Control::InCluster && !managers {
            self.error(
                node.pos(),
                "control",
                "in-cluster control needs a group with role: manager (its managers run the \
                 controllers that act); without one nothing inside the cluster can act: \
                 declare control: external and run drover controller --external",
            );
            return None;
        }
        Some(declared)
    }

    pub(super) fn gc(&mut self, node: Option<&Node>) -> Option<GcPolicy> {
        let Some(node) = node else {
            return Some(GcPolicy::default());
        };
        let f = self.fields(node, "gc", GC_FIELDS)?;
        let grace = self.duration(
            f.get("orphan_grace"),
            "gc.orphan_grace",
            defaults::ORPHAN_GRACE,
        );
        if grace.is_some_and(|d| d.is_zero()) {
            let at = f.get("orphan_grace").map_or(f.pos, Node::pos);
            self.error(
                at,
                "gc.orphan_grace",
                "must be longer than zero: a machine being made must never be taken for an orphan",
            );
        }
        Some(GcPolicy {
            orphan_grace: grace?,
        })
    }

    /// `max_unhealthy`: a whole number of members (at least 1) or a share `N%` (1-100).
    pub(super) fn max_unhealthy(
        &mut self,
        node: Option<&Node>,
        path: &str,
    ) -> Option<MaxUnhealthy> {
        let Some(node) = node else {
            return Some(MaxUnhealthy::default());
        };
        if let Node::Scalar { value, .. } = node
            && let Some(pct) = value.trim().strip_suffix('%')
        {
            return match pct.trim().parse::<u32>() {
                Ok(p) if (1..=100).contains(&p) => Some(MaxUnhealthy::Percent(p)),
                _ => {
                    self.error(
                        node.pos(),
                        path,
                        format!("`{value}` is not a share from 1% to 100%; write e.g. 50% or a member count"),
                    );
                    None
                }
            };
        }
        if let Node::Scalar {
            value,
            quoted: false,
            ..
        } = node
            && value.trim().parse::<i64>().is_err()
        {
            self.error(
                node.pos(),
                path,
                format!("`{value}` is neither a member count nor a share; write e.g. 2 or 50%"),
            );
            return None;
        }
        self.count(node, path, 1).map(MaxUnhealthy::Count)
    }

    /// Rules that span groups: unique names, unique logical ids, one manager
    /// group, and a warning when workers have no manager group to make their
    /// swarm.
    pub(super) fn cross_group_checks(&mut self, items: &[Node], groups: &[Option<GroupSpec>]) {
        let mut names: HashMap<&str, usize> = HashMap::new();
        let mut ids: HashMap<String, (usize, &str, usize)> = HashMap::new();
        let mut managers: Option<usize> = None;
        for (i, (node, group)) in items.iter().zip(groups).enumerate() {
            let Some(g) = group else { continue };
            let path = format!("groups[{i}]");
            let pos = |key: &str| field_pos(node, &[key]).unwrap_or(node.pos());
            if let Some(first) = names.insert(&g.name, i) {
                self.error(
                    pos("name"),
                    &join(&path, "name"),
                    format!(
                        "duplicate group name `{}` (first used by groups[{first}])",
                        g.name
                    ),
                );
            }
            if g.role == Role::Manager {
                if let Some(first) = managers {
                    self.error(pos("role"), &join(&path, "role"), format!("only one manager group per cluster (groups[{first}] is already the manager group): the swarm has one raft quorum"));
                }
                managers.get_or_insert(i);
            }
            let declared = match &g.allocation {
                Allocation::LogicalIds(slots) => slots.as_slice(),
                Allocation::Size { .. } => &[],
            };
            for (key, slots) in [("logical_ids", declared), ("spare_ids", &g.spares)] {
                for (j, slot) in slots.iter().enumerate() {
                    let id = slot.logical_id.clone().unwrap_or_default();
                    let at = seq_item_pos(node, key, j).unwrap_or(node.pos());
                    if let Some(&(gi, first_key, gj)) = ids.get(&id) {
                        let owner = if gi == i {
                            format!("{first_key}[{gj}] of this group")
                        } else {
                            format!("groups[{gi}].allocation.{first_key}[{gj}]")
                        };
                        self.error(
                            at,
                            &format!("{path}.allocation.{key}[{j}]"),
                            format!("duplicate logical id `{id}` (already used by {owner})"),
                        );
                    } else {
                        ids.insert(id, (i, key, j));
                    }
                }
            }
        }
        self.one_ec2_region(items, groups);
        self.one_group_per_host(items, groups);
        // What applying the file would do is worth saying only of a file
        // that can be applied.
        if !self.diags.iter().any(|d| d.severity == Severity::Error) {
            self.workers_without_managers(items, groups);
        }
    }

    /// Every ec2 group in the region of the first: a controller works in
    /// one region (`--ec2-region`), and reads a group elsewhere as empty
    /// (it would make its machines again and again).
    fn one_ec2_region(&mut self, items: &[Node], groups: &[Option<GroupSpec>]) {
        let mut first: Option<(usize, &str)> = None;
        for (i, (node, group)) in items.iter().zip(groups).enumerate() {
            let Some(region) = group
                .as_ref()
                .filter(|g| g.instance.provider == EC2_PROVIDER)
                .and_then(|g| g.instance.properties.get("region")?.as_str())
            else {
                continue;
            };
            match first {
                None => first = Some((i, region)),
                Some((f, r)) if r != region => self.error(
                    field_pos(node, &["instance", "properties", "region"]).unwrap_or(node.pos()),
                    &format!("groups[{i}].instance.properties.region"),
                    format!("`{region}` is not groups[{f}]'s region `{r}`: a controller works in one region (--ec2-region), so every ec2 group of a cluster is in the same one; use `{r}`, or run the other region as a cluster of its own"),
                ),
                Some(_) => {}
            }
        }
    }

    /// Only a manager group makes a swarm: without one, the planner adds
    /// no worker until a swarm with a leader exists (it waits, saying
    /// "waiting for the swarm to have a leader"). Plain groups need no swarm.
    pub(super) fn workers_without_managers(
        &mut self,
        items: &[Node],
        groups: &[Option<GroupSpec>],
    ) {
        let role = |g: &Option<GroupSpec>| g.as_ref().map(|g| g.role);
        if groups.iter().any(|g| role(g) == Some(Role::Manager)) {
            return;
        }
        if let Some(i) = groups.iter().position(|g| role(g) == Some(Role::Worker)) {
            let node = &items[i];
            self.warn(
                field_pos(node, &["role"]).unwrap_or(node.pos()),
                &format!("groups[{i}].role"),
                "no manager group: no worker is added until a swarm with a leader exists, and only a manager group makes one (one already stored, which apply keeps, is enough); add a manager group",
            );
        }
    }

    /// The group's `name`: 1-63 lowercase letters, digits and dashes.
    fn group_name(&mut self, f: &Fields<'_>, path: &str) -> Option<String> {
        self.required(f, "name", path, "the group's name")
            .and_then(|n| {
                let name = self.string(n, &join(path, "name"))?;
                let ok = crate::spec::is_name(&name);
                if !ok {
                    self.error(
                        n.pos(),
                        &join(path, "name"),
                        format!(
                            "`{name}` is not a valid name: use {}",
                            crate::spec::NAME_RULE
                        ),
                    );
                }
                ok.then_some(name)
            })
    }

    /// The group's `role`.
    fn group_role(&mut self, f: &Fields<'_>, path: &str) -> Option<Role> {
        let role_node = self.required(f, "role", path, "role: manager, worker or plain");
        role_node.and_then(|n| {
            self.choice(
                Some(n),
                &join(path, "role"),
                &[
                    ("manager", Role::Manager),
                    ("worker", Role::Worker),
                    ("plain", Role::Plain),
                ],
                Role::Plain,
            )
        })
    }

    /// What the group's provider asks of its allocation: pets' (and
    /// spare slots') ids that are addresses it accepts, and its properties,
    /// by the provider's own rule. Each part is checked whatever the
    /// others' problems.
    fn provider_rules(
        &mut self,
        node: &Node,
        path: &str,
        allocation: &Option<Allocation>,
        spares: Option<&[Slot]>,
        instance: &Option<InstanceSpec>,
    ) {
        let Some(inst) = instance else { return };
        if let Some(addresses) = AddressRule::of(&inst.provider) {
            if let Some(Allocation::LogicalIds(slots)) = allocation {
                self.address_ids(node, path, "logical_ids", slots, addresses);
            }
            self.address_ids(
                node,
                path,
                "spare_ids",
                spares.unwrap_or_default(),
                addresses,
            );
        }
        if let Some(alloc) = allocation {
            self.provider_properties(node, path, alloc, inst);
            if inst.provider == SSH_PROVIDER {
                self.ssh_inventory(node, path, alloc, spares.unwrap_or_default(), inst);
            }
        }
    }

    pub(super) fn group(&mut self, node: &Node, path: &str) -> Option<GroupSpec> {
        const KNOWN: &[&str] = &[
            "name",
            "role",
            "allocation",
            "instance",
            "flavor",
            "update",
            "health",
            "drain",
            "rollout",
            "hooks",
        ];
        // Fields of each section, so a field written one level too high
        // (`max_in_flight:` beside `name:`) is told where it belongs.
        const NESTED: &[(&str, &[&str])] = &[
            ("allocation", ALLOCATION_FIELDS),
            ("instance", INSTANCE_FIELDS),
            ("flavor", FLAVOR_FIELDS),
            ("update", UPDATE_FIELDS),
            ("health", HEALTH_FIELDS),
            ("drain", DRAIN_FIELDS),
            ("rollout", ROLLOUT_FIELDS),
            ("hooks", hooks::HOOKS_FIELDS),
        ];
        let f = self.fields_nested(node, path, KNOWN, NESTED)?;
        let name = self.group_name(&f, path);
        let role = self.group_role(&f, path);
        let allocation_node =
            self.required(&f, "allocation", path, "allocation: size or logical_ids");
        let allocation =
            allocation_node.and_then(|n| self.allocation(n, &join(path, "allocation"), role));
        let spares = allocation_node
            .and_then(|n| self.spare_ids(n, &join(path, "allocation"), role, allocation.as_ref()));
        let instance = self
            .required(&f, "instance", path, "instance: provider and properties")
            .and_then(|n| self.instance(n, &join(path, "instance")));
        self.provider_rules(node, path, &allocation, spares.as_deref(), &instance);
        // Decoded even when the role is unknown, so a mistyped role hides
        // none of the group's other problems (role-specific rules wait for it).
        let provider = instance.as_ref().map(|i| i.provider.as_str());
        let flavor = self.flavor(
            f.get("flavor"),
            &join(path, "flavor"),
            (role, provider),
            f.pos,
        );
        let update = self.update(
            f.get("update"),
            &join(path, "update"),
            role,
            allocation
                .as_ref()
                .map(|a| (a, spares.as_deref().unwrap_or_default())),
            f.pos,
        );
        if let (Some(u), Some(p)) = (&update, provider) {
            self.in_place_provider(node, path, p, u);
        }
        let health = self.health(f.get("health"), &join(path, "health"));
        let drain = self.drain(f.get("drain"), &join(path, "drain"));
        let rollout_after = self.rollout(f.get("rollout"), &join(path, "rollout"));
        let hooks = self.hooks(f.get("hooks"), &join(path, "hooks"));
        self.hook_deadlines(node, path);
        self.lifetime_rules(node, path, role, allocation.as_ref());
        if let Some(i) = &instance {
            self.carried_labels(node, path, i);
        }
        Some(GroupSpec {
            name: name?,
            role: role?,
            allocation: allocation?,
            spares: spares?,
            instance: instance?,
            flavor: flavor?,
            update: update?,
            health: health?,
            drain: drain?,
            rollout_after: rollout_after?,
            hooks: hooks?,
        })
    }
}
