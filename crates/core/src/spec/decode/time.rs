//! The calendar's fields: `update.windows` and `health.max_age`.

use super::{Decoder, join};
use crate::spec::{Window, WindowText};
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
}
