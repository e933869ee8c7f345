//! What operators install from `deploy/` (issue 22), checked with the tools
//! that will read it:
//!
//! - the alerting rules pass `promtool check rules`, and their unit tests
//!   (`deploy/prometheus/tests/*.yml`) pass `promtool test rules`, with a
//!   case where each alert fires and one where it must not;
//! - the systemd unit passes `systemd-analyze verify` (offline, in a
//!   scratch root holding the system's units and a stand-in binary) and
//!   keeps its contract: `Restart=always`, drover's settings from the
//!   root-only environment file only, nothing but `drover controller` on
//!   the command line;
//!   the example environment file names only variables drover reads;
//! - every metric name in the Grafana dashboard's expressions and in the
//!   alerting rules is one a live controller serves at `/metrics`: a real
//!   `drover controller` process on a real one-manager swarm (a dockerd on
//!   127.0.98.1, a file store) that provisions a real worker machine (the
//!   local provider, on 127.0.98.2) and fails to provision a second one
//!   (the address pool holds one), so that every metric family has samples:
//!   the client library lists a family only once it has one. Every panel
//!   expression parses as PromQL; every family served is on the dashboard.
//!
//! The engines and the controller are stopped by PID, also on failure
//! (the machine by the local provider's `StateGuard`).

mod support;

use drover_store::testkit::{Dockerd, stop};
use std::collections::BTreeSet;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

/// The manager (the controller's engine), and the one address the local
/// provider may give a machine.
const ADDR: &str = "127.0.98.1";
const WORKER: &str = "127.0.98.2";

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn deploy(path: &str) -> PathBuf {
    repo().join("deploy").join(path)
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn text(out: &[u8]) -> String {
    String::from_utf8_lossy(out).into_owned()
}

fn promtool(args: &[&str], stdin: Option<&str>) -> Output {
    let mut child = Command::new("promtool")
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("promtool (Debian package prometheus; scripts/setup.sh installs it)");
    let mut input = child.stdin.take().unwrap();
    input.write_all(stdin.unwrap_or("").as_bytes()).unwrap();
    drop(input);
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "promtool {}: {}{}",
        args.join(" "),
        text(&out.stdout),
        text(&out.stderr)
    );
    out
}

/// The rules' unit-test files.
fn rule_tests() -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(deploy("prometheus/tests"))
        .expect("deploy/prometheus/tests")
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "yml"))
        .collect();
    files.sort();
    assert!(!files.is_empty(), "no deploy/prometheus/tests/*.yml");
    files
}

#[test]
fn the_alerting_rules_pass_their_promtool_unit_tests() {
    let rules = deploy("prometheus/drover-alerts.yml");
    promtool(&["check", "rules", rules.to_str().unwrap()], None);
    let files = rule_tests();
    let mut args = vec!["test", "rules"];
    args.extend(files.iter().map(|f| f.to_str().unwrap()));
    promtool(&args, None);
}

/// Each alert has a case where it fires and one where it must not
/// (`exp_alerts: []`), and every case names an alert that exists.
#[test]
fn every_alert_has_a_firing_and_a_quiet_case() {
    let rules = read(&deploy("prometheus/drover-alerts.yml"));
    let alerts: BTreeSet<&str> = rules
        .lines()
        .filter_map(|l| l.trim().strip_prefix("- alert: "))
        .collect();
    assert!(alerts.len() >= 5, "{alerts:?}");
    let (mut firing, mut quiet) = (BTreeSet::new(), BTreeSet::new());
    for file in rule_tests() {
        let cases = read(&file);
        let mut alert = None;
        for line in cases.lines().map(str::trim) {
            if let Some(a) = line.strip_prefix("alertname: ") {
                alert = Some(a.to_string());
            } else if let Some(expected) = line.strip_prefix("exp_alerts:") {
                let a = alert.take().expect("exp_alerts after an alertname");
                assert!(
                    alerts.contains(a.as_str()),
                    "{}: no alert {a}",
                    file.display()
                );
                if expected.trim() == "[]" {
                    quiet.insert(a);
                } else {
                    firing.insert(a);
                }
            }
        }
    }
    for a in &alerts {
        assert!(firing.contains(*a), "{a}: no case where it fires");
        assert!(quiet.contains(*a), "{a}: no case where it must not fire");
    }
}

