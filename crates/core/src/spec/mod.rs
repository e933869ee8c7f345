//! The operator's declaration: a cluster file is a list of groups.
//!
//! Types here are the *resolved* spec: every default filled in, every
//! duration parsed. [`decode`] turns a positioned YAML/JSON tree into these
//! types, collecting every problem with its path and position;
//! [`crate::hash`] hashes the part of a group whose change means a roll;
//! [`validate_commit`] is the one gate every write of the desired state
//! passes (the same validation as a file, plus the transition rules).

mod commit;
mod decode;
mod diag;
mod duration;
pub mod ec2;
pub mod hooks;
pub mod incus;
pub mod local;
mod plugin;
mod props;
pub mod secret_value;
pub mod ssh;
mod window;

pub use commit::{Committable, Problem, Refused, validate_commit, validate_forget, validate_past};
pub use decode::{MAX_COUNT, MAX_GROUPS, load_bytes, parse_str};
pub use diag::{Diagnostic, Severity};
pub use duration::{DurationError, MAX_DURATION, format_duration, parse_duration};
pub use hooks::{Hook, HookCall, HookFacts, HookOnFailure, HookPoint, Hooks};
pub use plugin::{MAX_PLUGIN_NAME, PLUGIN_PROVIDER, PluginAddress, PluginAddressError};
pub use props::{BadProperty, describe_properties};
pub use window::{Window, WindowError, WindowText};

/// The local provider's name: real dockerd processes on loopback
/// addresses (`--local-dir`). Its logical ids must be such addresses.
pub const LOCAL_PROVIDER: &str = "local";

/// What a name drover puts on machines may be (a group's name, a cluster
/// id): it becomes a tag or label value on every machine and part of paths,
/// so it is short, plain and can never name another place (`../`).
pub const NAME_RULE: &str = "1-63 lowercase letters, digits and dashes, not starting with a dash";

/// True when `s` follows [`NAME_RULE`].
pub fn is_name(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 63
        && s.chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
        && !s.starts_with('-')
}
/// The incus provider's name: Incus system containers that boot Debian
/// (`--incus-engines`). Its logical ids are addresses on a bridge.
pub const INCUS_PROVIDER: &str = "incus";
/// The ec2 provider's name: Amazon EC2 instances (`--ec2-region`). Its
/// logical ids are private IPv4 addresses; its properties are
/// [`ec2::Ec2Properties`], checked by the decoder.
pub const EC2_PROVIDER: &str = "ec2";
/// The ssh provider's name: hosts the operator already has, enrolled
/// over SSH (`--ssh-dir`). Its properties are [`ssh::SshProperties`], its
/// logical ids the names of its inventory's hosts.
pub const SSH_PROVIDER: &str = "ssh";
/// The simulator's name (`drover sim`, `plan --sim`).
pub const SIM_PROVIDER: &str = "sim";
/// The providers drover ships, by the name `instance.provider` uses: the
/// one list [`load_bytes`] checks names against and the binary wires by.
pub const PROVIDERS: &[&str] = &[
    LOCAL_PROVIDER,
    INCUS_PROVIDER,
    EC2_PROVIDER,
    SSH_PROVIDER,
    SIM_PROVIDER,
    PLUGIN_PROVIDER,
];
/// The providers that run an update on a machine they keep, the ones
/// `update.strategy: in_place` is accepted with. Validation is pure and
/// cannot ask a provider, so this list says it a second time: each
/// provider's `InstanceProvider::updates_in_place` is true exactly for
/// these names (`crates/drover/tests/in_place_providers.rs` ties the two
/// for every provider of [`PROVIDERS`]).
pub const IN_PLACE_PROVIDERS: &[&str] =
    &[INCUS_PROVIDER, LOCAL_PROVIDER, SIM_PROVIDER, SSH_PROVIDER];

pub use crate::control::Control;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::time::Duration;

/// A whole cluster file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ClusterSpec {
    /// The groups, in the order the operator wrote them.
    pub groups: Vec<GroupSpec>,
    /// Garbage collection of machines no group owns (`gc:`).
    #[serde(default)]
    pub gc: GcPolicy,
    /// Which controllers may act for the cluster (`control:`,
    /// docs/control.md); resolved: a cluster without a manager group is
    /// controlled from outside.
    #[serde(default)]
    pub control: Control,
}

/// Cluster-wide garbage collection (docs/gc.md).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GcPolicy {
    /// An orphan (a machine carrying this cluster's tags for a group no
    /// longer declared) is destroyed once it has been seen this long.
    #[serde(with = "humantime_serde_compat")]
    pub orphan_grace: Duration,
}

impl Default for GcPolicy {
    fn default() -> Self {
        GcPolicy {
            orphan_grace: defaults::ORPHAN_GRACE,
        }
    }
}

