//! `update.windows`: when a group's roll may start new steps.
//!
//! A window is a cron-style start (5 fields: minute, hour, day of month,
//! month, day of week), a duration and an explicit IANA time zone: the
//! operator's calendar ("Saturdays 02:00 Berlin time, for 4 hours"), never
//! the controller host's zone. The pattern and the zone are parsed once,
//! here, so a stored spec that decodes is one the planner can evaluate;
//! the time zone database is jiff's bundled copy, so evaluating a window
//! reads no file (the core does no I/O) and gives the same answer on every
//! controller.

use super::duration::format_duration;
use croner::Cron;
use croner::parser::{CronParser, Seconds, Year};
use jiff::tz::{TimeZone, TimeZoneDatabase};
use serde::{Deserialize, Serialize};
use std::sync::OnceLock;
use std::time::Duration;

/// The longest a window may stay shut between two starts, in days: a
/// year, a leap year's included.
pub const MAX_WAIT_DAYS: i64 = 366;

/// One maintenance window, as the operator wrote it and parsed.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(try_from = "WindowText", into = "WindowText")]
pub struct Window {
    text: WindowText,
    cron: Cron,
    zone: TimeZone,
}

/// A window's fields as written (and as stored: the spec's JSON keeps the
/// operator's text, not a parsed form).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WindowText {
    /// Cron pattern of the window's start, 5 fields.
    pub start: String,
    /// How long the window stays open after each start.
    #[serde(with = "super::humantime_serde_compat")]
    pub duration: Duration,
    /// IANA time zone the pattern is read in (`Europe/Berlin`, `UTC`).
    pub time_zone: String,
}

/// Why a window does not parse; each names the field to change.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WindowError {
    /// The pattern is not a 5-field cron pattern.
    #[error(
        "`{pattern}` is not a 5-field cron pattern (minute hour day-of-month month day-of-week): {why}"
    )]
    Start {
        /// The pattern as written.
        pattern: String,
        /// The parser's reason.
        why: String,
    },
    /// The pattern parses but names no time that exists (e.g. 30 February).
    #[error("`{0}` never matches a date: the window would never open")]
    Never(String),
    /// The zone is not in the time zone database.
    #[error("`{0}` is not an IANA time zone name (e.g. Europe/Berlin, America/New_York, UTC)")]
    Zone(String),
    /// A window of no length never lets a step start.
    #[error("must be longer than zero: a window of no length never lets a step start")]
    ZeroDuration,
    /// The pattern leaves more than a year without a start (29 February):
    /// a roll that waits for it may wait years.
    #[error(
        "`{pattern}` leaves {days} days without a start (none between {from} and {to}): a roll could wait longer than a year for it; use a pattern that opens at least once a year"
    )]
    Rare {
        /// The pattern as written.
        pattern: String,
        /// The longest wait between two starts, in days.
        days: i64,
        /// The start before that wait, in the window's local time.
        from: String,
        /// The start after it.
        to: String,
    },
}

impl WindowError {
    /// The window's field the error is about.
    pub fn field(&self) -> &'static str {
        match self {
            WindowError::Start { .. } | WindowError::Never(_) | WindowError::Rare { .. } => "start",
            WindowError::Zone(_) => "time_zone",
            WindowError::ZeroDuration => "duration",
        }
    }
}

/// jiff's bundled copy of the tz database, opened once per process.
fn zones() -> &'static TimeZoneDatabase {
    static DB: OnceLock<TimeZoneDatabase> = OnceLock::new();
    DB.get_or_init(TimeZoneDatabase::bundled)
}

impl Window {
    /// Parses one window; the first problem found, by field.
    pub fn new(text: WindowText) -> Result<Window, WindowError> {
        let cron = CronParser::builder()
            .seconds(Seconds::Disallowed)
            .year(Year::Disallowed)
            .build()
            .parse(&text.start)
            .map_err(|e| WindowError::Start {
                pattern: text.start.clone(),
                why: e.to_string(),
            })?;
        let zone = zones()
            .get(&text.time_zone)
            .map_err(|_| WindowError::Zone(text.time_zone.clone()))?;
        if text.duration.is_zero() {
            return Err(WindowError::ZeroDuration);
        }
        let window = Window { text, cron, zone };
        // Any fixed moment does: a pattern that matches some day matches one
        // within a few years of any start (leap days included).
        if window.next_start(0).is_none() {
            return Err(WindowError::Never(window.text.start.clone()));
        }
        Ok(window)
    }

    /// `validate`'s rule (not a stored spec's: one read back must still
    /// decode): the window opens at least once in every span of
    /// [`MAX_WAIT_DAYS`] days, whatever the moment a roll starts waiting.
    /// Checked over 28 years from 2001, the Gregorian calendar's cycle of
    /// weekdays and leap years until 2100: probes a year apart each find
    /// the wait they fall in, so no longer wait lies between two probes.
    pub fn opens_yearly(&self) -> Result<(), WindowError> {
        const DAY_MS: i64 = 86_400_000;
        const CYCLE_START_MS: i64 = 978_307_200_000; // 2001-01-01T00:00:00Z
        let probes = (0..=29).map(|y| CYCLE_START_MS + y * 365 * DAY_MS);
        let longest = probes
            .filter_map(|p| Some((self.last_start(p)?, self.next_start(p)?)))
            .max_by_key(|(from, to)| to - from);
        match longest {
            Some((from, to)) if to - from > MAX_WAIT_DAYS * DAY_MS => Err(WindowError::Rare {
                pattern: self.text.start.clone(),
                days: (to - from) / DAY_MS,
                from: self.local(from),
                to: self.local(to),
            }),
            _ => Ok(()),
        }
    }

