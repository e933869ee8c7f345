//! Planner unit tests: small hand-built worlds, one safety rule each.
//!
//! The world is a healthy swarm of `m1..mN` managers (`m1` leads, and this
//! controller runs on it) plus a `workers` group whose members are added per
//! test. Time is driven by calling [`plan`] repeatedly with `now` advancing
//! and the returned memory fed back, as the controller does.

use super::{
    Action, Desired, DesiredGroup, GarbageState, GroupStatus, Memory, Phase, Plan, PlanInput, plan,
};
use crate::hash::config_hash;
use crate::journal::{OpKind, Operation, Step};
use crate::model::{
    Availability, Described, Instance, Node, NodeState, Observed, RaftMember, SwarmView, Tags,
    Time, tags,
};
use crate::spec::parse_str;
use std::collections::BTreeMap;

const CLUSTER: &str = "cluster-1";
/// The config hash of members built from a previous spec.
const OLD: &str = "0123456789abcdef";
const SEC: Time = 1_000;
const MANAGERS: &str = "managers";
const WORKERS: &str = "workers";

/// A cluster file: `n` managers and a worker group with `workers` extra
/// lines. More than one manager are replaced in place, accepting the unit of
/// fault tolerance that costs (the scenarios here are about that path; the
/// floor's own tests declare theirs).
fn cluster_yaml(managers: usize, workers: &str) -> String {
    let update = if managers > 1 {
        "  update: {strategy: replace, min_fault_tolerance: 0}\n"
    } else {
        ""
    };
    format!(
        "groups:\n\
         - name: managers\n  role: manager\n  allocation: {{size: {managers}}}\n  instance: {{provider: sim}}\n{update}\
         - name: workers\n  role: worker\n  instance: {{provider: sim}}\n{workers}"
    )
}

fn desired(yaml: &str) -> Desired {
    let loaded = parse_str(yaml);
    let spec = loaded
        .spec
        .unwrap_or_else(|| panic!("test spec rejected: {:?}", loaded.diagnostics));
    Desired {
        cluster_id: CLUSTER.into(),
        groups: spec
            .groups
            .into_iter()
            .map(|g| DesiredGroup {
                hash: config_hash(&g),
                spec: g,
                paused: false,
                is_rollback: false,
            })
            .collect(),
        orphan_grace: spec.gc.orphan_grace,
        held: Default::default(),
        replace: Default::default(),
        skip_drain: Default::default(),
        control: spec.control,
    }
}

/// An instance owned by this cluster's `group`, linked by `link`.
fn instance(group: &str, link: &str, config: &str, zone: Option<&str>) -> Instance {
    let mut t = Tags::new();
    t.insert(tags::CLUSTER.to_string(), CLUSTER.to_string());
    t.insert(tags::GROUP.to_string(), group.to_string());
    t.insert(tags::LINK.to_string(), link.to_string());
    t.insert(tags::CONFIG.to_string(), config.to_string());
    if let Some(z) = zone {
        t.insert(tags::ZONE.to_string(), z.to_string());
    }
    Instance {
        id: format!("i-{link}"),
        tags: t,
        running: true,
        created_ms: 0,
    }
}

pub(super) fn node(link: &str, manager: bool, leader: bool) -> Node {
    Node {
        id: format!("n-{link}"),
        link: Some(link.to_string()),
        cluster: Some(CLUSTER.to_string()),
        group: Some(if manager { MANAGERS } else { WORKERS }.to_string()),
        state: NodeState::Ready,
        availability: Availability::Active,
        manager_role: manager,
        raft: manager.then(|| RaftMember {
            leader,
            reachable: true,
            addr: format!("{link}:2377"),
        }),
        running_tasks: 0,
        locked: false,
        left: false,
        engine_no_manager: false,
        engine_version: None,
    }
}

/// A hand-built world plus the controller state carried between passes.
struct Cluster {
    desired: Desired,
    observed: Observed,
    journal: Vec<Operation>,
    memory: Memory,
    now: Time,
    /// Wall-clock time (epoch ms) at `now` 0: a pass at `now` reads the
    /// wall clock at `wall + now`.
    wall: Time,
    nonce: u64,
}

/// 2026-12-05 00:00 UTC, a Saturday: the test clusters' wall clock at `now` 0.
const WALL: Time = 1_796_428_800_000;

impl Cluster {
    /// `managers` current, healthy managers (`m1` leads and is self) and an
    /// empty worker group declared by `workers` (YAML lines of the group).
    fn new(managers: usize, workers: &str) -> Self {
        let desired = desired(&cluster_yaml(managers, workers));
        let hash = desired.groups[0].hash.clone();
        let links: Vec<String> = (1..=managers).map(|i| format!("m{i}")).collect();
        let insts = links
            .iter()
            .map(|l| instance(MANAGERS, l, &hash, None))
            .collect();
        let nodes = links
            .iter()
            .enumerate()
            .map(|(i, l)| node(l, true, i == 0))
            .collect();
        let mut instances = BTreeMap::new();
        instances.insert(MANAGERS.to_string(), Described::Ok(insts));
        instances.insert(WORKERS.to_string(), Described::Ok(Vec::new()));
        Cluster {
            desired,
            observed: Observed {
                instances,
                swarm: SwarmView::Ok(nodes),
                self_link: Some("m1".into()),
                left_reports: Vec::new(),
                services: Default::default(),
                boots: Default::default(),
                complete_listings: Default::default(),
            },
            journal: Vec::new(),
            memory: Memory::default(),
            now: 0,
            wall: WALL,
            nonce: 1,
        }
    }

    fn hash(&self, group: &str) -> String {
        self.desired
            .groups
            .iter()
            .find(|g| g.spec.name == group)
            .expect("declared group")
            .hash
            .clone()
    }

    fn group_mut(&mut self, group: &str) -> &mut DesiredGroup {
        self.desired
            .groups
            .iter_mut()
            .find(|g| g.spec.name == group)
            .expect("declared group")
    }

    fn instances(&mut self, group: &str) -> &mut Vec<Instance> {
        match self.observed.instances.get_mut(group) {
            Some(Described::Ok(list)) => list,
            other => panic!("{group} is not described: {other:?}"),
        }
    }

    fn nodes(&mut self) -> &mut Vec<Node> {
        match &mut self.observed.swarm {
            SwarmView::Ok(nodes) => nodes,
            other => panic!("no swarm: {other:?}"),
        }
    }

    fn node(&mut self, link: &str) -> &mut Node {
        self.nodes()
            .iter_mut()
            .find(|n| n.link.as_deref() == Some(link))
            .expect("node for link")
    }

    /// A healthy worker with a Ready node.
    fn add_worker(&mut self, link: &str, config: &str, zone: Option<&str>) {
        self.instances(WORKERS)
            .push(instance(WORKERS, link, config, zone));
        self.nodes().push(node(link, false, false));
    }

    /// Marks every member of `group` as built from the previous spec.
    fn outdate(&mut self, group: &str) {
        for i in self.instances(group) {
            i.tags.insert(tags::CONFIG.into(), OLD.into());
        }
    }

    fn outdate_one(&mut self, group: &str, link: &str) {
        for i in self.instances(group) {
            if i.link() == Some(link) {
                i.tags.insert(tags::CONFIG.into(), OLD.into());
            }
        }
    }

    /// The member's machine and node are gone (what a finished removal
    /// leaves: the operation removing it journaled its destroy's intent).
    fn remove_member(&mut self, group: &str, link: &str) {
        self.instances(group).retain(|i| i.link() != Some(link));
        self.nodes().retain(|n| n.link.as_deref() != Some(link));
        for o in &mut self.journal {
            if o.victim.as_ref().and_then(|v| v.link.as_deref()) == Some(link) {
                o.intent = Some(crate::journal::Intent {
                    step: Step::Destroy,
                    epoch: 1,
                });
            }
        }
    }

    /// The machine `op` provisioned, on the desired config; with a Ready node
    /// when `joined`.
    fn add_new_member(&mut self, op: &Operation, joined: bool) {
        let hash = self.hash(&op.group);
        let zone = op.target.as_ref().and_then(|t| t.zone.clone());
        let mut inst = instance(&op.group, &op.id, &hash, zone.as_deref());
        inst.id = format!("i-new-{}", op.id);
        if let Some(id) = op.target.as_ref().and_then(|t| t.logical_id.clone()) {
            inst.tags.insert(tags::LOGICAL_ID.into(), id);
        }
        self.instances(&op.group).push(inst);
        if joined {
            let manager = op.group == MANAGERS;
            self.nodes().push(node(&op.id, manager, false));
        }
    }

    /// One planning pass at `now`; memory is fed back for the next one.
    fn at(&mut self, now: Time) -> Plan {
        self.now = now;
        let p = plan(PlanInput {
            desired: &self.desired,
            observed: &self.observed,
            journal: &self.journal,
            memory: &self.memory,
            now,
            wall_ms: self.wall + now,
            nonce: self.nonce,
        });
        self.nonce += 1;
        self.memory = p.memory.clone();
        p
    }

    /// A new leader takes over: no memory of the previous controller's timers.
    fn forget(&mut self) {
        self.memory = Memory::default();
    }
}

fn begins<'p>(p: &'p Plan, group: &str) -> Vec<&'p Operation> {
    p.actions
        .iter()
        .filter_map(|a| match a {
            Action::Begin { op } if op.group == group => Some(&**op),
            _ => None,
        })
        .collect()
}

fn status<'p>(p: &'p Plan, group: &str) -> &'p GroupStatus {
    p.groups
        .iter()
        .find(|g| g.name == group)
        .expect("group status")
}

fn reason(p: &Plan, group: &str) -> String {
    status(p, group).reason.clone().unwrap_or_default()
}

/// `group` is blocked and nothing is rolled back: its reason.
fn blocked_not_rolled_back(p: &Plan, group: &str) -> String {
    assert!(
        !has(p, |a| matches!(a, Action::Rollback { .. })),
        "{}",
        describe(p)
    );
    assert_eq!(status(p, group).phase, Phase::Blocked, "{}", describe(p));
    reason(p, group)
}

fn victim_link(op: &Operation) -> &str {
    op.victim
        .as_ref()
        .and_then(|v| v.link.as_deref())
        .expect("victim with a link")
}

