//! Positioned tree → resolved [`ClusterSpec`], reporting every problem.
//!
//! The decoder is the schema: each `decode_*` function lists the fields it
//! knows, rejects the rest (a typo must never be silently ignored), fills in
//! defaults and records a [`Diagnostic`] per problem, then carries on so the
//! operator sees all of them at once.

use super::diag::{Diagnostic, Severity};
use super::*;
mod hooks;
mod release;

use crate::budget::{Amount, ServiceBudget};
use crate::quorum;
use crate::template::{self, BootContext};
use crate::yaml::{self, Node, Pos};
use std::collections::HashMap;

mod time;

/// Result of reading a cluster file.
#[derive(Debug, Clone)]
pub struct Loaded {
    /// The resolved spec, present only when there is no error.
    pub spec: Option<ClusterSpec>,
    /// Every error and warning, in file order.
    pub diagnostics: Vec<Diagnostic>,
}

/// Reads a cluster file as every command reading an operator's file does:
/// all of [`parse_str`]'s rules, and each group's provider must be one
/// drover ships ([`PROVIDERS`]), so a misspelt provider is caught by
/// `validate` instead of leaving a group that nothing ever provisions.
fn load(text: &str) -> Loaded {
    decode_with(text, PROVIDERS)
}

/// [`load`] for a file's raw bytes: text that is not UTF-8 is one error at
/// the line and column of its first invalid byte, so the operator can find
/// it (a Latin-1 `é` pasted into a comment is the usual cause).
pub fn load_bytes(bytes: &[u8]) -> Loaded {
    match std::str::from_utf8(bytes) {
        Ok(text) => load(text),
        Err(e) => {
            let valid = &bytes[..e.valid_up_to()];
            let line = 1 + valid.iter().filter(|&&b| b == b'\n').count();
            let line_start = valid.iter().rposition(|&b| b == b'\n').map_or(0, |i| i + 1);
            // The valid prefix is UTF-8: the column counts characters.
            let col = 1 + String::from_utf8_lossy(&valid[line_start..])
                .chars()
                .count();
            let message = format!(
                "not UTF-8 text: byte 0x{:02x} (offset {}) is not UTF-8; save the file as UTF-8",
                bytes[e.valid_up_to()],
                e.valid_up_to()
            );
            Loaded {
                spec: None,
                diagnostics: vec![Diagnostic {
                    pos: Pos { line, col },
                    path: "(document)".into(),
                    severity: Severity::Error,
                    message,
                }],
            }
        }
    }
}

/// Reads a cluster file (YAML or JSON: JSON is read as YAML, so positions
/// work for both) with every rule except the provider names: for engines
/// and tests that wire providers of their own names. Operators' files go
/// through [`load_bytes`].
pub fn parse_str(text: &str) -> Loaded {
    decode(text, Decoder::default())
}

/// Decodes `text`, checking provider names against `providers`.
fn decode_with(text: &str, providers: &[&str]) -> Loaded {
    decode(
        text,
        Decoder {
            providers: Some(providers),
            ..Decoder::default()
        },
    )
}

/// Reads the cluster-file form of a resolved spec about to be committed
/// ([`super::commit`]): as [`load_bytes`] (providers drover ships included: an
/// edited export naming a misspelt one is refused at import), except that
/// `size: 0` is accepted. That is a retired group, which `destroy` and
/// `apply --prune` commit so the planner retires its members one safe step
/// at a time, and which no cluster file may declare.
pub(super) fn parse_committed(text: &str) -> Loaded {
    decode(
        text,
        Decoder {
            retired_ok: true,
            providers: Some(PROVIDERS),
            ..Decoder::default()
        },
    )
}

fn decode(text: &str, mut dec: Decoder<'_>) -> Loaded {
    let spec = match yaml::parse(text) {
        Ok(root) => dec.cluster(&root),
        Err(e) => {
            dec.error(
                e.pos,
                "(document)",
                format!("not valid YAML or JSON: {}", e.message),
            );
            None
        }
    };
    dec.diags.sort();
    let failed = dec.diags.iter().any(|d| d.severity == Severity::Error);
    Loaded {
        spec: if failed { None } else { spec },
        diagnostics: dec.diags,
    }
}

#[derive(Default)]
struct Decoder<'p> {
    diags: Vec<Diagnostic>,
    /// The provider names a group may use; `None` accepts any.
    providers: Option<&'p [&'p str]>,
    /// `size: 0` (a retired group) is accepted: see [`parse_committed`].
    retired_ok: bool,
}

/// `update`'s fields as read, each `None` where it was refused.
struct UpdateDraft {
    strategy: Option<Strategy>,
    /// `None` when absent (or unreadable: already reported).
    min_fault_tolerance: Option<u32>,
    max_in_flight: Option<u32>,
    canaries: Option<u32>,
    watch: Option<Duration>,
    step_timeout: Option<Duration>,
}

