//! Service budgets on real engines (issue 21): a swarm of 1 manager and 4
//! workers runs replicated services of several sizes (a `docker import`ed
//! busybox, `--network host`, at most one task per node, so a drained
//! node's task waits for a new worker), and a probe counts each service's
//! running tasks every 200 ms while the workers roll two at a time. With
//! budgets (two service labels and the group's default) no service ever
//! drops below its budget; the same roll without them (the control) takes
//! two of a service's tasks at once.
//!
//! Everything started is stopped by PID (the lab's guard, etcd's drop),
//! also on failure; the probe's samples are printed, never timed.

mod support;

use drover_local::testkit::{BUSYBOX_IMAGE, busybox_tar};
use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use support::{Lab, bounded};

/// A service: name, replicas, labels, fewest running tasks allowed.
type Declared = (
    &'static str,
    u32,
    &'static [(&'static str, &'static str)],
    u32,
);

/// The services: name, replicas, labels (the `batch` service takes the
/// group's `update.service_budget`), and the fewest running tasks its
/// budget allows.
const SERVICES: &[Declared] = &[
    ("web", 4, &[("drover.max-unavailable", "1")], 3),
    ("api", 2, &[("drover.min-available", "50%")], 1),
    ("batch", 3, &[], 2),
];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_roll_keeps_every_service_within_its_budget() {
    bounded(900, budgets_kept()).await;
}

async fn budgets_kept() {
    let lab = Lab::new(110).await;
    let rootfs = lab.dir.join("busybox-rootfs.tar");
    std::fs::write(&rootfs, busybox_tar().expect("busybox rootfs")).expect("write rootfs");
    let one = spec(&lab, "one", true);
    let t0 = Instant::now();
    let out = lab.drover(&["bootstrap", "-f", &one, "--wait", "--timeout", "8m"]);
    assert_eq!(out.status.code(), Some(0), "bootstrap failed");
    let manager = lab.manager_endpoints().remove(0);
    for (name, replicas, labels, _) in SERVICES {
        create_service(&manager, name, *replicas, labels);
    }
    wait_all_running(&manager);
    eprintln!(
        "PHASE: bring-up with services {:.1}s",
        t0.elapsed().as_secs_f64()
    );

    let t1 = Instant::now();
    let seen = probe_during(&manager, || {
        lab.apply(Path::new(&spec(&lab, "two", true)), true)
    });
    eprintln!(
        "PHASE: roll with budgets {:.1}s; fewest running: {seen:?}",
        t1.elapsed().as_secs_f64()
    );
    for (name, replicas, _, floor) in SERVICES {
        let low = seen.get(*name).copied().unwrap_or(0);
        assert!(
            low >= *floor,
            "service {name} ({replicas} replicas) fell to {low} running, below its budget's {floor}"
        );
    }

    // The control: the same roll with no budget anywhere.
    for (name, _, labels, _) in SERVICES {
        for (key, _) in *labels {
            docker(
                &manager,
                &["service", "update", "--detach", "--label-rm", key, name],
            );
        }
    }
    wait_all_running(&manager);
    let seen = probe_during(&manager, || {
        lab.apply(Path::new(&spec(&lab, "three", false)), true)
    });
    eprintln!("PHASE: control roll without budgets; fewest running: {seen:?}");
    assert!(
        SERVICES
            .iter()
            .any(|(name, _, _, floor)| seen.get(*name).copied().unwrap_or(0) < *floor),
        "without budgets the two-at-a-time roll should have taken some service below its budget: {seen:?}"
    );
}