/// A journaled replacement (victim `i-<link>`, then a new member) of group
/// `managers` or `workers` by `role`, as an earlier controller wrote it.
fn replacement_op(
    id: &str,
    kind: OpKind,
    role: crate::spec::Role,
    link: &str,
    node: Option<&str>,
) -> Operation {
    let group = if role == crate::spec::Role::Manager {
        MANAGERS
    } else {
        WORKERS
    };
    Operation {
        victim: Some(crate::journal::Victim {
            link: Some(link.into()),
            node: node.map(str::to_string),
            ..crate::testkit::victim(&format!("i-{link}"))
        }),
        target: Some(crate::testkit::first_attempt()),
        ..crate::testkit::op(id, group, kind, role)
    }
}

fn has(p: &Plan, pred: impl Fn(&Action) -> bool) -> bool {
    p.actions.iter().any(pred)
}

fn describe(p: &Plan) -> String {
    let actions: Vec<String> = p.actions.iter().map(Action::describe).collect();
    format!(
        "actions: {actions:#?}\nexplanation: {:#?}\ngroups: {:#?}",
        p.explanation, p.groups
    )
}

// ---------------------------------------------------------------- step_timeout

/// Four outdated workers rolled two at a time with a 60s step_timeout;
/// `update` adds to the update section, `more` adds group lines.
fn rolling_workers(update: &str, more: &str) -> Cluster {
    let yaml = format!(
        "  allocation: {{size: 4}}\n  update: {{canaries: 0, max_in_flight: 2, step_timeout: 60s{update}}}\n{more}"
    );
    let mut c = Cluster::new(3, &yaml);
    for i in 1..=4 {
        c.add_worker(&format!("w{i}"), OLD, None);
    }
    c
}

/// Starts two rolls at t=0 but journals only the first (the shell stopped at
/// a failed action before the second Begin), leaving budget for one more.
fn journal_first_roll(c: &mut Cluster) -> Operation {
    let p = c.at(0);
    let ops = begins(&p, WORKERS);
    assert_eq!(ops.len(), 2, "{}", describe(&p));
    let op = ops[0].clone();
    assert_eq!(op.kind, OpKind::Roll);
    c.journal.push(op.clone());
    op
}

#[test]
fn a_new_worker_that_never_joins_blocks_its_group_once_step_timeout_passes() {
    let mut c = rolling_workers("", "");
    let op = journal_first_roll(&mut c);
    // Drain, destroy and node removal done; the replacement boots but never joins.
    c.remove_member(WORKERS, victim_link(&op));
    c.add_new_member(&op, false);

    let p = c.at(10 * SEC);
    assert_eq!(
        status(&p, WORKERS).phase,
        Phase::Rolling,
        "{}",
        describe(&p)
    );
    assert!(reason(&p, WORKERS).contains("to join"), "{}", describe(&p));
    // Control: while the step is within its timeout the budget admits a second roll.
    assert_eq!(begins(&p, WORKERS).len(), 1, "{}", describe(&p));

    let p = c.at(70 * SEC - 1);
    assert_ne!(
        status(&p, WORKERS).phase,
        Phase::Blocked,
        "{}",
        describe(&p)
    );

    // step_timeout is measured from the first sighting of the wait (t=10s).
    let p = c.at(70 * SEC);
    let st = status(&p, WORKERS);
    assert_eq!(st.phase, Phase::Blocked, "{}", describe(&p));
    let why = reason(&p, WORKERS);
    assert!(why.contains("await-healthy"), "{why}");
    assert!(why.contains(&op.id), "{why}");
    assert!(why.contains("step_timeout"), "{why}");
    assert!(begins(&p, WORKERS).is_empty(), "{}", describe(&p));
    assert!(
        !has(&p, |a| matches!(a, Action::Rollback { .. })),
        "on_failure defaults to pause: {}",
        describe(&p)
    );

    // It stays blocked on later passes too.
    let p = c.at(200 * SEC);
    assert_eq!(status(&p, WORKERS).phase, Phase::Blocked);
    assert!(begins(&p, WORKERS).is_empty(), "{}", describe(&p));
}

#[test]
fn a_drain_that_outlives_step_timeout_blocks_its_group_naming_the_drain_step() {
    // drain.timeout is longer than step_timeout: the step deadline fires first.
    let mut c = rolling_workers("", "  drain: {timeout: 10m, on_timeout: block}\n");
    let op = journal_first_roll(&mut c);
    let victim = victim_link(&op).to_string();
    let n = c.node(&victim);
    n.availability = Availability::Drain;
    n.running_tasks = 3;

    let p = c.at(SEC);
    assert!(reason(&p, WORKERS).contains("draining"), "{}", describe(&p));
    assert_eq!(begins(&p, WORKERS).len(), 1, "control: room for one more");

    let p = c.at(61 * SEC);
    assert_eq!(
        status(&p, WORKERS).phase,
        Phase::Blocked,
        "{}",
        describe(&p)
    );
    let why = reason(&p, WORKERS);
    assert!(why.contains("step drain of"), "{why}");
    assert!(why.contains("step_timeout"), "{why}");
    assert!(begins(&p, WORKERS).is_empty(), "{}", describe(&p));
    assert!(
        !has(&p, |a| matches!(a, Action::Destroy { .. })),
        "{}",
        describe(&p)
    );
}

#[test]
fn a_drain_past_drain_timeout_blocks_with_on_timeout_block() {
    let mut c = rolling_workers("", "  drain: {timeout: 30s, on_timeout: block}\n");
    let op = journal_first_roll(&mut c);
    let victim = victim_link(&op).to_string();
    let n = c.node(&victim);
    n.availability = Availability::Drain;
    n.running_tasks = 3;

    let p = c.at(SEC);
    assert_ne!(status(&p, WORKERS).phase, Phase::Blocked);
    let p = c.at(31 * SEC - 1);
    assert_ne!(
        status(&p, WORKERS).phase,
        Phase::Blocked,
        "{}",
        describe(&p)
    );

    let p = c.at(31 * SEC);
    assert_eq!(
        status(&p, WORKERS).phase,
        Phase::Blocked,
        "{}",
        describe(&p)
    );
    let why = reason(&p, WORKERS);
    assert!(
        why.contains(&format!("drain of node n-{victim} timed out")),
        "{why}"
    );
    assert!(why.contains("on_timeout: block"), "{why}");
    assert!(begins(&p, WORKERS).is_empty(), "{}", describe(&p));
    assert!(!has(&p, |a| matches!(a, Action::Destroy { .. })));
}

#[test]
fn a_drain_past_drain_timeout_goes_on_to_destroy_with_on_timeout_force() {
    let mut c = rolling_workers("", "  drain: {timeout: 30s, on_timeout: force}\n");
    let op = journal_first_roll(&mut c);
    let victim = victim_link(&op).to_string();
    let n = c.node(&victim);
    n.availability = Availability::Drain;
    n.running_tasks = 3;

    let p = c.at(SEC);
    assert!(!has(&p, |a| matches!(a, Action::Destroy { .. })));
    let p = c.at(31 * SEC);
    assert_ne!(
        status(&p, WORKERS).phase,
        Phase::Blocked,
        "{}",
        describe(&p)
    );
    let destroy = Action::Destroy {
        op: op.id.clone(),
        instance: format!("i-{victim}"),
    };
    assert!(p.actions.contains(&destroy), "{}", describe(&p));
}

#[test]
fn a_timed_out_roll_with_on_failure_rollback_requests_one_rollback_per_group() {
    let mut c = rolling_workers(", on_failure: rollback", "");
    // Both rolls journaled; neither replacement ever joins.
    let p = c.at(0);
    let ops: Vec<Operation> = begins(&p, WORKERS).into_iter().cloned().collect();
    assert_eq!(ops.len(), 2);
    for op in &ops {
        c.journal.push(op.clone());
        c.remove_member(WORKERS, victim_link(op));
        c.add_new_member(op, false);
    }

    let p = c.at(10 * SEC);
    assert!(!has(&p, |a| matches!(a, Action::Rollback { .. })));

    let p = c.at(70 * SEC);
    let rollbacks: Vec<&Action> = p
        .actions
        .iter()
        .filter(|a| matches!(a, Action::Rollback { .. }))
        .collect();
    assert_eq!(rollbacks.len(), 1, "{}", describe(&p));
    let Action::Rollback { group, reason } = rollbacks[0] else {
        unreachable!()
    };
    assert_eq!(group, WORKERS);
    assert!(reason.contains("step_timeout"), "{reason}");
    assert!(reason.contains("await-healthy"), "{reason}");
    assert_ne!(
        status(&p, WORKERS).phase,
        Phase::Blocked,
        "{}",
        describe(&p)
    );
    assert!(begins(&p, WORKERS).is_empty(), "{}", describe(&p));
}

#[test]
fn a_timed_out_step_of_a_rollback_blocks_instead_of_rolling_back_again() {
    let mut c = rolling_workers(", on_failure: rollback", "");
    c.group_mut(WORKERS).is_rollback = true;
    let op = journal_first_roll(&mut c);
    c.remove_member(WORKERS, victim_link(&op));
    c.add_new_member(&op, false);

    c.at(10 * SEC);
    let p = c.at(70 * SEC);
    let why = blocked_not_rolled_back(&p, WORKERS);
    assert!(why.contains("rollback failed"), "{why}");
    assert!(why.contains("await-healthy"), "{why}");
    assert!(begins(&p, WORKERS).is_empty(), "{}", describe(&p));
}

// ---------------------------------------------------------------- paused

#[test]
fn a_paused_group_begins_nothing_although_members_are_outdated_or_missing() {
    let mut c = Cluster::new(3, "  allocation: {size: 3}\n");
    c.add_worker("w1", OLD, None);
    c.add_worker("w2", OLD, None);

    // Control: unpaused, the planner rolls one and provisions the missing one.
    let p = c.at(0);
    let kinds: Vec<OpKind> = begins(&p, WORKERS).iter().map(|o| o.kind).collect();
    assert!(kinds.contains(&OpKind::Roll), "{}", describe(&p));
    assert!(kinds.contains(&OpKind::Provision), "{}", describe(&p));

    c.group_mut(WORKERS).paused = true;
    c.forget();
    let p = c.at(SEC);
    assert!(begins(&p, WORKERS).is_empty(), "{}", describe(&p));
    assert!(
        p.actions.iter().all(|a| !a.is_side_effect()),
        "{}",
        describe(&p)
    );
    assert_eq!(status(&p, WORKERS).phase, Phase::Paused);
}

