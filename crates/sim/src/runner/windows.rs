//! Where a simulated roll's time went: each stretch a group's roll waited
//! for its maintenance windows, which window opens next and when (in its
//! own zone, as `status` shows it). A roll waits when the group has members
//! not on its desired config while every window is closed: the planner
//! starts a roll step only inside one ([`Calendar`]). `drover plan --sim`
//! shows these waits beside the steps, and names the one a run cut short
//! was still in.

use super::Runner;
use drover_core::model::Time;
use drover_core::plan::{Calendar, Plan};

/// One stretch of a group's roll waiting for a maintenance window.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct WindowWait {
    /// The group.
    pub group: String,
    /// The window that opens first, as the spec declares it
    /// (`` `0 2 * * 6` for 4h (Europe/Berlin) ``).
    pub window: String,
    /// Virtual time the wait began, ms.
    pub from: Time,
    /// When the window opens (epoch ms); `None`: never again.
    pub opens_ms: Option<i64>,
    /// The same in the window's own zone (`2026-12-12 02:00 Europe/Berlin`).
    pub opens: Option<String>,
    /// Virtual time the wait ended (a window opened, or the roll no longer
    /// waits); `None` while it still waits when the run ends.
    pub until: Option<Time>,
}

impl Runner {
    /// Records, after a pass, where each group's roll stands against its
    /// windows: a wait begins when a roll is pending and every window is
    /// closed, and ends when one opens or no roll is pending. The calendar
    /// is read again only once what it last said may have changed (a
    /// window opened or closed): a week's wait is tens of thousands of
    /// passes.
    pub(super) fn note_windows(&mut self, plan: &Plan) {
        let wall = i64::try_from(self.world.wall_ms()).unwrap_or(i64::MAX);
        let now = self.world.now;
        for g in &plan.groups {
            let Some(d) = self.desired.groups.iter().find(|d| d.spec.name == g.name) else {
                continue;
            };
            let waits = &mut self.window_waits;
            let open_wait = waits
                .iter_mut()
                .find(|w| w.group == g.name && w.until.is_none());
            if g.current >= g.members || d.spec.update.windows.is_empty() {
                // No roll pending: no wait, and the calendar read afresh
                // when one is.
                if let Some(w) = open_wait {
                    w.until = Some(now);
                }
                self.windows_read.remove(&g.name);
                continue;
            }
            if self
                .windows_read
                .get(&g.name)
                .is_some_and(|until| wall < *until)
            {
                continue;
            }
            let (calm_until, closed) = match Calendar::at(&d.spec.update.windows, wall) {
                Calendar::Closed { window, opens } => {
                    (opens.unwrap_or(i64::MAX), Some((window, opens)))
                }
                Calendar::Open { until, .. } => (until, None),
                Calendar::Always => (i64::MAX, None),
            };
            self.windows_read.insert(g.name.clone(), calm_until);
            match (open_wait, closed) {
                (Some(w), None) => w.until = Some(now),
                (None, Some((window, opens))) => waits.push(WindowWait {
                    group: g.name.clone(),
                    window: window.to_string(),
                    from: now,
                    opens_ms: opens,
                    opens: opens.map(|at| window.local(at)),
                    until: None,
                }),
                _ => {}
            }
        }
    }

    /// The waits still under way: what a run that ended unconverged was
    /// waiting for.
    pub fn waiting_for_windows(&self) -> impl Iterator<Item = &WindowWait> {
        self.window_waits.iter().filter(|w| w.until.is_none())
    }
}

#[cfg(test)]
mod tests {
    use crate::runner::{Faults, Outcome};
    use crate::world::{Timings, WALL_ORIGIN};
    use drover_core::spec::parse_str;

    const DAY: u64 = 24 * 3_600_000;

    fn spec(windows: &str) -> drover_core::spec::ClusterSpec {
        parse_str(&format!(
            "groups:\n- name: m\n  role: manager\n  allocation: {{size: 3}}\n  instance: {{provider: sim}}\n  update:\n    windows: [{windows}]\n"
        ))
        .spec
        .expect("a valid spec")
    }

    fn roll(windows: &str) -> (crate::Runner, Outcome) {
        let before = spec(windows);
        let mut after = before.clone();
        after.groups[0].rollout_after = Some(1);
        let (runner, up, rolled) = crate::rollout(
            &before,
            &after,
            1,
            Faults::default(),
            Timings::default(),
            WALL_ORIGIN,
        );
        assert_eq!(up, Outcome::Converged);
        (runner, rolled)
    }

    #[test]
    fn a_roll_that_waits_for_tomorrows_window_records_the_wait_and_its_end() {
        // WALL_ORIGIN is Saturday 00:00 UTC; the window opens Sunday 02:00.
        let (runner, outcome) = roll("{start: \"0 2 * * 0\", duration: 4h, time_zone: UTC}");
        assert_eq!(outcome, Outcome::Converged);
        let w = &runner.window_waits[0];
        assert_eq!(w.group, "m");
        assert_eq!(w.opens.as_deref(), Some("2026-12-06 02:00 UTC"));
        assert!(w.until.is_some(), "{w:?}");
        assert!(runner.waiting_for_windows().next().is_none());
        // The first step came once the window opened.
        let first = runner.trace.first().expect("steps");
        let opened = w.opens_ms.unwrap() as u64 - WALL_ORIGIN;
        assert!(first.at >= opened, "{} < {opened}", first.at);
        assert!(first.at < opened + DAY);
    }
}
