//! Control-plane speed on instant machines: the real controller rolls a
//! plain group through the InfraKit plugin protocol, its plugin a separate
//! process (this benchmark run again as `plugin-child`: drover's plugin
//! server over a simulated cloud whose machines take no time), its store a
//! file store (each commit durable, as in production). Whatever the roll
//! takes is drover's: its passes, its durable writes, the plugin's round
//! trips. Side by side with InfraKit's group controller through InfraKit's
//! own instant `file` plugin (figures measured on this machine, issue 37).

use drover_controller::{Context, Controller};
use drover_core::spec::{ClusterSpec, PluginAddress, parse_str};
use drover_plugin::{PluginProvider, Timeouts};
use drover_sim::{SimCloud, Timings, World};
use drover_spi::{InstanceProvider, Provenance, Store};
use drover_store::FileStore;
use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Serves the instant simulated cloud as plugin `socket` until killed.
pub async fn serve(socket: &Path) {
    let cloud = SimCloud::new(World::new(1, Timings::instant()));
    let (listener, _removed) = drover_plugin::server::bind(socket).expect("bind the plugin socket");
    drover_plugin::server::serve(Arc::new(cloud), listener, std::future::pending())
        .await
        .expect("serve the plugin");
}

/// The plugin process, killed (and its socket gone) when dropped.
struct PluginProcess {
    child: Child,
    dir: PathBuf,
}

impl PluginProcess {
    fn start() -> PluginProcess {
        let dir = std::env::temp_dir().join(format!("drover-bench-plugin-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("plugin dir");
        let exe = std::env::current_exe().expect("own path");
        let child = Command::new(exe)
            .args([
                "plugin-child",
                dir.join("sim").to_str().expect("utf-8 path"),
            ])
            .spawn()
            .expect("start the plugin process");
        // Owned before it is waited for: a plugin that never listens is
        // killed (on drop) with the failed assertion.
        let plugin = PluginProcess { child, dir };
        let ready = (0..500).any(|_| {
            std::thread::sleep(Duration::from_millis(10));
            std::os::unix::net::UnixStream::connect(plugin.dir.join("sim")).is_ok()
        });
        assert!(ready, "the plugin process did not listen within 5 s");
        plugin
    }
}

impl Drop for PluginProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// A plain group of `size` on the plugin, rolled `max_in_flight` at a time,
/// no watch, no canary.
fn spec(size: usize, max_in_flight: usize, image: &str) -> ClusterSpec {
    let text = format!(
        "groups:
- name: plain
  role: plain
  allocation: {{size: {size}}}
  instance: {{provider: plugin, plugin: sim, properties: {{image: {image}}}}}
  update: {{max_in_flight: {max_in_flight}, canaries: 0, watch: 0s}}
"
    );
    let loaded = parse_str(&text);
    loaded
        .spec
        .unwrap_or_else(|| panic!("bench spec: {:?}", loaded.diagnostics))
}

fn who() -> Provenance {
    Provenance {
        who: "bench".into(),
        at_ms: 0,
        message: "plugin roll".into(),
    }
}

/// Seconds to roll a converged group of `size` (a new image), through a
/// fresh plugin process and store.
async fn roll_once(size: usize, max_in_flight: usize) -> f64 {
    let plugin = PluginProcess::start();
    let store_dir = tempfile_dir();
    let store = Arc::new(FileStore::open(store_dir.join("drover.db")).expect("file store"));
    store.init_cluster("bench").await.expect("init");
    let address = PluginAddress {
        name: "sim".into(),
        kind: None,
    };
    let provider = PluginProvider::new(address, &plugin.dir.join("sim"), Timeouts::default());
    let ctx = Context {
        providers: [(
            "plugin:sim".to_string(),
            Arc::new(provider) as Arc<dyn InstanceProvider>,
        )]
        .into(),
        // No swarm: a plain group needs none.
        cluster: Arc::new(SimCloud::new(World::new(2, Timings::instant()))),
        store: store.clone(),
        self_link: None,
        identity: "bench".into(),
        store_url: None,
        resync: Duration::from_millis(250),
    };
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let task = tokio::spawn(Controller::new(ctx).run(async {
        let _ = stopped.await;
    }));
    let rev = store
        .commit(0, &spec(size, max_in_flight, "v1"), who(), false)
        .await
        .expect("commit v1");
    converged(&*store, rev, Duration::from_secs(300)).await;
    let started = Instant::now();
    let rev = store
        .commit(rev, &spec(size, max_in_flight, "v2"), who(), false)
        .await
        .expect("commit v2");
    converged(&*store, rev, Duration::from_secs(300)).await;
    let took = started.elapsed().as_secs_f64();
    let _ = stop.send(());
    let _ = task.await;
    let _ = std::fs::remove_dir_all(&store_dir);
    took
}

/// A fresh directory for one roll's store.
fn tempfile_dir() -> PathBuf {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let dir = std::env::temp_dir().join(format!("drover-bench-store-{}-{n}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("store dir");
    dir
}

/// Waits until revision `rev` is recorded converged (polled every 5 ms).
async fn converged(store: &dyn Store, rev: u64, limit: Duration) {
    let t0 = Instant::now();
    loop {
        let history = store.history().await.expect("history");
        if history.iter().any(|r| r.rev == rev && r.converged) {
            return;
        }
        assert!(t0.elapsed() < limit, "revision {rev} did not converge");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// InfraKit's group controller through its `file` plugin, 1 ms poll
/// (issue 37's figures, this kind of machine): group of 50 and of 10.
const INFRAKIT: [(usize, f64); 2] = [(50, 0.59), (10, 0.11)];

/// The section: each shape's median over `runs` fresh rolls; with `only`
/// (`SIZE@MAX_IN_FLIGHT`, e.g. `50@10`), that shape alone.
pub async fn run(runs: usize, only: &str) {
    println!(
        "\n## Control plane on instant machines: a plain group rolled through a plugin process, file store\n"
    );
    println!(
        "| group | max_in_flight | median s (runs) | per replaced instance ms | InfraKit, 1 ms poll |"
    );
    println!("|---|---|---|---|---|");
    let shapes = [(5, 1), (50, 1), (5, 10), (50, 10), (10, 1)];
    for (size, m) in shapes
        .into_iter()
        .filter(|(n, m)| only.is_empty() || format!("{n}@{m}") == only)
    {
        let mut all = Vec::new();
        for _ in 0..runs {
            all.push(roll_once(size, m).await);
        }
        let median = crate::stats::median_ms(&all);
        let shown: Vec<String> = all.iter().map(|t| format!("{t:.2}")).collect();
        let infrakit = INFRAKIT
            .iter()
            .find(|(n, _)| *n == size && m == 1)
            .map_or(String::new(), |(_, s)| format!("{s} s"));
        println!(
            "| {size} | {m} | {median:.2} ({}) | {:.0} | {infrakit} |",
            shown.join(" "),
            median * 1000.0 / size as f64
        );
    }
}