/// A mapping's fields, after the unknown ones were reported.
struct Fields<'a> {
    entries: &'a [(String, Pos, Node)],
    pos: Pos,
}

impl<'a> Fields<'a> {
    /// True when the mapping uses a YAML merge key (`<<: *anchor`), which
    /// is reported once: the fields it would bring are not called missing.
    fn merges(&self) -> bool {
        self.entries.iter().any(|(k, _, _)| k == MERGE_KEY)
    }

    /// The value of `key`; an explicit `null` counts as absent.
    fn get(&self, key: &str) -> Option<&'a Node> {
        self.entries
            .iter()
            .find(|(k, _, v)| k == key && !v.is_null())
            .map(|(_, _, v)| v)
    }
}

/// The path of `key` under `path`; an empty key is written `""`, so no
/// finding has an empty path.
fn join(path: &str, key: &str) -> String {
    let key = if key.is_empty() { "\"\"" } else { key };
    if path.is_empty() {
        key.to_string()
    } else {
        format!("{path}.{key}")
    }
}

/// Levenshtein distance, for "did you mean" hints on unknown fields.
fn distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut prev = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let cur = row[j + 1];
            row[j + 1] = (prev + usize::from(ca != *cb)).min(row[j] + 1).min(cur + 1);
            prev = cur;
        }
    }
    row[b.len()]
}

/// The candidate (a field name, possibly `section.field`) that `key` most
/// likely misspells: a small edit distance relative to its length, or one
/// containing the other (`labels` for `engine_labels`).
fn closest(key: &str, candidates: impl Iterator<Item = String>) -> Option<String> {
    candidates
        .filter_map(|c| {
            let field = c.rsplit('.').next().unwrap_or(&c);
            let d = distance(key, field);
            let close = d <= 3 && 2 * d <= key.len().max(field.len());
            let contains = key.len() >= 4 && (field.contains(key) || key.contains(field));
            (close || contains).then_some((d, c))
        })
        .min()
        .map(|(_, c)| c)
}

