//! One group's observation, indexed once per pass: its owned members with
//! the tags and health a pass reads, by link and by id.

use super::DesiredGroup;
use super::fast::{Map, Set};
use super::health::{self, Health};
use super::world::World;
use crate::journal::Operation;
use crate::model::{Described, Instance, Node, Observed};
use crate::spec::Role;
use std::collections::hash_map::Entry;
use std::ops::Deref;

/// An owned instance with the tags a pass reads, read once: a pass reads
/// them for every member several times. Everything else is the instance's
/// (through `Deref`).
#[derive(Clone, Copy)]
pub(crate) struct Member<'a> {
    inst: &'a Instance,
    link: Option<&'a str>,
    config: Option<&'a str>,
    zone: Option<&'a str>,
    logical_id: Option<&'a str>,
    /// Built from the group's desired config.
    current: bool,
    /// Its swarm node ([`World::node_for`] its link), found once per pass.
    pub(crate) node: Option<&'a Node>,
    /// Judged once per pass.
    pub(crate) health: Health,
}

impl<'a> Member<'a> {
    /// `inst` as a member of `group` of cluster `cluster_id`, or `None` if
    /// it is not owned ([`Instance::owned_by`]).
    fn owned(inst: &'a Instance, cluster_id: &str, group: &str) -> Option<Self> {
        if !inst.owned_by(cluster_id, group) {
            return None;
        }
        Some(Member {
            inst,
            link: inst.link(),
            config: inst.config(),
            zone: inst.zone(),
            logical_id: inst.logical_id(),
            current: false,
            node: None,
            health: Health::Unknown,
        })
    }

    /// [`Instance::link`].
    pub(crate) fn link(&self) -> Option<&'a str> {
        self.link
    }
    /// [`Instance::config`].
    pub(crate) fn config(&self) -> Option<&'a str> {
        self.config
    }
    /// [`Instance::zone`].
    pub(crate) fn zone(&self) -> Option<&'a str> {
        self.zone
    }
    /// [`Instance::logical_id`].
    pub(crate) fn logical_id(&self) -> Option<&'a str> {
        self.logical_id
    }
    /// Built from the group's desired config (`config() == Some(hash)`).
    pub(crate) fn current(&self) -> bool {
        self.current
    }
    /// Judged healthy in this pass.
    pub(crate) fn healthy(&self) -> bool {
        self.health == Health::Healthy
    }
}

impl Deref for Member<'_> {
    type Target = Instance;
    fn deref(&self) -> &Instance {
        self.inst
    }
}

/// One group's observation, indexed.
pub(crate) struct View<'a> {
    pub(crate) d: &'a DesiredGroup,
    /// Owned members (cluster id and group both match), in described
    /// order, or why they are not known.
    pub(crate) described: Result<Vec<Member<'a>>, &'a str>,
    /// Ids of described instances that are not owned (to refuse touching
    /// foreign ones): with the owned ones, every described id.
    pub(crate) foreign: Set<&'a str>,
    /// Owned members by link and by id (positions in `described`):
    /// operations look their members up here, so a pass stays linear in
    /// the group's size.
    pub(crate) by_link: Map<&'a str, usize>,
    by_id: Map<&'a str, usize>,
    /// Why the group blocks when two owned machines carry one link.
    pub(crate) shared_link: Option<String>,
    /// By position in [`World::nodes`]: some owned member carries the
    /// node's link (so the node is not stale). Empty for plain groups.
    pub(crate) claimed: Vec<bool>,
}

