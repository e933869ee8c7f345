//! Store addresses (`--store`): parsed and checked before anything is
//! dialled, so a malformed one is bad input naming the argument, never a
//! connection to somewhere else.

use crate::etcd;
use drover_spi::StoreError;
use std::path::PathBuf;

/// What [`crate::open`] accepts, for error messages.
const FORMS: &str = "file:///path/state.db, etcd://host:port[,host:port][?prefix=/P&user=U], \
                     etcds://host:port[,host:port][?prefix=/P&ca=..&cert=..&key=..&user=U], \
                     swarm (DOCKER_HOST) or \
                     swarm:ENDPOINT (unix:///path/docker.sock, tcp://host:port, https://host:port)";

/// A parsed store address.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Address {
    File(PathBuf),
    Etcd {
        endpoints: String,
        prefix: Option<String>,
        ca: Option<PathBuf>,
        cert: Option<PathBuf>,
        key: Option<PathBuf>,
        user: Option<String>,
    },
    Swarm(Option<String>),
}

fn bad(url: &str, why: &str) -> StoreError {
    let url = shown(url);
    StoreError::BadAddress(format!("--store {url:?}: {why}; accepted forms: {FORMS}"))
}

/// The address as an error may quote it: credentials in its authority and
/// every query value left out, since a secret pasted under an option name
/// drover does not know (`?Password=`, `?token=`) must never be echoed.
fn shown(url: &str) -> String {
    let (scheme, rest) = url.split_once("://").map_or(("", url), |(s, r)| (s, r));
    let (rest, query) = rest
        .split_once('?')
        .map_or((rest, None), |(r, q)| (r, Some(q)));
    let (authority, path) = rest.find('/').map_or((rest, ""), |i| rest.split_at(i));
    let authority = authority
        .rsplit_once('@')
        .map_or(authority.to_string(), |(_, host)| format!("…@{host}"));
    let mut out = if scheme.is_empty() {
        format!("{authority}{path}")
    } else {
        format!("{scheme}://{authority}{path}")
    };
    if let Some(q) = query {
        let parts: Vec<String> = q
            .split('&')
            .map(|p| {
                p.split_once('=')
                    .map_or("…".into(), |(k, _)| format!("{k}=…"))
            })
            .collect();
        out.push('?');
        out.push_str(&parts.join("&"));
    }
    out
}

/// The etcd options a store address may carry, each at most once.
const ETCD_OPTIONS: &str = "prefix, ca, cert, key, user";

pub(crate) fn parse(url: &str) -> Result<Address, StoreError> {
    if let Some(path) = url.strip_prefix("file://") {
        if !path.starts_with('/') {
            return Err(bad(
                url,
                "a file store needs an absolute path (three slashes: file:///var/lib/drover/state.db)",
            ));
        }
        if path.contains(['?', '#']) {
            return Err(bad(
                url,
                "a file store address is its path alone, with no ? or # part: \
                 file:///var/lib/drover/state.db",
            ));
        }
        return Ok(Address::File(PathBuf::from(path)));
    }
    if url == "swarm" {
        return Ok(Address::Swarm(None));
    }
    if let Some(ep) = url.strip_prefix("swarm:") {
        // The engine client checks the endpoint itself when connecting.
        if ep.is_empty() {
            return Err(bad(
                url,
                "name the engine after swarm: (swarm:unix:///var/run/docker.sock), \
                 or write swarm alone for DOCKER_HOST",
            ));
        }
        if has_userinfo(ep) {
            return Err(bad(
                "swarm:…",
                "never put credentials in the store address (they would show in process \
                 listings); reach the engine over unix:// or TLS (DOCKER_CERT_PATH)",
            ));
        }
        return Ok(Address::Swarm(Some(ep.to_string())));
    }
    if url.starts_with("etcd://") || url.starts_with("etcds://") {
        return etcd_address(url);
    }
    Err(bad(url, "unknown store address"))
}

/// True when `url`'s authority (between `://` and the next `/`, `?` or
/// `#`) holds `user[:password]@`.
fn has_userinfo(url: &str) -> bool {
    let rest = url.split_once("://").map_or(url, |(_, r)| r);
    rest.split(['/', '?', '#'])
        .next()
        .unwrap_or("")
        .contains('@')
}