impl ClusterSpec {
    /// The group named `name`, if declared.
    pub fn group(&self, name: &str) -> Option<&GroupSpec> {
        self.groups.iter().find(|g| g.name == name)
    }
}

/// What a group's members are to the swarm.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    /// Swarm managers: the raft quorum. Rolled one at a time, leader last.
    Manager,
    /// Swarm workers.
    Worker,
    /// Machines outside any swarm (vanilla flavor).
    Plain,
}

impl Role {
    /// The lowercase name used in files and output.
    pub fn as_str(self) -> &'static str {
        match self {
            Role::Manager => "manager",
            Role::Worker => "worker",
            Role::Plain => "plain",
        }
    }
}

/// One declared slot of a group: its logical id (if pets) and its zone.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Slot {
    /// Fixed name/address of the slot (`logical_ids`), or `None` for cattle.
    pub logical_id: Option<String>,
    /// Failure domain the slot lives in.
    pub zone: Option<String>,
}

/// How many members and which.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Allocation {
    /// `size: N` cattle, spread round-robin over `zones` (if any).
    Size {
        /// Member count.
        size: u32,
        /// Zones to spread over.
        zones: Vec<String>,
    },
    /// Pets with fixed logical ids (e.g. loopback addresses).
    LogicalIds(Vec<Slot>),
}

impl Allocation {
    /// How many members the group should have.
    pub fn size(&self) -> usize {
        match self {
            Allocation::Size { size, .. } => *size as usize,
            Allocation::LogicalIds(ids) => ids.len(),
        }
    }

    /// True when slots carry fixed logical ids.
    pub fn is_pets(&self) -> bool {
        matches!(self, Allocation::LogicalIds(_))
    }
}

/// Which provider makes the machines and with what opaque properties.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct InstanceSpec {
    /// Provider name (`local`, `sim`, ...).
    pub provider: String,
    /// Opaque to drover; passed to the provider as is.
    pub properties: serde_json::Value,
    /// With `provider: plugin`: the plugin's address, `NAME[/TYPE]`
    /// (checked by [`PluginAddress::parse`]); absent for every other
    /// provider, so other groups' config hashes are unchanged.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub plugin: Option<String>,
}

impl InstanceSpec {
    /// The name the group's provider is wired under: the provider's name,
    /// or `plugin:NAME[/TYPE]` for a plugin (each plugin object is a
    /// provider of its own, so groups on different plugins never share a
    /// describe).
    pub fn provider_key(&self) -> String {
        match &self.plugin {
            Some(address) => format!("{PLUGIN_PROVIDER}:{address}"),
            None => self.provider.clone(),
        }
    }
}

/// What makes an instance a member.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum FlavorKind {
    /// Swarm manager or worker.
    Swarm,
    /// No swarm membership.
    Vanilla,
}

/// Flavor settings. `boot_script` is resolved: when the operator gave none,
/// it holds the default template for the role, so a new default is a roll.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FlavorSpec {
    /// swarm or vanilla.
    pub kind: FlavorKind,
    /// The boot script template (minijinja).
    pub boot_script: String,
    /// Labels put on the Docker engine by the boot script.
    pub engine_labels: BTreeMap<String, String>,
    /// `flavor.drover` (manager groups): the drover release the boot
    /// script installs. Absent, the machine's image must hold drover;
    /// absent from the config hash too, so other groups do not roll.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub drover: Option<DroverRelease>,
}

/// A pinned drover release: changing it changes every manager's boot
/// script, which rolls the managers, leader last (how drover is upgraded).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DroverRelease {
    /// Where the binary is fetched from: http:// or https://, no
    /// credential (the spec is shown by plan and status).
    pub url: String,
    /// The binary's SHA-256, 64 lowercase hex digits: a download that
    /// does not match is never installed (the boot script fails).
    pub sha256: String,
}

/// Replace old-then-new, add new-then-remove-old, or keep the machine and
/// update it where it is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Strategy {
    /// Remove the old member, then provision its replacement (same logical id).
    Replace,
    /// Provision the replacement first, then remove the old member.
    Surge,
    /// Keep the machine: take the member out of service (drained; a
    /// manager demoted out of the raft), run `update.in_place` on it, bring
    /// it back (promoted, healthy for `watch`, active). A machine nothing
    /// can recreate (hardware, a long-lived VM) is updated so.
    InPlace,
}

/// What to do when a rollout step fails or times out.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum OnFailure {
    /// Block the group with the reason; an operator decides.
    Pause,
    /// Go back to the previous spec under the same safety rules.
    Rollback,
}