/// The `KEY=VALUE` lines of a unit's `[section]`.
fn settings<'a>(text: &'a str, section: &str) -> Vec<(&'a str, &'a str)> {
    let mut current = None;
    text.lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .filter_map(|l| {
            if l.starts_with('[') {
                current = Some(l.trim_matches(['[', ']']));
                return None;
            }
            let kv = l.split_once('=')?;
            (current == Some(section)).then_some(kv)
        })
        .collect()
}

#[test]
fn the_systemd_unit_verifies_and_keeps_secrets_off_the_command_line() {
    let unit = deploy("systemd/drover-controller.service");
    // A scratch root: the system's units (sysinit.target and the rest that
    // verify loads), this unit, and an executable where ExecStart points.
    let root = tempfile::tempdir().unwrap();
    let r = root.path();
    for d in ["usr/local/bin", "etc/systemd/system", "usr/lib/systemd"] {
        std::fs::create_dir_all(r.join(d)).unwrap();
    }
    let copied = Command::new("cp")
        .args(["-r", "/usr/lib/systemd/system"])
        .arg(r.join("usr/lib/systemd"))
        .status()
        .unwrap();
    assert!(copied.success(), "copy /usr/lib/systemd/system");
    std::fs::copy(env!("CARGO_BIN_EXE_drover"), r.join("usr/local/bin/drover")).unwrap();
    std::fs::copy(
        &unit,
        r.join("etc/systemd/system/drover-controller.service"),
    )
    .unwrap();
    let out = Command::new("systemd-analyze")
        .arg("verify")
        .arg(format!("--root={}", r.display()))
        .arg("drover-controller.service")
        .output()
        .expect("systemd-analyze (Debian package systemd; scripts/setup.sh installs it)");
    // verify exits 0 on unknown keys and bad values, only saying so.
    let said = format!("{}{}", text(&out.stdout), text(&out.stderr));
    assert!(
        out.status.success() && said.trim().is_empty(),
        "systemd-analyze verify: {said}"
    );

    let unit = read(&unit);
    let service = settings(&unit, "Service");
    let value = |k: &str| {
        let all: Vec<&str> = service
            .iter()
            .filter(|(key, _)| *key == k)
            .map(|(_, v)| *v)
            .collect();
        assert_eq!(all.len(), 1, "{k}: {all:?}");
        all[0]
    };
    assert_eq!(value("Restart"), "always");
    assert_eq!(value("EnvironmentFile"), "/etc/drover/controller.env");
    assert_eq!(value("ExecStart"), "/usr/local/bin/drover controller");
    for (_, set) in service.iter().filter(|(k, _)| *k == "Environment") {
        assert!(
            !set.starts_with("DROVER_") && !set.starts_with("DOCKER_"),
            "{set}: drover's settings belong in the environment file"
        );
    }
    let after = settings(&unit, "Unit");
    assert!(
        after
            .iter()
            .any(|(k, v)| *k == "After" && v.split(' ').any(|u| u == "docker.service")),
        "{after:?}"
    );
}

/// Variables drover reads without a flag: the log filter, the etcd
/// password, the docker CLI's TLS settings (`drover_engine::Endpoint`).
const READ_DIRECTLY: [&str; 4] = [
    "DROVER_LOG",
    "DROVER_ETCD_PASSWORD",
    "DOCKER_TLS_VERIFY",
    "DOCKER_CERT_PATH",
];

