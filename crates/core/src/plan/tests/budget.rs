//! Service budgets: a roll of workers never takes a replicated service
//! below its budget, waits for moved tasks to run again, and reports a
//! budget that can never be met before it disrupts anything.

use super::*;
use crate::model::{Service, Services};
use proptest::prelude::*;

/// Four outdated workers w1..w4 rolled four at once, the group's own
/// budget from `budget` (YAML of `service_budget`, or empty).
fn workers(budget: &str, strategy: &str) -> Cluster {
    let update = if budget.is_empty() {
        String::new()
    } else {
        format!(", service_budget: {budget}")
    };
    let mut c = Cluster::new(
        1,
        &format!(
            "  allocation: {{size: 4}}\n  update: {{canaries: 0, max_in_flight: 4, strategy: {strategy}{update}}}\n"
        ),
    );
    for w in ["w1", "w2", "w3", "w4"] {
        c.add_worker(w, OLD, None);
    }
    c
}

/// A replicated service with `per_node` running tasks on each node
/// named (`n-<link>`), `replicas` desired, and `labels`.
fn service(
    name: &str,
    replicas: u32,
    per_node: &[(&str, u32)],
    labels: &[(&str, &str)],
) -> Service {
    Service {
        id: format!("s-{name}"),
        name: name.into(),
        replicas: Some(replicas),
        labels: labels
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
        running: per_node
            .iter()
            .map(|(l, n)| (format!("n-{l}"), *n))
            .collect(),
    }
}

fn set_services(c: &mut Cluster, services: Vec<Service>) {
    for s in &services {
        for (node, n) in &s.running {
            if let Some(nd) = c.nodes().iter_mut().find(|x| &x.id == node) {
                nd.running_tasks += n;
            }
        }
    }
    c.observed.services = Services::Known(services);
}

fn drained(p: &Plan) -> Vec<String> {
    p.actions
        .iter()
        .filter_map(|a| match a {
            Action::Drain { node, .. } => Some(node.clone()),
            _ => None,
        })
        .collect()
}

fn spread(name: &str, budget_labels: &[(&str, &str)]) -> Service {
    service(
        name,
        4,
        &[("w1", 1), ("w2", 1), ("w3", 1), ("w4", 1)],
        budget_labels,
    )
}

#[test]
fn a_budget_of_one_drains_one_node_at_a_time() {
    let mut c = workers("", "replace");
    set_services(
        &mut c,
        vec![spread("web", &[("drover.max-unavailable", "1")])],
    );
    let p = c.at(0);
    assert_eq!(drained(&p).len(), 1, "{}", describe(&p));
    assert_eq!(begins(&p, WORKERS).len(), 1, "{}", describe(&p));
    assert!(
        reason(&p, WORKERS).contains("service web"),
        "{}",
        describe(&p)
    );
    // Without the label: four at once (the control).
    let mut c = workers("", "replace");
    set_services(&mut c, vec![spread("web", &[])]);
    assert_eq!(drained(&c.at(0)).len(), 4);
}

#[test]
fn the_next_drain_waits_until_the_moved_task_runs_again() {
    let mut c = workers("{max_unavailable: 1}", "replace");
    set_services(&mut c, vec![spread("web", &[])]);
    let p = c.at(0);
    let first = begins(&p, WORKERS)[0].clone();
    c.journal.push(first.clone());
    let w = victim_link(&first).to_string();
    // Drained: its task stopped, not yet running elsewhere.
    c.node(&w).availability = Availability::Drain;
    c.node(&w).running_tasks = 0;
    let others: Vec<(&str, u32)> = ["w1", "w2", "w3", "w4"]
        .into_iter()
        .filter(|l| *l != w)
        .map(|l| (l, 1))
        .collect();
    c.observed.services = Services::Known(vec![service("web", 4, &others, &[])]);
    let p = c.at(SEC);
    assert!(begins(&p, WORKERS).is_empty(), "{}", describe(&p));
    assert!(
        reason(&p, WORKERS).contains("1 of its 4 tasks are down"),
        "{}",
        describe(&p)
    );
    assert!(p.wake_at.is_some_and(|t| t <= 2 * SEC), "{:?}", p.wake_at);
    // The task runs again on another node: the next one may go.
    let mut back = others.clone();
    back[0].1 += 1;
    c.observed.services = Services::Known(vec![service("web", 4, &back, &[])]);
    let p = c.at(2 * SEC);
    assert_eq!(begins(&p, WORKERS).len(), 1, "{}", describe(&p));
}