/// Rolling update policy.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct UpdatePolicy {
    /// replace or surge.
    pub strategy: Strategy,
    /// Manager groups: the lowest fault tolerance a roll may take the raft
    /// to (absent: the group's converged fault tolerance, or what replacing
    /// a pet in place leaves, warned about at validation).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_fault_tolerance: Option<u32>,
    /// Workers disrupted at once (managers always 1).
    pub max_in_flight: u32,
    /// Members rolled alone first, each watched before the rest.
    pub canaries: u32,
    /// A new member must stay healthy this long before the next step.
    #[serde(with = "humantime_serde_compat")]
    pub watch: Duration,
    /// A step taking longer than this fails.
    #[serde(with = "humantime_serde_compat")]
    pub step_timeout: Duration,
    /// pause or rollback.
    pub on_failure: OnFailure,
    /// Maintenance windows: when set, a roll starts new steps only while
    /// one is open (healing, reaping and filling never wait).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub windows: Vec<Window>,
    /// The availability budget of every service that declares none in its
    /// labels, while this group disrupts nodes ([`crate::budget`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub service_budget: Option<crate::budget::ServiceBudget>,
    /// What `strategy: in_place` runs on each member's machine (set
    /// exactly when the strategy is `in_place`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub in_place: Option<crate::in_place::InPlace>,
}

/// Health judgement timers.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HealthPolicy {
    /// A new instance whose node has not appeared by then never joined.
    #[serde(with = "humantime_serde_compat")]
    pub startup_timeout: Duration,
    /// A member unhealthy this long is replaced.
    #[serde(with = "humantime_serde_compat")]
    pub unhealthy_after: Duration,
    /// Machines tried for one slot before the group blocks: a machine that
    /// never joins, and a provision call that fails, each use one.
    #[serde(default = "defaults::max_attempts")]
    pub max_attempts: u32,
    /// Meltdown guard: with more members down at once than this, nothing
    /// is replaced or reaped and the group blocks.
    #[serde(default)]
    pub max_unhealthy: MaxUnhealthy,
    /// Machines older than this (less a per-machine spread) are replaced
    /// through the roll's gates (`plan::lifetime`).
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        with = "humantime_serde_compat::option"
    )]
    pub max_age: Option<Duration>,
}

/// How many members of a group may be down at once before the meltdown
/// guard stops all replacing and reaping (as Cluster API's `maxUnhealthy`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum MaxUnhealthy {
    /// A share of the group's machines (the declared size, or more while a
    /// surge roll adds one), in percent (rounded down, at least 1 member).
    Percent(u32),
    /// A number of members.
    Count(u32),
}

impl Default for MaxUnhealthy {
    fn default() -> Self {
        MaxUnhealthy::Percent(defaults::MAX_UNHEALTHY_PERCENT)
    }
}

impl MaxUnhealthy {
    /// Members that may be down at once in a group of `size`. A single
    /// failure is always repaired, whatever the share.
    pub fn limit(self, size: usize) -> usize {
        match self {
            MaxUnhealthy::Percent(p) => (size * p as usize / 100).max(1),
            MaxUnhealthy::Count(n) => n as usize,
        }
    }
}

impl std::fmt::Display for MaxUnhealthy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            MaxUnhealthy::Percent(p) => write!(f, "{p}%"),
            MaxUnhealthy::Count(n) => write!(f, "{n}"),
        }
    }
}

/// What to do when a drain outlives its timeout.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum OnDrainTimeout {
    /// Go on: remove the member even though tasks did not move.
    Force,
    /// Block the group with the reason.
    Block,
}

/// Drain policy for workers (tasks moved away before removal).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DrainPolicy {
    /// How long to wait for tasks to move.
    #[serde(with = "humantime_serde_compat")]
    pub timeout: Duration,
    /// force or block.
    pub on_timeout: OnDrainTimeout,
}

/// A resolved group spec.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GroupSpec {
    /// Unique name.
    pub name: String,
    /// manager, worker or plain.
    pub role: Role,
    /// Size or logical ids.
    pub allocation: Allocation,
    /// `allocation.spare_ids` (pets manager groups): slots for one
    /// temporary manager added before the first pet is replaced in place and
    /// retired after the last, so the raft keeps the group's converged fault
    /// tolerance through the roll.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub spares: Vec<Slot>,
    /// Provider and its properties.
    pub instance: InstanceSpec,
    /// Flavor and its properties.
    pub flavor: FlavorSpec,
    /// Rolling update policy.
    pub update: UpdatePolicy,
    /// Health timers.
    pub health: HealthPolicy,
    /// Drain policy.
    pub drain: DrainPolicy,
    /// Force a roll of members created before this time (ms since the Unix epoch).
    pub rollout_after: Option<u64>,
    /// Lifecycle hooks (not part of the config hash).
    #[serde(default, skip_serializing_if = "Hooks::is_empty")]
    pub hooks: Hooks,
}

