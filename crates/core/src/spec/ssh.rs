//! A group's `instance.properties` for the ssh provider (docs/ssh.md):
//! the static inventory of hosts the operator already has, how drover
//! logs in to them, and what returning a host to the pool cleans. One
//! rule for both places that read them: `drover validate` (the decoder)
//! and the provider before it enrolls a host, so an inventory is never
//! accepted by one and refused by the other.
//!
//! Every value that ends up in a remote shell command (paths, users) is
//! held to a plain alphabet here, and hosts may not start with `-`: the
//! provider quotes them anyway, but a value that could be read as an
//! option or a shell word is refused before it reaches anything.

use super::props::{BadProperty, Reader};
use serde_json::Value;
use std::net::IpAddr;

/// The ssh provider's instance properties.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SshProperties {
    /// The hosts, in the order written (a free host is taken in this
    /// order), each with its defaults resolved.
    pub hosts: Vec<SshHost>,
    /// Where the private key comes from.
    pub identity: Identity,
    /// The known_hosts file (on the controller's host) that host keys are
    /// checked against; a host missing from it, or whose key differs, is
    /// refused (OpenSSH's `StrictHostKeyChecking yes`).
    pub known_hosts: String,
    /// The engine's socket on the hosts, which drover reaches through the
    /// SSH connection.
    pub docker_socket: String,
    /// What returning a host to the pool cleans, beyond the swarm's leave.
    pub cleanup: Cleanup,
}

/// Where the private key drover logs in with comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Identity {
    /// A private key file on the controller's host (`identity_file`): only
    /// that key is offered (OpenSSH's `IdentitiesOnly yes`).
    File(String),
    /// An SSH agent (`identity_agent`): the path of its socket, or
    /// `SSH_AUTH_SOCK` for the agent the controller's environment names.
    Agent(String),
}

/// What a host's release runs and removes after its engine left the swarm:
/// only this, never anything else.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Cleanup {
    /// A shell command run as root (`sh -c`), first.
    pub command: Option<String>,
    /// Paths removed (recursively), after the command.
    pub paths: Vec<String>,
}

/// One host of the inventory, defaults resolved.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SshHost {
    /// The address or DNS name SSH connects to.
    pub host: String,
    /// The SSH port.
    pub port: u16,
    /// The user drover logs in as (`root`, or one with passwordless sudo).
    pub user: String,
    /// The zone, if the host names one.
    pub zone: Option<String>,
    /// The address the host's engine advertises to the swarm.
    pub advertise_address: String,
    /// Where drover keeps its record of the host's enrollment, the boot
    /// script and its log, on the host.
    pub state_dir: String,
}

impl SshHost {
    /// How drover names the host (a pet's logical id, the front of its
    /// instance ids, messages): `host`, with `:port` when it is not 22.
    pub fn name(&self) -> String {
        host_name(&self.host, self.port)
    }
}

/// A host's name from its address and port ([`SshHost::name`]).
pub fn host_name(host: &str, port: u16) -> String {
    match (port, host.contains(':')) {
        (DEFAULT_PORT, _) => host.to_string(),
        (_, true) => format!("[{host}]:{port}"),
        (_, false) => format!("{host}:{port}"),
    }
}

/// The SSH port when none is given.
pub const DEFAULT_PORT: u16 = 22;
/// The user when none is given.
pub const DEFAULT_USER: &str = "root";
/// Where drover keeps its files on a host when no `state_dir` is given.
pub const DEFAULT_STATE_DIR: &str = "/var/lib/drover";
/// The engine's socket on a host when no `docker_socket` is given.
pub const DEFAULT_DOCKER_SOCKET: &str = "/var/run/docker.sock";
/// `identity_agent`'s value for the agent of the controller's environment.
pub const AGENT_FROM_ENV: &str = "SSH_AUTH_SOCK";