// ---------------------------------------------------------------- failed describe

#[test]
fn a_failed_describe_provisions_and_destroys_nothing_and_reads_unobservable() {
    let mut c = Cluster::new(3, "  allocation: {size: 3}\n");

    // Control: an empty (successful) listing means three members to provision.
    let p = c.at(0);
    assert_eq!(begins(&p, WORKERS).len(), 3, "{}", describe(&p));

    c.observed.instances.insert(
        WORKERS.into(),
        Described::Failed("provider timed out".into()),
    );
    let p = c.at(SEC);
    assert!(begins(&p, WORKERS).is_empty(), "{}", describe(&p));
    assert!(
        !has(&p, |a| matches!(
            a,
            Action::Provision { .. } | Action::Destroy { .. }
        )),
        "{}",
        describe(&p)
    );
    let st = status(&p, WORKERS);
    assert_eq!(st.phase, Phase::Unobservable);
    assert!(reason(&p, WORKERS).contains("provider timed out"));
}

#[test]
fn a_failed_describe_holds_a_journaled_destroy() {
    let mut c = Cluster::new(3, "  allocation: {size: 2}\n");
    c.add_worker("w1", OLD, None);
    c.add_worker("w2", OLD, None);
    let p = c.at(0);
    let op = begins(&p, WORKERS)[0].clone();
    c.journal.push(op.clone());
    // Drained and empty: the next step is the destroy.
    let victim = victim_link(&op).to_string();
    c.node(&victim).availability = Availability::Drain;

    let p = c.at(SEC);
    assert!(
        has(
            &p,
            |a| matches!(a, Action::Destroy { op: o, .. } if *o == op.id)
        ),
        "control: {}",
        describe(&p)
    );

    c.observed
        .instances
        .insert(WORKERS.into(), Described::Failed("throttled".into()));
    let p = c.at(2 * SEC);
    assert!(
        p.actions.iter().all(|a| a.op_id() != Some(op.id.as_str())),
        "{}",
        describe(&p)
    );
    assert!(!has(&p, |a| matches!(a, Action::Destroy { .. })));
    assert_eq!(status(&p, WORKERS).phase, Phase::Unobservable);
}

// ---------------------------------------------------------------- timers and new leaders

#[test]
fn a_new_leader_restarts_the_unhealthy_timer_from_its_own_first_sighting() {
    let mut c = Cluster::new(
        3,
        "  allocation: {size: 2}\n  health: {unhealthy_after: 2m}\n",
    );
    let hash = c.hash(WORKERS);
    c.add_worker("w1", &hash, None);
    c.add_worker("w2", &hash, None);
    c.node("w2").state = NodeState::Down;
    let heals = |p: &Plan| {
        begins(p, WORKERS)
            .into_iter()
            .filter(|o| o.kind == OpKind::Heal)
            .count()
    };

    // The old leader saw w2 down at t=0 and, 2m later, replaces it.
    let p = c.at(0);
    assert_eq!(heals(&p), 0);
    let p = c.at(130 * SEC);
    assert_eq!(heals(&p), 1, "control: {}", describe(&p));

    // A new leader at the same moment has no memory: the clock starts now.
    c.forget();
    let p = c.at(130 * SEC);
    assert_eq!(heals(&p), 0, "{}", describe(&p));
    assert_eq!(p.wake_at, Some(250 * SEC));
    let p = c.at(250 * SEC - 1);
    assert_eq!(heals(&p), 0, "{}", describe(&p));
    let p = c.at(250 * SEC);
    assert_eq!(heals(&p), 1, "{}", describe(&p));
    let heal = begins(&p, WORKERS)[0];
    assert_eq!(victim_link(heal), "w2");
}

#[test]
fn wake_at_is_when_the_earliest_running_timer_expires() {
    let mut c = Cluster::new(3, "  allocation: {size: 1}\n  update: {watch: 5s}\n");
    c.add_worker("w1", OLD, None);
    let p = c.at(0);
    let op = begins(&p, WORKERS)[0].clone();
    c.journal.push(op.clone());
    c.remove_member(WORKERS, "w1");
    c.add_new_member(&op, true);

    // The new member is first seen healthy at 10s: its watch ends at 15s
    // (the step timeout, also running, would end at 610s).
    let p = c.at(10 * SEC);
    assert!(reason(&p, WORKERS).contains("watching"), "{}", describe(&p));
    assert_eq!(p.wake_at, Some(15 * SEC));
    let p = c.at(12 * SEC);
    assert_eq!(
        p.wake_at,
        Some(15 * SEC),
        "measured from the first sighting"
    );
    assert!(!has(&p, |a| matches!(a, Action::Complete { .. })));

    let p = c.at(15 * SEC);
    assert!(
        p.actions.contains(&Action::MarkDone {
            op: op.id.clone(),
            step: Step::AwaitHealthy
        }),
        "{}",
        describe(&p)
    );
    assert!(p.actions.contains(&Action::Complete { op: op.id.clone() }));
    assert_eq!(p.wake_at, None, "{}", describe(&p));
}

#[test]
fn wake_at_restarts_with_a_new_leaders_memory() {
    let mut c = Cluster::new(3, "  allocation: {size: 1}\n  update: {watch: 5s}\n");
    c.add_worker("w1", OLD, None);
    let p = c.at(0);
    let op = begins(&p, WORKERS)[0].clone();
    c.journal.push(op.clone());
    c.remove_member(WORKERS, "w1");
    c.add_new_member(&op, true);
    c.at(10 * SEC);
    c.forget();
    let p = c.at(12 * SEC);
    assert_eq!(p.wake_at, Some(17 * SEC));
    let p = c.at(15 * SEC);
    assert!(
        !has(&p, |a| matches!(a, Action::Complete { .. })),
        "{}",
        describe(&p)
    );
}

// ---------------------------------------------------------------- managers: quorum gates

fn is_demote(a: &Action) -> bool {
    matches!(a, Action::Demote { .. } | Action::DemoteSelfAndLeave { .. })
}

#[test]
fn no_healthy_manager_is_disrupted_while_another_raft_member_is_unreachable() {
    let mut c = Cluster::new(3, "  allocation: {size: 1}\n");
    c.outdate_one(MANAGERS, "m2");

    // Control: with every member reachable, m2 is rolled (demoted first).
    let p = c.at(0);
    let rolls = begins(&p, MANAGERS);
    assert_eq!(rolls.len(), 1, "{}", describe(&p));
    assert_eq!(victim_link(rolls[0]), "m2");
    assert!(
        p.actions.contains(&Action::Demote {
            op: rolls[0].id.clone(),
            node: "n-m2".into()
        }),
        "{}",
        describe(&p)
    );

    c.forget();
    c.node("m3").raft.as_mut().expect("member").reachable = false;
    let p = c.at(SEC);
    assert!(!has(&p, is_demote), "{}", describe(&p));
    assert!(
        begins(&p, MANAGERS)
            .iter()
            .all(|o| o.victim.as_ref().and_then(|v| v.link.as_deref()) != Some("m2")),
        "{}",
        describe(&p)
    );
    let why = reason(&p, MANAGERS);
    assert!(why.contains("i-m3"), "{why}");
}

#[test]
fn no_healthy_manager_is_disrupted_while_a_raft_member_without_a_machine_is_unreachable() {
    let mut c = Cluster::new(3, "  allocation: {size: 1}\n");
    c.outdate_one(MANAGERS, "m2");
    // m3's machine vanished outside drover; its raft membership did not.
    c.instances(MANAGERS).retain(|i| i.link() != Some("m3"));
    let n = c.node("m3");
    n.state = NodeState::Down;
    n.raft.as_mut().expect("member").reachable = false;

    let p = c.at(0);
    assert!(!has(&p, is_demote), "{}", describe(&p));
    assert!(
        begins(&p, MANAGERS).iter().all(|o| o.kind != OpKind::Roll),
        "{}",
        describe(&p)
    );
    let why = reason(&p, MANAGERS);
    assert!(why.contains("no machine carries its link"), "{why}");

    // Once Down for the grace period (unhealthy_after), the dead member is
    // reaped first: demoted (it is unreachable, so that raises FT), removed.
    let p = c.at(120 * SEC);
    let reap: Vec<&Operation> = begins(&p, MANAGERS)
        .into_iter()
        .filter(|o| o.kind == OpKind::RemoveDead)
        .collect();
    assert_eq!(reap.len(), 1, "{}", describe(&p));
    assert!(
        p.actions
            .iter()
            .any(|a| matches!(a, Action::Demote { node, .. } if node == "n-m3")),
        "{}",
        describe(&p)
    );
    assert!(
        begins(&p, MANAGERS).iter().all(|o| o.kind != OpKind::Roll),
        "{}",
        describe(&p)
    );
}

/// Five managers with m2's roll journaled while the raft was whole.
fn five_managers_rolling_m2() -> (Cluster, Operation) {
    let mut c = Cluster::new(5, "  allocation: {size: 1}\n");
    c.outdate_one(MANAGERS, "m2");
    let p = c.at(0);
    let op = begins(&p, MANAGERS)[0].clone();
    assert_eq!(victim_link(&op), "m2");
    c.journal.push(op.clone());
    (c, op)
}

#[test]
fn a_journaled_demotion_steps_aside_when_a_raft_member_becomes_unreachable() {
    // With 5 members and 1 unreachable, removing m2 would still leave FT 0:
    // only the "every member reachable" rule stops the demotion.
    let (mut c, op) = five_managers_rolling_m2();
    let p = c.at(SEC);
    assert!(
        p.actions.contains(&Action::Demote {
            op: op.id.clone(),
            node: "n-m2".into()
        }),
        "control: {}",
        describe(&p)
    );

    c.instances(MANAGERS).retain(|i| i.link() != Some("m5"));
    let n = c.node("m5");
    n.state = NodeState::Down;
    n.raft.as_mut().expect("member").reachable = false;
    let p = c.at(2 * SEC);
    assert!(!has(&p, is_demote), "{}", describe(&p));
    assert!(p.actions.contains(&Action::Complete { op: op.id.clone() }));
    assert!(
        p.explanation
            .iter()
            .any(|l| l.contains("1 of 5 raft members are unreachable")),
        "{}",
        describe(&p)
    );
}

