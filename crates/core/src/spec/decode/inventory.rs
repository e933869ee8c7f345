//! The ssh provider's inventory against the rest of the file: a group
//! needs a host per member, a pet's logical id names one of its hosts, a
//! zone it spreads over has hosts, and a host belongs to one group (two
//! groups enrolling the same machine would each take it for theirs).
//! The inventory's own fields are checked by [`ssh::SshProperties`].

use super::*;
use crate::spec::ssh::SshProperties;

impl Decoder<'_> {
    /// Group `group`'s allocation (and spare slots) against its inventory,
    /// once the inventory itself reads (its problems are reported at its
    /// fields already).
    pub(super) fn ssh_inventory(
        &mut self,
        group: &Node,
        path: &str,
        alloc: &Allocation,
        spares: &[Slot],
        inst: &InstanceSpec,
    ) {
        let Ok(props) = SshProperties::parse(&inst.properties) else {
            return;
        };
        let hosts = props.hosts.len();
        match alloc {
            Allocation::Size { size, zones } => {
                if *size as usize > hosts {
                    self.error(
                        field_pos(group, &["allocation", "size"]).unwrap_or(group.pos()),
                        &format!("{path}.allocation.size"),
                        format!("the inventory (instance.properties.hosts) has {hosts} host(s): a member needs a host of its own; add hosts or lower size"),
                    );
                }
                for (i, zone) in zones.iter().enumerate() {
                    if !props.hosts.iter().any(|h| h.zone.as_ref() == Some(zone)) {
                        self.error(
                            seq_item_pos(group, "zones", i).unwrap_or(group.pos()),
                            &format!("{path}.allocation.zones[{i}]"),
                            format!("no host of the inventory is in zone `{zone}`: give hosts their zone (hosts[i].zone) or leave it out"),
                        );
                    }
                }
            }
            Allocation::LogicalIds(slots) => {
                self.ssh_pets(group, path, "logical_ids", slots, &props)
            }
        }
        self.ssh_pets(group, path, "spare_ids", spares, &props);
    }

    /// Pets' slots (`logical_ids` or `spare_ids`): each id names a host of
    /// the inventory, in the zone the slot gives, if it gives one.
    fn ssh_pets(
        &mut self,
        group: &Node,
        path: &str,
        key: &str,
        slots: &[Slot],
        props: &SshProperties,
    ) {
        for (j, slot) in slots.iter().enumerate() {
            let id = slot.logical_id.as_deref().unwrap_or_default();
            let at = seq_item_pos(group, key, j).unwrap_or(group.pos());
            let field = format!("{path}.allocation.{key}[{j}]");
            match props.host(id) {
                None => {
                    let names: Vec<String> = props.hosts.iter().map(|h| h.name()).collect();
                    self.error(at, &field, format!("`{id}` is not a host of the inventory: an ssh pet's logical id names its host as the inventory does ({})", names.join(", ")));
                }
                Some(h) => {
                    if let Some(zone) = &slot.zone
                        && h.zone.as_ref() != Some(zone)
                    {
                        let has = h
                            .zone
                            .as_deref()
                            .map_or("no zone".to_string(), |z| format!("zone `{z}`"));
                        self.error(at, &field, format!("host `{id}` has {has} in the inventory, not `{zone}`: a host's zone is where it is; leave the slot's zone out"));
                    }
                }
            }
        }
    }

    /// Every host in one group's inventory only.
    pub(super) fn one_group_per_host(&mut self, items: &[Node], groups: &[Option<GroupSpec>]) {
        let mut owner: HashMap<String, (usize, usize)> = HashMap::new();
        for (i, (node, group)) in items.iter().zip(groups).enumerate() {
            let Some(props) = group
                .as_ref()
                .filter(|g| g.instance.provider == SSH_PROVIDER)
                .and_then(|g| SshProperties::parse(&g.instance.properties).ok())
            else {
                continue;
            };
            let list = node_at(node, &["instance", "properties", "hosts"]);
            for (j, h) in props.hosts.iter().enumerate() {
                let name = format!("{}:{}", h.host, h.port);
                match owner.get(&name) {
                    Some(&(gi, gj)) => {
                        let at = match list {
                            Some(Node::Seq { items, .. }) => items.get(j).map(Node::pos),
                            _ => None,
                        };
                        self.error(
                            at.unwrap_or(node.pos()),
                            &format!("groups[{i}].instance.properties.hosts[{j}]"),
                            format!("`{}` is already groups[{gi}].instance.properties.hosts[{gj}]: a host belongs to one group; list it once", h.name()),
                        );
                    }
                    None => {
                        owner.insert(name, (i, j));
                    }
                }
            }
        }
    }
}
