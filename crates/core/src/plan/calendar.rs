//! Maintenance windows (`update.windows`): a roll starts a new step only
//! while one of its group's windows is open.
//!
//! Only the *start* of a roll operation is gated, in the roll stage: an
//! operation already begun runs to its end after the window closes (a
//! half-replaced member is worse than a late one), and healing, reaping and
//! filling never wait. The next roll step waits for the next window, and
//! `wake_at` is set to its start so the controller replans right then.
//! Windows are read against the pass's wall-clock time
//! ([`PlanInput::wall_ms`](super::PlanInput::wall_ms)), never the
//! controller's monotonic timer clock.

use super::group::Planner;
use crate::spec::{GroupSpec, Window};
use std::fmt;
use std::time::Duration;

/// Where a group's windows stand at one moment (public for the simulator,
/// which says which window a roll waited for and when it opened).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Calendar<'w> {
    /// The group declares no window: always open.
    Always,
    /// `window` is open until `until` (epoch ms; the latest end among the
    /// windows open now).
    Open { window: &'w Window, until: i64 },
    /// All are closed; `window` opens first, at `opens` (epoch ms), or
    /// never again (`None`: past what time can represent).
    Closed {
        window: &'w Window,
        opens: Option<i64>,
    },
}

impl<'w> Calendar<'w> {
    /// `windows` at `wall` (epoch ms).
    pub fn at(windows: &'w [Window], wall: i64) -> Calendar<'w> {
        let open = windows
            .iter()
            .filter_map(|w| Some((w, w.last_start(wall)? + ms(w.duration()))))
            .filter(|(_, end)| *end > wall)
            .max_by_key(|(_, end)| *end);
        if let Some((window, until)) = open {
            return Calendar::Open { window, until };
        }
        windows
            .iter()
            .map(|w| (w, w.next_start(wall)))
            .min_by_key(|(_, opens)| opens.unwrap_or(i64::MAX))
            .map_or(Calendar::Always, |(window, opens)| Calendar::Closed {
                window,
                opens,
            })
    }

    /// One line for `status`: when the windows are next open.
    pub(crate) fn describe(&self) -> Option<String> {
        match *self {
            Calendar::Always => None,
            Calendar::Open { window, until } => {
                Some(format!("window open until {}", window.local(until)))
            }
            Calendar::Closed {
                window,
                opens: Some(at),
            } => Some(format!("next window at {}", window.local(at))),
            Calendar::Closed { opens: None, .. } => Some("no window opens again".into()),
        }
    }
}

fn ms(d: Duration) -> i64 {
    i64::try_from(d.as_millis()).unwrap_or(i64::MAX)
}

impl Planner<'_> {
    /// The group's windows at this pass's wall-clock time.
    pub(crate) fn calendar<'s>(&self, spec: &'s GroupSpec) -> Calendar<'s> {
        Calendar::at(&spec.update.windows, self.wall())
    }

    /// This pass's wall-clock time, as jiff counts it.
    pub(crate) fn wall(&self) -> i64 {
        i64::try_from(self.facts.input.wall_ms).unwrap_or(i64::MAX)
    }

    /// Why `spec`'s roll may not start a step now (every window closed), with
    /// a wake-up at the next start; `None` while a window is open.
    pub(crate) fn window_closed<'s>(&self, spec: &'s GroupSpec) -> Option<WindowClosed<'s>> {
        let Calendar::Closed { window, opens } = self.calendar(spec) else {
            return None;
        };
        if let Some(at) = opens {
            let wait = u64::try_from(at - self.wall()).unwrap_or(0);
            self.clock.wake_within(Duration::from_millis(wait));
        }
        Some(WindowClosed { window, opens })
    }
}

/// Why a roll waits: every window is closed; `window` opens first, at
/// `opens` (epoch ms), or never again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct WindowClosed<'w> {
    window: &'w Window,
    opens: Option<i64>,
}

impl fmt::Display for WindowClosed<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let window = self.window;
        match self.opens {
            None => write!(
                f,
                "the roll waits: maintenance window {window} never opens again"
            ),
            Some(at) => write!(
                f,
                "the roll waits for the maintenance window at {} ({window}); healing never waits",
                window.local(at)
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spec::WindowText;

    const H: i64 = 3_600_000;
    /// 2026-12-05 00:00 UTC, a Saturday.
    const SAT: i64 = 1_796_428_800_000;

    fn window(start: &str, hours: u64, zone: &str) -> Window {
        Window::new(WindowText {
            start: start.into(),
            duration: Duration::from_secs(hours * 3600),
            time_zone: zone.into(),
        })
        .unwrap()
    }

    #[test]
    fn open_from_each_start_for_its_duration() {
        // Saturdays 02:00-06:00 UTC.
        let ws = [window("0 2 * * 6", 4, "UTC")];
        assert!(
            matches!(Calendar::at(&ws, SAT + H), Calendar::Closed { opens: Some(o), .. } if o == SAT + 2 * H)
        );
        assert_eq!(
            Calendar::at(&ws, SAT + 2 * H),
            Calendar::Open {
                window: &ws[0],
                until: SAT + 6 * H
            }
        );
        assert!(matches!(
            Calendar::at(&ws, SAT + 6 * H - 1),
            Calendar::Open { .. }
        ));
        assert!(
            matches!(Calendar::at(&ws, SAT + 6 * H), Calendar::Closed { opens: Some(o), .. } if o == SAT + (7 * 24 + 2) * H),
            "closed at its end, next week's start next"
        );
    }

    #[test]
    fn the_earliest_window_opens_first_and_the_latest_end_counts() {
        let ws = [window("0 2 * * *", 2, "UTC"), window("0 3 * * *", 5, "UTC")];
        assert!(
            matches!(Calendar::at(&ws, SAT + H), Calendar::Closed { window, .. } if window == &ws[0])
        );
        assert!(
            matches!(Calendar::at(&ws, SAT + 3 * H), Calendar::Open { until, .. } if until == SAT + 8 * H)
        );
        assert_eq!(Calendar::at(&[], SAT), Calendar::Always);
    }

    #[test]
    fn status_names_the_local_time() {
        let ws = [window("0 2 * * 6", 4, "Europe/Berlin")];
        assert_eq!(
            Calendar::at(&ws, SAT - 12 * H).describe().as_deref(),
            Some("next window at 2026-12-05 02:00 Europe/Berlin")
        );
        assert_eq!(
            Calendar::at(&ws, SAT + H).describe().as_deref(),
            Some("window open until 2026-12-05 06:00 Europe/Berlin")
        );
    }

    #[test]
    fn a_closed_window_is_rendered_from_when_it_opens() {
        let ws = [window("0 2 * * 6", 4, "UTC")];
        let opens = WindowClosed {
            window: &ws[0],
            opens: Some(SAT + 2 * H),
        };
        assert_eq!(
            opens.to_string(),
            format!(
                "the roll waits for the maintenance window at 2026-12-05 02:00 UTC ({}); healing never waits",
                ws[0]
            )
        );
        let never = WindowClosed {
            window: &ws[0],
            opens: None,
        };
        assert_eq!(
            never.to_string(),
            format!(
                "the roll waits: maintenance window {} never opens again",
                ws[0]
            )
        );
    }
}