/// The roll's floor (issue 18): a journaled in-place replacement whose
/// group now holds its converged fault tolerance (surge, floor 2 for 5
/// managers) does not demote a member to reach 1; the same op under the
/// old floor (0) does (the control).
#[test]
fn a_journaled_demotion_waits_when_it_would_go_below_the_rolls_floor() {
    let (mut c, op) = five_managers_rolling_m2();
    let demote = Action::Demote {
        op: op.id.clone(),
        node: "n-m2".into(),
    };
    assert!(c.at(SEC).actions.contains(&demote), "control");
    let update = &mut c.desired.groups[0].spec.update;
    update.strategy = crate::spec::Strategy::Surge;
    update.min_fault_tolerance = None;
    let p = c.at(2 * SEC);
    assert!(!p.actions.contains(&demote), "{}", describe(&p));
    // The floor is the group's own: the reason does not blame a field the
    // operator never set (issue 36).
    assert!(
        p.explanation.iter().any(|l| l.contains(
            "below this roll's floor of 2 (what the group keeps while one member is replaced; update.min_fault_tolerance is not set)"
        )),
        "{}",
        describe(&p)
    );
    c.desired.groups[0].spec.update.min_fault_tolerance = Some(2);
    let p = c.at(3 * SEC);
    assert!(
        p.explanation
            .iter()
            .any(|l| l.contains("below this roll's floor of 2 (update.min_fault_tolerance)")),
        "{}",
        describe(&p)
    );
}

#[test]
fn a_journaled_demotion_steps_aside_while_the_raft_has_fewer_members_than_declared() {
    // m3 left the raft and its machine is gone: 2 of 3 declared. Removing m2
    // would leave FT 0 by arithmetic; only the "raft whole" rule stops it.
    let mut c = Cluster::new(3, "  allocation: {size: 1}\n");
    c.outdate_one(MANAGERS, "m2");
    let p = c.at(0);
    let op = begins(&p, MANAGERS)[0].clone();
    assert_eq!(victim_link(&op), "m2");
    c.journal.push(op.clone());
    c.remove_member(MANAGERS, "m3");

    let p = c.at(SEC);
    assert!(!has(&p, is_demote), "{}", describe(&p));
    assert!(
        p.explanation
            .iter()
            .any(|l| l.contains("fewer than the 3 declared")),
        "{}",
        describe(&p)
    );
    assert!(
        begins(&p, MANAGERS).iter().all(|o| o.kind != OpKind::Roll),
        "{}",
        describe(&p)
    );
}

// ---------------------------------------------------------------- managers: leader last

#[test]
fn with_every_manager_outdated_the_leader_is_not_the_first_victim() {
    let mut c = Cluster::new(3, "  allocation: {size: 1}\n");
    c.outdate(MANAGERS);
    // i-m1 (the leader, self) would sort first by id.
    let p = c.at(0);
    let rolls = begins(&p, MANAGERS);
    assert_eq!(
        rolls.len(),
        1,
        "managers go one at a time: {}",
        describe(&p)
    );
    let victim = rolls[0].victim.as_ref().expect("victim");
    assert_ne!(victim.link.as_deref(), Some("m1"));
    assert!(!victim.is_self);
    assert_eq!(rolls[0].steps()[0], Step::Demote);
}

#[test]
fn the_outdated_leader_goes_last_through_self_demotion() {
    let mut c = Cluster::new(3, "  allocation: {size: 1}\n");
    c.outdate_one(MANAGERS, "m1");
    let p = c.at(0);
    let rolls = begins(&p, MANAGERS);
    assert_eq!(rolls.len(), 1, "{}", describe(&p));
    let op = rolls[0];
    let victim = op.victim.as_ref().expect("victim");
    assert_eq!(victim.link.as_deref(), Some("m1"));
    assert!(victim.is_self);
    assert_eq!(op.steps()[0], Step::DemoteSelfAndLeave);

    let begin_at = p
        .actions
        .iter()
        .position(|a| matches!(a, Action::Begin { op: o } if o.id == op.id))
        .expect("begin");
    let first_effect = p
        .actions
        .iter()
        .position(|a| a.op_id() == Some(op.id.as_str()) && a.is_side_effect())
        .expect("a side effect");
    assert!(begin_at < first_effect);
    assert_eq!(
        p.actions[first_effect],
        Action::DemoteSelfAndLeave {
            op: op.id.clone(),
            node: "n-m1".into()
        }
    );
    assert!(
        !has(&p, |a| matches!(a, Action::Demote { .. })),
        "{}",
        describe(&p)
    );
}

#[test]
fn the_outdated_leader_waits_while_another_manager_is_not_current_and_healthy() {
    let mut c = Cluster::new(3, "  allocation: {size: 1}\n");
    c.outdate_one(MANAGERS, "m1");
    c.node("m3").raft.as_mut().expect("member").reachable = false;
    let p = c.at(0);
    assert!(!has(&p, is_demote), "{}", describe(&p));
    assert!(begins(&p, MANAGERS).is_empty(), "{}", describe(&p));
    assert!(
        reason(&p, MANAGERS).contains("the leader goes last"),
        "{}",
        describe(&p)
    );
}

// ---------------------------------------------------------------- ownership

fn foreign(tags_cluster: Option<&str>) -> Instance {
    let mut i = instance(WORKERS, "x1", OLD, None);
    i.id = "i-foreign".into();
    match tags_cluster {
        Some(c) => i.tags.insert(tags::CLUSTER.into(), c.into()),
        None => i.tags.remove(tags::CLUSTER),
    };
    i
}

#[test]
fn an_instance_without_this_clusters_id_is_neither_retired_nor_counted() {
    let mut c = Cluster::new(3, "  allocation: {size: 2}\n");
    let hash = c.hash(WORKERS);
    c.add_worker("w1", &hash, None);
    c.add_worker("w2", &hash, None);

    // Control: were it ours, the group would be over size and one retired.
    let mut ours = foreign(Some(CLUSTER));
    ours.tags.insert(tags::CONFIG.into(), hash.clone());
    c.instances(WORKERS).push(ours);
    let p = c.at(0);
    let kinds: Vec<OpKind> = begins(&p, WORKERS).iter().map(|o| o.kind).collect();
    assert_eq!(kinds, vec![OpKind::Retire], "{}", describe(&p));

    for tag in [None, Some("another-cluster")] {
        c.instances(WORKERS).retain(|i| i.id != "i-foreign");
        let mut f = foreign(tag);
        f.tags.insert(tags::CONFIG.into(), hash.clone());
        c.instances(WORKERS).push(f);
        c.forget();
        let p = c.at(SEC);
        assert!(begins(&p, WORKERS).is_empty(), "{tag:?}: {}", describe(&p));
        assert!(
            !has(&p, |a| matches!(a, Action::Destroy { .. })),
            "{}",
            describe(&p)
        );
        let st = status(&p, WORKERS);
        assert_eq!(st.members, 2);
        assert_eq!(st.phase, Phase::Converged, "{}", describe(&p));
    }
}

#[test]
fn an_outdated_foreign_instance_is_not_rolled_and_does_not_fill_a_slot() {
    let mut c = Cluster::new(3, "  allocation: {size: 3}\n");
    let hash = c.hash(WORKERS);
    c.add_worker("w1", &hash, None);
    c.add_worker("w2", &hash, None);
    c.instances(WORKERS).push(foreign(Some("another-cluster")));
    let p = c.at(0);
    let ops = begins(&p, WORKERS);
    assert_eq!(ops.len(), 1, "{}", describe(&p));
    assert_eq!(ops[0].kind, OpKind::Provision);
    assert!(ops[0].victim.is_none());
}

// ---------------------------------------------------------------- zones

#[test]
fn rolls_begun_in_one_pass_stay_in_one_zone() {
    let mut c = Cluster::new(
        3,
        "  allocation: {size: 5, zones: [a, b]}\n  update: {canaries: 0, max_in_flight: 4}\n",
    );
    c.add_worker("w1", OLD, Some("a"));
    c.add_worker("w2", OLD, Some("a"));
    c.add_worker("w3", OLD, Some("b"));
    c.add_worker("w4", OLD, Some("b"));
    c.add_worker("w5", OLD, Some("b"));
    let p = c.at(0);
    let rolls = begins(&p, WORKERS);
    assert_eq!(rolls.len(), 2, "{}", describe(&p));
    let zones: Vec<Option<&str>> = rolls
        .iter()
        .map(|o| o.victim.as_ref().and_then(|v| v.zone.as_deref()))
        .collect();
    assert!(zones.iter().all(|z| *z == Some("a")), "{zones:?}");
    assert!(
        reason(&p, WORKERS).contains("one zone at a time"),
        "{}",
        describe(&p)
    );
}

#[test]
fn scale_in_takes_from_the_fullest_zone() {
    let mut c = Cluster::new(3, "  allocation: {size: 3, zones: [a, b]}\n");
    let hash = c.hash(WORKERS);
    c.add_worker("w1", &hash, Some("a"));
    c.add_worker("w2", &hash, Some("b"));
    c.add_worker("w3", &hash, Some("b"));
    c.add_worker("w4", &hash, Some("b"));
    // The zone-a member is the newest, which the tie-break alone would pick.
    for (k, i) in c.instances(WORKERS).iter_mut().enumerate() {
        i.created_ms = if i.link() == Some("w1") {
            100
        } else {
            k as u64
        };
    }
    let p = c.at(0);
    let ops = begins(&p, WORKERS);
    assert_eq!(ops.len(), 1, "{}", describe(&p));
    assert_eq!(ops[0].kind, OpKind::Retire);
    let victim = ops[0].victim.as_ref().expect("victim");
    assert_eq!(victim.zone.as_deref(), Some("b"));
    assert_eq!(victim.instance.as_deref(), Some("i-w4"), "newest in zone b");
}

