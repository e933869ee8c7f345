//! Reading a provider's `instance.properties` (opaque JSON to the rest of
//! drover) field by field, so `validate` and the provider report every
//! problem at once, each naming its field: serde's `deny_unknown_fields`
//! stops at the first unknown key, and one mistyped field would hide all
//! the others.

use serde::de::DeserializeOwned;
use serde_json::{Map, Value};

/// Why a group's properties cannot be used, naming the field.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("instance.properties{field}: {problem}")]
pub struct BadProperty {
    /// The field, as `.name` (empty for the whole object).
    pub field: String,
    /// What is wrong and what to do.
    pub problem: String,
}

/// Joins problems into one line (a provider's refusal at provision time).
pub fn describe_properties(problems: &[BadProperty]) -> String {
    problems
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join("; ")
}

/// A mapping of properties being read: unknown keys are reported when it
/// is opened, each field's type when it is taken.
pub(crate) struct Reader<'a> {
    map: Option<&'a Map<String, Value>>,
    /// Prefix of every field named (`.launch_template` for a nested one).
    at: String,
    /// The provider's documentation page, named in type errors.
    doc: &'static str,
    pub(crate) problems: Vec<BadProperty>,
}

impl<'a> Reader<'a> {
    /// Opens `value` (at field `at`, `""` for the properties themselves),
    /// reporting a value that is not a mapping and each key not in `known`.
    pub(crate) fn open(value: &'a Value, at: &str, known: &[&str], doc: &'static str) -> Self {
        let mut r = Reader {
            map: value.as_object(),
            at: at.to_string(),
            doc,
            problems: Vec::new(),
        };
        match r.map {
            None => r.bad("", format!("expected a mapping; see {doc}")),
            Some(map) => {
                for key in map.keys().filter(|k| !known.contains(&k.as_str())) {
                    let hint = super::decode::closest(key, known.iter().map(|k| k.to_string()))
                        .map(|k| format!("did you mean `{k}`?"))
                        .unwrap_or_else(|| format!("known fields: {}", known.join(", ")));
                    r.bad(&format!(".{key}"), format!("unknown field `{key}`; {hint}"));
                }
            }
        }
        r
    }

    /// Records a problem at `field` (`.name`, under this reader's prefix).
    pub(crate) fn bad(&mut self, field: &str, problem: String) {
        self.problems.push(BadProperty {
            field: format!("{}{field}", self.at),
            problem,
        });
    }

    /// The raw value of `key`; `null` counts as absent.
    pub(crate) fn raw(&self, key: &str) -> Option<&'a Value> {
        self.map?.get(key).filter(|v| !v.is_null())
    }

    /// `key` read as `T`: `None` when absent, or when of the wrong type
    /// (reported at the field).
    pub(crate) fn get<T: DeserializeOwned>(&mut self, key: &str) -> Option<T> {
        let v = self.raw(key)?;
        match T::deserialize(v) {
            Ok(t) => Some(t),
            Err(e) => {
                let doc = self.doc;
                self.bad(&format!(".{key}"), format!("{e}; see {doc}"));
                None
            }
        }
    }

    /// `key`, required: reported as missing when absent.
    pub(crate) fn required<T: DeserializeOwned>(&mut self, key: &str, what: &str) -> Option<T> {
        if self.map.is_some() && self.raw(key).is_none() {
            self.bad(&format!(".{key}"), format!("missing: {what}"));
        }
        self.get(key)
    }

    /// The problems, or `value` when there are none.
    pub(crate) fn finish<T>(self, value: T) -> Result<T, Vec<BadProperty>> {
        if self.problems.is_empty() {
            Ok(value)
        } else {
            Err(self.problems)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn every_unknown_key_and_every_mistyped_field_is_named() {
        let v = json!({"a": "x", "bb": 1, "colour": 2, "zzz": 3});
        let mut r = Reader::open(&v, "", &["a", "bb", "color"], "docs/x.md");
        assert_eq!(r.get::<u32>("a"), None);
        assert_eq!(r.get::<u32>("bb"), Some(1));
        let _: Option<String> = r.required("color", "the colour");
        let fields: Vec<&str> = r.problems.iter().map(|p| p.field.as_str()).collect();
        assert_eq!(fields, [".colour", ".zzz", ".a", ".color"]);
        assert!(r.problems[0].problem.contains("did you mean `color`?"));
        let list = json!([1]);
        let nested = Reader::open(&list, ".t", &[], "docs/x.md");
        assert_eq!(nested.problems[0].field, ".t");
    }
}
