//! How long ago something happened, as the tables print it.

/// Units, largest first, in seconds.
const UNITS: [(u64, &str); 4] = [(86_400, "d"), (3_600, "h"), (60, "m"), (1, "s")];

/// The age of `at_ms` at `now_ms` in its two largest units (`1m 22s`,
/// `3d 4h`): enough to read, short enough for a column. `at_ms == 0` is a
/// record that carries no time (written by hand, or by a test): `unknown`,
/// not an age counted from 1970. A time ahead of `now_ms` (another host's
/// clock) reads `0s`.
pub fn ago(at_ms: u64, now_ms: u64) -> String {
    if at_ms == 0 {
        return "unknown".into();
    }
    let secs = now_ms.saturating_sub(at_ms) / 1000;
    let Some(i) = UNITS.iter().position(|(len, _)| secs >= *len) else {
        return "0s".into();
    };
    let (len, unit) = UNITS[i];
    let mut out = format!("{}{unit}", secs / len);
    if let Some((next, next_unit)) = UNITS.get(i + 1) {
        let n = (secs % len) / next;
        if n > 0 {
            out += &format!(" {n}{next_unit}");
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::ago;

    #[test]
    fn two_units_at_most_and_no_age_from_the_epoch() {
        let now = 1_800_000_000_000;
        assert_eq!(ago(now - 82_000, now), "1m 22s");
        assert_eq!(ago(now - 5_000, now), "5s");
        assert_eq!(ago(now, now), "0s");
        assert_eq!(ago(now + 9_000, now), "0s");
        assert_eq!(
            ago(now - (3 * 86_400 + 4 * 3_600 + 5 * 60) * 1000, now),
            "3d 4h"
        );
        assert_eq!(ago(now - 3_600_000, now), "1h");
        assert_eq!(ago(now - (86_400 + 30) * 1000, now), "1d");
        assert_eq!(ago(0, now), "unknown");
        assert_eq!(ago(1, now).split(' ').count(), 2, "{}", ago(1, now));
    }
}
