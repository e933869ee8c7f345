//! Reaching an engine the way the docker CLI does, so that whatever
//! `docker` reaches, drover reaches too: `DOCKER_HOST` (or the default
//! socket) when no endpoint is given; `tcp://` speaks TLS when
//! `DOCKER_TLS_VERIFY` is set, with the client's `key.pem`, `cert.pem` and
//! `ca.pem` from `DOCKER_CERT_PATH` (else the docker config directory).
//! The engine client and the swarm store both connect through here.

use crate::EngineError;
use bollard::Docker;
use std::path::PathBuf;
use std::time::Duration;

/// The docker CLI's default engine.
pub const DEFAULT_HOST: &str = "unix:///var/run/docker.sock";

/// The TLS client files the docker CLI reads from `DOCKER_CERT_PATH`.
const TLS_FILES: [&str; 3] = ["key.pem", "cert.pem", "ca.pem"];

/// The docker CLI's environment. Read from the process with
/// [`DockerEnv::from_process`]; built explicitly where one process must
/// reach several engines differently (tests: the environment is shared by
/// every thread).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DockerEnv {
    /// `DOCKER_HOST`: the engine when no endpoint is given.
    pub host: Option<String>,
    /// `DOCKER_TLS_VERIFY` is set: `tcp://` speaks TLS and checks the
    /// engine's certificate against `ca.pem`.
    pub tls_verify: bool,
    /// The directory of `key.pem`, `cert.pem` and `ca.pem`:
    /// `DOCKER_CERT_PATH`, else `DOCKER_CONFIG`, else `~/.docker`.
    pub cert_path: Option<PathBuf>,
}

impl DockerEnv {
    /// This process's `DOCKER_HOST`, `DOCKER_TLS_VERIFY`, `DOCKER_CERT_PATH`
    /// (empty values count as unset, as for the docker CLI).
    pub fn from_process() -> DockerEnv {
        let var = |k: &str| std::env::var_os(k).filter(|v| !v.is_empty());
        DockerEnv {
            host: var("DOCKER_HOST").and_then(|v| v.into_string().ok()),
            tls_verify: var("DOCKER_TLS_VERIFY").is_some(),
            cert_path: var("DOCKER_CERT_PATH")
                .or_else(|| var("DOCKER_CONFIG"))
                .map(PathBuf::from)
                .or_else(|| var("HOME").map(|h| PathBuf::from(h).join(".docker"))),
        }
    }

    /// The endpoint actually used: `endpoint`, else `DOCKER_HOST`, else the
    /// default socket.
    pub fn host<'a>(&'a self, endpoint: Option<&'a str>) -> &'a str {
        endpoint.or(self.host.as_deref()).unwrap_or(DEFAULT_HOST)
    }
}

/// How one engine is reached.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Transport {
    Unix(String),
    Http(String),
    Https { addr: String, certs: PathBuf },
}

fn bad(msg: String) -> EngineError {
    EngineError::BadAddress(msg)
}

/// Where `endpoint` points and how to talk to it; checks the TLS files
/// up front (bollard would otherwise send no client certificate and the
/// engine would refuse the handshake with an obscure alert). Errors call
/// the endpoint `name` (which says where it came from).
fn resolve(endpoint: &str, name: &str, env: &DockerEnv) -> Result<Transport, EngineError> {
    if endpoint.starts_with('/') {
        return Ok(Transport::Unix(format!("unix://{endpoint}")));
    }
    if endpoint.starts_with("unix:///") {
        return Ok(Transport::Unix(endpoint.to_string()));
    }
    let (tls, why, rest) = if let Some(r) = endpoint.strip_prefix("tcp://") {
        (env.tls_verify, "DOCKER_TLS_VERIFY is set", r)
    } else if let Some(r) = endpoint.strip_prefix("http://") {
        (false, "", r)
    } else if let Some(r) = endpoint.strip_prefix("https://") {
        (true, "it is https://", r)
    } else {
        return Err(bad(format!(
            "docker endpoint {name} is not supported: use unix:///path/docker.sock, \
             tcp://host:port or https://host:port"
        )));
    };
    let hostport = rest.strip_suffix('/').unwrap_or(rest);
    if hostport.is_empty() || hostport.contains('/') {
        return Err(bad(format!(
            "docker endpoint {name} must be host:port with no path (tcp://10.0.0.5:2376)"
        )));
    }
    // The docker CLI's default ports.
    let has_port = hostport
        .rsplit_once(':')
        .is_some_and(|(_, p)| p.parse::<u16>().is_ok());
    let port = match (has_port, tls) {
        (true, _) => String::new(),
        (false, true) => ":2376".into(),
        (false, false) => ":2375".into(),
    };
    let addr = format!("tcp://{hostport}{port}");
    if !tls {
        return Ok(Transport::Http(addr));
    }
    let certs = env.cert_path.clone().ok_or_else(|| {
        bad(format!(
            "{name} needs TLS ({why}) but neither DOCKER_CERT_PATH nor HOME is set: \
             set DOCKER_CERT_PATH to the directory holding key.pem, cert.pem and ca.pem"
        ))
    })?;
    for file in TLS_FILES {
        let path = certs.join(file);
        if !path.is_file() {
            return Err(bad(format!(
                "{name} needs TLS ({why}) but {} is missing: set DOCKER_CERT_PATH to \
                 the directory holding key.pem, cert.pem and ca.pem",
                path.display()
            )));
        }
    }
    Ok(Transport::Https { addr, certs })
}

