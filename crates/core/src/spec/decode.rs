//! Positioned tree → resolved [`ClusterSpec`], reporting every problem.
//!
//! The decoder is the schema: each `decode_*` function lists the fields it
//! knows, rejects the rest (a typo must never be silently ignored), fills in
//! defaults and records a [`Diagnostic`] per problem, then carries on so the
//! operator sees all of them at once.

use super::diag::{Diagnostic, Severity};
use super::*;
mod allocation;
mod cluster;
mod hooks;
mod instance;
mod inventory;
mod release;
mod secrets;
mod update;

use crate::budget::{Amount, ServiceBudget};
use crate::in_place::InPlace;
use crate::quorum;
use crate::template::{self, BootContext};
use crate::yaml::{self, Node, Pos};
use std::collections::HashMap;

mod time;

/// Result of reading a cluster file.
#[derive(Debug, Clone)]
pub struct Loaded {
    /// The resolved spec, present only when there is no error.
    pub spec: Option<ClusterSpec>,
    /// Every error and warning, in file order.
    pub diagnostics: Vec<Diagnostic>,
}

/// Reads a cluster file as every command reading an operator's file does:
/// all of [`parse_str`]'s rules, and each group's provider must be one
/// drover ships ([`PROVIDERS`]), so a misspelt provider is caught by
/// `validate` instead of leaving a group that nothing ever provisions.
fn load(text: &str) -> Loaded {
    decode_with(text, PROVIDERS)
}

/// [`load`] for a file's raw bytes: text that is not UTF-8 is one error at
/// the line and column of its first invalid byte, so the operator can find
/// it (a Latin-1 `é` pasted into a comment is the usual cause).
pub fn load_bytes(bytes: &[u8]) -> Loaded {
    match std::str::from_utf8(bytes) {
        Ok(text) => load(text),
        Err(e) => {
            let valid = &bytes[..e.valid_up_to()];
            let line = 1 + valid.iter().filter(|&&b| b == b'\n').count();
            let line_start = valid.iter().rposition(|&b| b == b'\n').map_or(0, |i| i + 1);
            // The valid prefix is UTF-8: the column counts characters.
            let col = 1 + String::from_utf8_lossy(&valid[line_start..])
                .chars()
                .count();
            let message = format!(
                "not UTF-8 text: byte 0x{:02x} (offset {}) is not UTF-8; save the file as UTF-8",
                bytes[e.valid_up_to()],
                e.valid_up_to()
            );
            Loaded {
                spec: None,
                diagnostics: vec![Diagnostic {
                    pos: Pos { line, col },
                    path: "(document)".into(),
                    severity: Severity::Error,
                    message,
                }],
            }
        }
    }
}

/// Reads a cluster file (YAML or JSON: JSON is read as YAML, so positions
/// work for both) with every rule except the provider names: for engines
/// and tests that wire providers of their own names. Operators' files go
/// through [`load_bytes`].
pub fn parse_str(text: &str) -> Loaded {
    decode(text, Decoder::default())
}

/// Decodes `text`, checking provider names against `providers`.
fn decode_with(text: &str, providers: &[&str]) -> Loaded {
    decode(
        text,
        Decoder {
            providers: Some(providers),
            ..Decoder::default()
        },
    )
}

/// Reads the cluster-file form of a resolved spec about to be committed
/// ([`super::commit`]): as [`load_bytes`] (providers drover ships included: an
/// edited export naming a misspelt one is refused at import), except that
/// `size: 0` is accepted. That is a retired group, which `destroy` and
/// `apply --prune` commit so the planner retires its members one safe step
/// at a time, and which no cluster file may declare.
pub(super) fn parse_committed(text: &str) -> Loaded {
    decode(
        text,
        Decoder {
            retired_ok: true,
            providers: Some(PROVIDERS),
            ..Decoder::default()
        },
    )
}