/// The cluster file: 1 manager, 4 workers (release `label`) rolled two at a
/// time, replaced in place; the workers import the busybox image at boot.
fn spec(lab: &Lab, label: &str, with_budget: bool) -> String {
    let budget = if with_budget {
        ", service_budget: {max_unavailable: 1}"
    } else {
        ""
    };
    let rootfs = lab.dir.join("busybox-rootfs.tar");
    let text = format!(
        "groups:
- name: managers
  role: manager
  allocation: {{size: 1}}
  instance: {{provider: local}}
  health: {{startup_timeout: 60s}}
- name: workers
  role: worker
  allocation: {{size: 4}}
  instance: {{provider: local}}
  flavor:
    engine_labels: {{release: {label}}}
    boot_script: |
      #!/bin/sh
      set -eu
      docker import {rootfs} {BUSYBOX_IMAGE} >/dev/null
      drover engine join --role worker --address {{{{ address }}}} --remote {{{{ join_addr }}}}
  update: {{strategy: replace, max_in_flight: 2, canaries: 0, watch: 1s, step_timeout: 5m{budget}}}
  health: {{startup_timeout: 60s}}
",
        rootfs = rootfs.display()
    );
    let path = lab.dir.join(format!("spec-{label}.yaml"));
    std::fs::write(&path, text).expect("write spec");
    path.to_str().expect("utf-8 path").to_string()
}

fn docker(endpoint: &str, args: &[&str]) -> String {
    let out = Command::new("docker")
        .args(["-H", endpoint])
        .args(args)
        .output()
        .expect("the docker CLI");
    assert!(out.status.success(), "docker {args:?}: {out:?}");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// A replicated service on the workers, one task per node at most.
fn create_service(endpoint: &str, name: &str, replicas: u32, labels: &[(&str, &str)]) {
    let replicas = replicas.to_string();
    let mut args = vec![
        "service",
        "create",
        "--detach",
        "--no-resolve-image",
        "--name",
        name,
        "--replicas",
        &replicas,
        "--replicas-max-per-node",
        "1",
        "--constraint",
        "node.role==worker",
        "--network",
        "host",
    ];
    let label_args: Vec<String> = labels.iter().map(|(k, v)| format!("{k}={v}")).collect();
    for l in &label_args {
        args.extend(["--label", l]);
    }
    args.extend([BUSYBOX_IMAGE, "/bin/sleep", "3600"]);
    docker(endpoint, &args);
}

/// Running tasks per service, as `docker service ls` counts them.
fn running(endpoint: &str) -> Option<BTreeMap<String, u32>> {
    let out = Command::new("docker")
        .args([
            "-H",
            endpoint,
            "service",
            "ls",
            "--format",
            "{{.Name}} {{.Replicas}}",
        ])
        .output()
        .ok()?;
    if !out.status.success() {
        return None;
    }
    let text = String::from_utf8_lossy(&out.stdout);
    text.lines()
        .map(|l| {
            let (name, replicas) = l.split_once(' ')?;
            let now = replicas.split('/').next()?.parse().ok()?;
            Some((name.to_string(), now))
        })
        .collect()
}

fn wait_all_running(endpoint: &str) {
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let full = running(endpoint).is_some_and(|r| {
            SERVICES
                .iter()
                .all(|(name, replicas, _, _)| r.get(*name) == Some(replicas))
        });
        if full {
            return;
        }
        assert!(Instant::now() < deadline, "services never all running");
        std::thread::sleep(Duration::from_millis(500));
    }
}

/// Runs `roll` while sampling every 200 ms; the fewest running tasks seen
/// per service.
fn probe_during(endpoint: &str, roll: impl FnOnce()) -> BTreeMap<String, u32> {
    let stop = Arc::new(AtomicBool::new(false));
    let low = Arc::new(Mutex::new(BTreeMap::<String, u32>::new()));
    let probe = {
        let (stop, low, endpoint) = (stop.clone(), low.clone(), endpoint.to_string());
        std::thread::spawn(move || {
            let mut samples = 0u32;
            while !stop.load(Ordering::SeqCst) {
                if let Some(now) = running(&endpoint) {
                    samples += 1;
                    let mut low = low.lock().unwrap();
                    for (name, n) in now {
                        let e = low.entry(name).or_insert(n);
                        *e = (*e).min(n);
                    }
                }
                std::thread::sleep(Duration::from_millis(200));
            }
            samples
        })
    };
    roll();
    stop.store(true, Ordering::SeqCst);
    let samples = probe.join().expect("probe");
    eprintln!("probe: {samples} samples");
    assert!(samples > 10, "the probe hardly sampled ({samples})");
    low.lock().unwrap().clone()
}
