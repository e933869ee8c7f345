//! Test helpers (feature `testkit`): hosts for the ssh provider, each an
//! `sshd` of the test's own on a loopback address, with its own host key
//! and configuration, accepting one test key. The host behind every such
//! sshd is this machine, so what drover runs there must be harmless: each
//! lab host has its own state directory under the lab's temporary
//! directory, a declared engine socket there, and stubs for `docker` and
//! `systemctl` first on its sessions' `PATH` (sshd's `SetEnv`), which only
//! record their calls. Every sshd (and the sessions it forked) is killed
//! by the PIDs recorded when the lab is dropped, also when a test fails.

use std::io::Read;
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The port every lab sshd listens on (each on its own address).
pub const PORT: u16 = 2222;

/// A lab of hosts.
pub struct Lab {
    /// Everything the lab writes.
    pub dir: tempfile::TempDir,
    /// The client key drover logs in with.
    pub key: PathBuf,
    /// The known_hosts file holding every lab host's key.
    pub known_hosts: PathBuf,
    hosts: Vec<Host>,
}

/// One lab host: an sshd on `addr`.
pub struct Host {
    /// Its loopback address.
    pub addr: String,
    sshd: Option<Child>,
}

impl Drop for Host {
    fn drop(&mut self) {
        self.stop();
    }
}