fn decode(text: &str, mut dec: Decoder<'_>) -> Loaded {
    let spec = match yaml::parse(text) {
        Ok(root) => {
            let spec = dec.cluster(&root);
            dec.secrets(&root, "");
            spec
        }
        Err(e) => {
            dec.error(
                e.pos,
                "(document)",
                format!("not valid YAML or JSON: {}", e.message),
            );
            None
        }
    };
    dec.diags.sort();
    let failed = dec.diags.iter().any(|d| d.severity == Severity::Error);
    Loaded {
        spec: if failed { None } else { spec },
        diagnostics: dec.diags,
    }
}

#[derive(Default)]
struct Decoder<'p> {
    diags: Vec<Diagnostic>,
    /// The provider names a group may use; `None` accepts any.
    providers: Option<&'p [&'p str]>,
    /// `size: 0` (a retired group) is accepted: see [`parse_committed`].
    retired_ok: bool,
}

/// `update`'s fields as read, each `None` where it was refused.
struct UpdateDraft {
    strategy: Option<Strategy>,
    /// `None` when absent (or unreadable: already reported).
    min_fault_tolerance: Option<u32>,
    max_in_flight: Option<u32>,
    canaries: Option<u32>,
    watch: Option<Duration>,
    step_timeout: Option<Duration>,
}

/// A mapping's fields, after the unknown ones were reported.
struct Fields<'a> {
    entries: &'a [(String, Pos, Node)],
    pos: Pos,
}

impl<'a> Fields<'a> {
    /// True when the mapping uses a YAML merge key (`<<: *anchor`), which
    /// is reported once: the fields it would bring are not called missing.
    fn merges(&self) -> bool {
        self.entries.iter().any(|(k, _, _)| k == MERGE_KEY)
    }

    /// The value of `key`; an explicit `null` counts as absent.
    fn get(&self, key: &str) -> Option<&'a Node> {
        self.entries
            .iter()
            .find(|(k, _, v)| k == key && !v.is_null())
            .map(|(_, _, v)| v)
    }
}

/// The path of `key` under `path`; an empty key is written `""`, so no
/// finding has an empty path.
fn join(path: &str, key: &str) -> String {
    let key = if key.is_empty() { "\"\"" } else { key };
    if path.is_empty() {
        key.to_string()
    } else {
        format!("{path}.{key}")
    }
}

/// Levenshtein distance, for "did you mean" hints on unknown fields.
fn distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut prev = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let cur = row[j + 1];
            row[j + 1] = (prev + usize::from(ca != *cb)).min(row[j] + 1).min(cur + 1);
            prev = cur;
        }
    }
    row[b.len()]
}

/// The candidate (a field name, possibly `section.field`) that `key` most
/// likely misspells: a small edit distance relative to its length, or one
/// containing the other (`labels` for `engine_labels`).
pub(super) fn closest(key: &str, candidates: impl Iterator<Item = String>) -> Option<String> {
    candidates
        .filter_map(|c| {
            let field = c.rsplit('.').next().unwrap_or(&c);
            let d = distance(key, field);
            let close = d <= 3 && 2 * d <= key.len().max(field.len());
            let contains = key.len() >= 4 && (field.contains(key) || key.contains(field));
            (close || contains).then_some((d, c))
        })
        .min()
        .map(|(_, c)| c)
}