/// A client for the engine at `endpoint` (`None`: `DOCKER_HOST`, else the
/// default socket), resolved with `env` like the docker CLI, with the API
/// version negotiated within `negotiate`. `calls` bounds every later call
/// on the client side (a backstop: callers bound calls themselves).
///
/// # Errors
/// [`EngineError::BadAddress`] for an endpoint, TLS setting or certificate
/// directory that cannot work (the message names it and says what to do);
/// otherwise what negotiating the version answered.
pub async fn docker_client(
    endpoint: Option<&str>,
    env: &DockerEnv,
    calls: Duration,
    negotiate: Duration,
) -> Result<Docker, EngineError> {
    let host = env.host(endpoint);
    let name = match (endpoint, &env.host) {
        (None, Some(_)) => format!("DOCKER_HOST={host}"),
        _ => host.to_string(),
    };
    let secs = calls.as_secs();
    let version = bollard::API_DEFAULT_VERSION;
    let docker = match resolve(host, &name, env)? {
        Transport::Unix(path) => Docker::connect_with_unix(&path, secs, version),
        Transport::Http(addr) => Docker::connect_with_http(&addr, secs, version),
        Transport::Https { addr, certs } => Docker::connect_with_ssl(
            &addr,
            &certs.join("key.pem"),
            &certs.join("cert.pem"),
            &certs.join("ca.pem"),
            secs,
            version,
        ),
    }
    .map_err(|e| match e {
        // A machine whose engine is not up (yet, or any more): try later.
        bollard::errors::Error::SocketNotFoundError(_) => EngineError::from(e),
        e => bad(format!("cannot use docker endpoint {name}: {e}")),
    })?;
    match tokio::time::timeout(negotiate, docker.negotiate_version()).await {
        Ok(Ok(docker)) => Ok(docker),
        Ok(Err(e)) if e.to_string().contains("HTTP request to an HTTPS server") => {
            Err(bad(format!(
                "{name} answers only TLS: set DOCKER_TLS_VERIFY=1 and DOCKER_CERT_PATH to the \
                 directory holding key.pem, cert.pem and ca.pem (or use https://)"
            )))
        }
        Ok(Err(e)) => Err(e.into()),
        Err(_) => Err(EngineError::Unavailable(format!(
            "{host}: no answer within {} s",
            negotiate.as_secs()
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(tls_verify: bool, cert_path: Option<PathBuf>) -> DockerEnv {
        DockerEnv {
            host: None,
            tls_verify,
            cert_path,
        }
    }

    fn err(endpoint: &str, env: &DockerEnv) -> String {
        match resolve(endpoint, endpoint, env) {
            Err(EngineError::BadAddress(m)) => m,
            other => panic!("{endpoint}: {other:?}"),
        }
    }

    #[test]
    fn resolves_like_the_docker_cli() {
        let plain = env(false, None);
        assert_eq!(plain.host(None), DEFAULT_HOST);
        let with_host = DockerEnv {
            host: Some("tcp://h:1".into()),
            ..plain.clone()
        };
        assert_eq!(with_host.host(None), "tcp://h:1");
        assert_eq!(with_host.host(Some("unix:///s")), "unix:///s");
        assert_eq!(
            resolve("/run/d.sock", "/run/d.sock", &plain).unwrap(),
            Transport::Unix("unix:///run/d.sock".into())
        );
        assert_eq!(
            resolve("tcp://10.0.0.5", "tcp://10.0.0.5", &plain).unwrap(),
            Transport::Http("tcp://10.0.0.5:2375".into())
        );
        assert_eq!(
            resolve("http://10.0.0.5:80/", "http://10.0.0.5:80/", &plain).unwrap(),
            Transport::Http("tcp://10.0.0.5:80".into())
        );
        // Explicit http:// stays plain even when DOCKER_TLS_VERIFY is set.
        let dir = tempfile::tempdir().unwrap();
        for f in TLS_FILES {
            std::fs::write(dir.path().join(f), "x").unwrap();
        }
        let tls = env(true, Some(dir.path().into()));
        assert!(matches!(
            resolve("http://h:2375", "http://h:2375", &tls).unwrap(),
            Transport::Http(_)
        ));
        assert_eq!(
            resolve("tcp://h", "tcp://h", &tls).unwrap(),
            Transport::Https {
                addr: "tcp://h:2376".into(),
                certs: dir.path().into()
            }
        );
        assert!(matches!(
            resolve("https://[::1]:9", "https://[::1]:9", &plain).unwrap_err(),
            EngineError::BadAddress(m) if m.contains("it is https://") && m.contains("HOME")
        ));
    }

    #[test]
    fn refuses_what_cannot_work_naming_it() {
        let plain = env(false, None);
        assert!(err("ssh://h", &plain).contains("tcp://host:port"));
        let from_env = DockerEnv {
            host: Some("ssh://h".into()),
            ..plain.clone()
        };
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        let timeout = Duration::from_secs(1);
        match rt.block_on(docker_client(None, &from_env, timeout, timeout)) {
            Err(EngineError::BadAddress(m)) => assert!(m.contains("DOCKER_HOST=ssh://h"), "{m}"),
            other => panic!("{other:?}"),
        }
        assert!(err("tcp://", &plain).contains("host:port"));
        assert!(err("tcp://h:1/x", &plain).contains("no path"));
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("key.pem"), "x").unwrap();
        let m = err("tcp://h:2376", &env(true, Some(dir.path().into())));
        assert!(
            m.contains("DOCKER_TLS_VERIFY is set")
                && m.contains(&dir.path().join("cert.pem").display().to_string())
                && m.contains("DOCKER_CERT_PATH"),
            "{m}"
        );
    }
}