const FIELDS: &[&str] = &[
    "hosts",
    "user",
    "port",
    "identity_file",
    "identity_agent",
    "known_hosts",
    "state_dir",
    "docker_socket",
    "cleanup",
];
const HOST_FIELDS: &[&str] = &[
    "host",
    "port",
    "user",
    "zone",
    "advertise_address",
    "state_dir",
];
const DOC: &str = "docs/ssh.md";

impl SshProperties {
    /// Reads `value` (the group's opaque properties) and checks everything
    /// that needs no host: every problem is returned, not the first.
    /// Whether the key and known_hosts files exist, and whether a host
    /// answers, only the controller's host knows: the provider says so.
    pub fn parse(value: &Value) -> Result<SshProperties, Vec<BadProperty>> {
        let mut r = Reader::open(value, "", FIELDS, DOC);
        let user: String = r.get("user").unwrap_or_else(|| DEFAULT_USER.to_string());
        let port = port(&mut r).unwrap_or(DEFAULT_PORT);
        let state_dir: String = r
            .get("state_dir")
            .unwrap_or_else(|| DEFAULT_STATE_DIR.to_string());
        let docker_socket: String = r
            .get("docker_socket")
            .unwrap_or_else(|| DEFAULT_DOCKER_SOCKET.to_string());
        for (field, v) in [
            (".state_dir", &state_dir),
            (".docker_socket", &docker_socket),
        ] {
            remote_path(&mut r, field, v);
        }
        if r.raw("user").is_some() {
            user_name(&mut r, ".user", &user);
        }
        let defaults = SshHost {
            host: String::new(),
            port,
            user,
            zone: None,
            advertise_address: String::new(),
            state_dir,
        };
        let hosts = hosts(&mut r, &defaults);
        let identity = identity(&mut r);
        let known_hosts: Option<String> = r.required(
            "known_hosts",
            "the known_hosts file, on the controller's host, that the hosts' keys are checked against (e.g. /etc/drover/ssh/known_hosts)",
        );
        if let Some(k) = &known_hosts {
            local_path(&mut r, ".known_hosts", k);
        }
        let state_dirs: Vec<&str> = hosts
            .iter()
            .map(|h| h.state_dir.as_str())
            .chain([defaults.state_dir.as_str()])
            .collect();
        let cleanup = cleanup(&mut r, &state_dirs);
        let props = SshProperties {
            hosts,
            identity: identity.unwrap_or(Identity::Agent(AGENT_FROM_ENV.into())),
            known_hosts: known_hosts.unwrap_or_default(),
            docker_socket,
            cleanup,
        };
        r.finish(props)
    }

    /// The host named `name` ([`SshHost::name`]), if the inventory has it.
    pub fn host(&self, name: &str) -> Option<&SshHost> {
        self.hosts.iter().find(|h| h.name() == name)
    }
}

/// `port` of the mapping `r` reads: 1–65535.
fn port(r: &mut Reader<'_>) -> Option<u16> {
    let p: u16 = r.get("port")?;
    if p == 0 {
        r.bad(".port", "must be 1-65535".into());
        return None;
    }
    Some(p)
}

/// `hosts`: a non-empty list of host names or `{host, ...}` mappings, each
/// listed once.
fn hosts(r: &mut Reader<'_>, defaults: &SshHost) -> Vec<SshHost> {
    let what = "the inventory: a list of hosts (an address or a DNS name, or {host, zone, user, port, advertise_address})";
    let list: Option<Vec<Value>> = r.required("hosts", what);
    let Some(list) = list else { return Vec::new() };
    if list.is_empty() {
        r.bad(".hosts", format!("is empty: list {what}"));
    }
    let mut out: Vec<SshHost> = Vec::new();
    for (i, item) in list.iter().enumerate() {
        let at = format!(".hosts[{i}]");
        let Some(h) = one_host(r, item, &at, defaults) else {
            continue;
        };
        if let Some(first) = out.iter().position(|o| o.name() == h.name()) {
            r.bad(
                &at,
                format!(
                    "`{}` is listed twice (already hosts[{first}]): list each host once",
                    h.name()
                ),
            );
            continue;
        }
        out.push(h);
    }
    out
}