impl GroupSpec {
    /// The lowest fault tolerance a roll or a retirement of this group's
    /// managers may leave the raft at: `update.min_fault_tolerance`, else
    /// what the group holds while one member is replaced: its converged
    /// fault tolerance when the successor (surge) or a spare comes first,
    /// one less replaced in place (validation warns about that).
    pub fn roll_floor(&self) -> u32 {
        self.update
            .min_fault_tolerance
            .unwrap_or_else(|| self.tolerance_while_replacing())
    }

    /// The raft's fault tolerance while one member is replaced: the group
    /// runs one member short in place, whole with a surge or a spare.
    pub fn tolerance_while_replacing(&self) -> u32 {
        use crate::quorum::tolerance_when_whole as tolerates;
        let n = self.allocation.size();
        match self.update.strategy {
            Strategy::Replace | Strategy::InPlace if self.spares.is_empty() => {
                tolerates(n.saturating_sub(1))
            }
            _ => tolerates(n),
        }
    }

    /// True when `logical_id` is one of the group's spare slots.
    pub fn is_spare(&self, logical_id: Option<&str>) -> bool {
        logical_id.is_some_and(|l| {
            self.spares
                .iter()
                .any(|s| s.logical_id.as_deref() == Some(l))
        })
    }

    /// The declared slots: one per logical id, or `size` anonymous slots
    /// spread over the zones round-robin.
    pub fn slots(&self) -> Vec<Slot> {
        match &self.allocation {
            Allocation::LogicalIds(ids) => ids.clone(),
            Allocation::Size { size, zones } => (0..*size as usize)
                .map(|i| Slot {
                    logical_id: None,
                    zone: (!zones.is_empty()).then(|| zones[i % zones.len()].clone()),
                })
                .collect(),
        }
    }
}

/// Defaults, chosen to be safe: managers watch for a while before the next
/// step so a rollout never outruns raft stabilisation.
pub mod defaults {
    use super::Role;
    use std::time::Duration;

    /// Default `update.watch`.
    pub fn watch(role: Role) -> Duration {
        match role {
            Role::Manager => Duration::from_secs(10),
            _ => Duration::from_secs(5),
        }
    }
    /// Default `update.max_in_flight`.
    pub const MAX_IN_FLIGHT: u32 = 1;
    /// Default `update.canaries`.
    pub const CANARIES: u32 = 1;
    /// Default `update.step_timeout`.
    pub const STEP_TIMEOUT: Duration = Duration::from_secs(600);
    /// Default `health.startup_timeout`.
    pub const STARTUP_TIMEOUT: Duration = Duration::from_secs(300);
    /// Default `health.unhealthy_after`.
    pub const UNHEALTHY_AFTER: Duration = Duration::from_secs(120);
    /// Default `health.max_attempts`.
    pub const MAX_ATTEMPTS: u32 = 3;
    /// `health.max_attempts` for specs stored before the field existed.
    pub fn max_attempts() -> u32 {
        MAX_ATTEMPTS
    }
    /// Default `health.max_unhealthy`, in percent.
    pub const MAX_UNHEALTHY_PERCENT: u32 = 50;
    /// Default `gc.orphan_grace`.
    pub const ORPHAN_GRACE: Duration = Duration::from_secs(600);
    /// Default `drain.timeout`.
    pub const DRAIN_TIMEOUT: Duration = Duration::from_secs(120);
}

/// Durations serialise as humantime text (`"10s"`), as operators write them.
pub(crate) mod humantime_serde_compat {
    use serde::{Deserialize, Deserializer, Serializer};
    use std::time::Duration;

    pub fn serialize<S: Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&humantime::format_duration(*d).to_string())
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
        let text = String::deserialize(d)?;
        humantime::parse_duration(&text).map_err(serde::de::Error::custom)
    }

    /// The same for an optional duration.
    pub mod option {
        use serde::{Deserialize, Deserializer, Serializer};
        use std::time::Duration;

        pub fn serialize<S: Serializer>(d: &Option<Duration>, s: S) -> Result<S::Ok, S::Error> {
            match d {
                Some(d) => super::serialize(d, s),
                None => s.serialize_none(),
            }
        }

        pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Duration>, D::Error> {
            Option::<String>::deserialize(d)?
                .map(|t| humantime::parse_duration(&t).map_err(serde::de::Error::custom))
                .transpose()
        }
    }
}

#[cfg(test)]
mod name_tests {
    #[test]
    fn a_name_is_plain_short_and_never_a_path() {
        for ok in ["a", "c0ffee012345", "web-1", &"a".repeat(63)] {
            assert!(super::is_name(ok), "{ok:?}");
        }
        for bad in ["", "-a", "A", "a\nb", "../x", "a/b", "a b", &"a".repeat(64)] {
            assert!(!super::is_name(bad), "{bad:?}");
        }
    }
}
