//! Hiding secrets in free text drover did not write itself (a machine's
//! boot log, an engine's error): the forms and names of the decoder's one
//! secret rule (`spec::secret_value`), applied to a text while keeping the
//! words around them, so a boot log's tail in status, events and blocked
//! reasons still shows the cause (design rule 8).

pub use crate::spec::secret_value::REDACTED;
use crate::spec::secret_value::{SWARM_PREFIXES, in_text, is_secret_name};

/// True when a swarm secret's prefix (any case) starts `rest`.
fn swarm_secret_at(rest: &str) -> bool {
    SWARM_PREFIXES.iter().any(|(p, _)| {
        rest.get(..p.len())
            .is_some_and(|h| h.eq_ignore_ascii_case(p))
    })
}

/// A byte of a swarm secret's text (base36 and dashes; `=`/`+`/`/` for
/// the base64 an unlock key may carry).
fn secret_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || matches!(b, b'-' | b'+' | b'/' | b'=')
}

/// A byte that ends a name (`NAME=value`, `name: value`).
fn name_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.')
}

/// `text` with every swarm secret replaced by [`REDACTED`], the value
/// after every `NAME=` or `NAME: ` whose name is secret-like
/// ([`is_secret_name`], up to the next blank, quote or line end) too, and
/// a line that still holds a credential in a URL (the decoder's rule,
/// [`in_text`]) hidden whole.
pub fn redact_text(text: &str) -> String {
    let out = redact_tokens_and_fields(text);
    if in_text(&out).is_none() {
        return out;
    }
    out.split('\n')
        .map(|line| {
            if in_text(line).is_some() {
                REDACTED
            } else {
                line
            }
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// [`redact_text`]'s first pass: swarm secrets and secret-named values.
fn redact_tokens_and_fields(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let bytes = text.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        let rest = &text[i..];
        if swarm_secret_at(rest) {
            out.push_str(REDACTED);
            i += rest.bytes().take_while(|b| secret_byte(*b)).count();
            continue;
        }
        if let Some(skip) = secret_assignment(&text[..i], rest) {
            out.push_str(&rest[..skip.0]);
            out.push_str(REDACTED);
            i += skip.0 + skip.1;
            continue;
        }
        let c = rest.chars().next().unwrap_or_default();
        out.push(c);
        i += c.len_utf8();
    }
    out
}

/// Values that only name an HTTP authentication scheme: the credential is
/// the word after them (`Authorization: Bearer TOKEN`).
const AUTH_SCHEMES: [&str; 5] = ["bearer", "basic", "token", "digest", "negotiate"];

/// At `rest`, right after a secret-looking name ending `before` (a quoted
/// JSON or YAML key too, or a command-line flag `--password VALUE`): the
/// length of the separator (`=`, `='`, `: `, `": "`, a blank after a flag)
/// and of the value after it (with the word after an authentication
/// scheme).
fn secret_assignment(before: &str, rest: &str) -> Option<(usize, usize)> {
    let key = before.strip_suffix(['"', '\'']).unwrap_or(before);
    let name_len = key.bytes().rev().take_while(|b| name_byte(*b)).count();
    let name = &key[key.len() - name_len..];
    if name.is_empty() || !is_secret_name(name) {
        return None;
    }
    let flag = key.len() == before.len() && name.starts_with('-');
    let sep = if rest.starts_with('=') {
        1
    } else if rest.starts_with(": ") {
        2
    } else if flag && rest.starts_with(' ') {
        1
    } else {
        return None;
    };
    let quote = rest[sep..]
        .bytes()
        .take_while(|b| matches!(b, b'\'' | b'"'))
        .count();
    let word = |from: usize| {
        rest[from..]
            .bytes()
            .take_while(|b| !b.is_ascii_whitespace() && !matches!(b, b'\'' | b'"'))
            .count()
    };
    let start = sep + quote;
    let mut value = word(start);
    let scheme = &rest[start..start + value];
    if AUTH_SCHEMES.iter().any(|a| scheme.eq_ignore_ascii_case(a))
        && rest[start + value..].starts_with(' ')
    {
        value += 1 + word(start + value + 1);
    }
    (value > 0).then_some((start, value))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Swarm secrets are hidden wherever they stand, and only they: the
    /// text around them (the cause an operator needs) stays.
    #[test]
    fn hides_swarm_tokens_and_unlock_keys_anywhere() {
        let log = "docker swarm join --token SWMTKN-1-3pu6hszjas19xyp7ghgosyx9k8atbfcr8p2is99znpy26u2lkl-1awxwuwd3z9j1z3puu7rcgdbx 10.0.0.1:2377\nkey SWMKEY-1-a+b/c=, next";
        let shown = redact_text(log);
        assert_eq!(
            shown,
            "docker swarm join --token <redacted> 10.0.0.1:2377\nkey <redacted>, next"
        );
    }

    /// A value named like a secret is hidden (a `set -x` trace of an
    /// export, a YAML line), its name and the rest of the line kept.
    #[test]
    fn hides_values_named_like_secrets() {
        let shown = redact_text(
            "+ export DROVER_JOIN_TOKEN='abc123'\napi_token: xyz more\nDROVER_STORE=etcd://u:p@h\nregion=eu",
        );
        assert_eq!(
            shown,
            "+ export DROVER_JOIN_TOKEN='<redacted>'\napi_token: <redacted> more\n<redacted>\nregion=eu"
        );
        assert!(!is_secret_name("engine_labels"));
        assert!(is_secret_name("AWS_SECRET_ACCESS_KEY"));
    }

    /// A credential after an authentication scheme, under a quoted JSON
    /// key, or after a command-line flag is hidden too.
    #[test]
    fn hides_bearer_tokens_json_values_and_flag_values() {
        assert_eq!(
            redact_text("+ curl -H 'Authorization: Bearer abc123' https://x"),
            "+ curl -H 'Authorization: <redacted>' https://x"
        );
        assert_eq!(
            redact_text(r#"{"password": "hunter2", "user": "bob"}"#),
            r#"{"password": "<redacted>", "user": "bob"}"#
        );
        assert_eq!(
            redact_text("mysql --password hunter2 -u bob"),
            "mysql --password <redacted> -u bob"
        );
        assert_eq!(
            redact_text("the password is wrong"),
            "the password is wrong"
        );
    }

    /// Text without secrets passes unchanged, multi-byte characters too.
    #[test]
    fn leaves_other_text_alone() {
        let t = "Error response from daemon: rpc error — connection refused ✗";
        assert_eq!(redact_text(t), t);
    }
}