impl Decoder<'_> {
    fn error(&mut self, pos: Pos, path: &str, message: impl Into<String>) {
        self.push(pos, path, Severity::Error, message.into());
    }

    fn warn(&mut self, pos: Pos, path: &str, message: impl Into<String>) {
        self.push(pos, path, Severity::Warning, message.into());
    }

    fn push(&mut self, pos: Pos, path: &str, severity: Severity, message: String) {
        self.diags.push(Diagnostic {
            pos,
            path: path.to_string(),
            severity,
            message,
        });
    }

    /// Opens a mapping and reports each key not in `known`.
    fn fields<'a>(&mut self, node: &'a Node, path: &str, known: &[&str]) -> Option<Fields<'a>> {
        self.fields_nested(node, path, known, &[])
    }

    /// Like [`Self::fields`]; an unknown key that is a field of one of the
    /// `nested` sections gets a hint naming where it belongs.
    fn fields_nested<'a>(
        &mut self,
        node: &'a Node,
        path: &str,
        known: &[&str],
        nested: &[(&str, &[&str])],
    ) -> Option<Fields<'a>> {
        let Node::Map { entries, pos } = node else {
            self.error(
                node.pos(),
                path,
                format!("expected a mapping, found {}", node.kind()),
            );
            return None;
        };
        for (key, kpos, _) in entries {
            if known.contains(&key.as_str()) {
                continue;
            }
            if key == MERGE_KEY {
                self.error(
                    *kpos,
                    &join(path, key),
                    "merge keys (`<<`) are not supported: write the fields out in this mapping",
                );
                continue;
            }
            let hint = closest(key, known.iter().map(|k| k.to_string()))
                .or_else(|| {
                    closest(
                        key,
                        nested.iter().flat_map(|(section, fields)| {
                            fields.iter().map(move |f| format!("{section}.{f}"))
                        }),
                    )
                })
                .map(|k| format!("; did you mean `{k}`?"))
                .unwrap_or_else(|| format!("; known fields: {}", known.join(", ")));
            self.error(
                *kpos,
                &join(path, key),
                format!("unknown field `{key}`{hint}"),
            );
        }
        Some(Fields { entries, pos: *pos })
    }

    fn required<'a>(
        &mut self,
        f: &Fields<'a>,
        key: &str,
        path: &str,
        what: &str,
    ) -> Option<&'a Node> {
        let v = f.get(key);
        if v.is_none() && !f.merges() {
            self.error(f.pos, &join(path, key), format!("missing: {what}"));
        }
        v
    }

    fn string(&mut self, node: &Node, path: &str) -> Option<String> {
        match node {
            Node::Scalar { value, .. } if !node.is_null() => Some(value.clone()),
            _ => {
                self.error(
                    node.pos(),
                    path,
                    format!("expected a string, found {}", node.kind()),
                );
                None
            }
        }
    }

    /// A whole number from `min` to [`MAX_COUNT`].
    fn count(&mut self, node: &Node, path: &str, min: u32) -> Option<u32> {
        let parsed = match node {
            Node::Scalar {
                value,
                quoted: false,
                ..
            } => value.parse::<i64>().ok().or_else(|| {
                // Digits too many for any integer: too large, not "not a number".
                let digits = value.strip_prefix('-').unwrap_or(value);
                (!digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit())).then_some(
                    if value.starts_with('-') {
                        i64::MIN
                    } else {
                        i64::MAX
                    },
                )
            }),
            _ => None,
        };
        match parsed {
            Some(n) if n >= i64::from(min) && n <= i64::from(MAX_COUNT) => Some(n as u32),
            Some(n) if n < i64::from(min) => {
                let found = node_text(node);
                self.error(
                    node.pos(),
                    path,
                    format!("must be at least {min}, found {found}"),
                );
                None
            }
            Some(_) => {
                let found = node_text(node);
                self.error(
                    node.pos(),
                    path,
                    format!(
                        "must be at most {MAX_COUNT} (the largest group drover manages), found {found}"
                    ),
                );
                None
            }
            None => {
                let found = match node {
                    Node::Scalar {
                        value,
                        quoted: true,
                        ..
                    } if value.trim().parse::<i64>().is_ok() => {
                        format!("found the string \"{value}\"; remove the quotes")
                    }
                    Node::Scalar { value, .. } if !node.is_null() => format!("found `{value}`"),
                    _ => format!("found {}", node.kind()),
                };
                self.error(
                    node.pos(),
                    path,
                    format!("expected a whole number, {found}"),
                );
                None
            }
        }
    }

    fn duration(&mut self, node: Option<&Node>, path: &str, default: Duration) -> Option<Duration> {
        let Some(node) = node else {
            return Some(default);
        };
        let text = self.string(node, path)?;
        match parse_duration(&text) {
            Ok(d) => Some(d),
            Err(e) => {
                self.error(node.pos(), path, format!("`{text}` is not a duration: {e}"));
                None
            }
        }
    }

    fn choice<T: Copy>(
        &mut self,
        node: Option<&Node>,
        path: &str,
        options: &[(&str, T)],
        default: T,
    ) -> Option<T> {
        let Some(node) = node else {
            return Some(default);
        };
        let text = self.string(node, path)?;
        if let Some((_, v)) = options.iter().find(|(name, _)| *name == text) {
            return Some(*v);
        }
        let names: Vec<&str> = options.iter().map(|(n, _)| *n).collect();
        self.error(
            node.pos(),
            path,
            format!("`{text}` is not one of: {}", names.join(", ")),
        );
        None
    }

    fn cluster(&mut self, root: &Node) -> Option<ClusterSpec> {
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
        let top = self.fields(root, "", &["groups", "gc"])?;
        let gc = self.gc(top.get("gc"));
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
        Some(ClusterSpec {
            groups: groups?,
            gc: gc?,
        })
    }

    fn gc(&mut self, node: Option<&Node>) -> Option<GcPolicy> {
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
    fn max_unhealthy(&mut self, node: Option<&Node>, path: &str) -> Option<MaxUnhealthy> {
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
    fn cross_group_checks(&mut self, items: &[Node], groups: &[Option<GroupSpec>]) {
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
        // What applying the file would do is worth saying only of a file
        // that can be applied.
        if !self.diags.iter().any(|d| d.severity == Severity::Error) {
            self.workers_without_managers(items, groups);
        }
    }

    /// Only a manager group makes a swarm: without one, the planner adds
    /// no worker until a swarm with a leader exists (it waits, saying
    /// "waiting for the swarm to have a leader"). Plain groups need no swarm.
    fn workers_without_managers(&mut self, items: &[Node], groups: &[Option<GroupSpec>]) {
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

    fn group(&mut self, node: &Node, path: &str) -> Option<GroupSpec> {
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
        let name = self.required(&f, "name", path, "the group's name").and_then(|n| {
            let name = self.string(n, &join(path, "name"))?;
            let ok = !name.is_empty()
                && name.len() <= 63
                && name.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
                && !name.starts_with('-');
            if !ok {
                self.error(n.pos(), &join(path, "name"), format!("`{name}` is not a valid name: use 1-63 lowercase letters, digits and dashes, not starting with a dash"));
            }
            ok.then_some(name)
        });
        let role_node = self.required(&f, "role", path, "role: manager, worker or plain");
        let role = role_node.and_then(|n| {
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
        });
        let allocation_node =
            self.required(&f, "allocation", path, "allocation: size or logical_ids");
        let allocation =
            allocation_node.and_then(|n| self.allocation(n, &join(path, "allocation"), role));
        let spares = allocation_node
            .and_then(|n| self.spare_ids(n, &join(path, "allocation"), role, allocation.as_ref()));
        let instance = self
            .required(&f, "instance", path, "instance: provider and properties")
            .and_then(|n| self.instance(n, &join(path, "instance")));
        if let (Some(Allocation::LogicalIds(slots)), Some(inst)) = (&allocation, &instance)
            && let Some(addresses) = AddressRule::of(&inst.provider)
        {
            self.address_ids(node, path, "logical_ids", slots, addresses);
            self.address_ids(
                node,
                path,
                "spare_ids",
                spares.as_deref().unwrap_or_default(),
                addresses,
            );
        }
        if let (Some(alloc), Some(inst)) = (&allocation, &instance)
            && inst.provider == EC2_PROVIDER
        {
            self.ec2_properties(node, path, alloc, inst);
        }
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
        let health = self.health(f.get("health"), &join(path, "health"));
        let drain = self.drain(f.get("drain"), &join(path, "drain"));
        let rollout_after = self.rollout(f.get("rollout"), &join(path, "rollout"));
        let hooks = self.hooks(f.get("hooks"), &join(path, "hooks"));
        if let (Some(h), Some(u)) = (&hooks, &update) {
            self.hook_deadlines(node, path, h, u.step_timeout);
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

    /// The ec2 provider's properties, checked offline (the same type the
    /// provider launches from): each problem at the properties' position.
    fn ec2_properties(
        &mut self,
        group: &Node,
        path: &str,
        alloc: &Allocation,
        inst: &InstanceSpec,
    ) {
        let zones: Vec<Option<&str>> = match alloc {
            Allocation::Size { zones, .. } if zones.is_empty() => vec![None],
            Allocation::Size { zones, .. } => zones.iter().map(|z| Some(z.as_str())).collect(),
            Allocation::LogicalIds(slots) => slots.iter().map(|s| s.zone.as_deref()).collect(),
        };
        let Err(problems) = ec2::Ec2Properties::parse(&inst.properties, &zones) else {
            return;
        };
        for p in problems {
            // At the field's own node when it is there (`.subnets.a`,
            // `.security_groups[0]`: its key's), else at the properties.
            let key = p.field.trim_start_matches('.');
            let key = key.split(['.', '[']).next().unwrap_or_default();
            let pos = field_pos(group, &["instance", "properties", key])
                .or_else(|| field_pos(group, &["instance", "properties"]))
                .unwrap_or(group.pos());
            self.error(
                pos,
                &format!("{path}.instance.properties{}", p.field),
                p.problem,
            );
        }
    }

    /// Providers whose logical ids are addresses check them here (of
    /// `key`: `logical_ids` or `spare_ids`), so `validate` catches an id
    /// no machine could hold.
    fn address_ids(
        &mut self,
        group: &Node,
        path: &str,
        key: &str,
        slots: &[Slot],
        rule: AddressRule,
    ) {
        for (j, slot) in slots.iter().enumerate() {
            let id = slot.logical_id.as_deref().unwrap_or_default();
            let usable = match rule {
                AddressRule::PrivateIp => ec2::private_ip(id).is_some(),
                _ => id
                    .parse::<std::net::Ipv4Addr>()
                    .is_ok_and(|a| a.is_loopback() == (rule == AddressRule::Loopback)),
            };
            if !usable {
                self.error(
                    seq_item_pos(group, key, j).unwrap_or(group.pos()),
                    &format!("{path}.allocation.{key}[{j}]"),
                    rule.problem(id),
                );
            }
        }
    }

    fn allocation(&mut self, node: &Node, path: &str, role: Option<Role>) -> Option<Allocation> {
        let f = self.fields(node, path, ALLOCATION_FIELDS)?;
        let alloc = match (f.get("size"), f.get("logical_ids")) {
            (Some(_), Some(ids)) => {
                self.error(
                    ids.pos(),
                    &join(path, "logical_ids"),
                    "give either size or logical_ids, not both",
                );
                None
            }
            (None, None) => {
                self.error(f.pos, path, "missing: size (cattle) or logical_ids (pets)");
                None
            }
            (Some(size), None) => {
                let min = if self.retired_ok { 0 } else { 1 };
                let size = self.count(size, &join(path, "size"), min);
                let zones = match f.get("zones") {
                    None => Some(Vec::new()),
                    Some(z) => self.zones(z, &join(path, "zones")),
                };
                Some(Allocation::Size {
                    size: size?,
                    zones: zones?,
                })
            }
            (None, Some(ids)) => {
                if let Some(z) = f.get("zones") {
                    self.error(z.pos(), &join(path, "zones"), "zones apply to size; with logical_ids give each id its own zone ({id: ..., zone: ...})");
                }
                self.logical_ids(ids, &join(path, "logical_ids"))
                    .map(Allocation::LogicalIds)
            }
        }?;
        if role == Some(Role::Manager) {
            let n = alloc.size();
            let (key, at) = match f.get("size") {
                Some(n) => ("size", n.pos()),
                None => ("logical_ids", f.get("logical_ids").map_or(f.pos, Node::pos)),
            };
            let path = &join(path, key);
            if n == 0 {
                // Retired (committed state only): nothing left to count.
            } else if n % 2 == 0 {
                self.error(at, path, format!("a manager group needs an odd number of members (1, 3, 5 or 7): {n} managers tolerate no more failures than {} and add raft traffic", n - 1));
            } else if n == 1 {
                self.warn(at, path, "one manager tolerates no failure: losing it loses the swarm's control plane; use 3 in production");
            } else if n > 7 {
                self.warn(
                    at,
                    path,
                    format!("{n} managers slow every raft write; Docker recommends at most 7"),
                );
            }
        }
        Some(alloc)
    }

    /// `allocation.spare_ids`: slots (written as `logical_ids` are) for the
    /// temporary member a pets manager group rolls with. Only pets managers
    /// have a use for one: cattle surge instead, and workers hold no quorum.
    fn spare_ids(
        &mut self,
        node: &Node,
        path: &str,
        role: Option<Role>,
        alloc: Option<&Allocation>,
    ) -> Option<Vec<Slot>> {
        let Node::Map { entries, .. } = node else {
            return Some(Vec::new());
        };
        let Some((_, _, ids)) = entries.iter().find(|(k, _, _)| k == "spare_ids") else {
            return Some(Vec::new());
        };
        let path = join(path, "spare_ids");
        let slots = self.logical_ids(ids, &path)?;
        match (role, alloc) {
            (Some(Role::Manager), Some(Allocation::Size { .. })) => self.error(ids.pos(), &path, "spare slots serve pets (logical_ids); cattle managers add each successor before removing its predecessor (strategy: surge); remove spare_ids"),
            (Some(Role::Worker | Role::Plain), _) => self.error(ids.pos(), &path, "spare slots hold a manager group's fault tolerance during its roll; workers and plain machines hold no quorum: remove spare_ids"),
            _ => {}
        }
        Some(slots)
    }

    fn string_list(&mut self, node: &Node, path: &str) -> Option<Vec<String>> {
        let Node::Seq { items, .. } = node else {
            self.error(
                node.pos(),
                path,
                format!("expected a list, found {}", node.kind()),
            );
            return None;
        };
        let out: Vec<Option<String>> = items
            .iter()
            .enumerate()
            .map(|(i, n)| self.string(n, &format!("{path}[{i}]")))
            .collect();
        out.into_iter().collect()
    }

    /// `zones`: a list of distinct, non-empty names (a zone listed twice
    /// would silently get twice its share of members).
    fn zones(&mut self, node: &Node, path: &str) -> Option<Vec<String>> {
        let zones = self.string_list(node, path)?;
        let Node::Seq { items, .. } = node else {
            return None;
        };
        let mut ok = true;
        for (i, (zone, item)) in zones.iter().zip(items).enumerate() {
            let p = format!("{path}[{i}]");
            if let Some(first) = zones[..i].iter().position(|z| z == zone) {
                self.error(
                    item.pos(),
                    &p,
                    format!(
                        "duplicate zone `{zone}` (already {path}[{first}]): list each zone once"
                    ),
                );
                ok = false;
            } else {
                ok &= self.zone_name(zone, item.pos(), &p);
            }
        }
        ok.then_some(zones)
    }

    /// True when `zone` is a usable zone name; else reports it.
    fn zone_name(&mut self, zone: &str, pos: Pos, path: &str) -> bool {
        let ok = !zone.trim().is_empty();
        if !ok {
            self.error(
                pos,
                path,
                "a zone name must not be empty; name the zone or leave it out",
            );
        }
        ok
    }

    fn logical_ids(&mut self, node: &Node, path: &str) -> Option<Vec<Slot>> {
        let Node::Seq { items, .. } = node else {
            self.error(
                node.pos(),
                path,
                format!("expected a list of logical ids, found {}", node.kind()),
            );
            return None;
        };
        if items.is_empty() {
            self.error(
                node.pos(),
                path,
                "declare at least one logical id (or use size)",
            );
            return None;
        }
        let slots: Vec<Option<Slot>> = items
            .iter()
            .enumerate()
            .map(|(i, item)| {
                let p = format!("{path}[{i}]");
                let (id, zone) = match item {
                    Node::Map { .. } => {
                        let f = self.fields(item, &p, &["id", "zone"])?;
                        let id = self.required(&f, "id", &p, "the logical id").and_then(|n| self.string(n, &join(&p, "id")));
                        let zone = f.get("zone").map(|z| {
                            let zp = join(&p, "zone");
                            self.string(z, &zp).filter(|name| self.zone_name(name, z.pos(), &zp))
                        });
                        (id?, zone.map_or(Some(None), |z| z.map(Some))?)
                    }
                    _ => (self.string(item, &p)?, None),
                };
                if id.is_empty() || id.chars().any(char::is_whitespace) {
                    self.error(item.pos(), &p, format!("`{id}` is not a usable logical id: it must be non-empty and contain no spaces"));
                    return None;
                }
                Some(Slot { logical_id: Some(id), zone })
            })
            .collect();
        slots.into_iter().collect()
    }

    fn instance(&mut self, node: &Node, path: &str) -> Option<InstanceSpec> {
        let f = self.fields(node, path, INSTANCE_FIELDS)?;
        let provider = self
            .required(&f, "provider", path, "the provider name (e.g. local)")
            .and_then(|n| {
                let path = join(path, "provider");
                let name = self.string(n, &path)?;
                self.known_provider(&name, n.pos(), &path).then_some(name)
            });
        let properties = match f.get("properties") {
            None => Some(serde_json::Value::Object(Default::default())),
            Some(p @ Node::Map { .. }) => Some(p.to_json()),
            Some(p) => {
                self.error(
                    p.pos(),
                    &join(path, "properties"),
                    format!("expected a mapping, found {}", p.kind()),
                );
                None
            }
        };
        let provider = provider?;
        let plugin = self.plugin_address(&f, &provider, path)?;
        Some(InstanceSpec {
            provider,
            properties: properties?,
            plugin,
        })
    }

    /// `instance.plugin`: required with `provider: plugin`, where it must
    /// be a usable `NAME[/TYPE]`; refused with any other provider.
    fn plugin_address(
        &mut self,
        f: &Fields<'_>,
        provider: &str,
        path: &str,
    ) -> Option<Option<String>> {
        let at = join(path, "plugin");
        match (f.get("plugin"), provider == PLUGIN_PROVIDER) {
            (None, false) => Some(None),
            (None, true) => {
                self.error(
                    f.pos,
                    &at,
                    "`provider: plugin` needs `plugin: NAME[/TYPE]`, the plugin's socket name in the plugins directory".to_string(),
                );
                None
            }
            (Some(n), false) => {
                self.error(
                    n.pos(),
                    &at,
                    format!("only `provider: plugin` takes a plugin; this group's provider is `{provider}`"),
                );
                None
            }
            (Some(n), true) => {
                let name = self.string(n, &at)?;
                match PluginAddress::parse(&name) {
                    Ok(_) => Some(Some(name)),
                    Err(e) => {
                        self.error(n.pos(), &at, e.to_string());
                        None
                    }
                }
            }
        }
    }

    /// True when `name` is a provider this decoder accepts; else reports it.
    fn known_provider(&mut self, name: &str, pos: Pos, path: &str) -> bool {
        let Some(known) = self.providers else {
            return true;
        };
        if known.contains(&name) {
            return true;
        }
        let hint = closest(name, known.iter().map(|k| k.to_string()))
            .map(|k| format!("did you mean `{k}`? "))
            .unwrap_or_default();
        self.error(
            pos,
            path,
            format!(
                "`{name}` is not a provider drover knows; {hint}the providers are: {}",
                known.join(", ")
            ),
        );
        false
    }

    fn flavor(
        &mut self,
        node: Option<&Node>,
        path: &str,
        (role, provider): (Option<Role>, Option<&str>),
        group_pos: Pos,
    ) -> Option<FlavorSpec> {
        let expected = role.map(|r| {
            if r == Role::Plain {
                FlavorKind::Vanilla
            } else {
                FlavorKind::Swarm
            }
        });
        let empty = Node::Map {
            entries: Vec::new(),
            pos: group_pos,
        };
        let f = self.fields(node.unwrap_or(&empty), path, FLAVOR_FIELDS)?;
        let kind = self.choice(
            f.get("kind"),
            &join(path, "kind"),
            &[
                ("swarm", FlavorKind::Swarm),
                ("vanilla", FlavorKind::Vanilla),
            ],
            expected.unwrap_or(FlavorKind::Swarm),
        );
        // An unknown kind hides none of the section's other problems.
        if let (Some(k), Some(expected), Some(role)) = (kind, expected, role)
            && k != expected
        {
            let at = f.get("kind").map_or(f.pos, Node::pos);
            let want = if expected == FlavorKind::Swarm {
                "swarm"
            } else {
                "vanilla"
            };
            self.error(
                at,
                &join(path, "kind"),
                format!(
                    "role {} needs flavor kind `{want}`; set kind: {want} or leave kind out",
                    role.as_str()
                ),
            );
        }
        let boot_script = match f.get("boot_script") {
            None => {
                role.map(|r| template::default_boot_script(provider.unwrap_or(""), r).to_string())
            }
            Some(n) => self.string(n, &join(path, "boot_script")),
        };
        let release = self.release(f.get("drover"), &join(path, "drover"), role);
        let mut rendered = true;
        for init in [false, true] {
            let Some(script) = &boot_script else { break };
            let ctx = BootContext {
                init,
                ..BootContext::example(role.unwrap_or(Role::Worker))
            }
            .with_release(release.as_ref().and_then(Option::as_ref));
            if let Err(e) = template::render(script, &ctx) {
                // At the failing expression itself when the script is a
                // literal block, else at the script.
                let at = f.get("boot_script").map_or(f.pos, |n| {
                    e.at.and_then(|(line, col)| n.inner_pos(line, col))
                        .unwrap_or(n.pos())
                });
                self.error(
                    at,
                    &join(path, "boot_script"),
                    if e.undefined {
                        format!("template does not render: {e}; templates may use only {TEMPLATE_VARIABLES} (the join token is never a variable: the script reads $DROVER_JOIN_TOKEN)")
                    } else {
                        format!("template does not render: {e}")
                    },
                );
                rendered = false;
                break;
            }
        }
        let labels = match f.get("engine_labels") {
            None => Some(BTreeMap::new()),
            Some(n) => self.labels(n, &join(path, "engine_labels")),
        };
        (rendered && kind == expected).then_some(())?;
        Some(FlavorSpec {
            kind: expected?,
            boot_script: boot_script?,
            engine_labels: labels?,
            drover: release?,
        })
    }

    fn labels(&mut self, node: &Node, path: &str) -> Option<BTreeMap<String, String>> {
        let Node::Map { entries, .. } = node else {
            self.error(
                node.pos(),
                path,
                format!("expected a mapping of label: value, found {}", node.kind()),
            );
            return None;
        };
        let mut out = BTreeMap::new();
        let mut ok = true;
        for (k, kpos, v) in entries {
            let p = join(path, k);
            if k.starts_with("drover.") {
                self.error(
                    *kpos,
                    &p,
                    "labels starting with `drover.` are reserved for drover's own bookkeeping",
                );
                ok = false;
            } else if let Node::Scalar { value, .. } = v {
                out.insert(k.clone(), value.clone());
            } else {
                self.error(
                    v.pos(),
                    &p,
                    format!("label values must be strings, found {}", v.kind()),
                );
                ok = false;
            }
        }
        ok.then_some(out)
    }

    fn update(
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
        let cattle_managers =
            role == Some(Role::Manager) && matches!(alloc, Some(Allocation::Size { .. }));
        // Cattle managers add each successor before removing its
        // predecessor, so a roll keeps the group's fault tolerance (and a
        // lone manager can only be rolled that way). Pets cannot: two
        // machines cannot hold one address.
        let default_strategy = if cattle_managers {
            Strategy::Surge
        } else {
            Strategy::Replace
        };
        let strategy = self.choice(
            f.get("strategy"),
            &join(path, "strategy"),
            &[("replace", Strategy::Replace), ("surge", Strategy::Surge)],
            default_strategy,
        );
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
        let min_fault_tolerance = f
            .get("min_fault_tolerance")
            .and_then(|n| self.count(n, &join(path, "min_fault_tolerance"), 0));
        let service_budget = match f.get("service_budget") {
            None => Some(None),
            Some(n) => self
                .service_budget(n, &join(path, "service_budget"))
                .map(Some),
        };
        let draft = UpdateDraft {
            strategy,
            min_fault_tolerance,
            max_in_flight,
            canaries,
            watch,
            step_timeout,
        };
        self.update_rules(&f, path, role, alloc, spares, &draft);
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
        })
    }

    /// `update.service_budget`: exactly one of `max_unavailable` and
    /// `min_available`, a count or a percentage (as the service labels).
    fn service_budget(&mut self, node: &Node, path: &str) -> Option<ServiceBudget> {
        let f = self.fields(node, path, &["max_unavailable", "min_available"])?;
        let amount = |d: &mut Self, key: &str| {
            let n = f.get(key)?;
            let field = join(path, key);
            let text = d.string(n, &field)?;
            text.parse::<Amount>()
                .map_err(|e| d.error(n.pos(), &field, e.to_string()))
                .ok()
        };
        match (f.get("max_unavailable"), f.get("min_available")) {
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
        }
    }

    /// The fault-tolerance floor of a manager group's roll: at most its
    /// converged fault tolerance, and no higher than its strategy can hold
    /// (a replacement in place spends one unit — two machines cannot hold a
    /// pet's address — unless a spare slot adds a temporary member first);
    /// replacing in place without a floor is warned about.
    fn floor_rules(
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
            (Some(m), Some(Strategy::Replace)) if m > in_place && n > 1 => self.error(at, &field, format!("{m} cannot be held while a member is replaced in place ({n} managers run at {in_place} then): the roll could never start; use at most {in_place}{fix}")),
            (None, Some(Strategy::Replace)) if n > 1 && in_place < converged => {
                let why = if a.is_pets() {
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
    fn update_rules(
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
        if let (Some(Strategy::Replace), Some(a)) = (draft.strategy, alloc)
            && role == Some(Role::Manager)
            && a.size() == 1
        {
            let fix = if a.is_pets() {
                "declare 3 logical ids, or use size: 1 with strategy: surge"
            } else {
                "use strategy: surge (adds the new manager first) or run 3 managers"
            };
            self.error(at("strategy"), &join(path, "strategy"), format!("a single manager cannot be replaced in place: the swarm would have no manager while its replacement starts; {fix}"));
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

    fn health(&mut self, node: Option<&Node>, path: &str) -> Option<HealthPolicy> {
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

    fn drain(&mut self, node: Option<&Node>, path: &str) -> Option<DrainPolicy> {
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

    fn rollout(&mut self, node: Option<&Node>, path: &str) -> Option<Option<u64>> {
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

/// The largest count a spec may give (a group's size, `max_in_flight`,
/// ...): far above any swarm, low enough that a typo of a few extra digits
/// is caught before anything allocates for it.
pub const MAX_COUNT: u32 = 100_000;
/// The most groups a cluster file may declare.
pub const MAX_GROUPS: usize = 1_000;

/// YAML 1.1's merge key, which drover does not expand: its rules for
/// overriding and ordering are a trap in a file whose every field matters.
const MERGE_KEY: &str = "<<";

/// A scalar's text as written (for messages), or its kind.
fn node_text(node: &Node) -> String {
    match node {
        Node::Scalar { value, .. } => value.clone(),
        other => other.kind().to_string(),
    }
}

const ALLOCATION_FIELDS: &[&str] = &["size", "logical_ids", "zones", "spare_ids"];
const INSTANCE_FIELDS: &[&str] = &["provider", "properties", "plugin"];
const FLAVOR_FIELDS: &[&str] = &["kind", "boot_script", "engine_labels", "drover"];
const UPDATE_FIELDS: &[&str] = &[
    "strategy",
    "min_fault_tolerance",
    "max_in_flight",
    "canaries",
    "watch",
    "step_timeout",
    "on_failure",
    "windows",
    "service_budget",
];
const HEALTH_FIELDS: &[&str] = &[
    "startup_timeout",
    "unhealthy_after",
    "max_attempts",
    "max_unhealthy",
    "max_age",
];
const GC_FIELDS: &[&str] = &["orphan_grace"];
const DRAIN_FIELDS: &[&str] = &["timeout", "on_timeout"];
const ROLLOUT_FIELDS: &[&str] = &["after"];

/// Variables a boot script template may use (see [`BootContext`]).
const TEMPLATE_VARIABLES: &str = "role, cluster_id, group, link, logical_id, address, join_addr, init, engine_labels, drover_url, drover_sha256";

/// Position of the value at `keys` under `node`, if present.
fn field_pos(node: &Node, keys: &[&str]) -> Option<Pos> {
    let mut cur = node;
    for key in keys {
        let Node::Map { entries, .. } = cur else {
            return None;
        };
        cur = &entries.iter().find(|(k, _, _)| k == key)?.2;
    }
    Some(cur.pos())
}

/// Position of the `j`th item of `allocation.KEY` of a group node.
fn seq_item_pos(group: &Node, key: &str, j: usize) -> Option<Pos> {
    let Node::Map { entries, .. } = group else {
        return None;
    };
    let alloc = &entries.iter().find(|(k, _, _)| k == "allocation")?.2;
    let Node::Map { entries, .. } = alloc else {
        return None;
    };
    let Node::Seq { items, .. } = &entries.iter().find(|(k, _, _)| k == key)?.2 else {
        return None;
    };
    items.get(j).map(Node::pos)
}

/// What a provider's logical ids must be, where they are addresses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum AddressRule {
    /// `local`: each pet's engine listens on its id, a loopback address.
    Loopback,
    /// `incus`: each pet's id is its fixed address on its bridge.
    Bridge,
    /// `ec2`: each pet's id is its private IPv4 address in its subnet.
    PrivateIp,
}

impl AddressRule {
    fn of(provider: &str) -> Option<AddressRule> {
        match provider {
            LOCAL_PROVIDER => Some(AddressRule::Loopback),
            INCUS_PROVIDER => Some(AddressRule::Bridge),
            EC2_PROVIDER => Some(AddressRule::PrivateIp),
            _ => None,
        }
    }

    fn problem(self, id: &str) -> String {
        match self {
            AddressRule::Loopback => format!(
                "`{id}` is not an address the local provider can use: its logical ids are IPv4 loopback addresses (127.0.0.0/8), e.g. 127.0.0.10"
            ),
            AddressRule::Bridge => format!(
                "`{id}` is not an address the incus provider can use: its logical ids are IPv4 addresses on the group's bridge (instance.properties.network), e.g. 10.203.60.11"
            ),
            AddressRule::PrivateIp => format!(
                "`{id}` is not an address the ec2 provider can use: its logical ids are private IPv4 addresses in the zone's subnet (instance.properties.subnets), e.g. 10.0.1.11"
            ),
        }
    }
}
