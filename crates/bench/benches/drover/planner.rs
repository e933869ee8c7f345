//! Planner cost: one planning pass over a group of N workers (plus a
//! 3-manager group) in the middle of a rolling update, with every member's
//! node and a journal of operations in flight at different steps.
//!
//! Every iteration changes the input (the clock, the nonce, and one more
//! member turns current), so no iteration can reuse another's work.

use crate::stats::median_ms;
use drover_core::journal::{OpKind, Operation, Step, Target, Victim};
use drover_core::model::{
    Availability, Described, Instance, Node, NodeState, Observed, RaftMember, SwarmView, Tags, tags,
};
use drover_core::plan::{Desired, Memory, PlanInput, plan};
use drover_core::spec::{Role, parse_str};
use std::collections::BTreeMap;
use std::time::Instant;

const CLUSTER: &str = "bench";

/// A group of `n` workers mid-rollout: half still on the old config, 10% of
/// the group (`max_in_flight`) in flight, spread over drain, destroy,
/// provision and watch.
pub struct Fixture {
    pub desired: Desired,
    pub observed: Observed,
    pub journal: Vec<Operation>,
    old: String,
    new: String,
    n: usize,
}

fn spec_text(n: usize, image: &str) -> String {
    format!(
        "groups:
- name: managers
  role: manager
  allocation: {{size: 3}}
  instance: {{provider: sim, properties: {{image: m}}}}
- name: workers
  role: worker
  allocation: {{size: {n}}}
  instance: {{provider: sim, properties: {{image: {image}}}}}
  update: {{max_in_flight: {m}, canaries: 0, watch: 1s}}
",
        m = (n / 10).max(1)
    )
}

fn instance(id: String, group: &str, link: String, config: &str) -> Instance {
    let tags = Tags::from([
        (tags::CLUSTER, CLUSTER.to_string()),
        (tags::GROUP, group.to_string()),
        (tags::LINK, link),
        (tags::CONFIG, config.to_string()),
    ]);
    Instance {
        id,
        tags,
        running: true,
        created_ms: 0,
    }
}

fn node(id: String, group: &str, link: String, manager: Option<bool>) -> Node {
    Node {
        id: id.clone(),
        link: Some(link),
        cluster: Some(CLUSTER.into()),
        group: Some(group.into()),
        state: NodeState::Ready,
        availability: Availability::Active,
        manager_role: manager.is_some(),
        raft: manager.map(|leader| RaftMember {
            leader,
            reachable: true,
            addr: format!("{id}:2377"),
        }),
        running_tasks: if manager.is_some() { 0 } else { 2 },
        locked: false,
        left: false,
        engine_no_manager: false,
        engine_version: None,
    }
}

impl Fixture {
    pub fn new(n: usize) -> Self {
        let old_spec = parse_str(&spec_text(n, "v1")).spec.expect("bench spec");
        let new_spec = parse_str(&spec_text(n, "v2")).spec.expect("bench spec");
        let old = drover_core::hash::config_hash(&old_spec.groups[1]);
        let desired = drover_core::plan::Desired::of_spec(CLUSTER, &new_spec);
        let new = desired.groups[1].hash.clone();
        let manager_hash = desired.groups[0].hash.clone();
        let mut managers = Vec::new();
        let mut workers = Vec::new();
        let mut nodes = Vec::new();
        for k in 0..3 {
            let link = format!("m-link-{k}");
            managers.push(instance(
                format!("m-{k}"),
                "managers",
                link.clone(),
                &manager_hash,
            ));
            nodes.push(node(format!("mn-{k}"), "managers", link, Some(k == 0)));
        }
        for k in 0..n {
            let link = format!("w-link-{k}");
            let config = if k % 2 == 0 { &old } else { &new };
            workers.push(instance(format!("w-{k}"), "workers", link.clone(), config));
            nodes.push(node(format!("wn-{k}"), "workers", link, None));
        }
        // Operations in flight on the first 10% of the old members, at four
        // different steps.
        let in_flight = (n / 10).max(1);
        let mut journal = Vec::new();
        for j in 0..in_flight {
            let k = 2 * j;
            let id = format!("workers-op-{j}");
            let victim = Victim {
                instance: Some(format!("w-{k}")),
                link: Some(format!("w-link-{k}")),
                node: Some(format!("wn-{k}")),
                logical_id: None,
                zone: None,
                is_self: false,
            };
            // The steps the journal records done, as earlier passes marked
            // them (a worker's roll: drain, destroy, node rm, provision,
            // watch).
            let done: &[Step] = match j % 4 {
                // Draining.
                0 => {
                    nodes[3 + k].availability = Availability::Drain;
                    &[]
                }
                // Drained: destroy next.
                1 => {
                    nodes[3 + k].availability = Availability::Drain;
                    nodes[3 + k].running_tasks = 0;
                    &[Step::Drain]
                }
                // Replacement provisioned, not joined yet.
                2 => {
                    workers[k] = instance(format!("w-new-{k}"), "workers", id.clone(), &new);
                    nodes[3 + k].state = NodeState::Down;
                    &[Step::Drain, Step::Destroy]
                }
                // Replacement joined: watching it.
                _ => {
                    workers[k] = instance(format!("w-new-{k}"), "workers", id.clone(), &new);
                    nodes[3 + k] = node(format!("wn-new-{k}"), "workers", id.clone(), None);
                    &[
                        Step::Drain,
                        Step::Destroy,
                        Step::RemoveNode,
                        Step::Provision,
                    ]
                }
            };
            journal.push(Operation {
                id,
                group: "workers".into(),
                kind: OpKind::Roll,
                role: Role::Worker,
                victim: Some(victim),
                target: Some(Target {
                    logical_id: None,
                    zone: None,
                    attempt: 1,
                }),
                surge: false,
                done: done.iter().copied().collect(),
                intent: None,
                collection: None,
                provision_failures: 0,
                short_zones: Vec::new(),
                hook_failure: None,
                in_place: false,
                update_failure: None,
            });
        }
        let observed = Observed {
            instances: BTreeMap::from([
                ("managers".to_string(), Described::Ok(managers)),
                ("workers".to_string(), Described::Ok(workers)),
            ]),
            swarm: SwarmView::Ok(nodes),
            self_link: None,
            left_reports: Vec::new(),
            services: Default::default(),
            boots: Default::default(),
            complete_listings: Default::default(),
        };
        Fixture {
            desired,
            observed,
            journal,
            old,
            new,
            n,
        }
    }