// ---------------------------------------------------------------- unobservable swarm

/// Regression: with the swarm unobservable (`Unavailable`) or without a
/// leader (`NoQuorum`) the world has no nodes; "no node" must not read as
/// "step done" (it once destroyed a manager still in the raft, and a worker
/// mid-drain with tasks running).
#[test]
fn an_unobservable_swarm_never_completes_a_demote_or_drain_step() {
    let mut c = Cluster::new(3, "  allocation: {size: 2}\n");
    c.add_worker("w1", OLD, None);
    c.add_worker("w2", OLD, None);
    c.outdate_one(MANAGERS, "m2");
    let p = c.at(0);
    let manager_op = begins(&p, MANAGERS)[0].clone();
    c.journal.push(manager_op);
    c.journal.push(replacement_op(
        "workers-roll",
        OpKind::Roll,
        crate::spec::Role::Worker,
        "w1",
        Some("n-w1"),
    ));
    let n = c.node("w1");
    n.availability = Availability::Drain;
    n.running_tasks = 5;
    for swarm in [
        SwarmView::Unavailable("engine API timed out".into()),
        SwarmView::NoQuorum("the swarm does not have a leader".into()),
    ] {
        c.observed.swarm = swarm;
        let p = c.at(SEC);
        assert!(
            !has(&p, |a| matches!(
                a,
                Action::Destroy { .. } | Action::MarkDone { .. } | Action::RemoveNode { .. }
            )),
            "{}",
            describe(&p)
        );
    }
}

// ---------------------------------------------------------------- shared links

/// Two machines on one link (e.g. a provision retried by a provider that is
/// not idempotent) block the group: a node step matched by that link could
/// hit the other machine's node, so drover refuses to guess.
#[test]
fn two_machines_on_one_link_block_the_group_and_nothing_is_disrupted() {
    let mut c = Cluster::new(3, "  allocation: {size: 1}\n");
    c.add_worker("w1", OLD, None);
    let mut twin = instance(WORKERS, "w1", OLD, None);
    twin.id = "i-w1-twin".into();
    c.instances(WORKERS).push(twin);
    assert_blocked_on_shared_link(&c.at(0), "w1");
    // The same before either joined: no node carries the link yet.
    let mut c = Cluster::new(3, "  allocation: {size: 2}\n");
    for id in ["i-w2", "i-w2-twin"] {
        let mut i = instance(WORKERS, "w2", OLD, None);
        i.id = id.into();
        c.instances(WORKERS).push(i);
    }
    assert_blocked_on_shared_link(&c.at(0), "w2");
}

fn assert_blocked_on_shared_link(p: &Plan, link: &str) {
    assert!(begins(p, WORKERS).is_empty(), "{}", describe(p));
    let st = status(p, WORKERS);
    assert_eq!(st.phase, Phase::Blocked);
    assert!(
        st.reason
            .as_deref()
            .is_some_and(|r| r.contains(&format!("same link {link}"))),
        "{st:?}"
    );
}

#[test]
fn member_status_joins_each_instance_to_its_node_with_the_planners_health() {
    let mut c = Cluster::new(3, "  allocation: {size: 2}\n");
    let hash = c.hash(WORKERS);
    c.add_worker("w1", &hash, None);
    c.add_worker("w2", OLD, None);
    c.node("m3").raft.as_mut().unwrap().reachable = false;
    c.instances(WORKERS)
        .push(instance(WORKERS, "w3", &hash, None));
    let mut foreign = instance(WORKERS, "x1", &hash, None);
    foreign.tags.insert(tags::CLUSTER.into(), "another".into());
    c.instances(WORKERS).push(foreign);

    let rows = super::member_status(&c.desired, &c.observed);
    let row = |id: &str| rows.iter().find(|r| r.id == id).expect(id);
    assert_eq!(rows.len(), 6, "{rows:#?}");
    assert!(
        rows.iter().all(|r| r.id != "i-x1"),
        "another cluster's machine listed"
    );
    let m1 = row("i-m1");
    assert_eq!(
        (m1.role.as_str(), m1.leader, m1.health.as_str()),
        ("manager", true, "healthy")
    );
    assert_eq!(m1.node_id.as_deref(), Some("n-m1"));
    assert!(m1.current);
    let m3 = row("i-m3");
    assert_eq!(m3.health, "unhealthy");
    assert_eq!(m3.health_reason.as_deref(), Some("manager unreachable"));
    assert!(!m3.leader);
    assert_eq!(row("i-w1").role, "worker");
    assert!(row("i-w1").current && !row("i-w2").current);
    let w3 = row("i-w3");
    assert_eq!(
        (w3.health.as_str(), w3.node_id.as_deref()),
        ("pending", None)
    );
}

#[test]
fn a_held_member_is_neither_rolled_nor_healed_and_the_group_says_why() {
    let mut c = Cluster::new(3, "  allocation: {size: 2}\n");
    c.add_worker("w1", OLD, None);
    c.add_worker("w2", OLD, None);
    c.node("w2").state = NodeState::Down;
    c.desired.held.insert("i-w1".into());
    c.desired.held.insert("i-w2".into());
    for t in [0, 10 * 60 * SEC] {
        let p = c.at(t);
        assert!(begins(&p, WORKERS).is_empty(), "{}", describe(&p));
        assert!(
            reason(&p, WORKERS).contains("held by an operator: i-w1, i-w2"),
            "{}",
            describe(&p)
        );
    }
    // Released: w2's unhealthy timer starts now (held, it was never judged).
    c.desired.held.clear();
    c.at(11 * 60 * SEC);
    let p = c.at(20 * 60 * SEC);
    assert!(
        !begins(&p, WORKERS).is_empty(),
        "released members are not acted on: {}",
        describe(&p)
    );
}

#[test]
fn a_replace_request_rolls_one_current_member_and_a_hold_wins_over_it() {
    let mut c = Cluster::new(3, "  allocation: {size: 2}\n");
    let hash = c.hash(WORKERS);
    c.add_worker("w1", &hash, None);
    c.add_worker("w2", &hash, None);
    c.desired.replace.insert("i-w2".into());
    c.desired.held.insert("i-w2".into());
    assert!(begins(&c.at(0), WORKERS).is_empty());
    c.desired.held.clear();
    let p = c.at(SEC);
    let ops = begins(&p, WORKERS);
    assert_eq!(ops.len(), 1, "{}", describe(&p));
    assert_eq!(victim_link(ops[0]), "w2");
}

#[test]
fn a_replace_with_skip_drain_destroys_without_draining() {
    let mut c = Cluster::new(3, "  allocation: {size: 2}\n");
    let hash = c.hash(WORKERS);
    c.add_worker("w1", &hash, None);
    c.add_worker("w2", &hash, None);
    c.node("w2").running_tasks = 3;
    c.desired.replace.insert("i-w2".into());
    let drains = |p: &Plan| has(p, |a| matches!(a, Action::Drain { .. }));
    let destroys_w2 = |p: &Plan| {
        has(
            p,
            |a| matches!(a, Action::Destroy { instance, .. } if instance == "i-w2"),
        )
    };
    // Control: a plain replace drains first and destroys nothing yet.
    let p = c.at(0);
    assert!(drains(&p) && !destroys_w2(&p), "{}", describe(&p));
    // With --skip-drain the node is left as it is and the machine destroyed.
    let mut c = Cluster::new(3, "  allocation: {size: 2}\n");
    let hash = c.hash(WORKERS);
    c.add_worker("w1", &hash, None);
    c.add_worker("w2", &hash, None);
    c.node("w2").running_tasks = 3;
    c.desired.replace.insert("i-w2".into());
    c.desired.skip_drain.insert("i-w2".into());
    let p = c.at(0);
    assert!(!drains(&p), "{}", describe(&p));
    assert!(destroys_w2(&p), "{}", describe(&p));
}

#[test]
fn a_locked_manager_blocks_manager_steps_and_is_neither_healed_nor_reaped() {
    let mut c = Cluster::new(3, "  allocation: {size: 1}\n");
    let w = c.hash(WORKERS);
    c.add_worker("w1", &w, None);
    c.group_mut(MANAGERS).hash = "new-config".into();
    {
        let n = c.node("m2");
        n.state = NodeState::Down;
        n.raft.as_mut().expect("member").reachable = false;
    }
    // Control: a Down manager whose machine runs is a health problem: healed.
    let p = c.at(120 * SEC);
    assert!(!begins(&p, MANAGERS).is_empty(), "{}", describe(&p));

    // The same node, reported locked by its own engine: nothing starts.
    let mut c = Cluster::new(3, "  allocation: {size: 1}\n");
    let w = c.hash(WORKERS);
    c.add_worker("w1", &w, None);
    c.group_mut(MANAGERS).hash = "new-config".into();
    {
        let n = c.node("m2");
        n.state = NodeState::Down;
        n.raft.as_mut().expect("member").reachable = false;
        n.locked = true;
    }
    // Its machine also vanished from the describe: still never reaped.
    c.instances(MANAGERS).retain(|i| i.link() != Some("m2"));
    for t in [0, 120 * SEC, 600 * SEC] {
        let p = c.at(t);
        assert!(
            p.actions.iter().all(|a| !a.is_side_effect()),
            "{}",
            describe(&p)
        );
        assert!(begins(&p, MANAGERS).is_empty(), "{}", describe(&p));
        assert_eq!(status(&p, MANAGERS).phase, Phase::Blocked);
        assert!(reason(&p, MANAGERS).contains("locked"), "{}", describe(&p));
    }
}

#[test]
fn an_adopted_member_counts_as_built_from_the_config_it_was_adopted_under() {
    let mut c = rolling_workers("", "");
    let hash = c.hash(WORKERS);
    for i in c.instances(WORKERS).iter_mut() {
        i.tags.remove(tags::CONFIG);
        i.tags.insert(tags::ADOPTED.into(), hash.clone());
    }
    let p = c.at(0);
    assert!(begins(&p, WORKERS).is_empty(), "{}", describe(&p));
    assert_eq!(status(&p, WORKERS).phase, Phase::Converged);
    // Once the spec changes, adopted members roll like any other.
    c.group_mut(WORKERS).hash = "changed".into();
    let p = c.at(SEC);
    assert_eq!(begins(&p, WORKERS).len(), 2, "{}", describe(&p));
}