impl Host {
    /// Kills its sshd and every session it forked (by the recorded PID and
    /// its descendants): the host stops answering, established
    /// connections included.
    pub fn stop(&mut self) {
        if let Some(mut child) = self.sshd.take() {
            for pid in descendants(child.id()) {
                let _ = nix::sys::signal::kill(
                    nix::unistd::Pid::from_raw(pid as i32),
                    nix::sys::signal::Signal::SIGKILL,
                );
            }
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

impl Lab {
    /// A host on each of `addrs` (loopback addresses of the test's own
    /// range), each answering on [`PORT`].
    pub fn new(addrs: &[&str]) -> Lab {
        let dir = tempfile::Builder::new()
            .prefix("drv-ssh")
            .tempdir()
            .expect("a temporary directory");
        let key = dir.path().join("id_ed25519");
        keygen(&key);
        std::fs::copy(public(&key), dir.path().join("authorized_keys")).expect("authorized_keys");
        stubs(dir.path());
        // sshd's privilege separation directory (Debian's unit makes it).
        let _ = std::fs::create_dir_all("/run/sshd");
        let mut lab = Lab {
            known_hosts: dir.path().join("known_hosts"),
            key,
            dir,
            hosts: Vec::new(),
        };
        for addr in addrs {
            lab.hosts.push(Host {
                addr: addr.to_string(),
                sshd: None,
            });
            lab.start(lab.hosts.len() - 1, true);
        }
        lab
    }

    /// The lab host on `addr`.
    pub fn host(&mut self, addr: &str) -> &mut Host {
        self.hosts
            .iter_mut()
            .find(|h| h.addr == addr)
            .expect("a lab host")
    }

    /// Restarts the sshd on `addr` with a new host key, which its
    /// known_hosts line no longer matches.
    pub fn rekey(&mut self, addr: &str) {
        let i = self
            .hosts
            .iter()
            .position(|h| h.addr == addr)
            .expect("a lab host");
        self.hosts[i].stop();
        let key = self.host_key(addr);
        let _ = std::fs::remove_file(&key);
        let _ = std::fs::remove_file(public(&key));
        self.start(i, false);
    }

    fn host_key(&self, addr: &str) -> PathBuf {
        self.dir.path().join(format!("host-{addr}"))
    }

    /// A host's state directory (where drover keeps its record there).
    pub fn state_dir(&self, addr: &str) -> PathBuf {
        self.dir.path().join(format!("state-{addr}"))
    }

    /// The engine socket a host's properties declare.
    pub fn docker_socket(&self, addr: &str) -> PathBuf {
        self.dir.path().join(format!("docker-{addr}.sock"))
    }

    /// Makes host `addr`'s engine part of another swarm: its `docker info`
    /// answers swarm state `state` (`active`, `pending`, `locked`).
    pub fn in_another_swarm(&self, addr: &str, state: &str) {
        let file = PathBuf::from(format!("{}.swarm", self.state_dir(addr).display()));
        std::fs::write(file, format!("{state}\n")).expect("the engine's swarm state");
    }

    /// What the stubs recorded (`docker ...`, `systemctl ...` lines).
    pub fn calls(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("calls")).unwrap_or_default()
    }

    /// `instance.properties` for a group of the hosts on `addrs` (any
    /// address: one where no lab sshd listens is a host that never
    /// answers), logging in with the lab's key.
    pub fn properties(&self, addrs: &[&str]) -> serde_json::Value {
        let hosts: Vec<serde_json::Value> = addrs
            .iter()
            .map(|a| serde_json::json!({"host": a, "port": PORT, "state_dir": self.state_dir(a)}))
            .collect();
        serde_json::json!({
            "hosts": hosts,
            "identity_file": self.key,
            "known_hosts": self.known_hosts,
            "docker_socket": self.docker_socket(addrs.first().copied().unwrap_or_default()),
        })
    }

    /// Starts host `i`'s sshd (a new host key if it has none); `trusted`:
    /// its key is added to the known_hosts file.
    fn start(&mut self, i: usize, trusted: bool) {
        let addr = self.hosts[i].addr.clone();
        let host_key = self.host_key(&addr);
        if !host_key.exists() {
            keygen(&host_key);
        }
        if trusted {
            let public = std::fs::read_to_string(public(&host_key)).expect("host key");
            let mut parts = public.split_whitespace();
            let line = format!(
                "[{addr}]:{PORT} {} {}\n",
                parts.next().unwrap_or_default(),
                parts.next().unwrap_or_default()
            );
            let mut known = std::fs::read_to_string(&self.known_hosts).unwrap_or_default();
            known.push_str(&line);
            std::fs::write(&self.known_hosts, known).expect("known_hosts");
        }
        let d = self.dir.path();
        let config = d.join(format!("sshd-{addr}.conf"));
        std::fs::write(&config, format!(
            "ListenAddress {addr}:{PORT}\nHostKey {}\nPidFile {}\nAuthorizedKeysFile {}\n\
             StrictModes no\nUsePAM no\nPasswordAuthentication no\nKbdInteractiveAuthentication no\n\
             PubkeyAuthentication yes\nPermitRootLogin prohibit-password\nAllowStreamLocalForwarding yes\n\
             X11Forwarding no\nPrintMotd no\nMaxSessions 64\nMaxStartups 64\n\
             SetEnv PATH={}:/usr/sbin:/usr/bin:/sbin:/bin\n",
            host_key.display(),
            d.join(format!("sshd-{addr}.pid")).display(),
            d.join("authorized_keys").display(),
            d.join("bin").display(),
        )).expect("sshd_config");
        let log = std::fs::File::create(d.join(format!("sshd-{addr}.log"))).expect("sshd log");
        let child = Command::new("/usr/sbin/sshd")
            .args(["-D", "-e", "-f"])
            .arg(&config)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("sshd starts (apt-get install openssh-server)");
        self.hosts[i].sshd = Some(child);
        let deadline = Instant::now() + Duration::from_secs(10);
        while TcpStream::connect((addr.as_str(), PORT)).is_err() {
            assert!(
                Instant::now() < deadline,
                "sshd on {addr} did not listen: {}",
                self.sshd_log(&addr)
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// What host `addr`'s sshd logged.
    pub fn sshd_log(&self, addr: &str) -> String {
        let mut text = String::new();
        if let Ok(mut f) = std::fs::File::open(self.dir.path().join(format!("sshd-{addr}.log"))) {
            let _ = f.read_to_string(&mut text);
        }
        text
    }
}

/// The public half of the key at `path` (ssh-keygen's `PATH.pub`).
fn public(path: &Path) -> PathBuf {
    PathBuf::from(format!("{}.pub", path.display()))
}

/// An `ssh-agent` of the test's own holding the lab's key, on a socket in
/// the lab's directory; killed by its recorded PID when dropped.
pub struct Agent {
    /// Its socket.
    pub socket: PathBuf,
    child: Child,
}

impl Drop for Agent {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Lab {
    /// Starts an agent holding the lab's key.
    pub fn agent(&self) -> Agent {
        let socket = self.dir.path().join("agent.sock");
        let child = Command::new("ssh-agent")
            .args(["-D", "-a"])
            .arg(&socket)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("ssh-agent starts");
        let agent = Agent { socket, child };
        let deadline = Instant::now() + Duration::from_secs(10);
        while !agent.socket.exists() {
            assert!(Instant::now() < deadline, "ssh-agent made no socket");
            std::thread::sleep(Duration::from_millis(20));
        }
        let added = Command::new("ssh-add")
            .arg("-q")
            .arg(&self.key)
            .env("SSH_AUTH_SOCK", &agent.socket)
            .status()
            .is_ok_and(|s| s.success());
        assert!(added, "ssh-add could not add the lab's key");
        agent
    }
}

/// A new ed25519 key pair at `path` (and `path.pub`), no passphrase.
fn keygen(path: &Path) {
    let ok = Command::new("ssh-keygen")
        .args(["-q", "-t", "ed25519", "-N", "", "-C", "drover-test", "-f"])
        .arg(path)
        .status()
        .is_ok_and(|s| s.success());
    assert!(ok, "ssh-keygen made no key at {}", path.display());
}

/// `docker` and `systemctl` stubs in `dir/bin` that record their calls in
/// `dir/calls`: `docker info` says the engine is in a swarm (so a release
/// leaves it) while the host is enrolled, and in none before (so a claim
/// takes it), unless [`Lab::in_another_swarm`] said otherwise (the scripts
/// that ask name the host's state directory in `DROVER_STATE_DIR`; one
/// that does not is answered `active`); `systemctl show` gives a main PID
/// that never changes (so an update restarts the engine).
fn stubs(dir: &Path) {
    let bin = dir.join("bin");
    std::fs::create_dir_all(&bin).expect("stub directory");
    let calls = dir.join("calls");
    for (name, answer) in [
        (
            "docker",
            "s=${DROVER_STATE_DIR:-}\n\
             if [ \"$1\" = info ]; then\n  \
             if [ -n \"$s\" ] && [ -e \"$s.swarm\" ]; then cat \"$s.swarm\"\n  \
             elif [ -n \"$s\" ] && [ ! -e \"$s/instance.json\" ]; then echo inactive\n  \
             else echo active; fi\n\
             fi",
        ),
        ("systemctl", "[ \"$1\" = show ] && echo 4242"),
    ] {
        let path = bin.join(name);
        std::fs::write(
            &path,
            format!(
                "#!/bin/sh\necho \"{name} $*\" >>{}\n{answer}\nexit 0\n",
                calls.display()
            ),
        )
        .expect("stub");
        std::fs::set_permissions(&path, std::os::unix::fs::PermissionsExt::from_mode(0o755))
            .expect("stub mode");
    }
}

/// Kills (SIGKILL, by PID) every OpenSSH control master whose control
/// socket is under `dir` (a provider's directory): its connections drop
/// as a controller's host losing its network, or the controller killed,
/// would drop them. Returns the PIDs killed.
pub fn kill_control_masters(dir: &Path) -> Vec<u32> {
    let ctl = dir.join("ctl").display().to_string();
    let mut killed = Vec::new();
    for e in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|p| p.parse::<u32>().ok()) else {
            continue;
        };
        let Ok(cmdline) = std::fs::read(e.path().join("cmdline")) else {
            continue;
        };
        let args: Vec<String> = cmdline
            .split(|b| *b == 0)
            .map(|a| String::from_utf8_lossy(a).into_owned())
            .collect();
        let master = args.first().is_some_and(|a| a.ends_with("ssh"))
            && args.iter().any(|a| a == "-M")
            && args.iter().any(|a| a.starts_with(&ctl));
        if master
            && nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(pid as i32),
                nix::sys::signal::Signal::SIGKILL,
            )
            .is_ok()
        {
            killed.push(pid);
        }
    }
    killed
}

/// `pid` and every process descended from it (by `/proc/*/stat`'s parent).
fn descendants(pid: u32) -> Vec<u32> {
    let parents: Vec<(u32, u32)> = std::fs::read_dir("/proc")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| {
            let p: u32 = e.file_name().to_str()?.parse().ok()?;
            let stat = std::fs::read_to_string(e.path().join("stat")).ok()?;
            let ppid = stat
                .rsplit_once(')')?
                .1
                .split_whitespace()
                .nth(1)?
                .parse()
                .ok()?;
            Some((p, ppid))
        })
        .collect();
    let mut out = vec![pid];
    let mut i = 0;
    while i < out.len() {
        let parent = out[i];
        out.extend(
            parents
                .iter()
                .filter(|(_, pp)| *pp == parent)
                .map(|(p, _)| *p),
        );
        i += 1;
    }
    out
}

/// The cluster id the lab's provisions carry.
pub const CLUSTER: &str = "c0ffee";

/// The ssh provider over one group's `props` (the lab's), its connections
/// under `dir`.
pub fn provider(dir: &Path, props: &serde_json::Value) -> crate::SshProvider {
    let props = drover_core::spec::ssh::SshProperties::parse(props)
        .expect("the lab's properties are valid");
    let declared = crate::Declared {
        current: vec![props],
        earlier: Vec::new(),
    };
    crate::SshProvider::open(dir, std::sync::Arc::new(declared)).expect("the provider's directory")
}

/// A provision of a worker of [`CLUSTER`] for operation `link`: an empty
/// boot script, no environment (a test sets its own with `..request()`).
pub fn request(props: &serde_json::Value, link: &str) -> drover_spi::ProvisionRequest {
    use drover_core::model::tags;
    let tags = std::collections::BTreeMap::from([
        (tags::CLUSTER.to_string(), CLUSTER.to_string()),
        (tags::GROUP.to_string(), "workers".to_string()),
        (tags::LINK.to_string(), link.to_string()),
        (tags::CONFIG.to_string(), "hash-1".to_string()),
    ]);
    drover_spi::ProvisionRequest {
        tags,
        logical_id: None,
        properties: props.clone(),
        engine_labels: std::collections::BTreeMap::new(),
        boot_template: "#!/bin/sh\n".into(),
        boot_context: drover_core::template::BootContext {
            link: link.into(),
            ..drover_core::template::BootContext::example(drover_core::spec::Role::Worker)
        },
        boot_env: Vec::new(),
    }
}
