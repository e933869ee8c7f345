use super::*;

fn form(text: &str) -> Option<Secret> {
    in_text(text).map(|f| f.secret)
}

#[test]
fn swarm_tokens_and_unlock_keys_are_found_anywhere_in_any_case() {
    let token =
        "SWMTKN-1-3pu6hszjas19xyp7ghgosyx9k8atbfcr8p2is99znpy26u2lkl-1awxwuwd3z9j1z3puu7rcgdbx";
    for text in [
        token.to_string(),
        format!("docker swarm join --token {token} 10.0.0.1:2377"),
        format!("x{}", token.to_lowercase()),
    ] {
        let found = in_text(&text).expect("found");
        assert_eq!(found.secret, Secret::JoinToken, "{text}");
        assert_eq!(
            text[found.offset..].to_ascii_uppercase().find("SWMTKN"),
            Some(0)
        );
    }
    assert_eq!(form("unlock: SWMKEY-1-abcdef"), Some(Secret::UnlockKey));
    assert_eq!(form("reads $DROVER_JOIN_TOKEN"), None);
}

#[test]
fn urls_with_userinfo_or_a_secret_query_are_found_and_references_are_not() {
    for (text, want) in [
        ("https://KEY:secret@host", Some(Secret::UrlUserinfo)),
        (
            "curl -fsS https://ghp_abc@github.com/x",
            Some(Secret::UrlUserinfo),
        ),
        ("git+ssh://git@example.com/r", Some(Secret::UrlUserinfo)),
        ("http://u:p@[fd00::1]:80/", Some(Secret::UrlUserinfo)),
        ("http://h/x?token=abc", Some(Secret::UrlQuery)),
        ("wget 'https://h/x?a=1&API_KEY=abc'", Some(Secret::UrlQuery)),
        (
            "https://b.s3.amazonaws.com/o?X-Amz-Credential=A&X-Amz-Signature=f",
            Some(Secret::UrlQuery),
        ),
        (
            "https://acct.blob.core.windows.net/c/b?sv=1;sig=abc",
            Some(Secret::UrlQuery),
        ),
        (
            "https://h/hook?accessToken=abc#frag",
            Some(Secret::UrlQuery),
        ),
        ("https://h/x?Password=abc", Some(Secret::UrlQuery)),
        ("https://$USER:$PASS@host/", None),
        ("https://h/x?token=$TOKEN", None),
        ("https://h/x?token=\"${TOKEN}\"", None),
        ("https://h/x?token={{ t }}", None),
        ("https://h/x?token=", None),
        ("etcds://h:2379?key=/etc/drover/client.key&user=ops", None),
        ("https://h/x?token", None),
        ("https://h/x?key_name=ops&author=me&page=2", None),
        ("https://h/x#token=abc", None),
        (
            "https://h/r?to=https://x.example/?token=abc",
            Some(Secret::UrlQuery),
        ),
        (
            "https://h/r?to=https://u:p@x.example/",
            Some(Secret::UrlUserinfo),
        ),
        ("user@example.com and host:/path", None),
        ("https://h/a@b", None),
        ("://token@host", None),
    ] {
        assert_eq!(form(text), want, "{text}");
    }
}

#[test]
fn secret_names_are_judged_by_their_last_word() {
    for name in [
        "token",
        "api_token",
        "apiKey",
        "API_KEY",
        "X-Amz-Signature",
        "x-goog-credential",
        "client_secret",
        "password",
        "db.passwd",
        "sig",
        "auth",
        "Authorization",
        "session",
        "accesstoken",
        "secret_access_key",
        "pwd",
    ] {
        assert!(is_secret_name(name), "{name}");
    }
    for name in [
        "key_name",
        "token_file",
        "author",
        "keyboard",
        "passage",
        "region",
        "",
        "--",
        "monkey_id",
    ] {
        assert!(!is_secret_name(name), "{name}");
    }
}

#[test]
fn a_field_named_like_a_secret_holds_one_unless_it_refers_or_is_empty_or_boolean() {
    assert_eq!(
        in_field("api_token", "abc").map(|f| f.secret),
        Some(Secret::SecretField)
    );
    assert_eq!(
        in_field("password", "12345").map(|f| f.secret),
        Some(Secret::SecretField)
    );
    for v in [
        "",
        "  ",
        "$TOKEN",
        "${TOKEN}",
        "$(cat /run/t)",
        "{{ link }}",
        "true",
        "False",
    ] {
        assert_eq!(in_field("token", v), None, "{v:?}");
    }
    assert_eq!(in_field("key_name", "ops"), None);
    assert_eq!(
        in_field("note", "see SWMTKN-1-x").map(|f| f.secret),
        Some(Secret::JoinToken)
    );
}

