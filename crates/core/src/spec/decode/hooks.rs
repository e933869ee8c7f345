//! `hooks:` of a group ([`crate::spec::hooks`]).

use super::{Decoder, field_pos, join, node_at, written_duration};
use crate::spec::hooks::{DEFAULT_TIMEOUT, Hook, HookCall, HookOnFailure, HookPoint, Hooks};
use crate::spec::{defaults, format_duration};
use crate::yaml::Node;

/// The fields of one hook.
pub(super) const HOOK_FIELDS: &[&str] = &["command", "http", "timeout", "on_failure"];
/// The hook points, as fields of `hooks`.
pub(super) const HOOKS_FIELDS: &[&str] = &[
    "pre_drain",
    "pre_destroy",
    "post_provision",
    "post_join",
    "on_abort",
];

impl Decoder<'_> {
    /// `hooks`: each point's hook, all checked.
    pub(super) fn hooks(&mut self, node: Option<&Node>, path: &str) -> Option<Hooks> {
        let Some(node) = node else {
            return Some(Hooks::default());
        };
        let f = self.fields(node, path, HOOKS_FIELDS)?;
        let mut hooks = Some(Hooks::default());
        for point in HookPoint::ALL {
            let Some(n) = f.get(point.as_str()) else {
                continue;
            };
            match (self.hook(n, &join(path, point.as_str())), hooks.as_mut()) {
                (Some(h), Some(all)) => *all.at_mut(point) = Some(h),
                (None, _) => hooks = None,
                _ => {}
            }
        }
        hooks
    }

    /// Each hook ends before its step's deadline: a call still running at
    /// `update.step_timeout` would fail its step (and could roll the group
    /// back) for the hook's slowness alone. Read from the file as written,
    /// so every hook is checked whatever else is wrong in the group.
    pub(super) fn hook_deadlines(&mut self, group: &Node, path: &str) {
        let Some(step_timeout) =
            written_duration(group, &["update", "step_timeout"], defaults::STEP_TIMEOUT)
        else {
            return;
        };
        for point in HookPoint::ALL {
            let keys = ["hooks", point.as_str()];
            if node_at(group, &keys).is_none_or(Node::is_null) {
                continue;
            }
            let Some(timeout) = written_duration(
                group,
                &["hooks", point.as_str(), "timeout"],
                DEFAULT_TIMEOUT,
            )
            .filter(|t| *t >= step_timeout) else {
                continue;
            };
            let at = field_pos(group, &["hooks", point.as_str(), "timeout"])
                .or_else(|| field_pos(group, &keys))
                .unwrap_or(group.pos());
            self.error(
                at,
                &join(path, &format!("hooks.{}.timeout", point.as_str())),
                format!(
                    "{} is not shorter than update.step_timeout ({}): a hook must end before its step's deadline; shorten it or raise step_timeout",
                    format_duration(timeout),
                    format_duration(step_timeout)
                ),
            );
        }
    }

    fn hook(&mut self, node: &Node, path: &str) -> Option<Hook> {
        let f = self.fields(node, path, HOOK_FIELDS)?;
        let call = match (f.get("command"), f.get("http")) {
            (Some(_), Some(_)) => {
                self.error(f.pos, path, "set command or http, not both");
                None
            }
            (Some(n), None) => self.hook_command(n, &join(path, "command")),
            (None, Some(n)) => self.hook_url(n, &join(path, "http")),
            (None, None) => {
                self.error(
                    f.pos,
                    path,
                    "expected command (a program and its arguments, e.g. [/usr/local/bin/notify, drain]) or http (a URL drover POSTs to)",
                );
                None
            }
        };
        let timeout_path = join(path, "timeout");
        let timeout = self.duration(f.get("timeout"), &timeout_path, DEFAULT_TIMEOUT);
        if let (Some(d), Some(n)) = (timeout, f.get("timeout"))
            && d.is_zero()
        {
            self.error(
                n.pos(),
                &timeout_path,
                "must be longer than 0s: a hook needs time to run",
            );
        }
        let on_failure = self.choice(
            f.get("on_failure"),
            &join(path, "on_failure"),
            &[
                ("block", HookOnFailure::Block),
                ("continue", HookOnFailure::Continue),
            ],
            HookOnFailure::Block,
        );
        Some(Hook {
            call: call?,
            timeout: timeout.filter(|d| !d.is_zero())?,
            on_failure: on_failure?,
        })
    }

    fn hook_command(&mut self, node: &Node, path: &str) -> Option<HookCall> {
        let argv = self.string_list(node, path)?;
        if argv.first().is_none_or(|p| p.is_empty()) {
            self.error(
                node.pos(),
                path,
                "needs the program to run first (a path, or a name found on PATH), then its arguments",
            );
            return None;
        }
        Some(HookCall::Command(argv))
    }

    fn hook_url(&mut self, node: &Node, path: &str) -> Option<HookCall> {
        let instead = "let the endpoint trust the network it listens on, or use a command hook that reads its credential from a file";
        self.http_url(node, path, instead).map(HookCall::Http)
    }

    /// An http:// or https:// URL with a host and no credential in it
    /// (a spec is shown by plan and status, and stored); `instead` says
    /// what to do about a credential.
    pub(super) fn http_url(&mut self, node: &Node, path: &str, instead: &str) -> Option<String> {
        let url = self.string(node, path)?;
        // First: a refusal of any other kind would echo the credential.
        if crate::spec::secret_value::in_text(&url).is_some() {
            self.error(
                node.pos(),
                path,
                format!("a credential in the URL is refused (the URL is stored with the spec and shown by plan and status); {instead}"),
            );
            return None;
        }
        let rest = url
            .strip_prefix("http://")
            .or_else(|| url.strip_prefix("https://"));
        if !rest.is_some_and(|r| !r.is_empty() && !r.starts_with('/')) {
            self.error(
                node.pos(),
                path,
                format!("`{url}` is not an http:// or https:// URL with a host"),
            );
            return None;
        }
        Some(url)
    }
}
