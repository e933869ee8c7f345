//! The operator's experience, end to end through the binary (issue 6), on
//! one demo cluster reused for every check to keep CI short:
//!
//! - `drover demo up` builds a real swarm (3 managers + 2 workers, each a
//!   dockerd on 127.0.85.x, etcd as the store); a second `demo up` is a no-op;
//! - `drover apply --wait`, run on a pseudo-terminal, rolls a change with live
//!   progress bars redrawn in place; `status --output json` is parsed
//!   and checked; `events --output json` holds the rollout's steps in order
//!   (every step after its operation began, drains before destroys, the
//!   leader's self-demotion begun last among the managers);
//! - the acting controller's metrics endpoint is scraped, passes
//!   `promtool check metrics`, and its fault-tolerance gauge equals the one
//!   computed from the swarm's node list;
//! - `diff`, `export` and `import` work against the live store;
//! - no swarm secret (`SWMTKN-`, `SWMKEY-`) appears in anything drover
//!   printed or logged (at trace level, controllers included), stored (status,
//!   events, history, a raw dump of etcd), left in the demo directory, or
//!   served as metrics during the rollout, nor in the command line of any
//!   process, sampled continuously while machines joined;
//! - `drover demo down` leaves no process and no directory.
//!
//! Everything started is stopped by PID, also when the test fails (`Demo`'s
//! drop runs `demo down`, then the provider's teardown). Timings are
//! printed, never asserted.

mod support;

use drover_core::model::SwarmView;
use drover_core::quorum::quorum;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use support::scrape;

const SECRETS: [&str; 2] = ["SWMTKN-", "SWMKEY-"];
const NET: &str = "127.0.85";
/// Trace for everything but the HTTP/2 and gRPC plumbing of the etcd client
/// (it logs frames, not payloads, and floods). `bollard=trace` is asked
/// for too; drover caps it at info, since its bodies carry join tokens.
const TRACE: &str = "trace,h2=debug,tonic=debug,tower=debug,bollard=trace";

/// The demo: its directory, etcd port, and every byte drover printed.
struct Demo {
    dir: PathBuf,
    port: u16,
    printed: Mutex<String>,
}

impl Demo {
    fn new() -> Demo {
        let dir = drover_local::testkit::short_tempdir("dd").expect("tempdir");
        std::fs::remove_dir(&dir).expect("demo up makes its own directory");
        Demo {
            dir,
            port: drover_store::testkit::free_port(),
            printed: Mutex::new(String::new()),
        }
    }

    fn store(&self) -> String {
        format!("etcd://127.0.0.1:{}", self.port)
    }