#[test]
fn redaction_hides_what_the_rule_finds_and_nothing_else() {
    let mut v = serde_json::json!({
        "instance": {"properties": {"api_token": "abc", "pin_code": 1, "password": 1234,
            "region": "x", "key_name": "ops", "token_file": "/etc/t", "use_auth": true,
            "nested": ["SWMTKN-1-zzz", {"url": "https://u:p@h/"}]}},
        "flavor": {"engine_labels": {"release": "v1", "SWMKEY-1-k": "v"},
            "boot_script": "curl https://h/x?sig=abc"}
    });
    assert!(redact(&mut v));
    let text = v.to_string();
    for leak in ["abc", "1234", "SWMTKN", "SWMKEY", "u:p@"] {
        assert!(!text.contains(leak), "{leak} in {text}");
    }
    for kept in [
        "\"region\":\"x\"",
        "\"key_name\":\"ops\"",
        "\"token_file\":\"/etc/t\"",
        "\"use_auth\":true",
        "\"pin_code\":1",
        "\"release\":\"v1\"",
    ] {
        assert!(text.contains(kept), "{kept} missing from {text}");
    }
    let mut again = v.clone();
    assert!(
        redact(&mut again),
        "a placeholder under a secret name is still one"
    );
    assert_eq!(again, v, "redaction is idempotent");
    let mut clean = serde_json::json!({"a": ["b", {"c": "https://h/x?page=1"}]});
    assert!(!redact(&mut clean));
}

#[test]
fn the_messages_never_quote_a_secret_and_say_where_it_belongs() {
    for s in [
        Secret::JoinToken,
        Secret::UnlockKey,
        Secret::UrlUserinfo,
        Secret::UrlQuery,
        Secret::SecretField,
    ] {
        assert!(!s.what().is_empty() && !s.belongs().is_empty());
    }
    assert!(Secret::JoinToken.belongs().contains("$DROVER_JOIN_TOKEN"));
    assert!(Secret::UrlQuery.belongs().contains("environment"));
}

/// What the decoder accepts, `diff` and `export` show unchanged: the
/// decoder refuses every value [`redact`] would hide (the serialised spec
/// included, whose defaults, such as the built-in boot scripts, are not in
/// the file).
#[test]
fn an_accepted_spec_holds_nothing_to_redact() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut checked = 0;
    for dir in ["tests/good-specs", "../../examples"] {
        for entry in std::fs::read_dir(root.join(dir)).expect("spec directory") {
            let path = entry.expect("entry").path();
            let ext = path.extension().and_then(|e| e.to_str());
            if !matches!(ext, Some("yaml" | "yml" | "json")) {
                continue;
            }
            let loaded = crate::spec::load_bytes(&std::fs::read(&path).expect("read"));
            let Some(spec) = loaded.spec else { continue };
            let mut v = serde_json::to_value(&spec).expect("serialise");
            assert!(!redact(&mut v), "{}: {v}", path.display());
            checked += 1;
        }
    }
    assert!(checked >= 10, "only {checked} specs checked");
}

/// Label names and values made of fragments the rule must tell apart.
fn fragment() -> impl proptest::strategy::Strategy<Value = String> {
    use proptest::prelude::*;
    prop::sample::select(vec![
        "SWMTKN-1-",
        "swmkey-1-",
        "https://",
        "git+ssh://",
        "h.example",
        "/a",
        "?",
        "&",
        "=",
        "@",
        ":",
        "#",
        " ",
        "token",
        "_key",
        "key_",
        "name",
        "sig",
        "$X",
        "{{ link }}",
        "v1",
        "author",
        "Password",
        "x",
        "/etc/f",
    ])
    .prop_map(str::to_string)
}

proptest::proptest! {
    /// Whatever a label holds: the file is refused for a secret exactly when
    /// the rule finds one, and an accepted file redacts to itself.
    #[test]
    fn the_decoder_refuses_exactly_what_redaction_hides(
        key in proptest::collection::vec(fragment(), 1..4),
        value in proptest::collection::vec(fragment(), 1..6),
    ) {
        let (key, value) = (key.concat(), value.concat());
        let label = serde_json::json!({ &key: &value }).to_string();
        let yaml = format!(
            "groups:\n  - name: w\n    role: worker\n    allocation: {{size: 1}}\n    instance: {{provider: sim}}\n    flavor:\n      engine_labels: {label}\n"
        );
        let loaded = crate::spec::parse_str(&yaml);
        let secret = in_field(&key, &value).is_some() || in_text(&key).is_some();
        let refused_for_it = loaded
            .diagnostics
            .iter()
            .any(|d| d.message.contains("which a spec never may"));
        proptest::prop_assert_eq!(refused_for_it, secret, "{}", yaml);
        if let Some(spec) = loaded.spec {
            let mut v = serde_json::to_value(&spec).unwrap();
            proptest::prop_assert!(!redact(&mut v), "{}", yaml);
        }
    }
}

/// Whatever the text (a 1 MiB boot script of nested URLs, of scheme
/// characters, of queries), the rule reads it in time linear in its size.
#[test]
fn the_rule_is_linear_in_the_text() {
    for unit in ["x://h?a=", "a://", "aaaa", "x://h/", "?a=b&", "://@"] {
        let text = unit.repeat((1 << 20) / unit.len());
        let started = std::time::Instant::now();
        assert_eq!(in_text(&text), None, "{unit}");
        assert!(!redact(&mut serde_json::json!({ "token_file": &text })));
        assert!(
            started.elapsed() < std::time::Duration::from_secs(2),
            "{unit}: {:?}",
            started.elapsed()
        );
    }
}