/// Every variable of the example environment file, commented out or not,
/// is one drover reads: a flag's `env` (from `--help`), or one read directly.
#[test]
fn the_example_environment_names_only_variables_drover_reads() {
    let mut known: BTreeSet<String> = READ_DIRECTLY.map(String::from).into();
    for args in [&["--help"][..], &["controller", "--help"]] {
        let out = Command::new(env!("CARGO_BIN_EXE_drover"))
            .args(args)
            .output()
            .unwrap();
        let help = text(&out.stdout);
        known.extend(
            help.split("[env: ")
                .skip(1)
                .filter_map(|rest| rest.split_once('=').map(|(name, _)| name.to_string())),
        );
    }
    assert!(known.contains("DROVER_STORE"), "{known:?}");
    let example = read(&deploy("systemd/controller.env.example"));
    // Settings, and commented-out ones (`#NAME=value`, no space).
    let names: Vec<&str> = example
        .lines()
        .filter_map(|l| l.strip_prefix('#').unwrap_or(l).split_once('='))
        .map(|(k, _)| k)
        .filter(|k| !k.is_empty() && k.chars().all(|c| c.is_ascii_uppercase() || c == '_'))
        .collect();
    assert!(names.contains(&"DOCKER_CERT_PATH"), "{names:?}");
    assert!(names.contains(&"DROVER_STORE"), "{names:?}");
    for name in names {
        assert!(
            known.contains(name),
            "{name}: drover reads no such variable"
        );
    }
}

/// Every `drover_…` name in `text`.
fn drover_names(text: &str) -> BTreeSet<String> {
    text.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == ':'))
        .filter(|w| w.starts_with("drover_"))
        .map(String::from)
        .collect()
}

/// The names a scrape offers: every sample's, every family's (`# TYPE`,
/// listed with no sample until there is one), and a histogram family's
/// `_bucket`, `_sum` and `_count` series.
fn served_names(exposition: &str) -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    for line in exposition.lines() {
        if let Some(family) = line.strip_prefix("# TYPE ") {
            let (name, kind) = family.split_once(' ').expect("# TYPE NAME KIND");
            names.insert(name.to_string());
            if kind == "histogram" {
                for suffix in ["_bucket", "_sum", "_count"] {
                    names.insert(format!("{name}{suffix}"));
                }
            }
        } else if !line.starts_with('#') && !line.is_empty() {
            let end = line.find(['{', ' ']).unwrap_or(line.len());
            names.insert(line[..end].to_string());
        }
    }
    names
}

/// The dashboard's panel expressions, and every other query text in it
/// (template variables).
fn dashboard_queries() -> (Vec<String>, Vec<String>) {
    fn walk(v: &serde_json::Value, exprs: &mut Vec<String>, other: &mut Vec<String>) {
        match v {
            serde_json::Value::Object(map) => {
                for (k, v) in map {
                    match (k.as_str(), v.as_str()) {
                        ("expr", Some(e)) => exprs.push(e.to_string()),
                        ("query" | "definition", Some(q)) => other.push(q.to_string()),
                        _ => walk(v, exprs, other),
                    }
                }
            }
            serde_json::Value::Array(items) => {
                items.iter().for_each(|i| walk(i, exprs, other));
            }
            _ => {}
        }
    }
    let path = deploy("grafana/drover.json");
    let doc: serde_json::Value = serde_json::from_str(&read(&path)).expect("dashboard JSON");
    let (mut exprs, mut other) = (Vec::new(), Vec::new());
    walk(&doc, &mut exprs, &mut other);
    (exprs, other)
}

/// A process stopped by PID when dropped, also when the test fails.
struct Running(Child);

