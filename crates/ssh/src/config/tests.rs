use super::*;

fn login(identity: Identity) -> Login {
    Login {
        host: SshHost {
            host: "10.0.1.11".into(),
            port: 2222,
            user: "admin".into(),
            zone: None,
            advertise_address: "10.0.1.11".into(),
            state_dir: "/var/lib/drover".into(),
        },
        identity,
        known_hosts: "/etc/drover/ssh/known_hosts".into(),
    }
}

#[test]
fn the_configuration_checks_host_keys_strictly_against_the_declared_file_only() {
    let c = login(Identity::File("/etc/drover/ssh/id_ed25519".into())).ssh_config();
    for line in [
        "HostName 10.0.1.11",
        "Port 2222",
        "User admin",
        "IdentityFile \"/etc/drover/ssh/id_ed25519\"",
        "IdentitiesOnly yes",
        "IdentityAgent none",
        "UserKnownHostsFile \"/etc/drover/ssh/known_hosts\"",
        "GlobalKnownHostsFile /dev/null",
        "StrictHostKeyChecking yes",
        "UpdateHostKeys no",
        "BatchMode yes",
        "StreamLocalBindMask 0177",
    ] {
        assert!(c.lines().any(|l| l.trim() == line), "{line} missing:\n{c}");
    }
    let agent = login(Identity::Agent("SSH_AUTH_SOCK".into())).ssh_config();
    assert!(agent.contains("  IdentityAgent SSH_AUTH_SOCK\n  IdentityFile none\n"));
    let sock = login(Identity::Agent("/run/agent.sock".into())).ssh_config();
    assert!(sock.contains("  IdentityAgent \"/run/agent.sock\"\n"));
}

#[test]
fn a_failed_login_says_what_the_operator_must_do() {
    let l = login(Identity::Agent("SSH_AUTH_SOCK".into()));
    let changed = "@@@@@@@@@@@\n@    WARNING: REMOTE HOST IDENTIFICATION HAS CHANGED!     @\n@@@@@@@@\nHost key for [10.0.1.11]:2222 has changed and you have requested strict checking.\nHost key verification failed.\n";
    let e = LoginError::from_ssh(&l, changed);
    assert!(matches!(e, LoginError::KeyChanged { .. }) && !e.is_transient());
    assert!(
        e.to_string().starts_with("host 10.0.1.11:2222 refused"),
        "{e}"
    );
    let unknown = "No ED25519 host key is known for [10.0.1.11]:2222 and you have requested strict checking.\r\nHost key verification failed.\r\n";
    assert!(matches!(
        LoginError::from_ssh(&l, unknown),
        LoginError::KeyUnknown { .. }
    ));
    let denied = "admin@10.0.1.11: Permission denied (publickey).";
    let e = LoginError::from_ssh(&l, denied);
    assert_eq!(
        e.to_string(),
        "host 10.0.1.11:2222 refused the login as admin: admin@10.0.1.11: Permission denied (publickey)."
    );
    let refused = "ssh: connect to host 10.0.1.11 port 2222: Connection refused\n";
    let e = LoginError::from_ssh(&l, refused);
    assert!(e.is_transient());
    assert_eq!(
        e.to_string(),
        "host 10.0.1.11:2222 cannot be reached: connect to host 10.0.1.11 port 2222: Connection refused"
    );
}
