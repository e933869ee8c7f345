//! The one duration grammar of cluster files.
//!
//! A duration is one or more `<whole number><unit>` parts, largest unit
//! first, each unit at most once, optionally separated by spaces: `30s`,
//! `5m`, `1h30m`, `1h 30m`, `500ms`, `2d`. Units are `ms`, `s`, `m`, `h`,
//! `d`, lower case only. Everything else is refused with what to write
//! instead, because every looser reading is a trap: `2M` would be two
//! months to one library and two minutes to the operator, `30S` and
//! `5 min` look fine and mean nothing certain. Months and years are not
//! units (their length varies); write days.

use std::fmt;
use std::time::Duration;

/// The units, largest first, with their length in milliseconds.
const UNITS: &[(&str, u64)] = &[
    ("d", 86_400_000),
    ("h", 3_600_000),
    ("m", 60_000),
    ("s", 1_000),
    ("ms", 1),
];

/// The longest duration a cluster file may give: far above any timer, low
/// enough that a few extra digits are caught as a typo.
pub const MAX_DURATION: Duration = Duration::from_secs(365 * 86_400);

/// Why a text is not a duration; the `Display` says what to write instead.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DurationError {
    /// Nothing but spaces.
    Empty,
    /// A number without a unit (`30`).
    NoUnit(String),
    /// A space between number and unit (`5 min`).
    Spaced(String),
    /// A part that does not start with a whole number (`h`, `soon`).
    NotAWholeNumber(String),
    /// A sign (`-5s`, `+5s`).
    Signed(String),
    /// A fraction (`1.5h`).
    Fraction(String),
    /// A unit not in the grammar (`30S`, `2M`, `5 min`, `1y`).
    UnknownUnit {
        /// The unit as written.
        unit: String,
        /// What to write instead, when there is an obvious fix.
        instead: Option<&'static str>,
    },
    /// A unit given twice or after a smaller one (`30s1m`).
    UnitOrder(String),
    /// Longer than [`MAX_DURATION`].
    TooLong,
}

impl fmt::Display for DurationError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DurationError::Empty => write!(f, "it is empty"),
            DurationError::NoUnit(n) => write!(f, "a unit is needed; write e.g. {n}s"),
            DurationError::Spaced(part) => write!(
                f,
                "`{part}` has a space before its unit; write the unit right after the number, as one of ms, s, m, h, d (e.g. 5m)"
            ),
            DurationError::NotAWholeNumber(part) => write!(
                f,
                "`{part}` does not start with a whole number; write e.g. 30s, 5m or 1h30m"
            ),
            DurationError::Signed(part) => write!(
                f,
                "`{part}` has a sign; a duration is never negative: write e.g. 5m"
            ),
            DurationError::Fraction(part) => write!(
                f,
                "`{part}` is a fraction; write whole units, e.g. 1h30m for 1.5h"
            ),
            DurationError::UnknownUnit { unit, instead } => {
                write!(f, "`{unit}` is not a unit")?;
                if let Some(fix) = instead {
                    write!(f, " ({fix})")?;
                }
                write!(f, "; the units are ms, s, m, h and d, in lower case")
            }
            DurationError::UnitOrder(unit) => write!(
                f,
                "`{unit}` is repeated or comes after a smaller unit; write the largest unit first, each once, e.g. 1h30m"
            ),
            DurationError::TooLong => write!(
                f,
                "it is longer than the {} days a duration may be",
                MAX_DURATION.as_secs() / 86_400
            ),
        }
    }
}

impl std::error::Error for DurationError {}

/// What an operator most likely meant by a unit outside the grammar.
fn instead(unit: &str) -> Option<&'static str> {
    Some(match unit {
        "M" => "minutes are m, and months are not a unit: write days, e.g. 60d",
        "y" | "Y" | "year" | "years" | "mo" | "month" | "months" | "w" | "week" | "weeks" => {
            "months, weeks and years are not units: write days, e.g. 30d"
        }
        "S" | "sec" | "secs" | "second" | "seconds" => "write s for seconds",
        "min" | "mins" | "minute" | "minutes" => "write m for minutes",
        "H" | "hr" | "hrs" | "hour" | "hours" => "write h for hours",
        "D" | "day" | "days" => "write d for days",
        "MS" | "Ms" | "msec" | "millis" => "write ms for milliseconds",
        "us" | "µs" | "ns" => "drover's timers are not that fine: write ms",
        _ => return None,
    })
}

/// Writes `d` in the grammar (`1h30m`, `500ms`, `0s`), so what drover
/// prints an operator can paste back.
pub fn format_duration(d: Duration) -> String {
    let mut left = d.as_millis();
    let mut out = String::new();
    for (unit, len) in UNITS {
        let n = left / u128::from(*len);
        if n > 0 {
            out += &format!("{n}{unit}");
            left -= n * u128::from(*len);
        }
    }
    if out.is_empty() {
        out = "0s".into();
    }
    out
}

