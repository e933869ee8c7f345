//! An engine upgrade in place over SSH on machines the operator keeps
//! (issue 39): six Debian 12 Incus machines running sshd are the `ssh`
//! provider's inventory (3 pet managers with a spare host, 2 workers); the
//! swarm is brought up on them through an etcd store on the lab bridge,
//! the managers' own controllers act, and the groups are rolled
//! `in_place` to Debian 13's `docker.io` 26.1, the packages served from a
//! local repository on the lab bridge (the machines have no route out).
//! Before, every node's engine is 20.10; after, every node's is 26.1, on
//! the same machines, the same enrollments and the same swarm nodes (no
//! machine recreated, no host enrolled anew); managers first, each out of
//! the raft while updated, the leader last; the 200 ms quorum watcher
//! sees no violation; a replicated service with `drover.min-available`
//! never falls below it; `status` and `events` tell the story.
//!
//! Its own bridge `drvt67` (10.203.67.0/24, NAT and routing off). The lab
//! deletes every machine on it and the bridge when it ends, also when the
//! test fails; etcd and the package server are stopped by their PIDs.

mod support;

use drover_incus::testkit::{Lab, Suite, exec, incus};
use drover_spi::Event;
use drover_store::testkit::Etcd;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};
use support::{bounded, budgeted, observe_endpoints, socket_endpoints, wait_for};

const NET: &str = "drvt67";
const SUBNET: &str = "10.203.67";
/// The hosts' last octets: managers (the last a spare), then workers.
const MANAGERS: [u8; 4] = [11, 12, 13, 14];
const WORKERS: [u8; 2] = [15, 16];
/// Where the package repository is served, on the bridge's host address.
const REPO_PORT: u16 = 18067;
/// Where each host records its update (time, instance, raft role).
const UPDATES: &str = "/var/lib/drover-lab/updates";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kept_machines_are_upgraded_in_place_over_ssh_leader_last() {
    let lab = Lab::new(NET, SUBNET);
    let _logs = support::IncusLogsOnFailure(&lab);
    bounded(2700, upgrade(&lab)).await;
}

/// A machine of the lab, by its address's last octet.
fn name(n: u8) -> String {
    format!("{NET}-h{n}")
}

fn addr(n: u8) -> String {
    format!("{SUBNET}.{n}")
}

/// The files every controller logs in with, at the same paths on this
/// host and on the manager hosts (the spec names them once): under
/// `/run`, which the managers' controller units see (their `/tmp` is
/// private, `/root` hidden).
struct Keys {
    dir: tempfile::TempDir,
}

impl Keys {
    fn new() -> Keys {
        let dir = tempfile::Builder::new()
            .prefix("drvt67-keys")
            .tempdir_in("/run")
            .expect("a key dir");
        let st = Command::new("ssh-keygen")
            .args(["-q", "-t", "ed25519", "-N", "", "-C", "drover-lab", "-f"])
            .arg(dir.path().join("id_ed25519"))
            .status()
            .expect("ssh-keygen (openssh-client)");
        assert!(st.success());
        Keys { dir }
    }

    fn key(&self) -> PathBuf {
        self.dir.path().join("id_ed25519")
    }

    fn known_hosts(&self) -> PathBuf {
        self.dir.path().join("known_hosts")
    }
}

/// A child process stopped by its PID when dropped.
struct Stopped(Child);

impl Drop for Stopped {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Ends, when dropped, the SSH control connections this host's drover
/// left under its `--ssh-dir` (they persist ten idle minutes otherwise):
/// each asked to exit through its own control socket.
struct CloseMasters(PathBuf);

impl Drop for CloseMasters {
    fn drop(&mut self) {
        let sockets = walk(&self.0).into_iter().filter(|p| p.ends_with("master"));
        for socket in sockets {
            let _ = Command::new("ssh")
                .arg("-S")
                .arg(&socket)
                .args(["-O", "exit", "drover-lab"])
                .stderr(Stdio::null())
                .status();
        }
    }
}

/// Every file under `dir`.
fn walk(dir: &Path) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    entries
        .flatten()
        .flat_map(|e| match e.file_type() {
            Ok(t) if t.is_dir() => walk(&e.path()),
            _ => vec![e.path()],
        })
        .collect()
}

