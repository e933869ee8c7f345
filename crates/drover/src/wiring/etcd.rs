//! The demo's store: a single-member etcd on loopback, its data and log
//! in the demo's directory.

use async_trait::async_trait;
use drover_controller::procedure::store_start::StoreProcess;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// etcd serving clients on `127.0.0.1:port` (peers on `port + 10`).
pub struct DemoEtcd {
    dir: PathBuf,
    port: u16,
    client: String,
}

impl DemoEtcd {
    /// The demo's etcd in `dir`, on `port`.
    pub fn new(dir: &Path, port: u16) -> Self {
        DemoEtcd {
            dir: dir.to_path_buf(),
            port,
            client: format!("http://127.0.0.1:{port}"),
        }
    }
}

#[async_trait]
impl StoreProcess for DemoEtcd {
    fn name(&self) -> &str {
        "etcd"
    }

    fn address(&self) -> &str {
        &self.client
    }

    fn log(&self) -> PathBuf {
        self.dir.join("etcd.log")
    }

    async fn answers(&self) -> bool {
        let url = self.client.replace("http://", "etcd://");
        super::store_answers(&url, Duration::from_secs(3)).await
    }

    fn start(&self) -> std::io::Result<u32> {
        use std::os::unix::process::CommandExt;
        let peer = format!("http://127.0.0.1:{}", self.port + 10);
        let log = std::fs::File::create(self.log())?;
        let child = std::process::Command::new("etcd")
            .arg("--data-dir")
            .arg(self.dir.join("etcd"))
            .args(["--name", "demo"])
            .args(["--listen-client-urls", &self.client])
            .args(["--advertise-client-urls", &self.client])
            .args(["--listen-peer-urls", &peer])
            .args(["--initial-advertise-peer-urls", &peer])
            .args(["--initial-cluster", &format!("demo={peer}")])
            .stdin(std::process::Stdio::null())
            .stdout(log.try_clone()?)
            .stderr(log)
            // Its own process group: it outlives this command, like the engines.
            .process_group(0)
            .spawn()?;
        Ok(child.id())
    }
}