impl Decoder<'_> {
    fn error(&mut self, pos: Pos, path: &str, message: impl Into<String>) {
        self.push(pos, path, Severity::Error, message.into());
    }

    fn warn(&mut self, pos: Pos, path: &str, message: impl Into<String>) {
        self.push(pos, path, Severity::Warning, message.into());
    }

    fn push(&mut self, pos: Pos, path: &str, severity: Severity, message: String) {
        self.diags.push(Diagnostic {
            pos,
            path: path.to_string(),
            severity,
            message,
        });
    }

    /// Opens a mapping and reports each key not in `known`.
    fn fields<'a>(&mut self, node: &'a Node, path: &str, known: &[&str]) -> Option<Fields<'a>> {
        self.fields_nested(node, path, known, &[])
    }

    /// Like [`Self::fields`]; an unknown key that is a field of one of the
    /// `nested` sections gets a hint naming where it belongs.
    fn fields_nested<'a>(
        &mut self,
        node: &'a Node,
        path: &str,
        known: &[&str],
        nested: &[(&str, &[&str])],
    ) -> Option<Fields<'a>> {
        let Node::Map { entries, pos } = node else {
            self.error(
                node.pos(),
                path,
                format!("expected a mapping, found {}", node.kind()),
            );
            return None;
        };
        for (key, kpos, _) in entries {
            if known.contains(&key.as_str()) {
                continue;
            }
            if key == MERGE_KEY {
                self.error(
                    *kpos,
                    &join(path, key),
                    "merge keys (`<<`) are not supported: write the fields out in this mapping",
                );
                continue;
            }
            let hint = closest(key, known.iter().map(|k| k.to_string()))
                .or_else(|| {
                    closest(
                        key,
                        nested.iter().flat_map(|(section, fields)| {
                            fields.iter().map(move |f| format!("{section}.{f}"))
                        }),
                    )
                })
                .map(|k| format!("; did you mean `{k}`?"))
                .unwrap_or_else(|| format!("; known fields: {}", known.join(", ")));
            self.error(
                *kpos,
                &join(path, key),
                format!("unknown field `{key}`{hint}"),
            );
        }
        Some(Fields { entries, pos: *pos })
    }

    fn required<'a>(
        &mut self,
        f: &Fields<'a>,
        key: &str,
        path: &str,
        what: &str,
    ) -> Option<&'a Node> {
        let v = f.get(key);
        if v.is_none() && !f.merges() {
            self.error(f.pos, &join(path, key), format!("missing: {what}"));
        }
        v
    }

    fn string(&mut self, node: &Node, path: &str) -> Option<String> {
        match node {
            Node::Scalar { value, .. } if !node.is_null() => Some(value.clone()),
            _ => {
                self.error(
                    node.pos(),
                    path,
                    format!("expected a string, found {}", node.kind()),
                );
                None
            }
        }
    }

    /// A whole number from `min` to [`MAX_COUNT`].
    fn count(&mut self, node: &Node, path: &str, min: u32) -> Option<u32> {
        let parsed = match node {
            Node::Scalar {
                value,
                quoted: false,
                ..
            } => value.parse::<i64>().ok().or_else(|| {
                // Digits too many for any integer: too large, not "not a number".
                let digits = value.strip_prefix('-').unwrap_or(value);
                (!digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit())).then_some(
                    if value.starts_with('-') {
                        i64::MIN
                    } else {
                        i64::MAX
                    },
                )
            }),
            _ => None,
        };
        match parsed {
            Some(n) if n >= i64::from(min) && n <= i64::from(MAX_COUNT) => Some(n as u32),
            Some(n) if n < i64::from(min) => {
                let found = node_text(node);
                self.error(
                    node.pos(),
                    path,
                    format!("must be at least {min}, found {found}"),
                );
                None
            }
            Some(_) => {
                let found = node_text(node);
                self.error(
                    node.pos(),
                    path,
                    format!(
                        "must be at most {MAX_COUNT} (the largest group drover manages), found {found}"
                    ),
                );
                None
            }
            None => {
                let found = match node {
                    Node::Scalar {
                        value,
                        quoted: true,
                        ..
                    } if value.trim().parse::<i64>().is_ok() => {
                        format!("found the string \"{value}\"; remove the quotes")
                    }
                    Node::Scalar { value, .. } if !node.is_null() => format!("found `{value}`"),
                    _ => format!("found {}", node.kind()),
                };
                self.error(
                    node.pos(),
                    path,
                    format!("expected a whole number, {found}"),
                );
                None
            }
        }
    }

    fn duration(&mut self, node: Option<&Node>, path: &str, default: Duration) -> Option<Duration> {
        let Some(node) = node else {
            return Some(default);
        };
        let text = self.string(node, path)?;
        match parse_duration(&text) {
            Ok(d) => Some(d),
            Err(e) => {
                self.error(node.pos(), path, format!("`{text}` is not a duration: {e}"));
                None
            }
        }
    }

    fn choice<T: Copy>(
        &mut self,
        node: Option<&Node>,
        path: &str,
        options: &[(&str, T)],
        default: T,
    ) -> Option<T> {
        let Some(node) = node else {
            return Some(default);
        };
        let text = self.string(node, path)?;
        if let Some((_, v)) = options.iter().find(|(name, _)| *name == text) {
            return Some(*v);
        }
        let names: Vec<&str> = options.iter().map(|(n, _)| *n).collect();
        self.error(
            node.pos(),
            path,
            format!("`{text}` is not one of: {}", names.join(", ")),
        );
        None
    }
}