/// Makes and starts machine `n` as an operator's own: the test image,
/// its fixed address, drover mounted from this host, its engine's socket
/// exposed in `engines` (for the watcher only).
fn launch(lab: &Lab, engines: &Path, n: u8) {
    let m = name(n);
    incus(&[
        "init",
        &lab.image,
        &m,
        "--storage",
        "drover",
        "-c",
        "security.privileged=true",
        "-c",
        "security.nesting=true",
        "-c",
        "limits.memory=1GiB",
    ]);
    let ip = format!("ipv4.address={}", addr(n));
    let network = format!("network={NET}");
    incus(&[
        "config",
        "device",
        "add",
        &m,
        "eth0",
        "nic",
        &network,
        "name=eth0",
        &ip,
    ]);
    let bin = format!("source={}", env!("CARGO_BIN_EXE_drover"));
    incus(&[
        "config",
        "device",
        "add",
        &m,
        "drover-bin",
        "disk",
        &bin,
        "path=/usr/local/bin/drover",
        "readonly=true",
    ]);
    let listen = format!(
        "listen=unix:{}",
        engines.join(format!("{m}.sock")).display()
    );
    incus(&[
        "config",
        "device",
        "add",
        &m,
        "engine",
        "proxy",
        "bind=host",
        &listen,
        "connect=unix:/var/run/docker.sock",
        "mode=0600",
    ]);
    incus(&["start", &m]);
}

/// Waits until machine `n` runs its engine and sshd; its host key line.
fn host_key(n: u8) -> String {
    let m = name(n);
    wait_for(Duration::from_secs(300), || {
        let out = exec(
            &m,
            "systemctl is-active --quiet docker ssh && cat /etc/ssh/ssh_host_ed25519_key.pub",
        );
        let key = String::from_utf8_lossy(&out.stdout).trim().to_string();
        (out.status.success() && key.starts_with("ssh-ed25519 ")).then_some(key)
    })
}

/// Copies a file of this host to `path` on machine `m`, root only.
fn push(m: &str, file: &Path, path: &Path) {
    let target = format!("{m}{}", path.display());
    incus(&[
        "file",
        "push",
        "--create-dirs",
        "--mode",
        "0600",
        file.to_str().unwrap(),
        &target,
    ]);
}

/// The cluster file: every group over SSH; with `command`, rolled in
/// place by it.
fn spec(keys: &Keys, command: Option<&str>) -> String {
    let props = |hosts: &[u8]| {
        let hosts: Vec<String> = hosts.iter().map(|n| addr(*n)).collect();
        format!(
            "{{hosts: [{}], identity_file: {}, known_hosts: {}}}",
            hosts.join(", "),
            keys.key().display(),
            keys.known_hosts().display()
        )
    };
    let update = command
        .map(|c| {
            let c = c.replace('\n', "\n        ");
            format!(
                "  update:\n    strategy: in_place\n    in_place:\n      timeout: 5m\n      command: |\n        {c}\n"
            )
        })
        .unwrap_or_default();
    let pets: Vec<String> = MANAGERS[..3].iter().map(|n| addr(*n)).collect();
    format!(
        "groups:\n\
         - name: managers\n  role: manager\n  allocation:\n    logical_ids: [{}]\n    spare_ids: [{}]\n  instance:\n    provider: ssh\n    properties: {}\n{update}\
         - name: workers\n  role: worker\n  allocation: {{size: 2}}\n  instance:\n    provider: ssh\n    properties: {}\n{update}",
        pets.join(", "),
        addr(MANAGERS[3]),
        props(&MANAGERS),
        props(&WORKERS),
    )
}

/// The update: Debian 13's engine from the lab's repository (docs/incus.md,
/// "Upgrading the engine in place"), recorded on the host first.
fn upgrade_command() -> String {
    format!(
        "mkdir -p {dir}\n\
         echo \"$(date +%s%N) $DROVER_INSTANCE $(docker info 2>/dev/null | grep -c 'Is Manager: true')\" >>{UPDATES}\n\
         echo 'deb [trusted=yes] http://{SUBNET}.1:{REPO_PORT}/ ./' >/etc/apt/drover-upgrade.list\n\
         o='-o Dir::Etc::SourceList=/etc/apt/drover-upgrade.list -o Dir::Etc::SourceParts=/nonexistent'\n\
         apt-get -q $o -o APT::Update::Error-Mode=any update\n\
         DEBIAN_FRONTEND=noninteractive apt-get -q -y $o --no-install-recommends -o Dpkg::Options::=--force-confdef -o Dpkg::Options::=--force-confold install docker.io docker-cli\n\
         dpkg --compare-versions \"$(dpkg-query -W -f='${{Version}}' docker.io)\" ge 26",
        dir = Path::new(UPDATES).parent().unwrap().display()
    )
}

