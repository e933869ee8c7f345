//! One group's observation, indexed once per pass: its owned members with
//! the tags and health a pass reads, by link and by id.

use super::DesiredGroup;
use super::blocked::Blocked;
use super::fast::{Map, Set};
use super::health::{self, Health};
use super::world::World;
use crate::journal::{Operation, Victim};
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

impl<'a> Member<'a> {
    /// Its instance's id, borrowed for the pass (a step's wait names it).
    pub(crate) fn instance_id(&self) -> &'a str {
        &self.inst.id
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
    /// By position in [`World::nodes`]: the first owned member (its
    /// position in `described`) carrying the node's link, or [`NONE`]; so
    /// a node no member claims is stale. Members are found by link through
    /// this and the world's one node table: a pass does not build a second
    /// table of every member's link. Empty for plain groups.
    claimant: Vec<u32>,
    /// Owned members carrying a link no node carries (all of a plain
    /// group's), by link.
    unjoined: Map<&'a str, usize>,
    /// Owned members by id, only those an operation may look up by id:
    /// the victims of the journal's operations, and members without a
    /// link (an operation begun in this pass finds its victim by link).
    /// Hashing every member's id was a large part of a pass over 100 000.
    by_id: Map<&'a str, usize>,
    /// Why the group blocks when two owned machines carry one link.
    pub(crate) shared_link: Option<Blocked>,
}

/// No member: in [`View::claimant`].
const NONE: u32 = u32::MAX;

impl<'a> View<'a> {
    /// Indexes group `d` of `observed`; `victims` are the instance ids of
    /// the victims of the journal's operations.
    pub(crate) fn new(
        d: &'a DesiredGroup,
        cluster_id: &str,
        observed: &'a Observed,
        world: &World<'a>,
        victims: &Set<&str>,
    ) -> Self {
        let mut v = View {
            d,
            described: Err("not described"),
            foreign: Set::default(),
            claimant: Vec::new(),
            unjoined: Map::default(),
            by_id: Map::default(),
            shared_link: None,
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
        if d.spec.role != Role::Plain {
            v.claimant = vec![NONE; world.nodes().len()];
        }
        for i in list {
            let Some(mut m) = Member::owned(i, cluster_id, &d.spec.name) else {
                v.foreign.insert(&i.id);
                continue;
            };
            let positions = world.positions_with_link(m.link);
            m.node = world.node_among(positions);
            m.health = health::judge_node(d.spec.role, i.running, world.swarm_ok(), m.node);
            m.current = m.config == Some(d.hash.as_str());
            if m.link.is_none() || victims.contains(i.id.as_str()) {
                v.by_id.insert(&i.id, owned.len());
            }
            if let Some(l) = m.link
                && let Some(other) = v.claim(l, positions, owned.len())
            {
                let other = owned[other].inst;
                v.shared_link
                    .get_or_insert_with(|| shared_link(other, i, l));
            }
            owned.push(m);
        }
        v.described = Ok(owned);
        v
    }

    /// Records that the member at `k` carries `link`, which the nodes at
    /// `positions` carry; returns the member that carries it already.
    fn claim(&mut self, link: &'a str, positions: &[u32], k: usize) -> Option<usize> {
        match positions.first() {
            Some(&first) if !self.claimant.is_empty() => {
                let other = self.claimant[first as usize];
                if other != NONE {
                    return Some(other as usize);
                }
                for &p in positions {
                    self.claimant[p as usize] = k as u32;
                }
                None
            }
            _ => match self.unjoined.entry(link) {
                Entry::Vacant(e) => {
                    e.insert(k);
                    None
                }
                Entry::Occupied(e) => Some(*e.get()),
            },
        }
    }

    /// Where the owned member carrying `link` is (the first described).
    fn link_position(&self, world: &World<'_>, link: &str) -> Option<usize> {
        match world.positions_with_link(Some(link)).first() {
            Some(&first) if !self.claimant.is_empty() => {
                let k = self.claimant[first as usize];
                (k != NONE).then_some(k as usize)
            }
            _ => self.unjoined.get(link).copied(),
        }
    }

    /// True when no owned member carries the link of the node at
    /// `position` in [`World::nodes`] (of a swarm group).
    pub(crate) fn unclaimed(&self, position: usize) -> bool {
        self.claimant.get(position).is_none_or(|&k| k == NONE)
    }

    /// Where `victim`'s instance is among the owned members: by id when
    /// indexed, else by its link (an op begun in this pass, whose victim
    /// was a member with a link), checking the id.
    fn victim_position(&self, world: &World<'_>, victim: &Victim) -> Option<usize> {
        let id = victim.instance.as_deref()?;
        if let Some(&k) = self.by_id.get(id) {
            return Some(k);
        }
        let k = self.link_position(world, victim.link.as_deref()?)?;
        let members = self.described.as_ref().ok()?;
        (members[k].id == id).then_some(k)
    }

    /// Where `op`'s members are among the owned members.
    pub(crate) fn found(&self, world: &World<'_>, op: &Operation) -> Found {
        Found {
            victim: op
                .victim
                .as_ref()
                .and_then(|v| self.victim_position(world, v)),
            // In place, the member is its own successor.
            replacement: if op.in_place {
                op.victim
                    .as_ref()
                    .and_then(|v| self.victim_position(world, v))
            } else {
                self.link_position(world, &op.id)
            },
        }
    }

    /// The owned member at position `k`.
    pub(crate) fn member(&self, k: Option<usize>) -> Option<&Member<'a>> {
        self.described.as_ref().ok()?.get(k?)
    }