    fn drover(&self, args: &[&str]) -> Output {
        let out = Command::new(env!("CARGO_BIN_EXE_drover"))
            .args(args)
            .env("DROVER_STORE", self.store())
            .env("DROVER_LOCAL_DIR", self.dir.join("machines"))
            .env("DROVER_LOCAL_POOL", format!("{NET}.20-{NET}.40"))
            .env("DROVER_LOG", TRACE)
            .stdin(Stdio::null())
            .output()
            .expect("run drover");
        let text = format!(
            "$ drover {}\n{}{}",
            args.join(" "),
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        // The trace logs are long: keep them for the secret scan, echo the stdout.
        eprintln!(
            "$ drover {} -> {:?}\n{}",
            args.join(" "),
            out.status.code(),
            String::from_utf8_lossy(&out.stdout)
        );
        self.printed.lock().unwrap().push_str(&text);
        out
    }

    /// Runs drover on a pseudo-terminal (util-linux `script`), as an operator
    /// at a terminal would: its exit code and everything it wrote there.
    fn drover_on_tty(&self, args: &[&str]) -> (Option<i32>, String) {
        let line: Vec<String> = std::iter::once(env!("CARGO_BIN_EXE_drover"))
            .chain(args.iter().copied())
            .map(|a| format!("'{a}'"))
            .collect();
        let out = Command::new("script")
            .args(["-qefc", &line.join(" "), "/dev/null"])
            .env("DROVER_STORE", self.store())
            .env("DROVER_LOCAL_DIR", self.dir.join("machines"))
            .env("DROVER_LOCAL_POOL", format!("{NET}.20-{NET}.40"))
            .env("DROVER_LOG", TRACE)
            .env("TERM", "xterm-256color")
            .stdin(Stdio::null())
            .output()
            .expect("run drover under script (util-linux)");
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        let shown: String = text
            .lines()
            .filter(|l| !l.contains("TRACE") && !l.contains("DEBUG"))
            .collect::<Vec<_>>()
            .join("\n");
        eprintln!(
            "$ drover {} (on a terminal) -> {:?}\n{shown}",
            args.join(" "),
            out.status.code()
        );
        self.printed
            .lock()
            .unwrap()
            .push_str(&format!("$ drover {}\n{text}", args.join(" ")));
        (out.status.code(), text)
    }

    fn up(&self) -> Output {
        let dir = self.dir.to_str().unwrap().to_string();
        let pool = format!("{NET}.10-{NET}.40");
        let port = self.port.to_string();
        self.drover(&[
            "demo",
            "up",
            "--dir",
            &dir,
            "--pool",
            &pool,
            "--etcd-port",
            &port,
            "--timeout",
            "6m",
        ])
    }

    fn json(&self, args: &[&str]) -> serde_json::Value {
        let out = self.drover(args);
        assert_eq!(out.status.code(), Some(0), "drover {args:?} failed");
        serde_json::from_slice(&out.stdout).expect("JSON output")
    }

    fn records(&self) -> Vec<drover_local::InstanceRecord> {
        drover_local::LocalProvider::new(self.dir.join("machines"), Vec::new())
            .ok()
            .and_then(|p| p.records().ok())
            .unwrap_or_default()
    }
}

impl Drop for Demo {
    fn drop(&mut self) {
        if self.dir.exists() {
            let _ = Command::new(env!("CARGO_BIN_EXE_drover"))
                .args(["demo", "down", "--dir", self.dir.to_str().unwrap()])
                .output();
        }
        // Whatever `demo down` could not do (it failed, or the marker was never written).
        drover_local::teardown(&self.dir.join("machines"));
        let needle = format!("{}/", self.dir.display());
        drover_local::procs::stop_tree(
            None,
            None,
            &needle,
            drover_local::procs::Owned::Named,
            Duration::from_secs(10),
        );
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// What the background sampler saw.
#[derive(Default)]
struct Sampled {
    cmdline_samples: u64,
    joins_seen: u64,
    leaks: Vec<String>,
    metrics: Vec<String>,
}

/// Continuously (20 ms apart): the command line of every process of the
/// demo (its directory in its command line or environment); every 50th
/// pass: every file in the demo directory (before destroyed machines take
/// theirs away) and every manager's metrics endpoint.
fn sampler(
    dir: PathBuf,
    stop: Arc<AtomicBool>,
    out: Arc<Mutex<Sampled>>,
) -> std::thread::JoinHandle<()> {
    std::thread::spawn(move || {
        let needle = dir.to_string_lossy().into_owned();
        let mut tick = 0u64;
        while !stop.load(Ordering::SeqCst) {
            let mut joins = 0;
            let mut leaks = Vec::new();
            for pid in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
                let Ok(raw) = std::fs::read(pid.path().join("cmdline")) else {
                    continue;
                };
                let cmd = String::from_utf8_lossy(&raw).replace('\0', " ");
                // The demo's processes only: other suites run beside this
                // one, some with a secret in argv on purpose (a refusal's
                // test). Everything the demo starts names its directory in
                // its command line or its environment.
                let environ = std::fs::read(pid.path().join("environ")).unwrap_or_default();
                let ours =
                    cmd.contains(&*needle) || String::from_utf8_lossy(&environ).contains(&*needle);
                if !ours {
                    continue;
                }
                joins += u64::from(cmd.contains("engine join"));
                if SECRETS.iter().any(|s| cmd.contains(s)) {
                    leaks.push(format!("argv of pid {:?}", pid.file_name()));
                }
            }
            if tick.is_multiple_of(50) {
                leaks.extend(scan_dir(&dir));
                let texts: Vec<String> = manager_addresses(&dir)
                    .iter()
                    .filter_map(|a| scrape(a))
                    .collect();
                let mut s = out.lock().unwrap();
                s.metrics.extend(texts);
            }
            let mut s = out.lock().unwrap();
            s.cmdline_samples += 1;
            s.joins_seen += joins;
            s.leaks.extend(leaks);
            drop(s);
            tick += 1;
            std::thread::sleep(Duration::from_millis(20));
        }
    })
}

fn manager_addresses(dir: &Path) -> Vec<String> {
    drover_local::LocalProvider::new(dir.join("machines"), Vec::new())
        .ok()
        .and_then(|p| p.records().ok())
        .unwrap_or_default()
        .into_iter()
        .filter(|r| r.tags.get("drover.group").is_some_and(|g| g == "managers"))
        .map(|r| r.address)
        .collect()
}

/// Files under `dir` (docker's own data roots included) holding a secret.
fn scan_dir(dir: &Path) -> Vec<String> {
    let mut leaks = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            let path = e.path();
            match e.file_type() {
                Ok(t) if t.is_dir() => stack.push(path),
                Ok(t) if t.is_file() => {
                    if let Ok(bytes) = std::fs::read(&path) {
                        let text = String::from_utf8_lossy(&bytes);
                        if let Some(at) = SECRETS.iter().find_map(|s| text.find(s)) {
                            // Where, and what precedes it (the secret itself stays out).
                            let from = text[..at]
                                .char_indices()
                                .rev()
                                .nth(120)
                                .map_or(0, |(i, _)| i);
                            leaks.push(format!("file {}: …{}", path.display(), &text[from..at]));
                        }
                    }
                }
                _ => {}
            }
        }
    }
    leaks
}