/// `etcd[s]://host:port[,host:port][?option=value[&...]]`, exactly: no path
/// (a prefix written as a path would be silently ignored, and the commit
/// land in another cluster's keys), no credentials, each option once.
fn etcd_address(url: &str) -> Result<Address, StoreError> {
    if has_userinfo(url) {
        return Err(bad(
            "etcd://…",
            "never put credentials in the store address (they would show in process \
             listings); name the user with ?user=NAME and set DROVER_ETCD_PASSWORD",
        ));
    }
    let (base, query) = url.split_once('?').unwrap_or((url, ""));
    // Before any message that quotes the address.
    if query
        .split('&')
        .any(|p| p.split('=').next() == Some("password"))
    {
        return Err(bad(
            "etcd://…",
            "never put a password in the store address (it would show in \
             process listings); set DROVER_ETCD_PASSWORD instead",
        ));
    }
    let hosts = base.split_once("://").map_or("", |(_, h)| h);
    if let Some((_, path)) = hosts.split_once('/') {
        return Err(bad(
            url,
            &format!(
                "the path /{path} is not part of an etcd address: name the key prefix \
                 as a parameter, etcd://host:port?prefix=/{path}"
            ),
        ));
    }
    etcd::parse_endpoints(base)?;
    let (mut prefix, mut ca, mut cert, mut key, mut user) = (None, None, None, None, None);
    let mut seen = Vec::new();
    for pair in query.split('&').filter(|p| !p.is_empty()) {
        let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
        if seen.contains(&k) {
            return Err(bad(
                url,
                &format!("the etcd option {k:?} is given twice; give it once"),
            ));
        }
        seen.push(k);
        if v.is_empty() && ETCD_OPTIONS.split(", ").any(|o| o == k) {
            return Err(bad(
                url,
                &format!("the etcd option {k:?} has no value; write {k}=VALUE"),
            ));
        }
        match k {
            "prefix" => prefix = Some(v.to_string()),
            "ca" => ca = Some(PathBuf::from(v)),
            "cert" => cert = Some(PathBuf::from(v)),
            "key" => key = Some(PathBuf::from(v)),
            "user" => user = Some(v.to_string()),
            // Named only when it is a name (`k=v`): a bare word may be a
            // secret pasted without one.
            other if pair.contains('=') => {
                return Err(bad(
                    url,
                    &format!("unknown etcd option {other:?} (known: {ETCD_OPTIONS})"),
                ));
            }
            _ => {
                return Err(bad(
                    url,
                    &format!("an etcd option must be NAME=VALUE (known: {ETCD_OPTIONS})"),
                ));
            }
        }
    }
    Ok(Address::Etcd {
        endpoints: base.to_string(),
        prefix,
        ca,
        cert,
        key,
        user,
    })
}

