//! The hash maps a pass builds over its observation (ids, links, timer keys).
//!
//! foldhash rather than std's SipHash: a pass hashes every member's id and
//! link several times, and SipHash was its largest single cost. The keys come
//! from drover's own tags and the provider's and swarm's ids, not from
//! someone choosing collisions; the fixed seed keeps a pass deterministic.

use std::collections::{HashMap, HashSet};

pub(crate) type Hasher = foldhash::fast::FixedState;
pub(crate) type Map<K, V> = HashMap<K, V, Hasher>;
pub(crate) type Set<K> = HashSet<K, Hasher>;
