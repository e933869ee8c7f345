//! The one rule for "is this text a secret that must never be stored".
//!
//! A spec is stored, hashed, shown (`plan`, `status`, `diff`, `export`),
//! put on engines as labels and sent to providers, so a secret written into
//! it leaks everywhere at once. The decoder refuses every value this rule
//! finds (`decode::secrets` walks the whole file), command-line values that
//! reach user data or boot environments are refused with it, and
//! [`redact`] (for `diff` and `export`) hides exactly what it finds, so a
//! spec accepted today is exported unchanged and an older store that holds
//! a secret never leaks it.
//!
//! The forms, each found anywhere in a text (a boot script, a label, an
//! argument, a property):
//! - a swarm join token (`SWMTKN-1-…`) or unlock key (`SWMKEY-1-…`);
//! - a URL (`SCHEME://…`) with userinfo (`user:password@`, `token@`);
//! - a URL with a query parameter named like a secret ([`is_secret_name`])
//!   holding a value;
//! - a field named like a secret holding a value ([`in_field`]).
//!
//! A value that only refers to a secret kept elsewhere (`$NAME`, `${NAME}`,
//! `$(cat FILE)`, `{{ … }}`, `/path/of/the/file`) is not one: reading a
//! secret from the environment or a file is exactly what a boot script
//! should do.

/// The form of secret found. Its texts never quote the secret.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Secret {
    /// `SWMTKN-1-…`.
    JoinToken,
    /// `SWMKEY-1-…`.
    UnlockKey,
    /// `scheme://user:password@host`.
    UrlUserinfo,
    /// `scheme://host/path?token=…`.
    UrlQuery,
    /// `password: …` (a field named like a secret, with a value).
    SecretField,
}

impl Secret {
    /// What was found, for a message.
    pub fn what(self) -> &'static str {
        match self {
            Secret::JoinToken => "a swarm join token (SWMTKN-1-…)",
            Secret::UnlockKey => "a swarm unlock key (SWMKEY-1-…)",
            Secret::UrlUserinfo => "a credential in a URL (user:password@ or token@)",
            Secret::UrlQuery => "a credential in a URL's query (a parameter named like a secret)",
            Secret::SecretField => "a value under a name that says it is a secret",
        }
    }

    /// Where such a secret belongs instead, for a message.
    pub fn belongs(self) -> &'static str {
        match self {
            Secret::JoinToken => {
                "drover fetches join tokens from the swarm itself and hands each boot script its own as $DROVER_JOIN_TOKEN: remove it"
            }
            Secret::UnlockKey => {
                "an unlock key stays with the operator (docker swarm unlock-key), never in a file drover stores: remove it"
            }
            Secret::UrlUserinfo | Secret::UrlQuery | Secret::SecretField => {
                "keep credentials in the environment or a credentials file of whatever uses them (a boot script reads them as $NAME or from a file of its image; the controller's in /etc/drover/controller.env, docs/deploy.md; AWS's from the AWS chain, docs/ec2.md) and refer to them, e.g. $API_TOKEN"
            }
        }
    }
}

/// A secret found in a text: its form and the byte offset where it starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Found {
    /// The form.
    pub secret: Secret,
    /// Byte offset of the secret (or of its URL) in the text.
    pub offset: usize,
}

/// The placeholder [`redact`] writes where a secret was.
pub const REDACTED: &str = "<redacted>";

/// A name is secret-like when its last word contains one of these…
pub const SECRET_NAME_PARTS: &[&str] = &[
    "token",
    "secret",
    "password",
    "passwd",
    "credential",
    "signature",
    "apikey",
    "accesskey",
    "privatekey",
];

/// …or is one of these (too short to look for inside a word: `author`,
/// `keyboard`, `passage` are no secrets).
pub const SECRET_NAME_WORDS: &[&str] = &[
    "key",
    "pass",
    "pwd",
    "sig",
    "auth",
    "authorization",
    "session",
];

/// The swarm's secret prefixes, found anywhere in a text (any case).
pub(crate) const SWARM_PREFIXES: &[(&str, Secret)] = &[
    ("swmtkn-1-", Secret::JoinToken),
    ("swmkey-1-", Secret::UnlockKey),
];

/// The first secret in `text`, if any: a swarm token or unlock key, or a
/// URL carrying a credential.
pub fn in_text(text: &str) -> Option<Found> {
    let lower = text.to_ascii_lowercase();
    let token = SWARM_PREFIXES
        .iter()
        .filter_map(|(p, secret)| {
            lower.find(p).map(|offset| Found {
                secret: *secret,
                offset,
            })
        })
        .min_by_key(|f| f.offset);
    let url = url_secret(text);
    match (token, url) {
        (Some(t), Some(u)) => Some(if t.offset <= u.offset { t } else { u }),
        (t, u) => t.or(u),
    }
}

/// The secret a field holds: one in its text ([`in_text`]), or the whole
/// value when the field's name is secret-like and the value is a literal
/// (not empty, not a reference, not a boolean).
pub fn in_field(name: &str, value: &str) -> Option<Found> {
    in_text(value).or_else(|| {
        (is_secret_name(name) && is_literal(value) && !is_boolean(value)).then_some(Found {
            secret: Secret::SecretField,
            offset: 0,
        })
    })
}

