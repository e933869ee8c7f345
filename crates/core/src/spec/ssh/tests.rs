use super::*;
use serde_json::json;

fn fields(v: Value) -> Vec<String> {
    match SshProperties::parse(&v) {
        Ok(_) => Vec::new(),
        Err(problems) => problems.into_iter().map(|p| p.field).collect(),
    }
}

fn base() -> Value {
    json!({"hosts": ["10.0.1.11"], "identity_file": "/etc/drover/ssh/id_ed25519",
        "known_hosts": "/etc/drover/ssh/known_hosts"})
}

fn with(extra: Value) -> Value {
    let mut v = base();
    for (k, x) in extra.as_object().unwrap() {
        v[k] = x.clone();
    }
    v
}

#[test]
fn an_inventory_resolves_every_default() {
    let p = SshProperties::parse(&with(json!({"hosts": [
        "10.0.1.11",
        {"host": "db-2.example.net", "advertise_address": "10.0.1.12", "zone": "b", "user": "admin", "port": 2222, "state_dir": "/srv/drover"}
    ], "cleanup": {"command": "docker system prune -af", "paths": ["/var/lib/docker/volumes"]}})))
    .unwrap();
    assert_eq!(
        p.hosts[0],
        SshHost {
            host: "10.0.1.11".into(),
            port: 22,
            user: "root".into(),
            zone: None,
            advertise_address: "10.0.1.11".into(),
            state_dir: "/var/lib/drover".into(),
        }
    );
    assert_eq!(p.hosts[1].name(), "db-2.example.net:2222");
    assert_eq!(p.hosts[1].advertise_address, "10.0.1.12");
    assert_eq!(p.hosts[1].zone.as_deref(), Some("b"));
    assert_eq!(
        p.identity,
        Identity::File("/etc/drover/ssh/id_ed25519".into())
    );
    assert_eq!(p.docker_socket, "/var/run/docker.sock");
    assert_eq!(p.cleanup.paths, ["/var/lib/docker/volumes"]);
    assert_eq!(p.host("db-2.example.net:2222").map(|h| h.port), Some(2222));
}

#[test]
fn group_level_user_and_port_are_every_hosts_default() {
    let p = SshProperties::parse(&with(json!({"user": "ops", "port": 2200,
        "hosts": ["10.0.1.11", {"host": "10.0.1.12", "user": "root"}]})))
    .unwrap();
    assert_eq!((p.hosts[0].user.as_str(), p.hosts[0].port), ("ops", 2200));
    assert_eq!((p.hosts[1].user.as_str(), p.hosts[1].port), ("root", 2200));
}

#[test]
fn the_key_comes_from_exactly_one_source() {
    let agent =
        json!({"hosts": ["10.0.1.11"], "identity_agent": "SSH_AUTH_SOCK", "known_hosts": "/k"});
    assert_eq!(
        SshProperties::parse(&agent).unwrap().identity,
        Identity::Agent("SSH_AUTH_SOCK".into())
    );
    assert_eq!(
        fields(json!({"hosts": ["10.0.1.11"], "known_hosts": "/k"})),
        [".identity_file"]
    );
    assert_eq!(
        fields(with(json!({"identity_agent": "/run/agent.sock"}))),
        [".identity_agent"]
    );
    assert_eq!(
        fields(with(json!({"identity_file": "id_ed25519"}))),
        [".identity_file"],
        "relative"
    );
    assert_eq!(
        fields(json!({"hosts": ["10.0.1.11"], "identity_agent": "agent.sock", "known_hosts": "k"})),
        [".identity_agent", ".known_hosts"]
    );
}

#[test]
fn hosts_and_known_hosts_are_required() {
    assert_eq!(
        fields(json!({"identity_file": "/k"})),
        [".hosts", ".known_hosts"]
    );
    assert_eq!(fields(with(json!({"hosts": []}))), [".hosts"]);
    assert_eq!(fields(with(json!({"hosts": "10.0.1.11"}))), [".hosts"]);
}

#[test]
fn every_bad_host_is_named_at_its_entry() {
    let v = with(json!({"hosts": [
        "-oProxyCommand=x",
        "db.example.net",
        {"host": "10.0.1.12", "port": 0, "user": "-x", "zone": "", "advertise_address": "db", "state_dir": "var/lib"},
        {"hots": "10.0.1.13"},
        "10.0.1.11",
        {"host": "10.0.1.11", "port": 22},
        {"host": "10.0.1.11", "port": 2222},
        7
    ]}));
    assert_eq!(
        fields(v),
        [
            ".hosts[0]",
            ".hosts[1]",
            ".hosts[2].port",
            ".hosts[2].user",
            ".hosts[2].state_dir",
            ".hosts[2].zone",
            ".hosts[2].advertise_address",
            ".hosts[3].hots",
            ".hosts[3].host",
            ".hosts[5]",
            ".hosts[7]",
        ]
    );
}

#[test]
fn paths_on_the_hosts_are_plain_and_never_the_root_or_drovers_own() {
    let v = with(json!({
        "state_dir": "/var/lib/drover",
        "docker_socket": "/run/docker sock",
        "cleanup": {"command": " ", "paths": ["/", "/var/lib/docker", "/var/lib", "/var/lib/drover", "/a/../b", "/x$(id)", "rel"]},
    }));
    assert_eq!(
        fields(v),
        [
            ".docker_socket",
            ".cleanup.command",
            ".cleanup.paths[0]",
            ".cleanup.paths[2]",
            ".cleanup.paths[3]",
            ".cleanup.paths[4]",
            ".cleanup.paths[5]",
            ".cleanup.paths[6]",
        ]
    );
}

#[test]
fn unknown_fields_have_hints() {
    let problems =
        SshProperties::parse(&with(json!({"known_host": "/k", "clean_up": {}}))).unwrap_err();
    let said: Vec<String> = problems.iter().map(ToString::to_string).collect();
    assert!(
        said.iter()
            .any(|s| s.contains("did you mean `known_hosts`?")),
        "{said:?}"
    );
    assert!(
        said.iter().any(|s| s.contains("did you mean `cleanup`?")),
        "{said:?}"
    );
}

#[test]
fn names_carry_the_port_when_it_is_not_22() {
    assert_eq!(host_name("10.0.1.11", 22), "10.0.1.11");
    assert_eq!(host_name("10.0.1.11", 2222), "10.0.1.11:2222");
    assert_eq!(host_name("fd00::1", 2222), "[fd00::1]:2222");
    assert!(is_host("db-1.example.net") && is_host("fd00::1") && is_host("db."));
    assert!(!is_host("-oProxyCommand") && !is_host("a b") && !is_host("") && !is_host("a..b"));
}
