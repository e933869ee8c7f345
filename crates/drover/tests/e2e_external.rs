//! External controllers on real etcd and real machines of the local
//! provider (issue 38): two `drover controller --external` processes bring
//! a plain group of 5 up and roll it; the acting one is `kill -9`ed
//! mid-roll; the other acts within 2 s of its lease's expiry; the roll
//! completes and no machine is made or destroyed twice (each controller's
//! own log of what it made and destroyed, read back as JSON).

mod support;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};
use support::{Lab, bounded};

const NET: u8 = 172;

/// The external controllers a test started, killed by PID when it ends.
struct Controllers(Vec<(String, Child, PathBuf)>);

impl Drop for Controllers {
    fn drop(&mut self) {
        for (_, child, _) in &mut self.0 {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

impl Controllers {
    /// `drover controller --external --name NAME` for each of `names`,
    /// logging JSON at info into the lab's directory.
    fn start(lab: &Lab, names: &[&str]) -> Controllers {
        let started = names.iter().map(|name| {
            let log = lab.dir.join(format!("{name}.log"));
            let child = lab
                .drover_command(&[
                    "--log-format",
                    "json",
                    "controller",
                    "--external",
                    "--name",
                    name,
                    "--metrics-addr",
                    "off",
                ])
                .env("DROVER_LOG", "info")
                .stdout(Stdio::null())
                .stderr(std::fs::File::create(&log).expect("log file"))
                .spawn()
                .expect("start an external controller");
            (name.to_string(), child, log)
        });
        Controllers(started.collect())
    }

    /// Sends SIGKILL to the controller named `name`.
    fn kill_9(&mut self, name: &str) {
        let (_, child, _) = self.0.iter_mut().find(|(n, ..)| n == name).expect("known");
        child.kill().expect("kill -9");
        child.wait().expect("reaped");
    }

    /// The ids every controller logged under `message` (`instance
    /// provisioned`, `instance destroyed`), in log order, all controllers'.
    fn logged(&self, message: &str) -> Vec<String> {
        self.0
            .iter()
            .flat_map(|(_, _, log)| ids_logged(log, message))
            .collect()
    }
}

fn ids_logged(log: &Path, message: &str) -> Vec<String> {
    let text = std::fs::read_to_string(log).unwrap_or_default();
    text.lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|v| v["fields"]["message"] == message)
        .filter_map(|v| v["fields"]["id"].as_str().map(str::to_string))
        .collect()
}

fn plain_spec(lab: &Lab, release: &str) -> PathBuf {
    let text = format!(
        "groups:
- name: edge
  role: plain
  allocation: {{size: 5}}
  instance: {{provider: local}}
  flavor: {{engine_labels: {{release: {release}}}}}
  update: {{max_in_flight: 1, watch: 1s}}
  health: {{startup_timeout: 60s}}
"
    );
    let path = lab.dir.join(format!("plain-{release}.yaml"));
    std::fs::write(&path, text).expect("write spec");
    path
}

/// The holder of the store's term, if a lease holds it.
async fn holder(lab: &Lab) -> Option<String> {
    let store = lab.try_store().await?;
    store.leader().await.ok().flatten().map(|(_, h)| h)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_standby_external_controller_finishes_a_roll_after_the_acting_one_is_killed() {
    bounded(600, async {
        let lab = Lab::new(NET).await;
        let mut controllers = Controllers::start(&lab, &["ext-a", "ext-b"]);
        lab.apply(&plain_spec(&lab, "v1"), true);
        let first: BTreeSet<String> = lab.records().into_iter().map(|r| r.id).collect();
        assert_eq!(first.len(), 5, "the group came up");
        let acting = holder(&lab).await.expect("one controller holds the term");
        let standby = if acting == "ext-a" { "ext-b" } else { "ext-a" };

        // status says who may act, who acts, and who stands by and why.
        let out = lab.drover(&["status"]);
        let shown = String::from_utf8_lossy(&out.stdout);
        assert_eq!(out.status.code(), Some(0), "{shown}");
        assert!(shown.contains(&format!("by {acting} (epoch")), "{shown}");
        assert!(shown.contains("control: external"), "{shown}");
        assert!(shown.contains("swarm: none (plain groups only)"), "{shown}");
        let waits = format!("waiting: {standby} (external controller): {acting} holds the term");
        assert!(shown.contains(&waits), "{shown}");

        // The roll, followed by an operator's apply --wait.
        let v2 = plain_spec(&lab, "v2");
        let mut apply = lab
            .drover_command(&["apply", "-f", v2.to_str().unwrap(), "--wait", "--timeout", "5m"])
            .spawn()
            .expect("apply v2");
        let t0 = Instant::now();
        while first.iter().filter(|id| lab.records().iter().any(|r| &&r.id == id)).count() > 3 {
            assert!(t0.elapsed() < Duration::from_secs(120), "the roll never began");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }

        // Mid-roll (two machines replaced): kill -9 the acting controller.
        controllers.kill_9(&acting);
        let killed = Instant::now();
        let (mut lapsed, mut took) = (None, None);
        while took.is_none() {
            assert!(killed.elapsed() < Duration::from_secs(30), "nobody took over");
            match holder(&lab).await {
                None if lapsed.is_none() => lapsed = Some((Instant::now(), support::epoch_ms())),
                Some(h) if h != acting => took = Some((Instant::now(), h)),
                _ => {}
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let (took_at, took_by) = took.unwrap();
        assert_eq!(took_by, standby);
        let after_lapse = took_at.duration_since(lapsed.map_or(took_at, |l| l.0));
        // The first thing the new term writes: its took-over event.
        let store = lab.store().await;
        // Its first step started under the new term: the first action.
        let first_step = loop {
            let events = store.events(0).await.expect("the events");
            let mine = events.iter().filter(|e| e.controller == standby);
            let mut after = mine.skip_while(|e| e.action != "took-over");
            if let Some(e) = after.find(|e| e.action == "step") {
                break e.clone();
            }
            assert!(killed.elapsed() < Duration::from_secs(60), "no step after the take-over");
            tokio::time::sleep(Duration::from_millis(20)).await;
        };
        let first_action_ms = lapsed.map(|l| first_step.at_ms.saturating_sub(l.1));
        eprintln!(
            "HANDOVER killed {acting}; its lease lapsed {:?} later; {standby} held the term {after_lapse:?} after the lapse, started its first step ({}) {first_action_ms:?} ms after",
            lapsed.map(|l| l.0.duration_since(killed)),
            first_step.reason
        );
        assert!(
            after_lapse <= Duration::from_secs(2),
            "{standby} acted {after_lapse:?} after the lease lapsed"
        );

        let status = apply.wait().expect("apply v2 ends");
        assert_eq!(status.code(), Some(0), "the roll did not complete");
        let now: BTreeSet<String> = lab.records().into_iter().map(|r| r.id).collect();
        assert_eq!(now.len(), 5);
        assert!(now.is_disjoint(&first), "every machine was replaced");

        let made = controllers.logged("instance provisioned");
        let unique: BTreeSet<&String> = made.iter().collect();
        assert_eq!(unique.len(), made.len(), "a machine was made twice: {made:?}");
        assert_eq!(made.len(), 10, "5 machines, then 5 replacements: {made:?}");
        let destroyed = controllers.logged("instance destroyed");
        let gone: BTreeSet<String> = destroyed.iter().cloned().collect();
        assert_eq!(gone.len(), destroyed.len(), "destroyed twice: {destroyed:?}");
        assert_eq!(gone, first, "exactly the first machines were destroyed");
    })
    .await;
}
