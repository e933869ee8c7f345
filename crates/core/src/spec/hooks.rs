//! Lifecycle hooks: an operator's command or HTTP endpoint called at four
//! points of a member's replacement (`hooks:` of a group).
//!
//! A hook is a step of the operation, journaled like the others: it runs
//! before the step it precedes, at least once (again after a controller
//! crash, with the same idempotency key, so the hook can deduplicate), and
//! the operation goes on only once it succeeded (or failed with
//! `on_failure: continue`). Hooks are not part of a group's config hash:
//! changing one rolls nothing.

use serde::{Deserialize, Serialize};
use std::time::Duration;

/// Where in an operation a hook runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum HookPoint {
    /// Before the member is taken out of service (a worker drained, a
    /// manager demoted, the leader handing over).
    PreDrain,
    /// Before its machine is destroyed.
    PreDestroy,
    /// Once the new machine exists (listed by its provider).
    PostProvision,
    /// Once the new member joined and is healthy.
    PostJoin,
    /// After an operation whose `pre_drain` (or `pre_destroy`) hook was
    /// called stepped aside with its member still in service (another
    /// manager became unhealthy, leadership moved onto it): what the pre
    /// hook told the outside world is undone.
    OnAbort,
}

impl HookPoint {
    /// Every point, in the order of the YAML file.
    pub const ALL: [HookPoint; 5] = [
        HookPoint::PreDrain,
        HookPoint::PreDestroy,
        HookPoint::PostProvision,
        HookPoint::PostJoin,
        HookPoint::OnAbort,
    ];

    /// Its field name.
    pub fn as_str(self) -> &'static str {
        match self {
            HookPoint::PreDrain => "pre_drain",
            HookPoint::PreDestroy => "pre_destroy",
            HookPoint::PostProvision => "post_provision",
            HookPoint::PostJoin => "post_join",
            HookPoint::OnAbort => "on_abort",
        }
    }
}

/// What a hook calls.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum HookCall {
    /// A program and its arguments (no shell), run on the acting
    /// controller's host with the hook's facts in its environment.
    Command(Vec<String>),
    /// An `http://` or `https://` URL, POSTed the hook's facts as JSON.
    Http(String),
}

/// What a failed hook does to its operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum HookOnFailure {
    /// The group is blocked with the hook's own message; the hook is
    /// called again every [`HOOK_RETRY`] until it succeeds.
    Block,
    /// Recorded in the audit log; the operation goes on.
    Continue,
}

/// How long a blocked hook waits before it is called again.
pub const HOOK_RETRY: Duration = Duration::from_secs(30);

/// One hook.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Hook {
    /// What it calls.
    pub call: HookCall,
    /// How long one call may take (then it failed).
    #[serde(with = "super::humantime_serde_compat")]
    pub timeout: Duration,
    /// What a failure does.
    pub on_failure: HookOnFailure,
}

/// A group's hooks, by point.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Hooks {
    /// Before the member is taken out of service.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pre_drain: Option<Hook>,
    /// Before its machine is destroyed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pre_destroy: Option<Hook>,
    /// Once the new machine exists.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub post_provision: Option<Hook>,
    /// Once the new member joined and is healthy.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub post_join: Option<Hook>,
    /// After an operation whose pre hook was called stepped aside, the
    /// member still in service ([`HookPoint::OnAbort`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub on_abort: Option<Hook>,
}

impl Hooks {
    /// The hook at `point`, if declared.
    pub fn at(&self, point: HookPoint) -> Option<&Hook> {
        match point {
            HookPoint::PreDrain => self.pre_drain.as_ref(),
            HookPoint::PreDestroy => self.pre_destroy.as_ref(),
            HookPoint::PostProvision => self.post_provision.as_ref(),
            HookPoint::PostJoin => self.post_join.as_ref(),
            HookPoint::OnAbort => self.on_abort.as_ref(),
        }
    }

    /// The hook slot at `point`.
    pub fn at_mut(&mut self, point: HookPoint) -> &mut Option<Hook> {
        match point {
            HookPoint::PreDrain => &mut self.pre_drain,
            HookPoint::PreDestroy => &mut self.pre_destroy,
            HookPoint::PostProvision => &mut self.post_provision,
            HookPoint::PostJoin => &mut self.post_join,
            HookPoint::OnAbort => &mut self.on_abort,
        }
    }

    /// True when no hook is declared.
    pub fn is_empty(&self) -> bool {
        HookPoint::ALL.iter().all(|p| self.at(*p).is_none())
    }
}

/// A hook's default timeout.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(60);

/// What a hook is told: in its environment (a command, as `DROVER_*`
/// variables) or as its JSON body (an endpoint). Never a secret.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HookFacts {
    /// Which hook.
    pub hook: HookPoint,
    /// The same on every call of this hook for this operation, by any
    /// controller (also after a crash mid-hook): a hook deduplicates on it.
    pub idempotency_key: String,
    /// The operation's id.
    pub operation: String,
    /// The cluster's id.
    pub cluster: String,
    /// The group.
    pub group: String,
    /// The machine: the member leaving (`pre_*`) or the new one (`post_*`).
    pub instance: Option<String>,
    /// Its slot's logical id, if it has one.
    pub logical_id: Option<String>,
    /// Its swarm node id, once known.
    pub node: Option<String>,
}

impl HookFacts {
    /// The key for `point` of operation `op`.
    pub fn key(op: &str, point: HookPoint) -> String {
        format!("{op}/{}", point.as_str())
    }

    /// The facts as a command's environment variables (absent ones empty).
    pub fn env(&self) -> [(&'static str, String); 8] {
        let opt = |v: &Option<String>| v.clone().unwrap_or_default();
        [
            ("DROVER_HOOK", self.hook.as_str().to_string()),
            ("DROVER_IDEMPOTENCY_KEY", self.idempotency_key.clone()),
            ("DROVER_OPERATION", self.operation.clone()),
            ("DROVER_CLUSTER", self.cluster.clone()),
            ("DROVER_GROUP", self.group.clone()),
            ("DROVER_INSTANCE", opt(&self.instance)),
            ("DROVER_LOGICAL_ID", opt(&self.logical_id)),
            ("DROVER_NODE", opt(&self.node)),
        ]
    }
}