impl<'a> View<'a> {
    /// Indexes group `d` of `observed`.
    pub(crate) fn new(
        d: &'a DesiredGroup,
        cluster_id: &str,
        observed: &'a Observed,
        world: &World<'a>,
    ) -> Self {
        let mut v = View {
            d,
            described: Err("not described"),
            foreign: Set::default(),
            by_link: Map::default(),
            by_id: Map::default(),
            shared_link: None,
            claimed: Vec::new(),
        };
        let list = match observed.instances.get(&d.spec.name) {
            Some(Described::Ok(list)) => list,
            Some(Described::Failed(e)) => {
                v.described = Err(e.as_str());
                return v;
            }
            None => return v,
        };
        let mut owned: Vec<Member<'a>> = Vec::with_capacity(list.len());
        v.by_id.reserve(list.len());
        v.by_link.reserve(list.len());
        let swarm_node = d.spec.role != Role::Plain;
        if swarm_node {
            v.claimed = vec![false; world.nodes().len()];
        }
        for i in list {
            let Some(mut m) = Member::owned(i, cluster_id, &d.spec.name) else {
                v.foreign.insert(&i.id);
                continue;
            };
            let positions = world.positions_with_link(m.link);
            if swarm_node {
                for &k in positions {
                    v.claimed[k as usize] = true;
                }
            }
            m.node = world.node_among(positions);
            m.health = health::judge_node(d.spec.role, i.running, world.swarm_ok(), m.node);
            m.current = m.config == Some(d.hash.as_str());
            v.by_id.insert(&i.id, owned.len());
            if let Some(l) = m.link {
                match v.by_link.entry(l) {
                    Entry::Vacant(e) => {
                        e.insert(owned.len());
                    }
                    Entry::Occupied(e) => {
                        let other = owned[*e.get()].inst;
                        v.shared_link
                            .get_or_insert_with(|| shared_link(other, i, l));
                    }
                }
            }
            owned.push(m);
        }
        v.described = Ok(owned);
        v
    }

    fn at(&self, k: Option<&usize>) -> Option<&Member<'a>> {
        self.described.as_ref().ok()?.get(*k?)
    }

    /// The owned member carrying `link` (the first described, as a scan would find).
    pub(crate) fn with_link(&self, link: &str) -> Option<&Member<'a>> {
        self.at(self.by_link.get(link))
    }

    /// The owned member `id`.
    pub(crate) fn owned(&self, id: &str) -> Option<&Member<'a>> {
        self.at(self.by_id.get(id))
    }

    /// By position among the owned members: which are the victim of one of
    /// `ops`, and which carry one of their ids as link (their replacement).
    /// One lookup per operation, rather than one per member.
    pub(crate) fn busy<'o>(&self, ops: impl Iterator<Item = &'o Operation>) -> Vec<Busy> {
        let mut busy = vec![Busy::default(); self.described.as_ref().map_or(0, Vec::len)];
        for o in ops {
            let victim = o.victim.as_ref().and_then(|v| v.instance.as_deref());
            if let Some(&k) = victim.and_then(|id| self.by_id.get(id)) {
                busy[k].victim = true;
            }
            if let Some(&k) = self.by_link.get(o.id.as_str()) {
                busy[k].replacement = true;
            }
        }
        busy
    }
}

/// What operations in flight do with one member.
#[derive(Clone, Copy, Default)]
pub(crate) struct Busy {
    /// It is an operation's victim (being replaced or retired).
    pub(crate) victim: bool,
    /// It carries an operation's id as link: that operation made it.
    pub(crate) replacement: bool,
}

/// Why two machines carrying the same link block the group (an operator
/// must resolve it).
fn shared_link(other: &Instance, i: &Instance, link: &str) -> String {
    format!(
        "instances {} and {} carry the same link {link}: destroy the one that should not exist; drover will not guess",
        other.id, i.id
    )
}

#[cfg(test)]
mod tests {
    use super::Member;
    use crate::model::{Instance, tags};

    fn instance(pairs: &[(&str, &str)]) -> Instance {
        Instance {
            id: "i-1".into(),
            tags: pairs.iter().copied().collect(),
            running: true,
            created_ms: 0,
        }
    }

    /// A member reads what the instance's own accessors read.
    #[test]
    fn a_member_reads_what_the_accessors_read() {
        let owned = [
            (tags::CLUSTER, "c1"),
            (tags::GROUP, "workers"),
            (tags::LINK, "l-1"),
            (tags::ZONE, "a"),
            (tags::LOGICAL_ID, "w1"),
            ("Name", "provider's own tag"),
        ];
        let built = instance(&[&owned[..], &[(tags::CONFIG, "h1")]].concat());
        let adopted = instance(&[&owned[..], &[(tags::ADOPTED, "h0")]].concat());
        for i in [&built, &adopted] {
            let m = Member::owned(i, "c1", "workers").expect("owned");
            assert_eq!(
                (m.link(), m.config(), m.zone(), m.logical_id()),
                (i.link(), i.config(), i.zone(), i.logical_id())
            );
        }
        assert_eq!(
            Member::owned(&adopted, "c1", "workers").and_then(|m| m.config()),
            Some("h0")
        );
        assert!(Member::owned(&built, "c2", "workers").is_none());
        assert!(Member::owned(&built, "c1", "managers").is_none());
        assert!(Member::owned(&instance(&[(tags::GROUP, "workers")]), "c1", "workers").is_none());
    }
}