    /// The rollout moves on by one member: iteration `i` never sees the
    /// same input as another.
    fn step(&mut self, i: usize) {
        let Some(Described::Ok(workers)) = self.observed.instances.get_mut("workers") else {
            unreachable!("fixture has workers");
        };
        // Skip the members with operations (the first 20%).
        let k = self.n / 5 + (2 * i) % (self.n - self.n / 5).max(1);
        if let Some(w) = workers.get_mut(k) {
            let now_current = w.config() == Some(self.old.as_str());
            let config = if now_current { &self.new } else { &self.old };
            w.tags.insert(tags::CONFIG.into(), config.clone());
        }
    }

    /// Time one planning pass, `iterations` times; returns the samples
    /// (wall and this thread's CPU time, ms) and the number of actions of
    /// the last plan (a sanity check that it works).
    pub fn measure(&mut self, iterations: usize) -> (Samples, usize) {
        let mut samples = Samples::default();
        let mut memory = Memory::default();
        let mut actions = 0;
        for i in 0..iterations {
            self.step(i);
            let cpu = cpu_ms();
            let started = Instant::now();
            let p = plan(PlanInput {
                desired: &self.desired,
                observed: &self.observed,
                journal: &self.journal,
                memory: &memory,
                now: 1_000 * i as u64,
                wall_ms: 1_000 * i as u64,
                nonce: i as u64,
            });
            samples.wall.push(started.elapsed().as_secs_f64() * 1e3);
            samples.cpu.push(cpu_ms() - cpu);
            actions = p.actions.len();
            memory = p.memory;
        }
        (samples, actions)
    }
}

/// Per-iteration times of one planning pass, ms.
#[derive(Default)]
pub struct Samples {
    /// Wall clock.
    pub wall: Vec<f64>,
    /// CPU time of the planning thread: the pass's own work, without the
    /// time other processes of this shared machine ran meanwhile.
    pub cpu: Vec<f64>,
}

/// This thread's CPU time, ms.
fn cpu_ms() -> f64 {
    use nix::time::{ClockId, clock_gettime};
    let t = clock_gettime(ClockId::CLOCK_THREAD_CPUTIME_ID).expect("thread CPU clock");
    t.tv_sec() as f64 * 1e3 + t.tv_nsec() as f64 / 1e6
}

/// The planner section: medians per N, growth per 10×, targets; returns
/// each size's median CPU ms (the growth picture's points).
pub fn run(sizes: &[usize]) -> Vec<(f64, f64)> {
    println!("\n## Planner: one pass over N workers mid-rollout (journal = N/10 ops in flight)\n");
    println!(
        "| N | median ms | min ms | CPU median ms | ×prev (10× N, CPU) | iterations | actions | target |"
    );
    println!("|---|---|---|---|---|---|---|---|");
    let mut prev: Option<f64> = None;
    let mut points = Vec::new();
    for &n in sizes {
        let mut f = Fixture::new(n);
        let iterations = (2_000_000 / n).clamp(21, 201);
        let (samples, actions) = f.measure(iterations);
        let med = median_ms(&samples.wall);
        let min = samples.wall.iter().copied().fold(f64::INFINITY, f64::min);
        let cpu = median_ms(&samples.cpu);
        let target = match n {
            10_000 => "< 5 ms",
            100_000 => "< 50 ms",
            _ => "",
        };
        let growth = prev.map_or("".to_string(), |p| format!("{:.1}", cpu / p));
        println!(
            "| {n} | {med:.3} | {min:.3} | {cpu:.3} | {growth} | {iterations} | {actions} | {target} |"
        );
        prev = Some(cpu);
        points.push((n as f64, cpu));
    }
    points
}