    /// The fields as written.
    pub fn text(&self) -> &WindowText {
        &self.text
    }

    /// How long it stays open.
    pub fn duration(&self) -> Duration {
        self.text.duration
    }

    /// The first start strictly after `ms` (epoch ms), if the pattern
    /// matches any time jiff can represent.
    pub fn next_start(&self, ms: i64) -> Option<i64> {
        self.start_near(ms, true)
    }

    /// The last start at or before `ms` (epoch ms).
    pub fn last_start(&self, ms: i64) -> Option<i64> {
        self.start_near(ms, false)
    }

    fn start_near(&self, ms: i64, forward: bool) -> Option<i64> {
        let at = jiff::Timestamp::from_millisecond(ms)
            .ok()?
            .to_zoned(self.zone.clone());
        let found = if forward {
            self.cron.find_next_occurrence(&at, false)
        } else {
            self.cron.find_previous_occurrence(&at, true)
        };
        found.ok().map(|z| z.timestamp().as_millisecond())
    }

    /// `ms` as the window's local time, e.g. `2026-12-05 02:00 Europe/Berlin`.
    pub fn local(&self, ms: i64) -> String {
        jiff::Timestamp::from_millisecond(ms).map_or_else(
            |_| format!("{ms} ms"),
            |t| {
                format!(
                    "{} {}",
                    t.to_zoned(self.zone.clone()).strftime("%Y-%m-%d %H:%M"),
                    self.text.time_zone
                )
            },
        )
    }
}

impl std::fmt::Display for Window {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "`{}` for {} ({})",
            self.text.start,
            format_duration(self.text.duration),
            self.text.time_zone
        )
    }
}

impl PartialEq for Window {
    fn eq(&self, other: &Self) -> bool {
        self.text == other.text
    }
}

impl Eq for Window {}

impl TryFrom<WindowText> for Window {
    type Error = WindowError;
    fn try_from(text: WindowText) -> Result<Window, WindowError> {
        Window::new(text)
    }
}

impl From<Window> for WindowText {
    fn from(w: Window) -> WindowText {
        w.text
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text(start: &str, duration: Duration, zone: &str) -> WindowText {
        WindowText {
            start: start.into(),
            duration,
            time_zone: zone.into(),
        }
    }

    const H: Duration = Duration::from_secs(3600);

    #[test]
    fn each_bad_field_is_named() {
        let cases = [
            (text("0 2 * *", H, "UTC"), "start"),
            (text("0 25 * * *", H, "UTC"), "start"),
            (text("0 0 2 * * *", H, "UTC"), "start"),
            (text("0 2 30 2 *", H, "UTC"), "start"),
            (text("0 2 * * *", H, "Mars/Olympus"), "time_zone"),
            (text("0 2 * * *", Duration::ZERO, "UTC"), "duration"),
        ];
        for (t, field) in cases {
            let e = Window::new(t.clone()).expect_err(&t.start);
            assert_eq!(e.field(), field, "{t:?}: {e}");
        }
    }

    #[test]
    fn a_window_opens_at_least_once_a_year() {
        for rare in ["0 2 29 2 *", "30 23 29 FEB *"] {
            let w = Window::new(text(rare, H, "Europe/Berlin")).expect(rare);
            let e = w.opens_yearly().expect_err(rare);
            assert_eq!(e.field(), "start");
            assert!(e.to_string().contains("days without a start"), "{e}");
        }
        for yearly in [
            "0 2 * * 6",
            "0 0 1 1 *",
            "0 2 31 12 *",
            "0 2 28 2 *",
            "* * * * *",
        ] {
            let w = Window::new(text(yearly, H, "Pacific/Kiritimati")).expect(yearly);
            assert_eq!(w.opens_yearly(), Ok(()), "{yearly}");
        }
    }

    #[test]
    fn starts_are_read_in_the_windows_zone() {
        // 2026-12-04 12:00 UTC; Berlin is UTC+1 in December.
        let now = 1_796_385_600_000;
        let w = Window::new(text("0 2 * * 6", 4 * H, "Europe/Berlin")).unwrap();
        let next = w.next_start(now).unwrap();
        assert_eq!(w.local(next), "2026-12-05 02:00 Europe/Berlin");
        assert_eq!(next, 1_796_432_400_000, "01:00 UTC");
        assert!(w.last_start(now).unwrap() < now - 6 * 24 * 3_600_000);
        assert_eq!(
            w.last_start(next),
            Some(next),
            "a start is its own last start"
        );
    }

    #[test]
    fn stored_as_written() {
        let w = Window::new(text("30 1 * * 1-5", 2 * H, "UTC")).unwrap();
        let json = serde_json::to_string(&w).unwrap();
        assert_eq!(
            json,
            r#"{"start":"30 1 * * 1-5","duration":"2h","time_zone":"UTC"}"#
        );
        let back: Window = serde_json::from_str(&json).unwrap();
        assert_eq!(back, w);
        let bad = json.replace("UTC", "Nowhere/Land");
        assert!(serde_json::from_str::<Window>(&bad).is_err());
    }
}
