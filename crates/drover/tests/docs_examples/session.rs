//! Runs one doc's examples the way a reader would type them: each command in
//! `sh`, with the built `drover` first on the PATH, in a fresh directory
//! holding a copy of the repository's `examples/`. Paths under `/tmp/` in
//! the doc are that directory (and printed back as `/tmp/`), so examples can
//! show the paths a reader would use without touching the real `/tmp`.

use drover_spi::Provenance;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// The operator commands are run as: `USER`, and the host name shown for it.
const USER: &str = "ada";
const SHOWN_HOST: &str = "ops1";

pub struct Session {
    dir: tempfile::TempDir,
    env: Vec<(String, String)>,
    last_code: i32,
    /// `ada@<this host>`, printed as `ada@ops1` so the docs do not name the
    /// CI machine; `None` without a host name (`drover` then prints `ada@`).
    operator: Option<String>,
}

impl Session {
    pub fn new(repo: &Path) -> Session {
        let dir = tempfile::tempdir().expect("temp dir");
        let examples = dir.path().join("examples");
        std::fs::create_dir(&examples).unwrap();
        for entry in std::fs::read_dir(repo.join("examples")).unwrap() {
            let path = entry.unwrap().path();
            std::fs::copy(&path, examples.join(path.file_name().unwrap())).unwrap();
        }
        let host = std::fs::read_to_string("/etc/hostname").unwrap_or_default();
        Session {
            dir,
            env: Vec::new(),
            last_code: 0,
            operator: (!host.trim().is_empty()).then(|| format!("{USER}@{}", host.trim())),
        }
    }

    /// A doc's path or text with `/tmp/` meaning this session's directory.
    fn here(&self, text: &str) -> String {
        text.replace("/tmp/", &format!("{}/", self.dir.path().display()))
    }

    fn path(&self, path: &str) -> PathBuf {
        self.dir.path().join(self.here(path))
    }

    pub fn write(&self, path: &str, text: &str) {
        std::fs::write(self.path(path), text).expect("write a doc's file");
    }

    /// The store at `url` holds `file` as its revision 1, converged, as if
    /// an `apply` had been rolled out by a controller.
    pub fn seed(&self, url: &str, file: &str) {
        let text = std::fs::read_to_string(self.path(file)).expect("the seed's cluster file");
        let spec = drover_core::spec::parse_str(&text)
            .spec
            .expect("a valid seed");
        let url = self.here(url);
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async {
            let store = drover_store::open(&url).await.expect("the seed's store");
            store.init_cluster("7d0a0a4c68f8").await.unwrap();
            let who = Provenance {
                who: format!("{USER}@{SHOWN_HOST}"),
                at_ms: 1_796_238_112_000,
                message: "first".into(),
            };
            let rev = store.commit(0, &spec, who, false).await.unwrap();
            let epoch = store.campaign("docs test").await.unwrap();
            store.mark_converged(epoch, rev).await.unwrap();
        });
    }

    /// Runs one command line of a doc; its output (stdout and stderr, as a
    /// terminal shows them) with this session's directory shown as `/tmp`.
    /// `echo $?` and `export NAME=VALUE` act on the session, as in one shell.
    pub fn run(&mut self, command: &str) -> Vec<String> {
        if command.trim() == "echo $?" {
            return vec![self.last_code.to_string()];
        }
        if let Some((name, value)) = command
            .strip_prefix("export ")
            .and_then(|a| a.split_once('='))
        {
            self.env.push((name.into(), self.here(value)));
            return Vec::new();
        }
        let bin = Path::new(env!("CARGO_BIN_EXE_drover")).parent().unwrap();
        let path = format!(
            "{}:{}",
            bin.display(),
            std::env::var("PATH").unwrap_or_default()
        );
        let out = Command::new("timeout")
            .args(["60", "sh", "-c"])
            .arg(format!("exec 2>&1; {}", self.here(command)))
            .current_dir(self.dir.path())
            .env_clear()
            .env("PATH", path)
            .env("HOME", self.dir.path())
            .env("USER", USER)
            .envs(self.env.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::null())
            .output()
            .expect("run sh");
        self.last_code = out.status.code().unwrap_or(-1);
        let mut text = String::from_utf8_lossy(&out.stdout)
            .replace(&self.dir.path().display().to_string(), "/tmp");
        if let Some(operator) = &self.operator {
            text = text.replace(operator, &format!("{USER}@{SHOWN_HOST}"));
        }
        text.lines().map(String::from).collect()
    }
}