/// Every key and value in etcd, as text.
async fn etcd_dump(port: u16) -> String {
    let mut c = etcd_client::Client::connect([format!("http://127.0.0.1:{port}")], None)
        .await
        .expect("etcd");
    let resp = c
        .get("", Some(etcd_client::GetOptions::new().with_all_keys()))
        .await
        .expect("dump");
    resp.kvs()
        .iter()
        .map(|kv| {
            format!(
                "{} = {}\n",
                String::from_utf8_lossy(kv.key()),
                String::from_utf8_lossy(kv.value())
            )
        })
        .collect()
}

/// The swarm's fault tolerance from the node list of a manager that answers.
async fn fault_tolerance_from_nodes(demo: &Demo) -> i64 {
    for r in demo.records() {
        let Ok(engine) = drover_engine::Engine::connect(&r.endpoint()).await else {
            continue;
        };
        if let SwarmView::Ok(nodes) = engine.observe().await {
            let members = nodes.iter().filter(|n| n.raft.is_some()).count();
            let reachable = nodes
                .iter()
                .filter(|n| n.raft.as_ref().is_some_and(|r| r.reachable))
                .count();
            return reachable as i64 - quorum(members) as i64;
        }
    }
    panic!("no manager answered with a node list");
}

/// A sample's value: `name{labels} value` or `name value`.
fn sample(text: &str, name_and_labels: &str) -> Option<f64> {
    text.lines()
        .find_map(|l| l.strip_prefix(name_and_labels)?.strip_prefix(' '))
        .and_then(|v| v.trim().parse().ok())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_demo_rollout_status_events_and_metrics_as_an_operator_sees_them() {
    let demo = Demo::new();
    let scenario = tokio::time::timeout(Duration::from_secs(720), scenario(&demo));
    if scenario.await.is_err() {
        panic!("the scenario did not finish within 12 minutes");
    }
}

async fn scenario(demo: &Demo) {
    let stop = Arc::new(AtomicBool::new(false));
    let seen = Arc::new(Mutex::new(Sampled::default()));
    let watcher = sampler(demo.dir.clone(), stop.clone(), seen.clone());

    // Up, and up again: the second is a no-op.
    let t0 = Instant::now();
    assert_eq!(demo.up().status.code(), Some(0), "demo up failed");
    let up = t0.elapsed();
    let again = demo.up();
    assert_eq!(again.status.code(), Some(0));
    assert!(
        String::from_utf8_lossy(&again.stdout).contains("already up"),
        "a second demo up changed something"
    );
    assert_eq!(demo.records().len(), 5);

    // A rolling update, followed to the end.
    let since = drover_controller::wall_ms();
    let v2 = demo.dir.join("cluster-v2.yaml");
    let t1 = Instant::now();
    // On a terminal, as an operator runs it: live bars, redrawn in place.
    let (code, shown) = demo.drover_on_tty(&[
        "apply",
        "-f",
        v2.to_str().unwrap(),
        "--wait",
        "--timeout",
        "6m",
    ]);
    assert_eq!(code, Some(0), "apply --wait failed");
    let rolled = t1.elapsed();
    assert!(shown.contains("converged on revision 2"));
    // The last frame drawn before the final line shows both groups done.
    let end = shown.find("converged on revision 2").unwrap();
    let last_frame = &shown[shown[..end]
        .rfind("managers     [")
        .expect("a managers bar")..end];
    assert!(
        last_frame.contains("[====================] 3/3 converged")
            && last_frame.contains("[====================] 2/2 converged"),
        "the final frame is not both groups converged: {last_frame:?}"
    );
    assert!(
        shown.contains("\x1b[1A") || shown.contains("\x1b[2K"),
        "the bars were not redrawn in place"
    );

    // Status, as JSON: both groups converged on revision 2, every instance
    // current and healthy, one leader, observed recently by a controller.
    let status = demo.json(&["status", "--output", "json"]);
    assert_eq!(status["revision"], 2, "{status:#}");
    for g in status["groups"].as_array().unwrap() {
        assert_eq!(g["phase"], "converged", "{status:#}");
        assert_eq!(g["current"], g["desired"], "{status:#}");
    }
    let instances = status["instances"].as_array().unwrap();
    assert_eq!(instances.len(), 5, "{status:#}");
    assert!(
        instances
            .iter()
            .all(|i| i["current"] == true && i["health"] == "healthy")
    );
    assert!(instances.iter().all(|i| i["node_id"].is_string()));
    let leaders: Vec<_> = instances.iter().filter(|i| i["leader"] == true).collect();
    assert_eq!(leaders.len(), 1, "{status:#}");
    assert_eq!(leaders[0]["role"], "manager");
    let by_controller = status["controller"].as_str().unwrap().to_string();
    assert!(status["observed_at_ms"].as_u64().unwrap() >= since);
    let only = demo.json(&["status", "workers", "--output", "json"]);
    assert!(
        only["instances"]
            .as_array()
            .unwrap()
            .iter()
            .all(|i| i["group"] == "workers")
    );

    // --log-format json: every log line is one JSON object with a level.
    let out = demo.drover(&["--log-format", "json", "history"]);
    let logs = String::from_utf8_lossy(&out.stderr);
    assert!(logs.lines().count() > 0, "no logs at trace level");
    for line in logs.lines() {
        let v: serde_json::Value = serde_json::from_str(line).expect("a JSON log line");
        assert!(v["level"].is_string(), "{line}");
    }

    // Events: the rollout's steps, in order.
    let events = demo.json(&["events", "--output", "json", "--since", "1h"]);
    let events: Vec<&serde_json::Value> = events
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["at_ms"].as_u64().unwrap() >= since)
        .collect();
    check_rollout_order(&events);

    // Metrics of the acting controller: valid exposition, and the fault
    // tolerance it reports is the one the node list gives.
    let acting = demo
        .records()
        .into_iter()
        .find(|r| r.tags.get("drover.link") == Some(&by_controller))
        .expect("the acting controller's machine");
    let text = scrape(&acting.address).expect("metrics endpoint answers");
    let promtool = Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn();
    let mut promtool =
        promtool.expect("promtool (Debian package prometheus; scripts/setup.sh installs it)");
    promtool
        .stdin
        .take()
        .unwrap()
        .write_all(text.as_bytes())
        .unwrap();
    let checked = promtool.wait_with_output().unwrap();
    assert!(
        checked.status.success(),
        "promtool check metrics: {}{}\n{text}",
        String::from_utf8_lossy(&checked.stdout),
        String::from_utf8_lossy(&checked.stderr)
    );
    let ft = fault_tolerance_from_nodes(demo).await;
    assert_eq!(
        sample(&text, "drover_swarm_fault_tolerance"),
        Some(ft as f64),
        "{text}"
    );
    assert_eq!(
        sample(&text, "drover_group_fault_tolerance{group=\"managers\"}"),
        Some(ft as f64)
    );
    assert_eq!(sample(&text, "drover_controller_acting"), Some(1.0));
    assert_eq!(
        sample(
            &text,
            "drover_group_members{group=\"managers\",health=\"healthy\",current=\"true\"}"
        ),
        Some(3.0),
        "{text}"
    );
    assert_eq!(
        sample(
            &text,
            "drover_group_rollout_progress_ratio{group=\"workers\"}"
        ),
        Some(1.0)
    );
    assert!(
        sample(
            &text,
            "drover_api_calls_total{api=\"provider\",call=\"describe\"}"
        )
        .is_some_and(|n| n > 0.0)
    );

    // Hold a worker: the acting controller's next status marks it held;
    // release it again.
    let worker = instances
        .iter()
        .find(|i| i["group"] == "workers")
        .and_then(|i| i["id"].as_str())
        .unwrap()
        .to_string();
    assert_eq!(demo.drover(&["hold", &worker]).status.code(), Some(0));
    let seen_held = drover_local::testkit::wait_for(Duration::from_secs(30), || async {
        let s = demo.json(&["status", "workers", "--output", "json"]);
        let list = s["instances"].as_array()?;
        list.iter()
            .any(|i| i["id"] == worker.as_str() && i["held"] == true)
            .then_some(())
    })
    .await;
    assert!(
        seen_held.is_some(),
        "the controller never reported the hold"
    );
    assert_eq!(
        demo.drover(&["hold", &worker, "--release"]).status.code(),
        Some(0)
    );

    // Replace it: a new machine takes its place, the group converges again.
    assert_eq!(demo.drover(&["replace", &worker]).status.code(), Some(0));
    let replaced = drover_local::testkit::wait_for(Duration::from_secs(180), || async {
        tokio::time::sleep(Duration::from_secs(1)).await;
        let s = demo.json(&["status", "workers", "--output", "json"]);
        let list = s["instances"].as_array()?;
        let gone = list.iter().all(|i| i["id"] != worker.as_str());
        let whole = list.len() == 2 && list.iter().all(|i| i["health"] == "healthy");
        (gone && whole && s["groups"][0]["phase"] == "converged").then_some(())
    })
    .await;
    assert!(replaced.is_some(), "{worker} was not replaced");

    // The revision commands against the live store.
    let diff = demo.drover(&["diff", "1", "2"]);
    let diff_text = String::from_utf8_lossy(&diff.stdout);
    assert!(
        diff_text.contains("-") && diff_text.contains("\"release\": \"v2\""),
        "{diff_text}"
    );
    let export = demo.drover(&["export"]);
    assert_eq!(export.status.code(), Some(0));
    let file = demo.dir.join("export.json");
    std::fs::write(&file, &export.stdout).unwrap();
    let copy = format!("file://{}", demo.dir.join("copy.db").display());
    let import = |args: &[&str]| {
        let mut all = vec!["import", "-f", file.to_str().unwrap(), "--store", &copy];
        all.extend_from_slice(args);
        demo.drover(&all).status.code()
    };
    assert_eq!(import(&[]), Some(0));
    assert_eq!(import(&[]), Some(2), "import into a non-empty store");
    let copied = demo.json(&["history", "--output", "json", "--store", &copy]);
    assert_eq!(copied.as_array().unwrap().len(), 2);

    // Secrets: nothing printed, logged, stored, served or passed in argv.
    stop.store(true, Ordering::SeqCst);
    watcher.join().unwrap();
    let sampled = std::mem::take(&mut *seen.lock().unwrap());
    let mut leaks = sampled.leaks.clone();
    leaks.extend(scan_dir(&demo.dir));
    let printed = demo.printed.lock().unwrap().clone();
    let dump = etcd_dump(demo.port).await;
    let stored = [
        ("printed output and logs", printed.as_str()),
        ("the etcd store", dump.as_str()),
        ("the metrics", &sampled.metrics.join("\n")),
        ("the last metrics scrape", text.as_str()),
    ];
    for (what, text) in stored {
        if SECRETS.iter().any(|s| text.contains(s)) {
            leaks.push(what.to_string());
        }
    }
    eprintln!(
        "PHASES: demo up {:.1}s, rollout {:.1}s; sampler: {} argv samples, {} join processes seen, {} metrics scrapes, {} bytes printed/logged, {} bytes in etcd",
        up.as_secs_f64(),
        rolled.as_secs_f64(),
        sampled.cmdline_samples,
        sampled.joins_seen,
        sampled.metrics.len(),
        printed.len(),
        dump.len()
    );
    assert!(leaks.is_empty(), "swarm secrets found in: {leaks:?}");
    assert!(
        sampled.joins_seen > 0,
        "the sampler never saw a join running"
    );
    assert!(
        !sampled.metrics.is_empty(),
        "no metrics were scraped during the rollout"
    );
    assert!(
        printed.contains("TRACE"),
        "trace-level logs were not captured"
    );
    assert!(dump.contains("demo up"), "the etcd dump is not the store's");

    // Down: no process, no directory.
    let etcd_pid = std::fs::read_to_string(demo.dir.join("demo.json"))
        .ok()
        .and_then(|t| serde_json::from_str::<serde_json::Value>(&t).ok())
        .and_then(|m| m["etcd_pid"].as_i64())
        .expect("demo.json names etcd's pid");
    let out = demo.drover(&["demo", "down", "--dir", demo.dir.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(0));
    assert!(!demo.dir.exists(), "demo down left its directory");
    let needle = format!("{}/", demo.dir.display());
    assert!(drover_local::procs::pids_matching(&needle).is_empty());
    assert!(
        !drover_local::procs::is_alive(etcd_pid as i32),
        "etcd still runs"
    );
}

/// Every step follows the beginning of its operation; within an operation
/// a drain comes before the destroy; the leader's self-demotion belongs to
/// the last manager roll begun (clean-ups may follow it).
fn check_rollout_order(events: &[&serde_json::Value]) {
    let at: Vec<u64> = events
        .iter()
        .map(|e| e["at_ms"].as_u64().unwrap())
        .collect();
    assert!(at.windows(2).all(|w| w[0] <= w[1]), "events out of order");
    let steps: Vec<(usize, &str, &str)> = events
        .iter()
        .enumerate()
        .filter(|(_, e)| e["action"] == "step")
        .map(|(i, e)| {
            (
                i,
                e["op"].as_str().unwrap_or(""),
                e["reason"].as_str().unwrap_or(""),
            )
        })
        .collect();
    assert!(
        steps
            .iter()
            .any(|(_, _, what)| what.starts_with("demote self")),
        "no leader self-demotion in {events:#?}"
    );
    let begun = |op: &str| {
        events
            .iter()
            .position(|e| e["action"] == "begin" && e["op"] == op)
    };
    for (i, op, what) in &steps {
        let b = begun(op).unwrap_or_else(|| panic!("step {what} of {op} has no begin event"));
        assert!(b < *i, "{what} before its operation {op} began");
    }
    for (i, op, what) in steps
        .iter()
        .filter(|(_, _, w)| w.starts_with("destroy instance"))
    {
        for (j, _, drain) in steps
            .iter()
            .filter(|(_, o, w)| o == op && w.starts_with("drain"))
        {
            assert!(j < i, "{drain} after {what} in {op}");
        }
    }
    let manager_begins: Vec<(usize, &str)> = events
        .iter()
        .enumerate()
        .filter(|(_, e)| {
            e["action"] == "begin" && e["group"] == "managers" && e["reason"] == "Roll"
        })
        .map(|(i, e)| (i, e["op"].as_str().unwrap()))
        .collect();
    let leader_op = steps
        .iter()
        .find(|(_, _, w)| w.starts_with("demote self"))
        .map(|(_, op, _)| *op)
        .unwrap();
    assert_eq!(
        manager_begins.last().map(|(_, op)| *op),
        Some(leader_op),
        "the leader's operation was not begun last: {manager_begins:?}"
    );
}