/// Reads `text` by the grammar of this module.
pub fn parse_duration(text: &str) -> Result<Duration, DurationError> {
    let mut rest = text.trim();
    if rest.is_empty() {
        return Err(DurationError::Empty);
    }
    let mut total: u64 = 0;
    // Index into UNITS of the last unit read: the next must be smaller.
    let mut last: Option<usize> = None;
    while !rest.is_empty() {
        let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
        let part_end = rest.find(char::is_whitespace).unwrap_or(rest.len());
        if rest.starts_with(['-', '+']) {
            return Err(DurationError::Signed(rest[..part_end].into()));
        }
        if digits == 0 {
            return Err(DurationError::NotAWholeNumber(rest[..part_end].into()));
        }
        let unit_len = rest[digits..]
            .find(|c: char| c.is_ascii_digit() || c.is_whitespace())
            .unwrap_or(rest.len() - digits);
        let unit = &rest[digits..digits + unit_len];
        let after = rest[digits + unit_len..].trim_start();
        if unit.is_empty() {
            // `5 min`: the unit is the next word.
            return match after.split_whitespace().next() {
                Some(word) if !word.starts_with(|c: char| c.is_ascii_digit()) => {
                    Err(DurationError::Spaced(format!("{} {word}", &rest[..digits])))
                }
                _ => Err(DurationError::NoUnit(rest[..digits].into())),
            };
        }
        if unit.starts_with(['.', ',']) {
            return Err(DurationError::Fraction(rest[..part_end].into()));
        }
        let Some(index) = UNITS.iter().position(|(u, _)| *u == unit) else {
            return Err(DurationError::UnknownUnit {
                unit: unit.into(),
                instead: instead(unit),
            });
        };
        if last.is_some_and(|l| index <= l) {
            return Err(DurationError::UnitOrder(unit.into()));
        }
        last = Some(index);
        let n: u64 = rest[..digits].parse().map_err(|_| DurationError::TooLong)?;
        total = n
            .checked_mul(UNITS[index].1)
            .and_then(|ms| total.checked_add(ms))
            .ok_or(DurationError::TooLong)?;
        rest = after;
    }
    let d = Duration::from_millis(total);
    if d > MAX_DURATION {
        return Err(DurationError::TooLong);
    }
    Ok(d)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(text: &str) -> u64 {
        parse_duration(text).unwrap().as_millis() as u64
    }

    #[test]
    fn the_grammar_reads_whole_numbers_with_lower_case_units_largest_first() {
        assert_eq!(ms("30s"), 30_000);
        assert_eq!(ms("5m"), 300_000);
        assert_eq!(ms("1h30m"), 5_400_000);
        assert_eq!(ms("1h 30m"), 5_400_000);
        assert_eq!(ms("500ms"), 500);
        assert_eq!(ms("1m500ms"), 60_500);
        assert_eq!(ms("2d"), 172_800_000);
        assert_eq!(ms("0s"), 0);
        assert_eq!(ms("365d"), MAX_DURATION.as_millis() as u64);
    }

    #[test]
    fn drover_prints_durations_largest_unit_first() {
        assert_eq!(format_duration(Duration::from_secs(5_430)), "1h30m30s");
        assert_eq!(
            format_duration(Duration::from_millis(90_061_500)),
            "1d1h1m1s500ms"
        );
        assert_eq!(format_duration(Duration::ZERO), "0s");
    }

    proptest::proptest! {
        /// Any text is read or refused, never a panic (multi-byte units,
        /// digits past any integer, ...).
        #[test]
        fn any_text_is_read_or_refused(text in "\\PC{0,24}") {
            let _ = parse_duration(&text);
        }

        /// Every duration drover may hold prints and reads back exactly.
        #[test]
        fn printing_and_reading_round_trip(ms in 0..=MAX_DURATION.as_millis() as u64) {
            let d = Duration::from_millis(ms);
            proptest::prop_assert_eq!(parse_duration(&format_duration(d)), Ok(d));
        }
    }

    #[test]
    fn ambiguous_or_loose_units_are_refused_saying_what_to_write() {
        let err = |t: &str| parse_duration(t).unwrap_err().to_string();
        assert!(err("2M").contains("minutes are m"), "{}", err("2M"));
        assert!(err("30S").contains("write s for seconds"));
        assert!(err("5 min").contains("`5 min` has a space before its unit"));
        assert!(err("5min").contains("write m for minutes"));
        assert!(err("1y").contains("write days"));
        assert!(err("30").contains("write e.g. 30s"));
        assert!(err("1.5h").contains("is a fraction"));
        assert!(err("-5s").contains("never negative"));
        assert!(err("30s1m").contains("largest unit first"));
        assert!(err("1m1m").contains("largest unit first"));
        assert!(err("366d").contains("longer than the 365 days"));
        assert!(err("99999999999999999999999s").contains("longer than"));
        assert!(err("  ").contains("empty"));
    }
}