#[test]
fn a_drained_node_still_running_its_tasks_counts_as_down() {
    // The drain was asked; the swarm has not stopped the task yet.
    let mut c = workers("{max_unavailable: 1}", "replace");
    set_services(&mut c, vec![spread("web", &[])]);
    c.node("w1").availability = Availability::Drain;
    let p = c.at(0);
    assert!(!drained(&p).iter().any(|n| n != "n-w1"), "{}", describe(&p));
}

#[test]
fn a_budget_that_can_never_be_met_blocks_before_anything_is_disrupted() {
    let mut c = workers("", "replace");
    let single = service("db", 1, &[("w2", 1)], &[("drover.min-available", "1")]);
    set_services(&mut c, vec![single]);
    let p = c.at(0);
    // The others roll; w2 never.
    assert!(
        !drained(&p).contains(&"n-w2".to_string()),
        "{}",
        describe(&p)
    );
    let s = status(&p, WORKERS);
    assert_eq!(s.phase, Phase::Blocked, "{}", describe(&p));
    let why = reason(&p, WORKERS);
    assert!(
        why.contains("service db") && why.contains("can never"),
        "{why}"
    );
}

#[test]
fn tasks_crowded_on_one_node_can_never_be_drained_within_the_budget() {
    let mut c = workers("{max_unavailable: 1}", "replace");
    set_services(&mut c, vec![service("web", 3, &[("w3", 3)], &[])]);
    let p = c.at(0);
    assert!(
        !drained(&p).contains(&"n-w3".to_string()),
        "{}",
        describe(&p)
    );
    assert!(
        reason(&p, WORKERS).contains("node n-w3 runs 3"),
        "{}",
        describe(&p)
    );
}

#[test]
fn an_unreadable_label_keeps_the_tasks_where_they_are() {
    let mut c = workers("", "replace");
    set_services(
        &mut c,
        vec![spread("web", &[("drover.max-unavailable", "some")])],
    );
    let p = c.at(0);
    assert!(drained(&p).is_empty(), "{}", describe(&p));
    assert!(
        reason(&p, WORKERS).contains("label drover.max-unavailable"),
        "{}",
        describe(&p)
    );
}

#[test]
fn the_label_wins_over_the_group_default_and_global_services_go_with_their_node() {
    let mut c = workers("{max_unavailable: 1}", "replace");
    let mut global = spread("agent", &[]);
    global.replicas = None;
    set_services(
        &mut c,
        vec![spread("web", &[("drover.max-unavailable", "50%")]), global],
    );
    assert_eq!(drained(&c.at(0)).len(), 2);
}

#[test]
fn unknown_services_hold_only_nodes_running_tasks() {
    let mut c = workers("{max_unavailable: 1}", "replace");
    c.node("w1").running_tasks = 2;
    c.observed.services = Services::Unknown("timed out".into());
    let p = c.at(0);
    let d = drained(&p);
    assert_eq!(d.len(), 3, "{}", describe(&p));
    assert!(!d.contains(&"n-w1".to_string()), "{}", describe(&p));
}

#[test]
fn a_surge_roll_checks_the_budget_again_when_it_drains() {
    let mut c = workers("{max_unavailable: 1}", "surge");
    set_services(&mut c, vec![spread("web", &[])]);
    let p = c.at(0);
    let op = begins(&p, WORKERS)[0].clone();
    c.journal.push(op.clone());
    c.add_new_member(&op, true);
    // Meanwhile one task of the service went down elsewhere.
    let w = victim_link(&op).to_string();
    let other = ["w1", "w2", "w3", "w4"]
        .into_iter()
        .find(|l| *l != w)
        .expect("another worker");
    let running: Vec<(&str, u32)> = ["w1", "w2", "w3", "w4"]
        .into_iter()
        .filter(|l| *l != other)
        .map(|l| (l, 1))
        .collect();
    c.observed.services = Services::Known(vec![service("web", 4, &running, &[])]);
    // Past the new member's watch, its drain is due but waits.
    c.at(SEC);
    let p = c.at(600 * SEC);
    assert!(drained(&p).is_empty(), "{}", describe(&p));
    assert!(
        reason(&p, WORKERS).contains("service web"),
        "{}",
        describe(&p)
    );
}