/// The largest count a spec may give (a group's size, `max_in_flight`,
/// ...): far above any swarm, low enough that a typo of a few extra digits
/// is caught before anything allocates for it.
pub const MAX_COUNT: u32 = 100_000;
/// The most groups a cluster file may declare.
pub const MAX_GROUPS: usize = 1_000;

/// YAML 1.1's merge key, which drover does not expand: its rules for
/// overriding and ordering are a trap in a file whose every field matters.
const MERGE_KEY: &str = "<<";

/// A scalar's text as written (for messages), or its kind.
fn node_text(node: &Node) -> String {
    match node {
        Node::Scalar { value, .. } => value.clone(),
        other => other.kind().to_string(),
    }
}

const ALLOCATION_FIELDS: &[&str] = &["size", "logical_ids", "zones", "spare_ids"];
const INSTANCE_FIELDS: &[&str] = &["provider", "properties", "plugin"];
const FLAVOR_FIELDS: &[&str] = &["kind", "boot_script", "engine_labels", "drover"];
const UPDATE_FIELDS: &[&str] = &[
    "strategy",
    "min_fault_tolerance",
    "max_in_flight",
    "canaries",
    "watch",
    "step_timeout",
    "on_failure",
    "windows",
    "service_budget",
    "in_place",
];
const IN_PLACE_FIELDS: &[&str] = &["command", "timeout"];
const HEALTH_FIELDS: &[&str] = &[
    "startup_timeout",
    "unhealthy_after",
    "max_attempts",
    "max_unhealthy",
    "max_age",
];
const GC_FIELDS: &[&str] = &["orphan_grace"];
const DRAIN_FIELDS: &[&str] = &["timeout", "on_timeout"];
const ROLLOUT_FIELDS: &[&str] = &["after"];

/// Variables a boot script template may use (see [`BootContext`]).
const TEMPLATE_VARIABLES: &str = "role, cluster_id, group, link, logical_id, address, join_addr, join_addrs, init, engine_labels, drover_url, drover_sha256";

/// Position of the value at `keys` under `node`, if present.
fn field_pos(node: &Node, keys: &[&str]) -> Option<Pos> {
    node_at(node, keys).map(Node::pos)
}

/// The node at `keys` under `node`, if present.
fn node_at<'n>(node: &'n Node, keys: &[&str]) -> Option<&'n Node> {
    let mut cur = node;
    for key in keys {
        let Node::Map { entries, .. } = cur else {
            return None;
        };
        cur = &entries.iter().find(|(k, _, _)| k == key)?.2;
    }
    Some(cur)
}

/// The duration written at `keys` under `node`, read quietly for a rule
/// between sections (a problem with the field itself is reported where
/// it is decoded): `default` when absent, `None` when unreadable.
fn written_duration(node: &Node, keys: &[&str], default: Duration) -> Option<Duration> {
    match node_at(node, keys) {
        None => Some(default),
        Some(n) if n.is_null() => Some(default),
        Some(Node::Scalar { value, .. }) => parse_duration(value).ok(),
        Some(_) => None,
    }
}

/// Position of the `j`th item of `allocation.KEY` of a group node.
fn seq_item_pos(group: &Node, key: &str, j: usize) -> Option<Pos> {
    let Node::Map { entries, .. } = group else {
        return None;
    };
    let alloc = &entries.iter().find(|(k, _, _)| k == "allocation")?.2;
    let Node::Map { entries, .. } = alloc else {
        return None;
    };
    let Node::Seq { items, .. } = &entries.iter().find(|(k, _, _)| k == key)?.2 else {
        return None;
    };
    items.get(j).map(Node::pos)
}