impl Drop for Running {
    fn drop(&mut self) {
        stop(&mut self.0, false, Duration::from_secs(10));
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn the_dashboard_and_the_rules_use_only_metrics_a_live_controller_serves() {
    // Every panel expression is PromQL (Grafana's variables given values).
    let (exprs, other) = dashboard_queries();
    assert!(exprs.len() >= 15, "{exprs:?}");
    let dir = tempfile::tempdir().unwrap();
    let mut as_rules = String::from("groups:\n  - name: dashboard\n    rules:\n");
    for (i, e) in exprs.iter().enumerate() {
        let e = e
            .replace("$__rate_interval", "5m")
            .replace("$job", "drover");
        as_rules.push_str(&format!(
            "      - record: dashboard_panel_{i}\n        expr: {}\n",
            serde_json::to_string(&e).unwrap()
        ));
    }
    let rules_file = dir.path().join("dashboard-rules.yml");
    std::fs::write(&rules_file, as_rules).unwrap();
    promtool(&["check", "rules", rules_file.to_str().unwrap()], None);

    // A real controller on a real one-manager swarm, over a file store
    // holding a group of two workers, with room for one.
    let engine = Dockerd::start_swarm_labelled(ADDR, &["drover.link=deploy-m1"]).await;
    let machines = dir.path().join("machines");
    let _machines = drover_local::testkit::StateGuard {
        state_dir: machines.clone(),
    };
    let store = format!("file://{}", dir.path().join("state.db").display());
    {
        let s = drover_store::open(&store).await.expect("store");
        s.init_cluster("c-deploy").await.unwrap();
        let spec = drover_core::spec::parse_str(
            "groups:\n- name: edge\n  role: worker\n  allocation: {size: 2}\n  instance: {provider: local}\n",
        )
        .spec
        .expect("valid spec");
        let who = drover_spi::Provenance {
            who: "test".into(),
            at_ms: 1,
            message: String::new(),
        };
        s.commit(0, &spec, who, false).await.unwrap();
    }
    let log = dir.path().join("controller.log");
    let drover = |args: &[&str]| {
        let mut c = Command::new(env!("CARGO_BIN_EXE_drover"));
        c.args(args)
            .env("DROVER_STORE", &store)
            .env("DROVER_LOCAL_DIR", &machines)
            .env("DROVER_LOCAL_POOL", format!("{WORKER}-{WORKER}"))
            .env("DOCKER_HOST", &engine.endpoint)
            .env("DROVER_LOG", "info")
            .stdin(Stdio::null());
        c
    };
    let controller = Running(
        drover(&["controller", "--metrics-addr", &format!("{ADDR}:9464")])
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .expect("run drover controller"),
    );
    let deadline = Instant::now() + Duration::from_secs(120);
    let exposition = loop {
        let scraped = support::scrape(ADDR).unwrap_or_default();
        if scraped.lines().any(|l| l == "drover_controller_acting 1")
            && scraped.contains("drover_group_members{group=\"edge\",health=\"healthy\"")
            && scraped.contains("drover_steps_failed_total{kind=\"provision\"")
        {
            break scraped;
        }
        assert!(
            Instant::now() < deadline,
            "no healthy member and failed provision within 120 s; last scrape:\n{scraped}\nits log:\n{}",
            std::fs::read_to_string(&log).unwrap_or_default()
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    };
    eprintln!(
        "live /metrics after {:.1} s:\n{exposition}",
        (Instant::now() + Duration::from_secs(120) - deadline).as_secs_f64()
    );
    drop(controller);
    drop(engine);
    promtool(&["check", "metrics"], Some(&exposition));
    let served = served_names(&exposition);

    let mut dashboard = BTreeSet::new();
    for q in exprs.iter().chain(&other) {
        dashboard.extend(drover_names(q));
    }
    let rules = drover_names(&read(&deploy("prometheus/drover-alerts.yml")));
    for (what, names) in [("dashboard", &dashboard), ("alerting rules", &rules)] {
        assert!(names.len() >= 5, "{what}: {names:?}");
        let unknown: Vec<&String> = names.difference(&served).collect();
        assert!(
            unknown.is_empty(),
            "{what}: metrics a controller does not serve: {unknown:?}\n{exposition}"
        );
    }
    // And the dashboard shows every family a controller serves.
    let families: BTreeSet<String> = exposition
        .lines()
        .filter_map(|l| l.strip_prefix("# TYPE "))
        .filter_map(|l| l.split(' ').next())
        .map(String::from)
        .collect();
    let shown: BTreeSet<String> = dashboard
        .iter()
        .map(|n| {
            ["_bucket", "_sum", "_count"]
                .iter()
                .find_map(|s| n.strip_suffix(s).filter(|f| families.contains(*f)))
                .unwrap_or(n)
                .to_string()
        })
        .collect();
    let missing: Vec<&String> = families.difference(&shown).collect();
    assert!(missing.is_empty(), "not on the dashboard: {missing:?}");
}