proptest! {
    /// Whatever the placement, budgets and roll width, the drains one pass
    /// plans never take a service past its budget.
    #[test]
    fn one_pass_never_drains_past_a_budget(
        placement in proptest::collection::vec((0usize..4, 0u32..3), 1..6),
        max_unavailable in 0u32..3,
        width in 1u32..5,
    ) {
        // A budget of 0 only a service's label may declare (a spec's is refused).
        let (group_budget, labels) = match max_unavailable {
            0 => (String::new(), vec![("drover.max-unavailable", "0")]),
            n => (format!(", service_budget: {{max_unavailable: {n}}}"), Vec::new()),
        };
        let mut c = Cluster::new(
            1,
            &format!("  allocation: {{size: 4}}\n  update: {{canaries: 0, max_in_flight: {width}{group_budget}}}\n"),
        );
        let links = ["w1", "w2", "w3", "w4"];
        for w in links {
            c.add_worker(w, OLD, None);
        }
        let services: Vec<Service> = placement
            .iter()
            .enumerate()
            .map(|(k, (spread, per))| {
                let on: Vec<(&str, u32)> = links.iter().take(spread + 1).map(|l| (*l, *per)).collect();
                let replicas = on.iter().map(|(_, n)| n).sum::<u32>().max(1);
                service(&format!("s{k}"), replicas, &on, &labels)
            })
            .collect();
        set_services(&mut c, services.clone());
        let p = c.at(0);
        let gone = drained(&p);
        for s in &services {
            let lost: u32 = gone.iter().map(|n| s.running_on(n)).sum();
            let missing = s.replicas.unwrap_or(0) - s.running_total();
            prop_assert!(missing + lost <= max_unavailable || lost == 0, "{}: lost {lost}\n{}", s.name, describe(&p));
        }
    }
}

#[test]
fn a_manager_running_tasks_is_demoted_only_within_the_budgets() {
    let mut c = Cluster::new(3, "  allocation: {size: 1}\n");
    c.journal.push(replacement_op(
        "op-m2",
        OpKind::Roll,
        crate::spec::Role::Manager,
        "m2",
        Some("n-m2"),
    ));
    let web = |on_m3| {
        service(
            "web",
            2,
            &[("m2", 1), ("m3", on_m3)],
            &[("drover.max-unavailable", "1")],
        )
    };
    c.observed.services = Services::Known(vec![web(0)]);
    let demotes = |p: &Plan| {
        has(
            p,
            |a| matches!(a, Action::Demote { node, .. } if node == "n-m2"),
        )
    };
    let p = c.at(0);
    assert!(!demotes(&p), "{}", describe(&p));
    assert!(
        reason(&p, MANAGERS).contains("service web"),
        "{}",
        describe(&p)
    );
    c.observed.services = Services::Known(vec![web(1)]);
    let p = c.at(SEC);
    assert!(demotes(&p), "{}", describe(&p));
}

#[test]
fn a_heal_is_never_held_by_a_budget() {
    // A budget that lets no task go (a spec may not declare one: a label may).
    let mut c = workers("", "replace");
    set_services(
        &mut c,
        vec![spread("web", &[("drover.max-unavailable", "0")])],
    );
    c.journal.push(replacement_op(
        "op-heal",
        OpKind::Heal,
        crate::spec::Role::Worker,
        "w1",
        Some("n-w1"),
    ));
    let p = c.at(0);
    assert!(
        drained(&p).contains(&"n-w1".to_string()),
        "{}",
        describe(&p)
    );
}

#[test]
fn a_drain_held_past_the_step_timeout_blocks_and_never_rolls_back() {
    let mut c = Cluster::new(
        1,
        "  allocation: {size: 4}\n  update: {canaries: 0, max_in_flight: 1, step_timeout: 60s, on_failure: rollback, service_budget: {max_unavailable: 1}}\n",
    );
    for w in ["w1", "w2", "w3", "w4"] {
        c.add_worker(w, OLD, None);
    }
    let mut op = replacement_op(
        "op-w1",
        OpKind::Roll,
        crate::spec::Role::Worker,
        "w1",
        Some("n-w1"),
    );
    op.surge = true;
    c.journal.push(op);
    // w1's task runs; another of the service's is down for good.
    set_services(
        &mut c,
        vec![service("web", 4, &[("w1", 1), ("w2", 1), ("w3", 1)], &[])],
    );
    c.add_new_member(&c.journal[0].clone(), true);
    c.at(0);
    c.at(10 * SEC);
    let p = c.at(30 * SEC);
    assert_eq!(
        status(&p, WORKERS).phase,
        Phase::Rolling,
        "{}",
        describe(&p)
    );
    let p = c.at(100 * SEC);
    assert!(drained(&p).is_empty(), "{}", describe(&p));
    let why = blocked_not_rolled_back(&p, WORKERS);
    assert!(why.contains("service web"), "{why}");
}
