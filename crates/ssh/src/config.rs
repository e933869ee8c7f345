//! How drover logs in to one host: the OpenSSH client configuration it
//! writes for the host (`ssh -F`), and what a failed login means. Pure.
//!
//! The file is the whole configuration: `-F` keeps the user's and the
//! system's `ssh_config` out, so every controller, on whatever host it
//! runs, logs in the same way, as the cluster file says and nothing else.

use drover_core::spec::ssh::{Identity, SshHost};

/// One host's login: the host and its group's key and known_hosts file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Login {
    /// The host.
    pub host: SshHost,
    /// Where the key comes from.
    pub identity: Identity,
    /// The known_hosts file its key is checked against.
    pub known_hosts: String,
}

/// How long a login may take before the host counts as not answering.
pub const CONNECT_TIMEOUT_S: u32 = 10;

impl Login {
    /// The client configuration for this host. Host keys: only the
    /// declared known_hosts file counts (the global one is off), a key
    /// missing from it or different is refused, and nothing is ever
    /// written to it. Keys: only the declared source. Forwarded sockets
    /// are the controller's user's only (mask 0177), and a stale one left
    /// by an earlier connection is replaced.
    pub fn ssh_config(&self) -> String {
        let h = &self.host;
        let identity = match &self.identity {
            Identity::File(path) => {
                format!("  IdentityFile \"{path}\"\n  IdentitiesOnly yes\n  IdentityAgent none\n")
            }
            // `IdentityFile none`: the agent's keys only, never the
            // default files of the controller's user (~/.ssh/id_*).
            Identity::Agent(agent) if agent == "SSH_AUTH_SOCK" => {
                "  IdentityAgent SSH_AUTH_SOCK\n  IdentityFile none\n".to_string()
            }
            Identity::Agent(agent) => {
                format!("  IdentityAgent \"{agent}\"\n  IdentityFile none\n")
            }
        };
        format!(
            "# Written by drover for host {name} of an ssh inventory (docs/ssh.md).\n\
             Host *\n  HostName {host}\n  Port {port}\n  User {user}\n\
             {identity}\
             \x20 UserKnownHostsFile \"{known}\"\n  GlobalKnownHostsFile /dev/null\n\
             \x20 StrictHostKeyChecking yes\n  UpdateHostKeys no\n  CheckHostIP no\n\
             \x20 BatchMode yes\n  PasswordAuthentication no\n  KbdInteractiveAuthentication no\n\
             \x20 ForwardAgent no\n  ForwardX11 no\n  RequestTTY no\n\
             \x20 ConnectTimeout {CONNECT_TIMEOUT_S}\n  ServerAliveInterval 5\n  ServerAliveCountMax 3\n\
             \x20 StreamLocalBindMask 0177\n  StreamLocalBindUnlink yes\n  LogLevel ERROR\n",
            name = h.name(),
            host = h.host,
            port = h.port,
            user = h.user,
            known = self.known_hosts,
        )
    }
}

/// Why a login failed, as the provider's callers must treat it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LoginError {
    /// The host's key is not the one its known_hosts file holds: refused,
    /// never accepted (it may be another machine on the host's address).
    #[error(
        "host {host} refused: its host key differs from the one for it in {known_hosts} (REMOTE HOST IDENTIFICATION HAS CHANGED); if the host was reinstalled, check its new key out of band and replace its line there"
    )]
    KeyChanged {
        /// The host.
        host: String,
        /// The file holding the old key.
        known_hosts: String,
    },
    /// The host's key is in no line of the known_hosts file.
    #[error(
        "host {host} refused: its host key is not in {known_hosts}; check the key out of band and add it (ssh-keyscan -p PORT HOST prints it, unverified)"
    )]
    KeyUnknown {
        /// The host.
        host: String,
        /// The file.
        known_hosts: String,
    },
    /// The host refused the key drover logs in with.
    #[error("host {host} refused the login as {user}: {said}")]
    Denied {
        /// The host.
        host: String,
        /// The user.
        user: String,
        /// What ssh said.
        said: String,
    },
    /// Something on the controller's host is missing (a key file, the
    /// known_hosts file, the agent): bad input, named.
    #[error("{0}")]
    Local(String),
    /// The host did not answer (refused connection, timeout, no route,
    /// unknown name): unknown, never gone.
    #[error("host {host} cannot be reached: {said}")]
    Unreachable {
        /// The host.
        host: String,
        /// What ssh said.
        said: String,
    },
}

impl LoginError {
    /// True when trying again may succeed (the host may answer later);
    /// every other failure needs the operator.
    pub fn is_transient(&self) -> bool {
        matches!(self, LoginError::Unreachable { .. })
    }

    /// Reads what a failed `ssh` login wrote (its log, standard error).
    pub fn from_ssh(login: &Login, said: &str) -> LoginError {
        let host = login.host.name();
        let known_hosts = login.known_hosts.clone();
        let last = said
            .lines()
            .map(str::trim)
            .rfind(|l| !l.is_empty() && !l.starts_with('@'))
            .unwrap_or("no reason given")
            .trim_start_matches("ssh: ")
            .to_string();
        if said.contains("REMOTE HOST IDENTIFICATION HAS CHANGED")
            || said.contains("has changed and you have requested strict checking")
        {
            LoginError::KeyChanged { host, known_hosts }
        } else if said.contains("Host key verification failed")
            || said.contains("No ED25519 host key is known")
            || said.contains("host key is known for")
        {
            LoginError::KeyUnknown { host, known_hosts }
        } else if said.contains("Permission denied")
            || said.contains("Too many authentication failures")
        {
            LoginError::Denied {
                host,
                user: login.host.user.clone(),
                said: last,
            }
        } else {
            LoginError::Unreachable { host, said: last }
        }
    }
}

#[cfg(test)]
mod tests;
