//! When to rotate a role's swarm join token.
//!
//! Some providers can hand a machine its boot environment only through
//! something that stays readable for the machine's life (EC2's user data:
//! `DescribeInstanceAttribute`, the metadata service). A join token placed
//! there must become useless once it has served: the controller rotates
//! the role's token (`docker swarm join-token --rotate`) as soon as no
//! machine that may hold the current token still awaits its join, and
//! never while one does (rotation does not affect joined nodes, but the
//! old token stops working some seconds later, so a machine still booting
//! with it would never join).
//!
//! The rule is pure, with time passed in. The shell keeps a [`Tokens`] per
//! controller term, records each boot that was given a token in readable
//! user data ([`Tokens::placed`]), asks [`Tokens::due`] each pass with the
//! roles that still await a join ([`awaiting`]), rotates, and records it
//! ([`Tokens::rotated`]).

use crate::journal::{Operation, Step};
use crate::model::{Node, Time};
use crate::spec::Role;
use std::collections::{BTreeMap, BTreeSet};

/// The least time between two rotations of one role's token. The old
/// token keeps working ~10 s after a rotation (swarm-facts), so rotating
/// more often closes nothing sooner; it would only add raft writes while a
/// roll joins machine after machine.
pub const MIN_INTERVAL_MS: Time = 10_000;

/// What one controller term knows of the roles' current join tokens.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Tokens {
    /// Role → since when its current token may be readable somewhere.
    exposed: BTreeMap<Role, Time>,
    /// Role → when this term last rotated its token.
    rotated: BTreeMap<Role, Time>,
}

impl Tokens {
    /// A new term's view: the term before it may have placed the tokens of
    /// `roles` (those with a group on a provider that exposes the boot
    /// environment) and not rotated them yet. One rotation too many is
    /// harmless; one too few leaves a token readable and valid.
    pub fn assume_exposed(roles: impl IntoIterator<Item = Role>, now: Time) -> Tokens {
        let mut t = Tokens::default();
        for role in roles {
            t.placed(role, now);
        }
        t
    }

    /// `role`'s current token was given to a boot that places it in
    /// readable user data.
    pub fn placed(&mut self, role: Role, now: Time) {
        if role != Role::Plain {
            self.exposed.entry(role).or_insert(now);
        }
    }

    /// `role`'s token was rotated at `now`: the exposed one is useless.
    pub fn rotated(&mut self, role: Role, now: Time) {
        self.exposed.remove(&role);
        self.rotated.insert(role, now);
    }

    /// A rotation of `role`'s token failed at `now`: still exposed, tried
    /// again no sooner than [`MIN_INTERVAL_MS`] later (not every pass).
    pub fn failed(&mut self, role: Role, now: Time) {
        self.rotated.insert(role, now);
    }

    /// The roles whose token must be rotated now: exposed, no machine of
    /// the role still awaiting its join, and at least [`MIN_INTERVAL_MS`]
    /// since this term last rotated it.
    pub fn due(&self, awaiting: &BTreeSet<Role>, now: Time) -> Vec<Role> {
        self.exposed
            .keys()
            .copied()
            .filter(|role| !awaiting.contains(role))
            .filter(|role| {
                self.rotated
                    .get(role)
                    .is_none_or(|at| now.saturating_sub(*at) >= MIN_INTERVAL_MS)
            })
            .collect()
    }

    /// True while `role`'s current token may be readable somewhere.
    pub fn is_exposed(&self, role: Role) -> bool {
        self.exposed.contains_key(&role)
    }
}

/// The roles with a machine that may still join with the current token:
/// every journaled operation adding a member, on any provider (a role's
/// token is the whole swarm's: rotating it for an EC2 group's sake would
/// strand another provider's machine still booting with it), whose
/// provision has started — by its journal record, or `starting` in this
/// pass — and whose node has not appeared in `nodes` (matched by the link,
/// which is the operation's id). An operation that has not provisioned
/// yet does not count: it fetches the token when it does, after any
/// rotation, and a parked one must not keep an exposed token valid.
/// Nor does a parked one in `parked` (the plan's
/// [`crate::plan::Plan::parked`]: an operation whose machine can no longer
/// join — stopped, or not joined nor even listed within its
/// `startup_timeout`): a machine kept for diagnosis (a `NeverJoined`
/// block's last) or one whose operation is stuck on a failing hook must
/// not keep the token valid for ever (issue 36). A machine still booting
/// within its `startup_timeout` does count: it may yet join.
/// One provisioning in this pass (`starting`) always counts.
/// `None` without a node list: whether anything awaits is unknown then,
/// and nothing may be rotated.
pub fn awaiting<'a>(
    journal: impl IntoIterator<Item = &'a Operation>,
    starting: &BTreeSet<&str>,
    parked: &BTreeSet<&str>,
    nodes: Option<&[Node]>,
) -> Option<BTreeSet<Role>> {
    let nodes = nodes?;
    let joined: BTreeSet<&str> = nodes.iter().filter_map(|n| n.link.as_deref()).collect();
    Some(
        journal
            .into_iter()
            .filter(|op| op.target.is_some() && op.role != Role::Plain)
            .filter(|op| {
                starting.contains(op.id.as_str())
                    || (op.reached(Step::Provision) && !parked.contains(op.id.as_str()))
            })
            .filter(|op| !joined.contains(op.id.as_str()))
            .map(|op| op.role)
            .collect(),
    )
}