/// One entry of `hosts`: its problems are reported under `at`.
fn one_host(r: &mut Reader<'_>, item: &Value, at: &str, defaults: &SshHost) -> Option<SshHost> {
    let mut h = defaults.clone();
    let none = Value::Object(Default::default());
    let mut e = match item {
        Value::String(host) => {
            h.host = host.clone();
            Reader::open(&none, at, HOST_FIELDS, DOC)
        }
        _ => {
            let mut e = Reader::open(item, at, HOST_FIELDS, DOC);
            h.host = e
                .required("host", "the address or DNS name SSH connects to")
                .unwrap_or_default();
            h.port = port(&mut e).unwrap_or(h.port);
            h.user = e.get("user").unwrap_or(h.user);
            h.zone = e.get("zone");
            h.state_dir = e.get("state_dir").unwrap_or(h.state_dir);
            h.advertise_address = e.get("advertise_address").unwrap_or_default();
            if e.raw("user").is_some() {
                user_name(&mut e, ".user", &h.user.clone());
            }
            if e.raw("state_dir").is_some() {
                remote_path(&mut e, ".state_dir", &h.state_dir.clone());
            }
            if h.zone.as_deref().is_some_and(|z| z.trim().is_empty()) {
                e.bad(".zone", "is empty: name the zone or leave it out".into());
            }
            e
        }
    };
    let named = !h.host.is_empty() || matches!(item, Value::String(_));
    if named && !is_host(&h.host) {
        e.bad(host_field(item), format!("`{}` is not a host: give an IP address or a DNS name (letters, digits, dots and dashes, not starting with a dash)", h.host));
    }
    advertised(&mut e, &mut h, item);
    let ok = e.problems.is_empty();
    r.problems.extend(e.problems);
    ok.then_some(h)
}

/// Where a host's name is written: the entry itself, or its `host`.
fn host_field(item: &Value) -> &'static str {
    match item {
        Value::String(_) => "",
        _ => ".host",
    }
}

/// The address the host's engine advertises: `advertise_address`, else
/// the host itself when it is an address (a DNS name may resolve to
/// several, and the swarm takes only an address or an interface).
fn advertised(e: &mut Reader<'_>, h: &mut SshHost, item: &Value) {
    let given = !h.advertise_address.is_empty() || e.raw("advertise_address").is_some();
    if given {
        if h.advertise_address.parse::<IpAddr>().is_err() {
            e.bad(
                ".advertise_address",
                format!(
                    "`{}` is not an IP address: the swarm advertises an address (e.g. 10.0.1.11)",
                    h.advertise_address
                ),
            );
        }
    } else if h.host.parse::<IpAddr>().is_ok() {
        h.advertise_address = h.host.clone();
    } else if is_host(&h.host) {
        let entry = match item {
            Value::String(_) => format!("{{host: {}, advertise_address: ...}}", h.host),
            _ => "advertise_address".to_string(),
        };
        e.bad(
            host_field(item),
            format!("`{}` is a name, and the swarm advertises an address: give the address its engine advertises ({entry})", h.host),
        );
    }
}

/// `identity_file` or `identity_agent`: exactly one.
fn identity(r: &mut Reader<'_>) -> Option<Identity> {
    let file: Option<String> = r.get("identity_file");
    let agent: Option<String> = r.get("identity_agent");
    match (file, agent) {
        (Some(f), None) => {
            local_path(r, ".identity_file", &f);
            Some(Identity::File(f))
        }
        (None, Some(a)) => {
            if a != AGENT_FROM_ENV {
                local_path(r, ".identity_agent", &a);
            }
            Some(Identity::Agent(a))
        }
        (Some(_), Some(_)) => {
            r.bad(".identity_agent", "give identity_file or identity_agent, not both: drover logs in with one key source".into());
            None
        }
        (None, None) => {
            if r.raw("identity_file").is_none() && r.raw("identity_agent").is_none() {
                r.bad(".identity_file", format!("missing: where the private key comes from: identity_file (a key file on the controller's host, e.g. /etc/drover/ssh/id_ed25519) or identity_agent ({AGENT_FROM_ENV}, or an agent's socket)"));
            }
            None
        }
    }
}