/// The leader m1 (self, outdated) began its hand-over (journaled) and
/// demoted itself; m2 leads now and plans. m1 is still listed as a raft
/// member that no longer leads.
fn leader_demoted_itself() -> (Cluster, Operation) {
    let mut c = Cluster::new(3, "  allocation: {size: 1}\n");
    let w = c.hash(WORKERS);
    c.add_worker("w1", &w, None);
    c.outdate_one(MANAGERS, "m1");
    let p = c.at(0);
    let op = begins(&p, MANAGERS)[0].clone();
    assert_eq!(op.steps()[0], Step::DemoteSelfAndLeave);
    c.journal.push(op.clone());
    c.node("m1").manager_role = false;
    c.node("m1").raft.as_mut().expect("member").leader = false;
    c.node("m2").raft.as_mut().expect("member").leader = true;
    c.observed.self_link = Some("m2".into());
    (c, op)
}

#[test]
fn a_former_leader_whose_engine_reports_it_left_is_destroyed_without_waiting_for_down() {
    // m1 demoted itself and left; m2 leads now and plans (still listed Ready).
    let (mut c, op) = leader_demoted_itself();
    c.node("m1").raft = None;
    let destroys = |p: &Plan| {
        has(
            p,
            |a| matches!(a, Action::Destroy { op: o, .. } if *o == op.id),
        )
    };
    let p = c.at(SEC);
    assert!(!destroys(&p), "{}", describe(&p));
    assert!(
        reason(&p, MANAGERS).contains("to leave"),
        "{}",
        describe(&p)
    );
    // Its engine is asked once a second: the controller looks again then,
    // not at its next resync.
    let ask_every = crate::own_engine::ASK_EVERY.as_millis() as u64;
    assert!(
        p.wake_at.is_some_and(|w| w <= SEC + ask_every),
        "wake_at {:?}",
        p.wake_at
    );
    // Its own engine says it is in no swarm: no need to wait for Down.
    c.node("m1").left = true;
    let p = c.at(2 * SEC);
    assert!(destroys(&p), "{}", describe(&p));
}

/// Issue 18, fast planned hand-over: the former leader's controller says in
/// the store that its engine left; the next leader destroys its machine on
/// that report, without asking the engine or waiting for Down. Believed only
/// for the node id it names and once that node is out of the raft.
#[test]
fn a_former_leader_whose_controller_reports_its_leave_is_destroyed_on_that_report() {
    use crate::model::LeftReport;
    // m1 demoted itself; m2 leads now and plans. m1 is still a raft member
    // (not yet out), yet its controller's report (forged, or early) says
    // it left: nothing is destroyed while it is in the raft.
    let (mut c, op) = leader_demoted_itself();
    c.observed.left_reports = vec![LeftReport {
        link: "m1".into(),
        node: "n-m1".into(),
        at_ms: 0,
    }];
    let destroys = |p: &Plan| {
        has(
            p,
            |a| matches!(a, Action::Destroy { op: o, .. } if *o == op.id),
        )
    };
    let p = c.at(SEC);
    assert!(!destroys(&p), "destroyed a raft member: {}", describe(&p));
    // Out of the raft, listed Ready; a report about an earlier node of the
    // same machine (another id) or of another machine proves nothing.
    c.node("m1").raft = None;
    c.observed.left_reports = vec![
        LeftReport {
            link: "m1".into(),
            node: "n-m1-before".into(),
            at_ms: 0,
        },
        LeftReport {
            link: "m3".into(),
            node: "n-m1".into(),
            at_ms: 0,
        },
    ];
    let p = c.at(2 * SEC);
    assert!(!destroys(&p), "{}", describe(&p));
    // Its own controller's report names this node: destroyed at once.
    c.observed.left_reports.push(LeftReport {
        link: "m1".into(),
        node: "n-m1".into(),
        at_ms: 0,
    });
    let p = c.at(2 * SEC + 10);
    assert!(destroys(&p), "{}", describe(&p));
}

// ------------------------------------------------------- garbage collection

fn provisions(p: &Plan) -> Vec<(String, u32)> {
    p.actions
        .iter()
        .filter_map(|a| match a {
            Action::Provision { op, attempt, .. } => Some((op.clone(), *attempt)),
            _ => None,
        })
        .collect()
}

fn destroys(p: &Plan) -> usize {
    p.actions
        .iter()
        .filter(|a| matches!(a, Action::Destroy { .. }))
        .count()
}

/// One worker slot whose machines never join: `startup_timeout` 60s and a
/// budget of two machines.
fn never_joining_worker() -> Cluster {
    let mut c = Cluster::new(
        3,
        "  allocation: {size: 1}\n  health: {startup_timeout: 60s, max_attempts: 2}\n",
    );
    let hash = c.hash(WORKERS);
    c.instances(WORKERS)
        .push(instance(WORKERS, "w1", &hash, None));
    c
}

#[test]
fn a_machine_that_never_joins_is_replaced_by_the_next_attempt_after_a_backoff() {
    let mut c = never_joining_worker();
    let p = c.at(0);
    assert!(begins(&p, WORKERS).is_empty(), "{}", describe(&p));
    let p = c.at(60 * SEC);
    let ops = begins(&p, WORKERS);
    assert_eq!(ops.len(), 1, "{}", describe(&p));
    let op = ops[0].clone();
    assert_eq!(op.kind, OpKind::Heal);
    assert_eq!(op.target.as_ref().map(|t| t.attempt), Some(2));
    let c0 = op.collection.clone().expect("a collection");
    assert_eq!(c0.rule, crate::journal::GcRule::NeverJoined);
    assert_eq!(c0.item, "i-w1");
    assert!(c0.evidence.contains("link w1"), "{}", c0.evidence);
    assert!(c0.evidence.contains("attempt 1 of 2"), "{}", c0.evidence);
    assert!(
        p.garbage.iter().any(|g| g.collection.item == "i-w1"),
        "{:?}",
        p.garbage
    );

    // The failed machine is gone; the replacement waits out the backoff.
    c.journal.push(op.clone());
    c.remove_member(WORKERS, "w1");
    let p = c.at(61 * SEC);
    assert!(provisions(&p).is_empty(), "{}", describe(&p));
    assert!(
        reason(&p, WORKERS).contains("backing off"),
        "{}",
        describe(&p)
    );
    let p = c.at(71 * SEC);
    assert_eq!(provisions(&p), vec![(op.id.clone(), 2)], "{}", describe(&p));
    let provision = p
        .actions
        .iter()
        .find(|a| matches!(a, Action::Provision { .. }))
        .expect("provision");
    let tagged = super::instance_tags(CLUSTER, provision);
    assert_eq!(tagged.get(tags::ATTEMPT).map(String::as_str), Some("2"));
}

#[test]
fn the_group_blocks_when_the_last_attempt_never_joins_and_a_new_spec_gets_a_fresh_budget() {
    let mut c = never_joining_worker();
    // The second machine (attempt 2 of 2) never joins either.
    for i in c.instances(WORKERS) {
        i.tags.insert(tags::ATTEMPT.into(), "2".into());
    }
    c.at(0);
    let p = c.at(60 * SEC);
    assert_eq!(
        status(&p, WORKERS).phase,
        Phase::Blocked,
        "{}",
        describe(&p)
    );
    let why = reason(&p, WORKERS);
    assert!(why.contains("2 machines in a row never joined"), "{why}");
    assert!(why.contains("health.max_attempts = 2"), "{why}");
    assert!(why.contains("i-w1"), "{why}");
    assert!(begins(&p, WORKERS).is_empty(), "{}", describe(&p));
    assert_eq!(destroys(&p), 0, "{}", describe(&p));

    // Control: a new spec (another config hash) starts again from attempt 1.
    c.group_mut(WORKERS).hash = "fedcba9876543210".into();
    let p = c.at(61 * SEC);
    let ops = begins(&p, WORKERS);
    assert!(
        ops.iter()
            .any(|o| o.kind == OpKind::Heal && o.target.as_ref().map(|t| t.attempt) == Some(1)),
        "{}",
        describe(&p)
    );
}

#[test]
fn failed_provision_calls_use_the_same_budget_and_back_off() {
    let mut c = Cluster::new(3, "  allocation: {size: 1}\n  health: {max_attempts: 3}\n");
    let p = c.at(0);
    let mut op = begins(&p, WORKERS)[0].clone();
    assert_eq!(provisions(&p).len(), 1, "{}", describe(&p));
    // One failed call: attempt 2 waits 10s first.
    op.provision_failures = 1;
    c.journal.push(op.clone());
    let p = c.at(SEC);
    assert!(provisions(&p).is_empty(), "{}", describe(&p));
    let p = c.at(11 * SEC);
    assert_eq!(provisions(&p), vec![(op.id.clone(), 2)], "{}", describe(&p));
    // Three failed calls spend a budget of three: blocked, nothing provisioned.
    c.journal[0].provision_failures = 3;
    let p = c.at(12 * SEC);
    assert!(provisions(&p).is_empty(), "{}", describe(&p));
    assert_eq!(
        status(&p, WORKERS).phase,
        Phase::Blocked,
        "{}",
        describe(&p)
    );
    assert!(
        reason(&p, WORKERS).contains("health.max_attempts"),
        "{}",
        describe(&p)
    );
}

/// An orphan of group `old` (this cluster's id), plus machines that carry
/// that group name but another cluster's id or no cluster id at all.
fn with_orphans(c: &mut Cluster) {
    let mut other = instance("old", "x1", OLD, None);
    other
        .tags
        .insert(tags::CLUSTER.into(), "another-cluster".into());
    other.id = "i-other".into();
    let mut untagged = instance("old", "x2", OLD, None);
    untagged.tags.remove(tags::CLUSTER);
    untagged.id = "i-untagged".into();
    c.observed.instances.insert(
        "old".into(),
        Described::Ok(vec![instance("old", "o1", OLD, None), other, untagged]),
    );
    c.desired.orphan_grace = std::time::Duration::from_secs(300);
}