/// [`awaiting`] after `plan`, made on `journal` and `swarm`: the
/// provisions it starts count (their intents reach the store with this
/// pass, not `journal`), its parked operations do not
/// ([`crate::plan::Plan::parked`]). What the controller and the simulator
/// both ask before rotating.
pub fn awaiting_after<'a>(
    plan: &crate::plan::Plan,
    journal: impl IntoIterator<Item = &'a Operation>,
    swarm: &crate::model::SwarmView,
) -> Option<BTreeSet<Role>> {
    use crate::plan::Action;
    let nodes = match swarm {
        crate::model::SwarmView::Ok(nodes) => Some(nodes.as_slice()),
        _ => None,
    };
    let starting: BTreeSet<&str> = plan
        .actions
        .iter()
        .filter(|a| matches!(a, Action::Provision { .. }))
        .filter_map(Action::op_id)
        .collect();
    let parked: BTreeSet<&str> = plan.parked.iter().map(String::as_str).collect();
    awaiting(journal, &starting, &parked, nodes)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::journal::OpKind;
    use crate::testkit;
    use proptest::prelude::*;

    fn add_op(id: &str, group: &str, role: Role) -> Operation {
        Operation {
            target: Some(testkit::first_attempt()),
            ..testkit::op(id, group, OpKind::Provision, role)
        }
    }

    fn node(link: &str) -> Node {
        Node {
            link: Some(link.into()),
            ..testkit::node(&format!("n-{link}"))
        }
    }

    #[test]
    fn a_machine_that_has_not_joined_holds_its_roles_token() {
        let mut ec2 = add_op("w-1", "w", Role::Worker);
        let mut elsewhere = add_op("p-1", "p", Role::Worker);
        let parked = add_op("m-1", "m", Role::Manager);
        for op in [&mut ec2, &mut elsewhere] {
            op.intent = Some(crate::journal::Intent {
                step: Step::Provision,
                epoch: 1,
            });
        }
        let none = BTreeSet::new();
        let journal = [ec2, elsewhere, parked];
        let waiting = awaiting(&journal, &none, &none, Some(&[])).unwrap();
        assert_eq!(
            waiting,
            BTreeSet::from([Role::Worker]),
            "a parked op takes no token yet"
        );
        // A group on another provider holds the role's token too.
        let one_joined = awaiting(&journal, &none, &none, Some(&[node("w-1")])).unwrap();
        assert_eq!(one_joined, BTreeSet::from([Role::Worker]));
        let joined = awaiting(&journal, &none, &none, Some(&[node("w-1"), node("p-1")])).unwrap();
        assert!(joined.is_empty());
        // A provision starting in this pass counts at once.
        let starting = BTreeSet::from(["m-1"]);
        let now = awaiting(
            &journal,
            &starting,
            &none,
            Some(&[node("w-1"), node("p-1")]),
        )
        .unwrap();
        assert_eq!(now, BTreeSet::from([Role::Manager]));
        assert_eq!(
            awaiting(&journal, &none, &none, None),
            None,
            "no node list: unknown"
        );
    }

    /// Issue 36: an operation whose every provision call failed (no zone
    /// had capacity, say) stays journaled, parked or blocked; it made no
    /// machine, so it holds back no rotation of its role's exposed token.
    /// A new term still rotates at once.
    #[test]
    fn an_operation_whose_provisions_all_failed_holds_back_no_rotation() {
        let mut parked = add_op("m-1", "m", Role::Manager);
        parked.intent = Some(crate::journal::Intent {
            step: Step::Provision,
            epoch: 1,
        });
        let none = BTreeSet::new();
        let journal = [parked.clone()];
        let waiting = awaiting(&journal, &none, &none, Some(&[])).unwrap();
        assert_eq!(waiting, BTreeSet::from([Role::Manager]), "a call runs");
        parked.provision_failed(Some("z1"));
        parked.provision_failed(None);
        let journal = [parked];
        let waiting = awaiting(&journal, &none, &none, Some(&[])).unwrap();
        assert!(waiting.is_empty(), "every call failed: {waiting:?}");
        let mut tokens = Tokens::default();
        tokens.placed(Role::Manager, 0);
        assert_eq!(tokens.due(&waiting, 1), vec![Role::Manager]);
        // Its next call counts again from the moment it starts.
        let starting = BTreeSet::from(["m-1"]);
        let again = awaiting(&journal, &starting, &none, Some(&[])).unwrap();
        assert_eq!(again, BTreeSet::from([Role::Manager]));
        // A new term rotates what the last may have placed, at once.
        let term = Tokens::assume_exposed([Role::Manager, Role::Worker], 5);
        assert_eq!(term.due(&BTreeSet::new(), 5).len(), 2);
    }

    /// Issue 36: a group blocked `NeverJoined` keeps its last machine for
    /// diagnosis; that machine's operation (provisioned, no node), parked
    /// by the plan, holds back no rotation of its role's exposed token.
    /// Control: the same operation not parked does, and so does one
    /// provisioning in this pass whatever the plan said.
    #[test]
    fn a_parked_operation_holds_back_no_rotation() {
        let mut kept = add_op("w-4", "workers", Role::Worker);
        kept.done.insert(Step::Provision);
        let journal = [kept];
        let none = BTreeSet::new();
        let waiting = awaiting(&journal, &none, &none, Some(&[])).unwrap();
        assert_eq!(waiting, BTreeSet::from([Role::Worker]), "it awaits a join");
        let parked = BTreeSet::from(["w-4"]);
        let waiting = awaiting(&journal, &none, &parked, Some(&[])).unwrap();
        assert!(waiting.is_empty(), "parked: {waiting:?}");
        let mut tokens = Tokens::default();
        tokens.placed(Role::Worker, 0);
        assert_eq!(tokens.due(&waiting, 1), vec![Role::Worker]);
        // Another operation parked changes nothing for this one.
        let other = BTreeSet::from(["w-9"]);
        let waiting = awaiting(&journal, &none, &other, Some(&[])).unwrap();
        assert_eq!(waiting, BTreeSet::from([Role::Worker]));
        // Provisioning in this pass: it takes the current token now.
        let starting = BTreeSet::from(["w-4"]);
        let waiting = awaiting(&journal, &starting, &parked, Some(&[])).unwrap();
        assert_eq!(waiting, BTreeSet::from([Role::Worker]));
    }

    #[test]
    fn a_token_is_rotated_once_nothing_awaits_and_not_again_until_placed() {
        let mut t = Tokens::default();
        t.placed(Role::Plain, 0);
        assert!(t.due(&BTreeSet::new(), 0).is_empty(), "plain has no token");
        t.placed(Role::Worker, 0);
        let worker = BTreeSet::from([Role::Worker]);
        assert!(t.due(&worker, 1).is_empty(), "never while one awaits");
        assert_eq!(t.due(&BTreeSet::new(), 2), vec![Role::Worker]);
        t.rotated(Role::Worker, 2);
        assert!(t.due(&BTreeSet::new(), 3).is_empty());
        t.placed(Role::Worker, 4);
        assert!(t.due(&BTreeSet::new(), 5).is_empty(), "too soon");
        assert_eq!(
            t.due(&BTreeSet::new(), 2 + MIN_INTERVAL_MS),
            vec![Role::Worker]
        );
    }

    /// One event of a controller term, for the property below.
    #[derive(Debug, Clone)]
    enum Event {
        /// A machine of the role is provisioned with the token in user data.
        Provision(bool),
        /// The oldest machine of the role still waiting joins.
        Join(bool),
        /// Time passes and the controller makes a pass.
        Pass(Time),
    }

    fn event() -> impl Strategy<Value = Event> {
        prop_oneof![
            any::<bool>().prop_map(Event::Provision),
            any::<bool>().prop_map(Event::Join),
            (0..15_000u64).prop_map(Event::Pass),
        ]
    }

    fn role(manager: bool) -> Role {
        if manager { Role::Manager } else { Role::Worker }
    }

    proptest! {
        /// Safety: no rotation ever while a machine of the role holding the
        /// current token still awaits its join. Liveness: once nothing
        /// awaits and time passes, no token stays exposed.
        #[test]
        fn never_while_one_awaits_and_always_once_none_does(
            events in proptest::collection::vec(event(), 0..60),
            new_term in any::<bool>(),
        ) {
            let mut now: Time = 0;
            let mut t = if new_term {
                Tokens::assume_exposed([Role::Manager, Role::Worker], now)
            } else {
                Tokens::default()
            };
            let mut waiting: BTreeMap<Role, usize> = BTreeMap::new();
            let pass = |t: &mut Tokens, waiting: &BTreeMap<Role, usize>, now: Time| {
                let awaiting: BTreeSet<Role> =
                    waiting.iter().filter(|(_, n)| **n > 0).map(|(r, _)| *r).collect();
                for r in t.due(&awaiting, now) {
                    assert!(!awaiting.contains(&r), "rotated {r:?} while a machine awaits");
                    t.rotated(r, now);
                }
            };
            for e in events {
                match e {
                    Event::Provision(m) => {
                        t.placed(role(m), now);
                        *waiting.entry(role(m)).or_default() += 1;
                    }
                    Event::Join(m) => {
                        let n = waiting.entry(role(m)).or_default();
                        *n = n.saturating_sub(1);
                    }
                    Event::Pass(dt) => {
                        now += dt;
                        pass(&mut t, &waiting, now);
                    }
                }
            }
            // Everything joins; the controller keeps passing.
            waiting.clear();
            now += MIN_INTERVAL_MS;
            pass(&mut t, &waiting, now);
            prop_assert!(!t.is_exposed(Role::Manager) && !t.is_exposed(Role::Worker));
        }
    }
}