/// `drover ARGS` against the lab's store, this host logging in with
/// `ssh_dir`'s connections, printing what it said.
fn drover(ssh_dir: &Path, store: &str, args: &[&str]) -> std::process::Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_drover"));
    cmd.args(args)
        .args(["--store", store])
        .env("DROVER_SSH_DIR", ssh_dir)
        .env("RUST_LOG", "warn");
    support::run_printed(cmd, args)
}

/// The swarm's ready nodes: node id → (engine version, is the leader).
async fn nodes(engines: &Path) -> BTreeMap<String, (String, bool)> {
    let nodes = observe_endpoints(&socket_endpoints(engines))
        .await
        .unwrap_or_default();
    nodes
        .into_iter()
        .filter(|n| n.state == drover_core::model::NodeState::Ready)
        .map(|n| {
            let leader = n.raft.as_ref().is_some_and(|r| r.leader);
            (n.id, (n.engine_version.unwrap_or_default(), leader))
        })
        .collect()
}

/// Until the swarm has five ready nodes; them.
async fn five(engines: &Path) -> BTreeMap<String, (String, bool)> {
    let t0 = Instant::now();
    loop {
        let n = nodes(engines).await;
        if n.len() == 5 {
            return n;
        }
        assert!(
            t0.elapsed() < Duration::from_secs(300),
            "not 5 nodes: {n:?}"
        );
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}

/// The swarm node each member host's engine says it is.
fn host_nodes() -> BTreeMap<u8, String> {
    MANAGERS[..3]
        .iter()
        .chain(&WORKERS)
        .map(|n| {
            let out = exec(&name(*n), "docker info --format '{{.Swarm.NodeID}}'");
            (*n, String::from_utf8_lossy(&out.stdout).trim().to_string())
        })
        .collect()
}

/// Each enrolled host's instance id, from its own record.
fn enrollments() -> BTreeMap<u8, String> {
    MANAGERS
        .iter()
        .chain(&WORKERS)
        .filter_map(|n| {
            let out = exec(&name(*n), "cat /var/lib/drover/instance.json");
            let doc: serde_json::Value = serde_json::from_slice(&out.stdout).ok()?;
            Some((*n, doc["id"].as_str()?.to_string()))
        })
        .collect()
}

/// Every group converged on its desired config, as `status` says.
fn converged(ssh_dir: &Path, store: &str) -> bool {
    let out = Command::new(env!("CARGO_BIN_EXE_drover"))
        .args(["status", "--output", "json", "--store", store])
        .env("DROVER_SSH_DIR", ssh_dir)
        .output()
        .expect("drover status");
    let Ok(doc) = serde_json::from_slice::<serde_json::Value>(&out.stdout) else {
        return false;
    };
    doc["groups"].as_array().is_some_and(|groups| {
        groups
            .iter()
            .all(|g| g["phase"] == "converged" && g["current"] == g["desired"])
    })
}

async fn upgrade(lab: &Lab) {
    let engines = lab.engine_dir().to_path_buf();
    let keys = Keys::new();
    let ssh_dir = keys.dir.path().join("ctl");
    let _masters = CloseMasters(ssh_dir.clone());
    let repo = keys.dir.path().join("repo");
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/upgrade-repo.sh");
    let out = Command::new(&script)
        .arg(&repo)
        .output()
        .expect("scripts/upgrade-repo.sh");
    assert!(
        out.status.success(),
        "the upgrade repository: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    eprintln!("repository: {}", String::from_utf8_lossy(&out.stdout));
    let _served = Stopped(
        Command::new("python3")
            .args(["-m", "http.server", &REPO_PORT.to_string()])
            .args(["--bind", &format!("{SUBNET}.1"), "--directory"])
            .arg(&repo)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("python3"),
    );
    let etcd = Etcd::start_on(&format!("{SUBNET}.1")).await;
    let store = etcd.url.clone();

    // The operator's machines: booted, sshd keys known, the login key on
    // the managers (their controllers log in to the other hosts).
    let all: Vec<u8> = MANAGERS.iter().chain(&WORKERS).copied().collect();
    for n in &all {
        launch(lab, &engines, *n);
    }
    let known: Vec<String> = all
        .iter()
        .map(|n| format!("{} {}", addr(*n), host_key(*n)))
        .collect();
    std::fs::write(keys.known_hosts(), known.join("\n") + "\n").unwrap();
    let public = keys.key().with_extension("pub");
    for n in &all {
        push(&name(*n), &public, Path::new("/root/.ssh/authorized_keys"));
    }
    for n in &MANAGERS {
        push(&name(*n), &keys.key(), &keys.key());
        push(&name(*n), &keys.known_hosts(), &keys.known_hosts());
    }
    let rootfs = budgeted::rootfs(keys.dir.path());
    for n in &WORKERS {
        assert!(
            budgeted::import(&name(*n), &rootfs),
            "busybox on {}",
            name(*n)
        );
    }

    // The swarm, brought up from this host through the store.
    let files = keys.dir.path();
    let v1 = files.join("v1.yaml");
    std::fs::write(&v1, spec(&keys, None)).unwrap();
    let out = drover(
        &ssh_dir,
        &store,
        &[
            "apply",
            "-f",
            v1.to_str().unwrap(),
            "--wait",
            "--timeout",
            "15m",
        ],
    );
    assert!(out.status.success(), "bootstrap failed");
    let before = five(&engines).await;
    assert!(
        before
            .values()
            .all(|(v, _)| v.starts_with(Suite::Bookworm.engine_series())),
        "20.10 everywhere before: {before:?}"
    );
    let members = host_nodes();
    let leader = members
        .iter()
        .find(|(_, id)| before.get(*id).is_some_and(|(_, l)| *l))
        .map(|(n, _)| *n)
        .expect("a leader among the pets");
    let enrolled = enrollments();
    assert_eq!(enrolled.len(), 5, "five hosts enrolled: {enrolled:?}");

    // A service whose budget the roll keeps.
    budgeted::create(&socket_endpoints(&engines));
    wait_for(Duration::from_secs(120), || {
        (budgeted::running(&socket_endpoints(&engines)) == Some(2)).then_some(())
    });

    // The roll, under the quorum watcher and a task counter.
    let watched = budgeted::Watched::start(&engines);
    let v2 = files.join("v2.yaml");
    std::fs::write(&v2, spec(&keys, Some(&upgrade_command()))).unwrap();
    let from_ms = support::epoch_ms();
    let t0 = Instant::now();
    let out = drover(&ssh_dir, &store, &["apply", "-f", v2.to_str().unwrap()]);
    assert!(out.status.success(), "the roll was not committed");
    let after = loop {
        let n = nodes(&engines).await;
        if n.len() == 5
            && n.values()
                .all(|(v, _)| v.starts_with(Suite::Trixie.engine_series()))
            && converged(&ssh_dir, &store)
        {
            break n;
        }
        assert!(
            t0.elapsed() < Duration::from_secs(1500),
            "not upgraded within 1500 s: {n:?}"
        );
        tokio::time::sleep(Duration::from_secs(1)).await;
    };
    let roll = t0.elapsed();
    let to_ms = support::epoch_ms();
    watched.assert_kept().await;
    eprintln!("MEASURED incus in place over ssh 20.10 -> 26.1 (3+2, a spare host): {roll:?}");

    // The same machines, enrollments and swarm nodes.
    assert_eq!(
        after.keys().collect::<Vec<_>>(),
        before.keys().collect::<Vec<_>>(),
        "the same swarm nodes"
    );
    assert_eq!(host_nodes(), members, "each host the same node");
    let kept = enrollments();
    for (n, id) in &enrolled {
        if *n == MANAGERS[3] {
            continue; // the spare host: enrolled for the roll, returned
        }
        assert_eq!(kept.get(n), Some(id), "{} kept its enrollment", addr(*n));
    }

    // Managers first, each out of the raft, the leader last.
    let mut updates: Vec<(u128, u8, String)> = Vec::new();
    for n in MANAGERS[..3].iter().chain(&WORKERS) {
        let out = exec(&name(*n), &format!("cat {UPDATES}"));
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 1, "{} updated once: {text}", addr(*n));
        let f: Vec<&str> = lines[0].split(' ').collect();
        updates.push((f[0].parse().unwrap(), *n, f[2].to_string()));
    }
    updates.sort();
    eprintln!("updates, in order: {updates:?}");
    let order: Vec<u8> = updates.iter().map(|u| u.1).collect();
    assert!(
        order[..3].iter().all(|n| MANAGERS.contains(n)),
        "managers first: {order:?}"
    );
    assert_eq!(order[2], leader, "the leader last: {order:?}");
    for (_, n, manager) in &updates {
        assert_eq!(manager, "0", "{} updated as a raft member", addr(*n));
    }

    // The roll against its machine-bound minimum (BENCHMARKS.md §9).
    let out = drover(
        &ssh_dir,
        &store,
        &["events", "--since", "2h", "--output", "json"],
    );
    let events: Vec<Event> = serde_json::from_slice(&out.stdout).expect("events --output json");
    eprintln!("{}", in_place_split(&events, from_ms, to_ms));

    // The story, as an operator reads it.
    let status = drover(&ssh_dir, &store, &["status"]);
    let text = String::from_utf8_lossy(&status.stdout).into_owned();
    assert!(text.contains("converged"), "{text}");
    let events = drover(&ssh_dir, &store, &["events", "--since", "2h"]);
    let log = String::from_utf8_lossy(&events.stdout).into_owned();
    for id in enrolled.values() {
        assert!(log.contains(id.as_str()), "the events name {id}: {log}");
    }
    assert!(log.contains("update"), "the events tell the updates: {log}");
}

/// The in-place roll in `from_ms..to_ms`, split by its event log: each
/// operation's span and its update (the `update` step: the command and the
/// engine's restart, the machine's own time). The machine-bound minimum is
/// every member's update plus its group's `watch` (10 s managers, 5 s
/// workers: the node judged healthy); the rest of the wall time is the
/// roll's own: demotes and the raft letting go, drains, promotes,
/// activations, the spare's enrollment and return, drover's passes.
fn in_place_split(events: &[Event], from_ms: u64, to_ms: u64) -> String {
    let window: Vec<&Event> = events
        .iter()
        .filter(|e| (from_ms..=to_ms).contains(&e.at_ms))
        .collect();
    let at = |op: &str, action: &str| {
        window
            .iter()
            .find(|e| e.action == action && e.op.as_deref() == Some(op))
            .map(|e| e.at_ms)
    };
    let mut out = format!(
        "{:<34} {:<9} {:>6} {:>7}\n",
        "operation", "group", "span", "update"
    );
    let mut minimum = 0;
    let mut updates = 0;
    for begin in window.iter().filter(|e| e.action == "begin") {
        let Some(op) = begin.op.as_deref() else {
            continue;
        };
        let group = begin.group.clone().unwrap_or_default();
        let span = at(op, "end").map_or(0, |end| end - begin.at_ms);
        let started = window.iter().find(|e| {
            e.op.as_deref() == Some(op)
                && e.reason.starts_with("update instance")
                && e.outcome == "started"
        });
        let update = started.and_then(|s| {
            window
                .iter()
                .find(|e| e.reason == s.reason && e.outcome == "ok" && e.at_ms >= s.at_ms)
                .map(|e| e.at_ms - s.at_ms)
        });
        if let Some(u) = update {
            let watch = if group == "managers" { 10_000 } else { 5_000 };
            minimum += u + watch;
            updates += 1;
        }
        out += &format!(
            "{op:<34} {group:<9} {:>6.1} {:>7}\n",
            span as f64 / 1000.0,
            update.map_or("-".into(), |u| format!("{:.1}", u as f64 / 1000.0))
        );
    }
    let wall = to_ms - from_ms;
    out += &format!(
        "MEASURED in place over ssh split: wall {:.1} s, machine-bound minimum {:.1} s ({updates} updates + watch), ratio {:.2}",
        wall as f64 / 1000.0,
        minimum as f64 / 1000.0,
        wall as f64 / minimum.max(1) as f64
    );
    out
}