#[test]
fn an_orphan_of_an_undeclared_group_is_destroyed_after_the_grace_period_and_nothing_else() {
    let mut c = Cluster::new(3, "  allocation: {size: 1}\n");
    with_orphans(&mut c);
    let p = c.at(0);
    assert!(begins(&p, "old").is_empty(), "{}", describe(&p));
    let listed: Vec<&str> = p
        .garbage
        .iter()
        .map(|g| g.collection.item.as_str())
        .collect();
    assert_eq!(listed, vec!["i-o1"], "{:?}", p.garbage);
    assert!(
        matches!(
            p.garbage[0].state,
            GarbageState::InGrace { down: false, .. }
        ),
        "{:?}",
        p.garbage
    );
    assert!(
        (p.garbage[0].state.to_string()).starts_with("in grace: seen for 0s of "),
        "{:?}",
        p.garbage
    );

    let p = c.at(300 * SEC);
    let ops = begins(&p, "old");
    assert_eq!(ops.len(), 1, "{}", describe(&p));
    let op = ops[0].clone();
    assert_eq!(op.kind, OpKind::Orphan);
    let col = op.collection.clone().expect("collection");
    assert_eq!(col.rule, crate::journal::GcRule::Orphan);
    assert!(
        col.evidence.contains("no group old is declared"),
        "{}",
        col.evidence
    );
    assert!(
        has(
            &p,
            |a| matches!(a, Action::Destroy { instance, .. } if instance == "i-o1")
        ),
        "{}",
        describe(&p)
    );
    assert_eq!(destroys(&p), 1, "{}", describe(&p));

    // Destroyed, no node: the operation completes.
    c.journal.push(op.clone());
    if let Some(Described::Ok(list)) = c.observed.instances.get_mut("old") {
        list.retain(|i| i.id != "i-o1");
    }
    let p = c.at(301 * SEC);
    assert!(
        has(
            &p,
            |a| matches!(a, Action::Complete { op: id } if *id == op.id)
        ),
        "{}",
        describe(&p)
    );
    assert_eq!(destroys(&p), 0, "{}", describe(&p));
}

#[test]
fn orphans_are_not_collected_from_a_failed_describe_an_unobservable_swarm_or_as_managers() {
    let mut c = Cluster::new(3, "  allocation: {size: 1}\n");
    with_orphans(&mut c);
    c.at(0);
    // A manager node carries the orphan's link: kept, whatever the grace.
    c.nodes().push(node("o1", true, false));
    let p = c.at(400 * SEC);
    assert!(begins(&p, "old").is_empty(), "{}", describe(&p));
    let kept = p.garbage.iter().find(|g| g.collection.item == "i-o1");
    assert!(
        kept.is_some_and(|g| g.state == GarbageState::KeptManager),
        "{:?}",
        p.garbage
    );
    c.nodes().retain(|n| n.link.as_deref() != Some("o1"));
    // The swarm cannot be asked: nothing is concluded.
    let swarm = std::mem::replace(
        &mut c.observed.swarm,
        SwarmView::Unavailable("engine API timed out".into()),
    );
    let p = c.at(500 * SEC);
    assert!(begins(&p, "old").is_empty(), "{}", describe(&p));
    c.observed.swarm = swarm;
    // A failed describe: nothing is concluded either.
    c.observed
        .instances
        .insert("old".into(), Described::Failed("throttled".into()));
    let p = c.at(600 * SEC);
    assert!(begins(&p, "old").is_empty(), "{}", describe(&p));
    assert_eq!(destroys(&p), 0, "{}", describe(&p));
}

#[test]
fn the_meltdown_guard_blocks_healing_when_too_many_members_are_down_at_once() {
    let mut c = Cluster::new(3, "  allocation: {size: 4}\n");
    for i in 1..=4 {
        let hash = c.hash(WORKERS);
        c.add_worker(&format!("w{i}"), &hash, None);
    }
    // Control: one machine down (default 50% of 4 = 2 may be down) is healed.
    c.instances(WORKERS)[0].running = false;
    let p = c.at(0);
    assert_eq!(begins(&p, WORKERS).len(), 1, "{}", describe(&p));
    // Three of four down at once: nothing replaced, the group blocks.
    for i in c.instances(WORKERS).iter_mut().take(3) {
        i.running = false;
    }
    let p = c.at(SEC);
    assert!(begins(&p, WORKERS).is_empty(), "{}", describe(&p));
    assert_eq!(destroys(&p), 0, "{}", describe(&p));
    assert_eq!(
        status(&p, WORKERS).phase,
        Phase::Blocked,
        "{}",
        describe(&p)
    );
    let why = reason(&p, WORKERS);
    assert!(why.contains("meltdown guard: 3 of 4"), "{why}");
    assert!(why.contains("max_unhealthy = 50%"), "{why}");
}

#[test]
fn the_meltdown_guard_counts_dead_nodes_and_stops_reaping_them() {
    let mut c = Cluster::new(3, "  allocation: {size: 3}\n  health: {max_unhealthy: 1}\n");
    for i in 1..=3 {
        let hash = c.hash(WORKERS);
        c.add_worker(&format!("w{i}"), &hash, None);
    }
    // Two machines vanished; their nodes are Down.
    for l in ["w1", "w2"] {
        c.instances(WORKERS).retain(|i| i.link() != Some(l));
        c.node(l).state = NodeState::Down;
    }
    c.at(0);
    let p = c.at(3_600 * SEC);
    assert!(begins(&p, WORKERS).is_empty(), "{}", describe(&p));
    assert!(
        reason(&p, WORKERS).contains("2 machines lost"),
        "{}",
        describe(&p)
    );
}

#[test]
fn a_dead_node_is_reaped_with_its_rule_and_evidence() {
    let mut c = Cluster::new(3, "  allocation: {size: 1}\n");
    let hash = c.hash(WORKERS);
    c.add_worker("w1", &hash, None);
    c.instances(WORKERS).clear();
    c.node("w1").state = NodeState::Down;
    let p = c.at(0);
    let g = p
        .garbage
        .iter()
        .find(|g| g.collection.item == "n-w1")
        .expect("listed");
    assert_eq!(g.collection.rule, crate::journal::GcRule::DeadNode);
    assert!(
        matches!(g.state, GarbageState::InGrace { down: true, .. }),
        "{g:?}"
    );
    let p = c.at(120 * SEC);
    let reap: Vec<&Operation> = begins(&p, WORKERS)
        .into_iter()
        .filter(|o| o.kind == OpKind::RemoveDead)
        .collect();
    assert_eq!(reap.len(), 1, "{}", describe(&p));
    let col = reap[0].collection.as_ref().expect("collection");
    assert_eq!(col.rule, crate::journal::GcRule::DeadNode);
    assert!(col.evidence.contains("link w1"), "{}", col.evidence);
    assert!(col.evidence.contains("Down for"), "{}", col.evidence);
}

/// Found by `e2e_partition`: a leader cut off and replaced leaves its node
/// Down, a manager by spec, yet out of the raft (no member). swarmkit
/// refuses its demotion ("can't find manager in raft memberlist") for
/// ever, so the reaper's demote step is done at once (there is no vote to
/// take away) and the node is removed.
#[test]
fn a_dead_manager_node_out_of_the_raft_is_removed_without_a_demotion() {
    let mut c = Cluster::new(3, "  allocation: {size: 1}\n");
    let mut n = node("m4", true, false);
    n.state = NodeState::Down;
    n.raft = None;
    c.nodes().push(n);
    c.at(0);
    let p = c.at(120 * SEC);
    let reap = begins(&p, MANAGERS)
        .into_iter()
        .find(|o| o.kind == OpKind::RemoveDead)
        .cloned()
        .expect("the dead node is reaped");
    c.journal.push(reap);
    let p = c.at(121 * SEC);
    assert!(
        !has(&p, |a| matches!(a, Action::Demote { .. })),
        "{}",
        describe(&p)
    );
    assert!(
        has(
            &p,
            |a| matches!(a, Action::RemoveNode { node, .. } if node == "n-m4")
        ),
        "{}",
        describe(&p)
    );
}

/// A node labelled for one group whose link a machine of another group
/// carries is mislabelled, not dead: no group reaps it (its machine's own
/// group heals the machine if it is unhealthy).
#[test]
fn a_node_another_groups_machine_carries_is_never_reaped() {
    let mut c = Cluster::new(3, "  allocation: {size: 1}\n");
    let hash = c.hash(WORKERS);
    c.add_worker("w1", &hash, None);
    let n = c.node("w1");
    n.group = Some(MANAGERS.into());
    n.state = NodeState::Down;
    for now in [0, 120 * SEC, 3_600 * SEC] {
        let p = c.at(now);
        let reaped = p.actions.iter().any(|a| match a {
            Action::Begin { op } => op.kind == OpKind::RemoveDead,
            _ => false,
        });
        assert!(!reaped, "{}", describe(&p));
        assert!(
            !p.garbage.iter().any(|g| g.collection.item == "n-w1"),
            "{}",
            describe(&p)
        );
    }
}

#[test]
fn a_never_joined_member_of_a_group_scaled_in_is_retired_not_blocked() {
    let mut c = never_joining_worker();
    for i in c.instances(WORKERS) {
        i.tags.insert(tags::ATTEMPT.into(), "2".into());
    }
    c.at(0);
    // Control: at the declared size the spent budget blocks.
    let p = c.at(60 * SEC);
    assert_eq!(
        status(&p, WORKERS).phase,
        Phase::Blocked,
        "{}",
        describe(&p)
    );
    // Scaled in to nothing (`apply --prune`): the machine is retired.
    let yaml = cluster_yaml(
        3,
        "  allocation: {size: 1}\n  health: {startup_timeout: 60s, max_attempts: 2}\n",
    );
    c.desired = desired(&yaml);
    if let super::super::spec::Allocation::Size { size, .. } =
        &mut c.group_mut(WORKERS).spec.allocation
    {
        *size = 0;
    }
    let p = c.at(61 * SEC);
    let ops = begins(&p, WORKERS);
    assert_eq!(ops.len(), 1, "{}", describe(&p));
    assert_eq!(ops[0].kind, OpKind::Retire);
    assert_ne!(
        status(&p, WORKERS).phase,
        Phase::Blocked,
        "{}",
        describe(&p)
    );
}

