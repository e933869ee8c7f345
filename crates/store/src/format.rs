//! Record formats: how one record (a section, an etcd key's value) is
//! written, and the check every read makes before trusting it.
//!
//! - Format 1 (session-1 builds): the record's bare JSON.
//! - Format 2: `{"drover_format": 2, "data": <the record's JSON>}`.
//!
//! A reader that meets a format newer than [`FORMAT`] returns
//! [`StoreError::NewerFormat`], one that cannot parse a record returns
//! [`StoreError::Corrupt`]; either way the backends write nothing back, so
//! the record stays exactly as it was for a newer drover or a person to read.
//! Writers use the format negotiated from the controllers' heartbeats
//! ([`drover_spi::write_format`]), so an old controller mid-upgrade keeps
//! reading everything a new one writes.

use drover_spi::{FORMAT, OLDEST_FORMAT, StoreError};
use serde::Serialize;
use serde::de::DeserializeOwned;
use std::sync::atomic::{AtomicU32, Ordering};

/// The envelope key of format 2 and later.
const KEY: &str = "drover_format";

/// The format a store handle writes; starts at the previous format (the
/// safe choice until the heartbeats were read).
#[derive(Debug)]
pub(crate) struct WriteFormat(AtomicU32);

impl Default for WriteFormat {
    fn default() -> Self {
        WriteFormat(AtomicU32::new(OLDEST_FORMAT))
    }
}

impl WriteFormat {
    pub(crate) fn get(&self) -> u32 {
        self.0.load(Ordering::Relaxed)
    }

    pub(crate) fn set(&self, format: u32) {
        self.0
            .store(format.clamp(OLDEST_FORMAT, FORMAT), Ordering::Relaxed);
    }
}

#[derive(Serialize)]
struct Envelope<'a, T> {
    drover_format: u32,
    data: &'a T,
}

/// `value` as a record of `format`.
pub(crate) fn encode<T: Serialize>(value: &T, format: u32) -> Vec<u8> {
    // drover's record types serialise infallibly (string keys, no custom
    // serialisers).
    if format <= 1 {
        serde_json::to_vec(value).unwrap_or_default()
    } else {
        serde_json::to_vec(&Envelope {
            drover_format: format,
            data: value,
        })
        .unwrap_or_default()
    }
}

/// A record of `format` holding `json`, a value's JSON text as is: what
/// [`encode`] gives for that value, without parsing the text back into one.
pub(crate) fn encode_json(json: &[u8], format: u32) -> Vec<u8> {
    if format <= 1 {
        return json.to_vec();
    }
    let head = format!("{{\"{KEY}\":{format},\"data\":");
    let mut out = Vec::with_capacity(head.len() + json.len() + 1);
    out.extend_from_slice(head.as_bytes());
    out.extend_from_slice(json);
    out.push(b'}');
    out
}

/// Reads `record` (named in errors), refusing newer formats and garbage.
pub(crate) fn decode<T: DeserializeOwned>(record: &str, bytes: &[u8]) -> Result<T, StoreError> {
    let corrupt = |why: String| StoreError::Corrupt(format!("{record}: {why}"));
    let value: serde_json::Value =
        serde_json::from_slice(bytes).map_err(|e| corrupt(e.to_string()))?;
    let data = match value {
        serde_json::Value::Object(mut map) if map.contains_key(KEY) => {
            let found = map
                .get(KEY)
                .and_then(serde_json::Value::as_u64)
                .ok_or_else(|| corrupt(format!("{KEY} is not a number")))?;
            if found > u64::from(FORMAT) {
                return Err(StoreError::NewerFormat {
                    record: record.to_string(),
                    found,
                    supported: FORMAT,
                });
            }
            if found < 2 {
                return Err(corrupt(format!("{KEY} {found} is not an enveloped format")));
            }
            map.remove("data")
                .ok_or_else(|| corrupt(format!("format {found} record without data")))?
        }
        bare => bare,
    };
    serde_json::from_value(data).map_err(|e| corrupt(e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_formats_round_trip_and_newer_ones_are_refused() {
        let v = serde_json::json!({"a": [1, 2], "drover": "x"});
        for f in OLDEST_FORMAT..=FORMAT {
            let back: serde_json::Value = decode("r", &encode(&v, f)).unwrap();
            assert_eq!(back, v);
        }
        assert_eq!(encode(&v, 1), serde_json::to_vec(&v).unwrap());
        for f in OLDEST_FORMAT..=FORMAT {
            let text = serde_json::to_vec(&v).unwrap();
            assert_eq!(encode_json(&text, f), encode(&v, f));
        }
        let newer = br#"{"drover_format": 3, "data": {}}"#;
        let e = decode::<serde_json::Value>("journal", newer).unwrap_err();
        assert!(matches!(
            e,
            StoreError::NewerFormat {
                found: 3,
                supported: FORMAT,
                ..
            }
        ));
        assert!(e.to_string().contains("upgrade drover"), "{e}");
        for garbage in [&b"{not json"[..], br#"{"drover_format": "x"}"#, b"[1"] {
            assert!(matches!(
                decode::<serde_json::Value>("journal", garbage),
                Err(StoreError::Corrupt(_))
            ));
        }
    }

    #[test]
    fn write_format_starts_at_the_previous_one() {
        let w = WriteFormat::default();
        assert_eq!(w.get(), OLDEST_FORMAT);
        w.set(99);
        assert_eq!(w.get(), FORMAT);
    }
}
