//! Tag and engine-label names drover puts on everything it makes, and the
//! type that holds a machine's tags.
//!
//! A planning pass reads drover's own tags of every member. Kept in a map of
//! strings, each read is a search comparing key strings on memory that is
//! cold in large groups (a tree node and a string allocation per key): at
//! 100 000 members that search, not the planning logic, was the larger part
//! of a pass. [`Tags`] keeps drover's tags in fixed slots instead (reading
//! one is an index), and every other tag in a map, with the behaviour of the
//! map of strings it replaces.

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::collections::BTreeMap;
use std::fmt;

/// drover's own tags, each with its slot in [`Tags`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Key {
    /// [`ADOPTED`].
    Adopted,
    /// [`ATTEMPT`].
    Attempt,
    /// [`CLUSTER`].
    Cluster,
    /// [`CONFIG`].
    Config,
    /// [`GROUP`].
    Group,
    /// [`LINK`].
    Link,
    /// [`LOGICAL_ID`].
    LogicalId,
    /// [`ZONE`].
    Zone,
}

impl Key {
    /// Every key, in the order of their names (so of the slots).
    const ALL: [Key; 8] = [
        Key::Adopted,
        Key::Attempt,
        Key::Cluster,
        Key::Config,
        Key::Group,
        Key::Link,
        Key::LogicalId,
        Key::Zone,
    ];

    /// The tag's name.
    pub const fn name(self) -> &'static str {
        match self {
            Key::Adopted => "drover.adopted",
            Key::Attempt => "drover.attempt",
            Key::Cluster => "drover.cluster",
            Key::Config => "drover.config",
            Key::Group => "drover.group",
            Key::Link => "drover.link",
            Key::LogicalId => "drover.logical-id",
            Key::Zone => "drover.zone",
        }
    }

    /// The key named `name`, if it is one of drover's.
    fn named(name: &str) -> Option<Key> {
        // All of drover's names share this prefix: other tags are told
        // apart by it without comparing them to every name.
        if !name.starts_with("drover.") {
            return None;
        }
        Key::ALL.into_iter().find(|k| k.name() == name)
    }
}

/// The cluster id made at bootstrap; every ownership decision checks it.
pub const CLUSTER: &str = Key::Cluster.name();
/// The group name.
pub const GROUP: &str = Key::Group.name();
/// The link token joining instance and node (also an engine label).
pub const LINK: &str = Key::Link.name();
/// The config hash the instance was built from.
pub const CONFIG: &str = Key::Config.name();
/// The slot's logical id (pets).
pub const LOGICAL_ID: &str = Key::LogicalId.name();
/// The slot's zone.
pub const ZONE: &str = Key::Zone.name();
/// Which machine for its slot this is, when not the first (see
/// `journal::Target::attempt`).
pub const ATTEMPT: &str = Key::Attempt.name();
/// Set on instances that were adopted rather than created: the config
/// hash of the spec they were adopted under (they carry no
/// [`CONFIG`] tag: drover did not build them).
pub const ADOPTED: &str = Key::Adopted.name();

/// A machine's tags: a map from names to values, with drover's own in fixed
/// slots. Iterates, compares and serialises like the `BTreeMap<String,
/// String>` it replaces (a JSON object, keys in order).
#[derive(Clone, Default, PartialEq, Eq)]
pub struct Tags {
    /// drover's tags, by `Key as usize`.
    own: [Option<String>; Key::ALL.len()],
    /// Every other tag (the provider's), which a pass never reads.
    other: BTreeMap<String, String>,
}

impl Tags {
    /// No tags.
    pub fn new() -> Self {
        Self::default()
    }

    /// One of drover's tags (an index, no search).
    pub fn own(&self, key: Key) -> Option<&str> {
        self.own[key as usize].as_deref()
    }

    /// The tag named `key`.
    pub fn get(&self, key: &str) -> Option<&str> {
        match Key::named(key) {
            Some(k) => self.own(k),
            None => self.other.get(key).map(String::as_str),
        }
    }

    /// True when a tag named `key` is set.
    pub fn contains_key(&self, key: &str) -> bool {
        self.get(key).is_some()
    }

    /// Sets tag `key` to `value`; returns the value it replaces.
    pub fn insert(&mut self, key: String, value: String) -> Option<String> {
        match Key::named(&key) {
            Some(k) => self.own[k as usize].replace(value),
            None => self.other.insert(key, value),
        }
    }