/// `cleanup`: `{command, paths}`; paths are never a host's root, nor a
/// state directory or one holding it (the record goes last, by drover).
fn cleanup(r: &mut Reader<'_>, state_dirs: &[&str]) -> Cleanup {
    let Some(v) = r.raw("cleanup") else {
        return Cleanup::default();
    };
    let mut c = Reader::open(v, ".cleanup", &["command", "paths"], DOC);
    let out = Cleanup {
        command: c.get("command"),
        paths: c.get("paths").unwrap_or_default(),
    };
    if out.command.as_deref().is_some_and(|s| s.trim().is_empty()) {
        c.bad(
            ".command",
            "is empty: give a command or leave it out".into(),
        );
    }
    for (i, p) in out.paths.iter().enumerate() {
        let at = format!(".paths[{i}]");
        if remote_path(&mut c, &at, p) {
            let holds_state = state_dirs
                .iter()
                .any(|d| *d == p || d.starts_with(&format!("{}/", p.trim_end_matches('/'))));
            if holds_state {
                c.bad(&at, format!("`{p}` holds drover's state directory (its record of the host): drover removes its own files; name the engine's state only"));
            }
        }
    }
    r.problems.extend(c.problems);
    out
}

/// A user name OpenSSH and `sudo` take: letters, digits, `.`, `_`, `-`,
/// not starting with `-`.
fn user_name(r: &mut Reader<'_>, field: &str, user: &str) {
    let ok = !user.is_empty()
        && !user.starts_with('-')
        && user.len() <= 32
        && user
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'));
    if !ok {
        r.bad(field, format!("`{user}` is not a user name: letters, digits, `.`, `_` and `-`, not starting with `-`, at most 32"));
    }
}

/// An absolute path on the controller's host (a key, a known_hosts file),
/// without quotes or control characters (it is written, quoted, into the
/// OpenSSH client's configuration).
fn local_path(r: &mut Reader<'_>, field: &str, path: &str) {
    if !path.starts_with('/') {
        r.bad(field, format!("`{path}` is not an absolute path: every controller reads the same file, whatever its working directory"));
    } else if path.chars().any(|c| c == '"' || c.is_control()) {
        r.bad(
            field,
            format!(
                "`{}` holds a quote or a control character: name the file by a plain path",
                path.escape_debug()
            ),
        );
    }
}

/// An absolute path on the hosts, in a plain alphabet (it is part of the
/// commands drover runs there), never the root: true when it is one.
fn remote_path(r: &mut Reader<'_>, field: &str, path: &str) -> bool {
    let plain = path.starts_with('/')
        && path.trim_end_matches('/').len() > 1
        && path.chars().all(|c| {
            c.is_ascii_alphanumeric() || matches!(c, '/' | '.' | '_' | '-' | '+' | '@' | ':')
        })
        && !path.split('/').any(|part| part == "." || part == "..");
    if !plain {
        r.bad(field, format!("`{path}` is not a usable path on the hosts: an absolute path other than `/`, of letters, digits and `/._-+@:`, without `.` or `..` parts"));
    }
    plain
}

/// An IP address, or a DNS name: labels of letters, digits and dashes,
/// none starting with a dash (so never read as an option).
pub fn is_host(s: &str) -> bool {
    if s.parse::<IpAddr>().is_ok() {
        return true;
    }
    !s.is_empty()
        && s.len() <= 253
        && s.trim_end_matches('.').split('.').all(|label| {
            !label.is_empty()
                && label.len() <= 63
                && !label.starts_with('-')
                && label.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')
        })
}

#[cfg(test)]
mod tests;
