//! Where a group's members go: `allocation` (size or logical ids,
//! zones, spare slots) and the addresses a provider accepts as ids.

use super::*;

impl Decoder<'_> {
    /// The ec2, incus and ssh providers' properties, checked offline by the
    /// rule each provider applies before it makes a machine: each problem
    /// at its field's position.
    pub(super) fn provider_properties(
        &mut self,
        group: &Node,
        path: &str,
        alloc: &Allocation,
        inst: &InstanceSpec,
    ) {
        let problems = match inst.provider.as_str() {
            EC2_PROVIDER => {
                let zones: Vec<Option<&str>> = match alloc {
                    Allocation::Size { zones, .. } if zones.is_empty() => vec![None],
                    Allocation::Size { zones, .. } => {
                        zones.iter().map(|z| Some(z.as_str())).collect()
                    }
                    Allocation::LogicalIds(slots) => {
                        slots.iter().map(|s| s.zone.as_deref()).collect()
                    }
                };
                ec2::Ec2Properties::parse(&inst.properties, &zones).err()
            }
            INCUS_PROVIDER => {
                incus::IncusProperties::parse(&inst.properties, alloc.is_pets()).err()
            }
            SSH_PROVIDER => ssh::SshProperties::parse(&inst.properties).err(),
            _ => None,
        };
        let props = node_at(group, &["instance", "properties"]);
        for p in problems.unwrap_or_default() {
            let pos = props.map_or(group.pos(), |n| property_pos(n, &p.field));
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
    pub(super) fn address_ids(
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

    pub(super) fn allocation(
        &mut self,
        node: &Node,
        path: &str,
        role: Option<Role>,
    ) -> Option<Allocation> {
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
    pub(super) fn spare_ids(
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
        // Read (and each id reported) whatever the slots' other problems.
        let slots = self.logical_ids(ids, &path);
        match (role, alloc) {
            (Some(Role::Manager), Some(Allocation::Size { .. })) => self.error(ids.pos(), &path, "spare slots serve pets (logical_ids); cattle managers add each successor before removing its predecessor (strategy: surge); remove spare_ids"),
            (Some(Role::Worker | Role::Plain), _) => self.error(ids.pos(), &path, "spare slots hold a manager group's fault tolerance during its roll; workers and plain machines hold no quorum: remove spare_ids"),
            _ => {}
        }
        slots
    }

    pub(super) fn string_list(&mut self, node: &Node, path: &str) -> Option<Vec<String>> {
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
    pub(super) fn zones(&mut self, node: &Node, path: &str) -> Option<Vec<String>> {
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
    pub(super) fn zone_name(&mut self, zone: &str, pos: Pos, path: &str) -> bool {
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

    pub(super) fn logical_ids(&mut self, node: &Node, path: &str) -> Option<Vec<Slot>> {
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
}

/// Position of a property's `field` (`.devices.eth0`, `.security_groups[0]`,
/// `.config.user.drover.group`: a key may hold dots) under the properties'
/// node: the deepest node the field names that is written.
fn property_pos(props: &Node, field: &str) -> Pos {
    let mut cur = props;
    let mut rest = field.strip_prefix('.').unwrap_or(field);
    while !rest.is_empty() {
        let next = match cur {
            Node::Map { entries, .. } => entries
                .iter()
                .filter(|(k, _, _)| {
                    rest.strip_prefix(k.as_str())
                        .is_some_and(|r| r.is_empty() || r.starts_with(['.', '[']))
                })
                .max_by_key(|(k, _, _)| k.len())
                .map(|(k, _, v)| (k.len(), v)),
            Node::Seq { items, .. } => rest
                .strip_prefix('[')
                .and_then(|r| r.split_once(']'))
                .and_then(|(i, _)| Some((i.len() + 2, items.get(i.parse::<usize>().ok()?)?))),
            _ => None,
        };
        let Some((len, node)) = next else { break };
        cur = node;
        rest = rest[len..].strip_prefix('.').unwrap_or(&rest[len..]);
    }
    cur.pos()
}

/// What a provider's logical ids must be, where they are addresses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum AddressRule {
    /// `local`: each pet's engine listens on its id, a loopback address.
    Loopback,
    /// `incus`: each pet's id is its fixed address on its bridge.
    Bridge,
    /// `ec2`: each pet's id is its private IPv4 address in its subnet.
    PrivateIp,
}

impl AddressRule {
    pub(super) fn of(provider: &str) -> Option<AddressRule> {
        match provider {
            LOCAL_PROVIDER => Some(AddressRule::Loopback),
            INCUS_PROVIDER => Some(AddressRule::Bridge),
            EC2_PROVIDER => Some(AddressRule::PrivateIp),
            _ => None,
        }
    }

    pub(super) fn problem(self, id: &str) -> String {
        match self {
            AddressRule::Loopback => format!(
                "`{id}` is not an address the local provider can use: its logical ids are IPv4 loopback addresses (127.0.0.0/8), e.g. 127.0.0.10"
            ),
            AddressRule::Bridge => format!(
                "`{id}` is not an address the incus provider can use: its logical ids are IPv4 addresses on the group's bridge (instance.properties.network), e.g. 10.203.60.11"
            ),
            AddressRule::PrivateIp => {
                let why = id
                    .parse()
                    .ok()
                    .and_then(ec2::never_assigned)
                    .map(|w| format!(" ({w})"))
                    .unwrap_or_default();
                format!(
                    "`{id}` is not an address the ec2 provider can use{why}: its logical ids are private IPv4 addresses in the zone's subnet (instance.properties.subnets), e.g. 10.0.1.11"
                )
            }
        }
    }
}
