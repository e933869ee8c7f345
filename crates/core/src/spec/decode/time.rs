//! The calendar's fields: `update.windows` and `health.max_age`, and the
//! rules between them and the time a replacement takes.

use super::{Decoder, field_pos, join, node_at, written_duration};
use crate::spec::{Allocation, Role, Window, WindowText, defaults, format_duration};
use crate::yaml::Node;
use std::time::Duration;

const WINDOW_FIELDS: &[&str] = &["start", "duration", "time_zone"];

impl Decoder<'_> {
    /// `update.windows`: a list of windows (absent: always open).
    pub(super) fn windows(&mut self, node: Option<&Node>, path: &str) -> Option<Vec<Window>> {
        let Some(node) = node else {
            return Some(Vec::new());
        };
        let Node::Seq { items, .. } = node else {
            self.error(
                node.pos(),
                path,
                format!("expected a list of windows, found {}", node.kind()),
            );
            return None;
        };
        let windows: Vec<Option<Window>> = items
            .iter()
            .enumerate()
            .map(|(i, item)| self.window(item, &format!("{path}[{i}]")))
            .collect();
        windows.into_iter().collect()
    }

    /// One window; a field the parse refuses is reported where it is written.
    fn window(&mut self, node: &Node, path: &str) -> Option<Window> {
        let f = self.fields(node, path, WINDOW_FIELDS)?;
        let start = self
            .required(
                &f,
                "start",
                path,
                "the window's start, a 5-field cron pattern such as \"0 2 * * 6\"",
            )
            .and_then(|n| self.string(n, &join(path, "start")));
        let duration = self
            .required(
                &f,
                "duration",
                path,
                "how long the window stays open, such as 4h",
            )
            .and_then(|n| self.duration(Some(n), &join(path, "duration"), Duration::ZERO));
        let time_zone = self
            .required(
                &f,
                "time_zone",
                path,
                "the IANA time zone the start is read in, such as Europe/Berlin or UTC",
            )
            .and_then(|n| self.string(n, &join(path, "time_zone")));
        let text = WindowText {
            start: start?,
            duration: duration?,
            time_zone: time_zone?,
        };
        Window::new(text)
            .and_then(|w| w.opens_yearly().map(|()| w))
            .map_err(|e| {
                let at = f.get(e.field()).map_or(f.pos, Node::pos);
                self.error(at, &join(path, e.field()), e.to_string());
            })
            .ok()
    }

    /// `health.max_age`: absent means machines are kept however old.
    pub(super) fn max_age(&mut self, node: Option<&Node>, path: &str) -> Option<Option<Duration>> {
        let Some(node) = node else {
            return Some(None);
        };
        let age = self.duration(Some(node), path, Duration::ZERO)?;
        if age.is_zero() {
            self.error(
                node.pos(),
                path,
                "must be longer than zero: every machine would be replaced as soon as it is made; remove the field to keep machines however old",
            );
            return None;
        }
        Some(Some(age))
    }

    /// A window shorter than `watch` lets at most one step start per
    /// opening (each step watches its new member that long before the
    /// next may start): legal, and a roll of one member per opening.
    pub(super) fn window_lengths(
        &mut self,
        node: Option<&Node>,
        path: &str,
        windows: &[Window],
        watch: Duration,
    ) {
        let Some(Node::Seq { items, .. }) = node else {
            return;
        };
        for (i, (w, item)) in windows.iter().zip(items).enumerate() {
            if w.duration() < watch {
                self.warn(
                    field_pos(item, &["duration"]).unwrap_or(item.pos()),
                    &format!("{path}[{i}].duration"),
                    format!(
                        "{} is shorter than update.watch ({}): each opening lets at most one step start, so the roll takes one opening per step; make the window longer than a step",
                        format_duration(w.duration()),
                        format_duration(watch)
                    ),
                );
            }
        }
    }

    /// `health.max_age` against the time a replacement takes (up to
    /// `startup_timeout` to join, then `watch`): a machine that can come
    /// due before its successor is judged makes a group that replaces
    /// machines forever (refused); one whose whole group cannot be rolled
    /// within a machine's life, at that pace, is warned about. Read from
    /// the file as written, so it is said whatever else is wrong.
    pub(super) fn lifetime_rules(
        &mut self,
        group: &Node,
        path: &str,
        role: Option<Role>,
        alloc: Option<&Allocation>,
    ) {
        let Some(age_node) = node_at(group, &["health", "max_age"]) else {
            return;
        };
        let role = role.unwrap_or(Role::Worker);
        let read = |keys: &[&str], default| written_duration(group, keys, default);
        let (Some(age), Some(startup), Some(watch)) = (
            read(&["health", "max_age"], Duration::ZERO).filter(|a| !a.is_zero()),
            read(&["health", "startup_timeout"], defaults::STARTUP_TIMEOUT),
            read(&["update", "watch"], defaults::watch(role)),
        ) else {
            return;
        };
        let earliest = crate::plan::lifetime::earliest_due(age);
        let step = startup + watch;
        let at = age_node.pos();
        let path = join(path, "health.max_age");
        if earliest <= step {
            let needed = crate::plan::lifetime::least_max_age_beyond(step);
            self.error(at, &path, format!(
                "{} lets a machine come due at {} old (up to a quarter early), within the {} its successor may take to start and be watched (startup_timeout {} + watch {}): the group would replace machines forever; set max_age to at least {}",
                format_duration(age), format_duration(earliest), format_duration(step),
                format_duration(startup), format_duration(watch), format_duration(needed)
            ));
            return;
        }
        let in_flight = match (role, node_at(group, &["update", "max_in_flight"])) {
            (Role::Manager, _) | (_, None) => 1,
            (_, Some(n)) => super::node_text(n).parse::<u32>().unwrap_or(1).max(1),
        };
        let steps = alloc
            .map_or(1, |a| a.size() as u32)
            .div_ceil(in_flight)
            .max(2);
        if earliest < step * steps {
            self.warn(at, &path, format!(
                "{} is close to the time the group's roll can take: {steps} steps of up to {} each (startup_timeout + watch) outlast a machine's life from {}; the group may be replacing machines all the time; make max_age longer",
                format_duration(age), format_duration(step), format_duration(earliest)
            ));
        }
    }
}