/// True when `name` (a field or query parameter name) says it holds a
/// secret: split into words at `_ - .` and lowercase-to-uppercase steps,
/// its last word contains one of [`SECRET_NAME_PARTS`] or is one of
/// [`SECRET_NAME_WORDS`] (any case). `api_token`, `X-Amz-Signature`,
/// `apiKey`, `sig` are; `key_name`, `token_file`, `author` are not.
pub fn is_secret_name(name: &str) -> bool {
    let Some(last) = words(name).pop() else {
        return false;
    };
    SECRET_NAME_PARTS.iter().any(|p| last.contains(p)) || SECRET_NAME_WORDS.contains(&&*last)
}

/// `name`'s words, lowercase.
fn words(name: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    let mut prev_lower = false;
    for c in name.chars() {
        if !c.is_ascii_alphanumeric() {
            prev_lower = false;
            out.push(String::new());
            continue;
        }
        if (c.is_ascii_uppercase() && prev_lower) || out.is_empty() {
            out.push(String::new());
        }
        prev_lower = c.is_ascii_lowercase() || c.is_ascii_digit();
        if let Some(w) = out.last_mut() {
            w.push(c.to_ascii_lowercase());
        }
    }
    out.retain(|w| !w.is_empty());
    out
}

/// A value that is itself a secret, not a reference to one kept elsewhere:
/// a variable (`$NAME`, `${NAME}`, `$(cat FILE)`), a template expression,
/// or an absolute path (the file holding it, as a store's `key=FILE`).
fn is_literal(value: &str) -> bool {
    let v = value.trim().trim_matches(['"', '\'']);
    !(v.is_empty()
        || v.starts_with('$')
        || v.starts_with('/')
        || v.starts_with("{{")
        || v.starts_with("{%"))
}

fn is_boolean(value: &str) -> bool {
    matches!(value.trim().to_ascii_lowercase().as_str(), "true" | "false")
}

/// Characters that end a URL written in free text.
fn ends_url(c: char) -> bool {
    c.is_whitespace() || matches!(c, '"' | '\'' | '`' | '<' | '>' | '(' | ')' | '\\')
}

/// Each URL in `text`: the byte offset of its scheme and the text after `://`.
fn urls(text: &str) -> impl Iterator<Item = (usize, &str)> {
    text.match_indices("://").filter_map(move |(i, _)| {
        let scheme_start = text[..i]
            .char_indices()
            .rev()
            .take_while(|(_, c)| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'))
            .last()
            .map(|(j, _)| j)?;
        text[scheme_start..i]
            .starts_with(|c: char| c.is_ascii_alphabetic())
            .then_some((scheme_start, &text[i + 3..]))
    })
}

/// The first URL in `text` carrying a credential. Linear in the text,
/// whatever it holds: userinfo is looked for after every `://` (an
/// authority ends at the next `/`), the query only of a URL that does not
/// lie inside one already read, whose query is read whole (split at `&`,
/// `;` and `?`, so a URL nested in a parameter's value is read too).
fn url_secret(text: &str) -> Option<Found> {
    let mut read_to = 0;
    for (offset, rest) in urls(text) {
        let base = text.len() - rest.len();
        if has_userinfo(rest) {
            return Some(Found {
                secret: Secret::UrlUserinfo,
                offset,
            });
        }
        if base < read_to {
            continue;
        }
        let end = rest.find(ends_url).unwrap_or(rest.len());
        read_to = base + end;
        if has_secret_query(&rest[..end]) {
            return Some(Found {
                secret: Secret::UrlQuery,
                offset,
            });
        }
    }
    None
}

/// A literal userinfo in the authority at the start of `rest` (the text
/// after `://`).
fn has_userinfo(rest: &str) -> bool {
    let end = rest
        .find(|c| ends_url(c) || matches!(c, '/' | '?' | '#'))
        .unwrap_or(rest.len());
    rest[..end]
        .rsplit_once('@')
        .is_some_and(|(userinfo, _)| userinfo.split(':').any(is_literal))
}

/// A query parameter named like a secret, with a literal value, in `url`
/// (the text after `://`, up to the URL's end).
fn has_secret_query(url: &str) -> bool {
    let before_fragment = url.split('#').next().unwrap_or(url);
    let Some((_, query)) = before_fragment.split_once('?') else {
        return false;
    };
    query
        .split(['&', ';', '?'])
        .filter_map(|p| p.split_once('='))
        .any(|(name, value)| is_secret_name(name) && is_literal(value))
}

/// Replaces every value the rule finds with [`REDACTED`] (a key holding
/// one is renamed to it): strings anywhere, and the strings and numbers
/// under secret-like names ([`in_field`]). Returns whether anything was
/// redacted. What `diff` and `export` show.
pub fn redact(v: &mut serde_json::Value) -> bool {
    use serde_json::Value;
    match v {
        Value::Object(map) => {
            let mut changed = false;
            let entries = std::mem::take(map);
            for (k, mut val) in entries {
                let text = match &val {
                    Value::String(s) => Some(s.clone()),
                    Value::Number(n) => Some(n.to_string()),
                    _ => None,
                };
                if text.is_some_and(|t| in_field(&k, &t).is_some()) {
                    val = REDACTED.into();
                    changed = true;
                } else {
                    changed |= redact(&mut val);
                }
                let key = if in_text(&k).is_some() {
                    changed = true;
                    REDACTED.to_string()
                } else {
                    k
                };
                map.insert(key, val);
            }
            changed
        }
        Value::Array(items) => items.iter_mut().fold(false, |c, i| redact(i) | c),
        Value::String(s) if in_text(s).is_some() => {
            *s = REDACTED.into();
            true
        }
        _ => false,
    }
}

#[cfg(test)]
#[path = "secret_value_tests.rs"]
mod tests;