    /// By position among the owned members: which are the victim of an
    /// operation and which its replacement, given where each operation's
    /// members were [`found`](Self::found).
    pub(crate) fn busy(&self, found: impl Iterator<Item = Found>) -> Vec<Busy> {
        let mut busy = vec![Busy::default(); self.described.as_ref().map_or(0, Vec::len)];
        for f in found {
            // In place, the member is its own successor: it stays in the
            // group (busy, not leaving).
            if let Some(k) = f.victim.filter(|_| f.victim != f.replacement) {
                busy[k].victim = true;
            }
            if let Some(k) = f.replacement {
                busy[k].replacement = true;
            }
        }
        busy
    }
}

/// Where an operation's members are among a view's owned members (their
/// positions): its victim's instance, and its replacement (the member
/// carrying the operation's id as link). A view does not change during a
/// pass, so this is looked up once per operation and pass, not once per
/// step and again for every budget count and status.
#[derive(Clone, Copy, Default, Debug, PartialEq)]
pub(crate) struct Found {
    /// The victim's instance, if it still exists.
    pub(crate) victim: Option<usize>,
    /// The member the operation made, if it exists.
    pub(crate) replacement: Option<usize>,
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
fn shared_link(other: &Instance, i: &Instance, link: &str) -> Blocked {
    Blocked::SharedLink {
        first: other.id.clone(),
        second: i.id.clone(),
        link: link.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::{Member, View};
    use crate::hash::config_hash;
    use crate::journal::Victim;
    use crate::model::{Described, Instance, Observed, SwarmView, tags};
    use crate::plan::{DesiredGroup, fast::Set, world::World};
    use crate::spec::parse_str;

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

    fn victim(id: &str, link: Option<&str>) -> Victim {
        Victim {
            instance: Some(id.into()),
            link: link.map(str::to_string),
            node: None,
            logical_id: None,
            zone: None,
            is_self: false,
        }
    }

    /// Only the journal's victims and members without a link are indexed
    /// by id; every other victim (an operation begun in this pass) is
    /// found by its link, and only if the member there has its id.
    #[test]
    fn finds_an_operations_victim_by_id_or_by_link() {
        let spec = parse_str(
            "groups:\n- name: workers\n  role: worker\n  allocation: {size: 3}\n  instance: {provider: sim}\n",
        )
        .spec
        .expect("spec");
        let g = spec.groups[0].clone();
        let d = DesiredGroup {
            hash: config_hash(&g),
            spec: g,
            paused: false,
            is_rollback: false,
        };
        let member = |id: &str, link: Option<&str>| {
            let mut tags = vec![(tags::CLUSTER, "c1"), (tags::GROUP, "workers")];
            tags.extend(link.map(|l| (tags::LINK, l)));
            Instance {
                id: id.into(),
                ..instance(&tags)
            }
        };
        let observed = Observed {
            instances: [(
                "workers".to_string(),
                Described::Ok(vec![
                    member("i-journal", Some("l-1")),
                    member("i-new", Some("l-2")),
                    member("i-unlinked", None),
                ]),
            )]
            .into(),
            swarm: SwarmView::Ok(Vec::new()),
            self_link: None,
            left_reports: Vec::new(),
            services: Default::default(),
            boots: Default::default(),
            complete_listings: Default::default(),
        };
        let world = World::new(&observed, Set::default());
        let journal_victims: Set<&str> = ["i-journal", "i-gone"].into_iter().collect();
        let v = View::new(&d, "c1", &observed, &world, &journal_victims);
        let found = |vi: Victim| {
            v.member(v.victim_position(&world, &vi))
                .map(|m| m.id.clone())
        };
        assert_eq!(
            found(victim("i-journal", None)).as_deref(),
            Some("i-journal")
        );
        assert_eq!(
            found(victim("i-new", Some("l-2"))).as_deref(),
            Some("i-new")
        );
        assert_eq!(
            found(victim("i-unlinked", None)).as_deref(),
            Some("i-unlinked")
        );
        // Gone, or another machine on its link: not found.
        assert_eq!(found(victim("i-gone", Some("l-9"))), None);
        assert_eq!(found(victim("i-other", Some("l-2"))), None);
        let busy = v.busy(std::iter::empty());
        assert!(busy.iter().all(|b| !b.victim && !b.replacement));
    }
}