#[test]
fn a_machine_that_stops_before_joining_uses_the_same_budget() {
    let mut c = never_joining_worker();
    c.instances(WORKERS)[0].running = false;
    let p = c.at(0);
    let ops = begins(&p, WORKERS);
    assert_eq!(ops.len(), 1, "{}", describe(&p));
    assert_eq!(ops[0].target.as_ref().map(|t| t.attempt), Some(2));
    let col = ops[0].collection.as_ref().expect("a collection");
    assert!(col.evidence.contains("stopped before"), "{}", col.evidence);
    // The last attempt stopping too blocks the group; nothing is destroyed.
    c.instances(WORKERS)[0]
        .tags
        .insert(tags::ATTEMPT.into(), "2".into());
    let p = c.at(SEC);
    assert_eq!(
        status(&p, WORKERS).phase,
        Phase::Blocked,
        "{}",
        describe(&p)
    );
    assert_eq!(destroys(&p), 0, "{}", describe(&p));
}

#[test]
fn a_surge_roll_adds_nothing_while_the_group_is_over_its_size() {
    // A surge roll that stepped aside after its member joined leaves the
    // group one over: the outdated member is retired, not surged again.
    let mut c = Cluster::new(
        3,
        "  allocation: {size: 2}\n  update: {strategy: surge, max_in_flight: 3, canaries: 0}\n",
    );
    let hash = c.hash(WORKERS);
    c.add_worker("w1", OLD, None);
    c.add_worker("w2", &hash, None);
    c.add_worker("w3", &hash, None);
    let p = c.at(0);
    let ops = begins(&p, WORKERS);
    assert_eq!(ops.len(), 1, "{}", describe(&p));
    assert_eq!(ops[0].kind, OpKind::Retire, "{}", describe(&p));
    assert_eq!(victim_link(ops[0]), "w1");
    assert!(provisions(&p).is_empty(), "{}", describe(&p));
}

#[test]
fn the_meltdown_guard_stops_refilling_when_a_describe_suddenly_lists_no_machine() {
    let mut c = Cluster::new(3, "  allocation: {size: 3}\n");
    for i in 1..=3 {
        let hash = c.hash(WORKERS);
        c.add_worker(&format!("w{i}"), &hash, None);
    }
    // The provider answers "no machines" while every node is still Ready.
    c.instances(WORKERS).clear();
    let p = c.at(0);
    assert!(provisions(&p).is_empty(), "{}", describe(&p));
    assert!(begins(&p, WORKERS).is_empty(), "{}", describe(&p));
    assert!(
        reason(&p, WORKERS).contains("3 machines lost"),
        "{}",
        describe(&p)
    );
    // Control: a new group (no nodes yet) is filled.
    c.nodes().retain(|n| n.group.as_deref() != Some(WORKERS));
    let p = c.at(SEC);
    assert_eq!(provisions(&p).len(), 3, "{}", describe(&p));
}

// ---------------------------------------------------------------- destroy

#[test]
fn a_manager_group_destroyed_retires_the_others_one_at_a_time_and_never_the_last() {
    let mut c = Cluster::new(3, "  allocation: {size: 1}\n");
    for g in [MANAGERS, WORKERS] {
        c.group_mut(g).spec.allocation = crate::spec::Allocation::Size {
            size: 0,
            zones: Vec::new(),
        };
    }
    for round in 0..2 {
        let p = c.at(round * SEC);
        let ops = begins(&p, MANAGERS);
        assert_eq!(ops.len(), 1, "one manager at a time: {}", describe(&p));
        assert_eq!(ops[0].kind, OpKind::Retire);
        let link = victim_link(ops[0]).to_string();
        assert_ne!(link, "m1", "the leader (self) went first: {}", describe(&p));
        assert_eq!(ops[0].steps()[0], Step::Demote);
        c.remove_member(MANAGERS, &link);
    }
    let p = c.at(5 * SEC);
    assert!(begins(&p, MANAGERS).is_empty(), "{}", describe(&p));
    assert!(!has(&p, is_demote), "{}", describe(&p));
    assert!(
        reason(&p, MANAGERS).contains("drover destroy managers"),
        "{}",
        describe(&p)
    );
}

/// Issue 15's planner flaws, each with the scenario that reproduced it.
/// Runs passes every 10 s up to `until` seconds, doing what the shell and
/// the swarm do with each action at once (a provision makes a joined
/// member, a demote takes the node out of the raft); true when some pass
/// satisfied `seen`.
fn run_until(c: &mut Cluster, until: Time, seen: impl Fn(&Plan) -> bool) -> (bool, Plan) {
    run_machines(c, until, true, |p, _| seen(p))
}

/// [`run_until`], with the provisioned machines joining (`joins`) or not,
/// and `seen` shown the world after each pass's actions too.
fn run_machines(
    c: &mut Cluster,
    until: Time,
    joins: bool,
    mut seen: impl FnMut(&Plan, &Cluster) -> bool,
) -> (bool, Plan) {
    let mut hit = false;
    let mut last = c.at(0);
    for s in (10..until).step_by(10) {
        for a in &last.actions {
            c.apply(a, joins);
        }
        hit |= seen(&last, c);
        last = c.at(s * SEC);
    }
    let hit = hit || seen(&last, c);
    (hit, last)
}

impl Cluster {
    /// What the shell and the swarm make of `a` at once (see [`run_until`]).
    fn apply(&mut self, a: &Action, joins: bool) {
        match a {
            Action::Begin { op } => self.journal.push((**op).clone()),
            Action::Complete { op } => self.journal.retain(|o| o.id != *op),
            Action::Provision { op, attempt, .. } => {
                let o = self.journal.iter().find(|o| o.id == *op).cloned();
                if let Some(o) = o.filter(|o| {
                    !self
                        .instances(&o.group)
                        .iter()
                        .any(|i| i.link() == Some(o.id.as_str()))
                }) {
                    self.add_new_member(&o, joins);
                    if let Some(new) = self.instances(&o.group).last_mut() {
                        new.tags.insert(tags::ATTEMPT.into(), attempt.to_string());
                    }
                }
            }
            Action::Destroy { op, instance } => {
                if let Some(o) = self.journal.iter_mut().find(|o| o.id == *op) {
                    o.intent = Some(crate::journal::Intent {
                        step: Step::Destroy,
                        epoch: 1,
                    });
                }
                for d in self.observed.instances.values_mut() {
                    if let Described::Ok(list) = d {
                        list.retain(|i| i.id != *instance);
                    }
                }
            }
            Action::Demote { node, .. } => self.demote(node),
            Action::DemoteSelfAndLeave { node, .. } => {
                // The leader leaves; another member leads, and the
                // controller on it takes over with no memory of timers.
                self.demote(node);
                let next = self.nodes().iter_mut().find_map(|n| {
                    let r = n.raft.as_mut()?;
                    r.leader = true;
                    n.link.clone()
                });
                self.observed.self_link = next;
                self.forget();
            }
            Action::RemoveNode { node, .. } => self.nodes().retain(|n| n.id != *node),
            _ => {}
        }
    }

    /// `node` out of the raft, a worker.
    fn demote(&mut self, node: &str) {
        if let Some(n) = self.nodes().iter_mut().find(|n| n.id == *node) {
            n.manager_role = false;
            n.raft = None;
        }
    }

    /// The raft's members now.
    fn voters(&self) -> usize {
        match &self.observed.swarm {
            SwarmView::Ok(nodes) => nodes.iter().filter(|n| n.raft.is_some()).count(),
            _ => 0,
        }
    }
}

mod ahead;
mod boot;
mod budget;
mod fill;
mod ghost;
mod hooks;
mod in_place;
mod spare;
mod time;
mod untidy;
mod zones;

#[test]
fn a_phase_is_named_as_the_status_document_spells_it() {
    let names = [
        "converged",
        "rolling",
        "changing",
        "waiting",
        "paused",
        "blocked",
        "unobservable",
    ];
    for name in names {
        let phase: Phase = serde_json::from_value(serde_json::json!(name)).unwrap();
        assert_eq!(phase.as_str(), name);
    }
}

#[test]
fn an_actions_kind_is_its_serialised_tag() {
    use crate::spec::Role;
    let op = || "op".to_string();
    let node = || "n".to_string();
    // A real operation, as the planner begins one.
    let journal_op = journal_first_roll(&mut rolling_workers("", ""));
    for a in [
        Action::Begin {
            op: Box::new(journal_op),
        },
        Action::MarkDone {
            op: op(),
            step: Step::Drain,
        },
        Action::Complete { op: op() },
        Action::Provision {
            op: op(),
            group: WORKERS.into(),
            role: Role::Worker,
            logical_id: None,
            zone: None,
            config: OLD.into(),
            attempt: 1,
        },
        Action::Drain {
            op: op(),
            node: node(),
        },
        Action::Demote {
            op: op(),
            node: node(),
        },
        Action::DemoteSelfAndLeave {
            op: op(),
            node: node(),
        },
        Action::Destroy {
            op: op(),
            instance: "i".into(),
        },
        Action::RemoveNode {
            op: op(),
            node: node(),
            force: false,
        },
        Action::Rollback {
            group: WORKERS.into(),
            reason: "r".into(),
        },
    ] {
        assert_eq!(serde_json::to_value(&a).unwrap()["action"], a.kind());
    }
}

#[test]
fn a_specs_desired_state_keeps_the_group_order_and_hashes_each_config() {
    let spec = parse_str(&cluster_yaml(3, "  allocation: {size: 2}\n"))
        .spec
        .expect("test spec");
    let d = Desired::of_spec(CLUSTER, &spec);
    let names: Vec<&str> = d.groups.iter().map(|g| g.spec.name.as_str()).collect();
    assert_eq!(names, [MANAGERS, WORKERS]);
    for (g, s) in d.groups.iter().zip(&spec.groups) {
        assert_eq!(g.hash, config_hash(s));
        assert!(!g.paused && !g.is_rollback);
    }
    assert_eq!(d.orphan_grace, spec.gc.orphan_grace);
    assert!(d.held.is_empty() && d.replace.is_empty() && d.skip_drain.is_empty());
}