impl Address {
    /// The store as one phrase, for messages ("etcd at 10.0.0.1:2379").
    pub(crate) fn describe(&self) -> String {
        match self {
            Address::File(path) => format!("the file store {}", path.display()),
            Address::Etcd { endpoints, .. } => {
                let hosts = endpoints.split_once("://").map_or("", |(_, h)| h);
                format!("etcd at {}", hosts.replace(',', ", "))
            }
            Address::Swarm(Some(ep)) => format!("the docker engine at {ep}"),
            Address::Swarm(None) => format!(
                "the docker engine at {}",
                drover_engine::DockerEnv::from_process().host(None)
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn err(url: &str) -> String {
        match parse(url) {
            Err(e) => e.to_string(),
            Ok(a) => panic!("{url} parsed as {a:?}"),
        }
    }

    /// An address an error quotes never carries a credential or a query
    /// value, whatever option name a secret was pasted under.
    #[test]
    fn errors_quote_no_credential_and_no_query_value() {
        for url in [
            "etcd://h:2379?Password=hunter2",
            "etcd://h:2379?token=hunter2&prefix=/p",
            "http://u:hunter2@h:2379",
            "etcd://h:2379?hunter2",
        ] {
            let e = err(url);
            assert!(!e.contains("hunter2"), "{url}: {e}");
        }
        assert!(err("etcd://h:2379?token=x").contains("etcd://h:2379?token=…"));
    }

    #[test]
    fn parses_every_form() {
        assert_eq!(
            parse("file:///var/lib/drover/state.db").unwrap(),
            Address::File("/var/lib/drover/state.db".into())
        );
        assert_eq!(parse("swarm").unwrap(), Address::Swarm(None));
        assert_eq!(
            parse("swarm:unix:///run/d.sock").unwrap(),
            Address::Swarm(Some("unix:///run/d.sock".into()))
        );
        assert_eq!(
            parse("swarm:tcp://10.0.0.5:2376").unwrap(),
            Address::Swarm(Some("tcp://10.0.0.5:2376".into()))
        );
        match parse("etcds://a:2379,b:2379?prefix=/drover/x&ca=/ca.pem&user=u").unwrap() {
            Address::Etcd {
                endpoints,
                prefix,
                ca,
                user,
                ..
            } => {
                assert_eq!(endpoints, "etcds://a:2379,b:2379");
                assert_eq!(prefix.as_deref(), Some("/drover/x"));
                assert_eq!(ca, Some(PathBuf::from("/ca.pem")));
                assert_eq!(user.as_deref(), Some("u"));
            }
            a => panic!("{a:?}"),
        }
        assert_eq!(
            etcd::parse_endpoints("etcd://127.0.0.1:2379,10.0.0.2:2379").unwrap(),
            (
                vec![
                    "http://127.0.0.1:2379".to_string(),
                    "http://10.0.0.2:2379".to_string()
                ],
                false
            )
        );
    }

    #[test]
    fn refuses_the_rest_clearly() {
        assert!(err("/var/lib/state.db").contains("--store"));
        assert!(err("/var/lib/state.db").contains("file:///"));
        assert!(err("file://state.db").contains("absolute path"));
        assert!(err("swarm:").contains("DOCKER_HOST"));
        assert!(err("etcd://").contains("no etcd endpoint"));
        assert!(err("etcd://h:1?bogus=1").contains("unknown etcd option"));
        let e = err("etcd://h:1?user=u&password=hunter2");
        assert!(
            e.contains("DROVER_ETCD_PASSWORD") && !e.contains("hunter2"),
            "{e}"
        );
        assert!(err("redis://h").contains("unknown store address"));
        for (url, why) in [
            ("etcd://h:notaport", "not a number"),
            ("etcd://h:0", "not a number"),
            ("etcd://h:2379,g", "has no port"),
            ("etcd://:2379", "has no host"),
            ("etcd://::1:2379", "has no host"),
        ] {
            let e = err(url);
            assert!(e.contains("--store") && e.contains(why), "{url}: {e}");
        }
        assert!(parse("etcd://[::1]:2379").is_ok());
    }

    #[test]
    fn only_the_documented_grammar_is_accepted() {
        for (url, why) in [
            (
                "etcd://10.0.0.1:2379/drover/prod",
                "the path /drover/prod is not part of an etcd address: name the key prefix as a parameter, etcd://host:port?prefix=/drover/prod",
            ),
            ("etcd://h:2379,g:2379/", "the path / is not part"),
            (
                "etcd://h:1?prefix=/a&prefix=/b",
                "the etcd option \"prefix\" is given twice",
            ),
            (
                "etcd://h:1?prefix",
                "the etcd option \"prefix\" has no value",
            ),
            ("etcds://h:1?ca=", "the etcd option \"ca\" has no value"),
            ("file:///var/lib/s.db?mode=ro", "with no ? or # part"),
        ] {
            let e = err(url);
            assert!(
                e.contains(why) && e.contains("accepted forms"),
                "{url}: {e}"
            );
        }
        for url in [
            "etcd://root:hunter2@h:2379",
            "etcds://h:2379?prefix=&password=hunter2",
            "etcd://h:2379/p?password=hunter2",
            "swarm:https://u:hunter2@h:2376",
        ] {
            let e = err(url);
            assert!(
                e.contains("never put") && !e.contains("hunter2"),
                "{url}: {e}"
            );
        }
        // An @ in a parameter (a user name) is not userinfo.
        assert!(parse("etcds://h:2379?user=me@corp").is_ok());
    }
}