    /// Removes tag `key`; returns its value.
    pub fn remove(&mut self, key: &str) -> Option<String> {
        match Key::named(key) {
            Some(k) => self.own[k as usize].take(),
            None => self.other.remove(key),
        }
    }

    /// Removes every tag.
    pub fn clear(&mut self) {
        *self = Self::default();
    }

    /// How many tags are set.
    pub fn len(&self) -> usize {
        self.own.iter().flatten().count() + self.other.len()
    }

    /// True when no tag is set.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Every tag, in the order of their names.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &str)> {
        let own = Key::ALL
            .into_iter()
            .filter_map(|k| Some((k.name(), self.own(k)?)));
        let other = self.other.iter().map(|(k, v)| (k.as_str(), v.as_str()));
        let mut all: Vec<(&str, &str)> = own.chain(other).collect();
        all.sort_unstable_by_key(|(k, _)| *k);
        all.into_iter()
    }
}

impl<K: Into<String>, V: Into<String>> Extend<(K, V)> for Tags {
    fn extend<I: IntoIterator<Item = (K, V)>>(&mut self, pairs: I) {
        for (k, v) in pairs {
            self.insert(k.into(), v.into());
        }
    }
}

impl<K: Into<String>, V: Into<String>> FromIterator<(K, V)> for Tags {
    fn from_iter<I: IntoIterator<Item = (K, V)>>(pairs: I) -> Self {
        let mut tags = Tags::new();
        tags.extend(pairs);
        tags
    }
}

impl From<BTreeMap<String, String>> for Tags {
    fn from(map: BTreeMap<String, String>) -> Self {
        map.into_iter().collect()
    }
}

impl<K: Into<String>, V: Into<String>, const N: usize> From<[(K, V); N]> for Tags {
    fn from(pairs: [(K, V); N]) -> Self {
        pairs.into_iter().collect()
    }
}

impl From<&Tags> for BTreeMap<String, String> {
    fn from(tags: &Tags) -> Self {
        tags.iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }
}

impl fmt::Debug for Tags {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_map().entries(self.iter()).finish()
    }
}

impl Serialize for Tags {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_map(self.iter())
    }
}

impl<'de> Deserialize<'de> for Tags {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        BTreeMap::<String, String>::deserialize(d).map(Tags::from)
    }
}

#[cfg(test)]
mod tests {
    use super::{Key, Tags};
    use std::collections::BTreeMap;

    fn pairs() -> BTreeMap<String, String> {
        [
            ("drover.link", "l-1"),
            ("Name", "web-1"),
            ("drover.cluster", "c1"),
            ("drover.zone", "a"),
            ("zeta", "z"),
            ("drover.x", "not drover's"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
    }

    /// Whatever goes in, `Tags` answers, iterates and serialises as the map
    /// of strings it replaces.
    #[test]
    fn behaves_like_a_map_of_strings() {
        let map = pairs();
        let mut tags = Tags::from(map.clone());
        assert_eq!(BTreeMap::from(&tags), map);
        assert_eq!(
            serde_json::to_string(&tags).unwrap(),
            serde_json::to_string(&map).unwrap()
        );
        assert_eq!(format!("{tags:?}"), format!("{map:?}"));
        let back: Tags = serde_json::from_str(&serde_json::to_string(&map).unwrap()).unwrap();
        assert_eq!(back, tags);
        for k in map.keys().map(String::as_str).chain(["drover.group", "y"]) {
            assert_eq!(tags.get(k), map.get(k).map(String::as_str), "{k}");
        }
        assert_eq!(tags.len(), map.len());
        assert_eq!(tags.own(Key::Link), Some("l-1"));
        assert_eq!(
            tags.insert("drover.link".into(), "l-2".into()).as_deref(),
            Some("l-1")
        );
        assert_eq!(tags.remove("drover.zone").as_deref(), Some("a"));
        assert_eq!(tags.remove("zeta").as_deref(), Some("z"));
        assert_eq!(tags.own(Key::Zone), None);
        assert_eq!(tags.len(), map.len() - 2);
        tags.clear();
        assert!(tags.is_empty() && tags.iter().next().is_none());
    }

    #[test]
    fn every_key_has_the_slot_of_its_name() {
        for (slot, k) in Key::ALL.into_iter().enumerate() {
            assert_eq!(k as usize, slot);
            assert_eq!(Key::named(k.name()), Some(k));
        }
        let names: Vec<&str> = Key::ALL.iter().map(|k| k.name()).collect();
        assert!(names.is_sorted(), "slots follow the names' order");
    }
}
