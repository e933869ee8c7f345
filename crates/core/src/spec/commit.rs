//! The one rule for every write of the desired state: whatever is about to
//! be committed — by `apply`'s merge, `adopt`, `import`, `rollback`,
//! `restart`, `destroy` and the controller's automatic rollback — is a
//! [`Committable`], and the only way to make one is [`validate_commit`]:
//!
//! 1. **The whole spec passes the validation of a cluster file.** It is
//!    rendered as the cluster file it means and read back through the one
//!    decoder (`decode.rs`), so every rule a file is held to — those of
//!    today and those added later — holds for every commit, with no second
//!    copy of the rules to drift from the first. (Checking the resolved
//!    types directly would need exactly that copy: the decoder checks each
//!    field where it reads it, with its position.) The only thing a commit
//!    may say that a file may not is a retired group (`size: 0`, what
//!    `destroy` and `apply --prune` commit). And the spec must read back
//!    as itself: nothing is committed that no cluster file could say.
//! 2. **The transition from the current revision is allowed.** No group
//!    disappears: a group leaves by being retired, so the planner drains
//!    and removes its members one safe step at a time (an undeclared
//!    group's machines are orphans, destroyed without draining). No group
//!    changes role in place: its members would be removed as members of
//!    the *new* role (a worker turned plain is destroyed without being
//!    drained, a worker turned manager is "demoted" instead of drained), so
//!    a new role is a new group (an addition) and the old group is retired
//!    (a removal), both shown by `apply` and `drover plan`.

use super::decode::parse_committed;
use super::diag::Severity;
use super::hooks::{Hook, HookCall, HookPoint};
use super::*;
use crate::budget::ServiceBudget;
use serde_json::{Value, json};
use std::time::UNIX_EPOCH;

/// A spec that passed [`validate_commit`]: the only thing a commit takes.
#[derive(Debug, Clone, PartialEq)]
pub struct Committable(ClusterSpec);

impl Committable {
    /// The validated spec.
    pub fn spec(&self) -> &ClusterSpec {
        &self.0
    }
}

/// One reason a spec may not be committed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    /// The group concerned, when there is one.
    pub group: Option<String>,
    /// The offending field in the spec to commit, e.g. `groups[1].role`.
    pub path: String,
    /// What is wrong and what to do instead.
    pub message: String,
}

impl std::fmt::Display for Problem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.group {
            Some(g) => write!(f, "{} (group {g}): {}", self.path, self.message),
            None => write!(f, "{}: {}", self.path, self.message),
        }
    }
}

/// Why a spec may not be committed: every problem, at once.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("the desired state to commit is not valid: {}", problems.iter().map(ToString::to_string).collect::<Vec<_>>().join("; "))]
pub struct Refused {
    /// Each problem, naming the field and what to do.
    pub problems: Vec<Problem>,
}

/// The one rule (module docs): `next` may replace `previous` (the current
/// revision's spec, `None` for the first commit) in the store.
pub fn validate_commit(
    previous: Option<&ClusterSpec>,
    next: ClusterSpec,
) -> Result<Committable, Refused> {
    checked(
        as_a_file(&next),
        previous.map(|p| transition(p, &next, None)),
        next,
    )
}

/// The one exception to rule 2, taken only on an operator's explicit word
/// (`drover destroy GROUP --forget-machines`, for a group whose provider is
/// gone): `previous` without group `forgotten`, which leaves the desired
/// state without being retired (its machines cannot be reached to be
/// retired). Every other rule holds as for [`validate_commit`].
pub fn validate_forget(previous: &ClusterSpec, forgotten: &str) -> Result<Committable, Refused> {
    let mut next = previous.clone();
    next.groups.retain(|g| g.name != forgotten);
    let moved = transition(previous, &next, Some(forgotten));
    checked(as_a_file(&next), Some(moved), next)
}

/// A past revision as `import` recreates it, against the one before it:
/// a forget (exactly one group gone and nothing else changed, what
/// [`validate_forget`] commits) is checked as one, anything else as a
/// commit ([`validate_commit`]).
pub fn validate_past(
    previous: Option<&ClusterSpec>,
    next: ClusterSpec,
) -> Result<Committable, Refused> {
    match previous.and_then(|p| forgotten(p, &next).map(|g| (p, g))) {
        Some((previous, group)) => validate_forget(previous, group),
        None => validate_commit(previous, next),
    }
}

/// The one group `next` forgot of `previous`, when that is its only change.
fn forgotten<'a>(previous: &'a ClusterSpec, next: &ClusterSpec) -> Option<&'a str> {
    let mut gone = previous
        .groups
        .iter()
        .filter(|g| next.group(&g.name).is_none());
    let (Some(g), None) = (gone.next(), gone.next()) else {
        return None;
    };
    let mut without = previous.clone();
    without.groups.retain(|o| o.name != g.name);
    (without == *next).then_some(g.name.as_str())
}

/// `next` when neither rule found a problem.
fn checked(
    mut problems: Vec<Problem>,
    moved: Option<Vec<Problem>>,
    next: ClusterSpec,
) -> Result<Committable, Refused> {
    problems.extend(moved.unwrap_or_default());
    if problems.is_empty() {
        Ok(Committable(next))
    } else {
        Err(Refused { problems })
    }
}

/// Rule 1: `spec`, written as a cluster file, is valid and reads back as itself.
fn as_a_file(spec: &ClusterSpec) -> Vec<Problem> {
    let text = to_file(spec).to_string();
    let loaded = parse_committed(&text);
    let group_of = |path: &str| {
        let i: usize = path
            .strip_prefix("groups[")?
            .split(']')
            .next()?
            .parse()
            .ok()?;
        Some(spec.groups.get(i)?.name.clone())
    };
    let mut problems: Vec<Problem> = loaded
        .diagnostics
        .iter()
        .filter(|d| d.severity == Severity::Error)
        .map(|d| Problem {
            group: group_of(&d.path),
            path: d.path.clone(),
            message: d.message.clone(),
        })
        .collect();
    let Some(read) = loaded.spec else {
        return problems;
    };
    // Same number of groups (the decoder read each one), so pairwise.
    for (i, (g, r)) in spec.groups.iter().zip(&read.groups).enumerate() {
        if g != r {
            problems.push(Problem {
                group: Some(g.name.clone()),
                path: format!("groups[{i}]"),
                message: "holds a value no cluster file can give (it reads back differently): apply the group from a cluster file".into(),
            });
        }
    }
    if spec.gc != read.gc {
        problems.push(Problem {
            group: None,
            path: "gc".into(),
            message: "holds a value no cluster file can give (it reads back differently): apply gc from a cluster file".into(),
        });
    }
    problems
}

/// Rule 2: no group disappears (but `forgotten`, on an operator's word),
/// no group changes role.
fn transition(previous: &ClusterSpec, next: &ClusterSpec, forgotten: Option<&str>) -> Vec<Problem> {
    let mut problems = Vec::new();
    for old in &previous.groups {
        let name = &old.name;
        if Some(name.as_str()) == forgotten {
            continue;
        }
        let retire =
            format!("drover destroy {name}, or drover apply --prune with a file without it");
        match next.groups.iter().position(|g| g.name == *name) {
            None => problems.push(Problem {
                group: Some(name.clone()),
                path: "groups".into(),
                message: format!("group {name} is in the current desired state but not in this one: a group leaves only by being retired ({retire}), so its members are drained and removed one safe step at a time"),
            }),
            Some(i) if next.groups[i].role != old.role => {
                let new = next.groups[i].role;
                problems.push(Problem {
                    group: Some(name.clone()),
                    path: format!("groups[{i}].role"),
                    message: format!(
                        "group {name} is a {} group now and a group's role never changes in place: its members would be removed as {} members are ({}), not as {} members must be ({}); declare the {} group under a new name and retire this one ({retire})",
                        old.role.as_str(),
                        new.as_str(),
                        removal(new),
                        old.role.as_str(),
                        removal(old.role),
                        new.as_str(),
                    ),
                });
            }
            Some(_) => {}
        }
    }
    problems
}

/// How the planner removes a member of `role`.
fn removal(role: Role) -> &'static str {
    match role {
        Role::Manager => "demoted out of the raft one at a time, destroyed, its node removed",
        Role::Worker => "drained, destroyed, its node removed",
        Role::Plain => "destroyed, without draining",
    }
}

/// The cluster file `spec` means (as JSON, which the decoder reads as
/// YAML): every field written out, defaults included.
fn to_file(spec: &ClusterSpec) -> Value {
    json!({
        "groups": spec.groups.iter().map(group_file).collect::<Vec<_>>(),
        "gc": {"orphan_grace": duration(spec.gc.orphan_grace)},
    })
}

/// Slots as `logical_ids` and `spare_ids` write them.
fn slots_file(slots: &[Slot]) -> Value {
    slots
        .iter()
        .map(|s| match &s.zone {
            Some(zone) => json!({"id": s.logical_id, "zone": zone}),
            None => json!({"id": s.logical_id}),
        })
        .collect()
}

fn group_file(g: &GroupSpec) -> Value {
    let mut allocation = match &g.allocation {
        Allocation::Size { size, zones } if zones.is_empty() => json!({"size": size}),
        Allocation::Size { size, zones } => json!({"size": size, "zones": zones}),
        Allocation::LogicalIds(slots) => json!({"logical_ids": slots_file(slots)}),
    };
    if !g.spares.is_empty() {
        allocation["spare_ids"] = slots_file(&g.spares);
    }
    let max_unhealthy = match g.health.max_unhealthy {
        MaxUnhealthy::Percent(p) => json!(format!("{p}%")),
        MaxUnhealthy::Count(n) => json!(n),
    };
    let mut file = json!({
        "name": g.name,
        "role": g.role,
        "allocation": allocation,
        "instance": g.instance,
        "flavor": g.flavor,
        "update": {
            "strategy": g.update.strategy,
            "max_in_flight": g.update.max_in_flight,
            "canaries": g.update.canaries,
            "watch": duration(g.update.watch),
            "step_timeout": duration(g.update.step_timeout),
            "on_failure": g.update.on_failure,
        },
        "health": {
            "startup_timeout": duration(g.health.startup_timeout),
            "unhealthy_after": duration(g.health.unhealthy_after),
            "max_attempts": g.health.max_attempts,
            "max_unhealthy": max_unhealthy,
        },
        "drain": {
            "timeout": duration(g.drain.timeout),
            "on_timeout": g.drain.on_timeout,
        },
    });
    if let Some(floor) = g.update.min_fault_tolerance {
        file["update"]["min_fault_tolerance"] = json!(floor);
    }
    if !g.update.windows.is_empty() {
        file["update"]["windows"] = g.update.windows.iter().map(window_file).collect();
    }
    if let Some(u) = &g.update.in_place {
        file["update"]["in_place"] = json!({"command": u.command, "timeout": duration(u.timeout)});
    }
    if let Some(age) = g.health.max_age {
        file["health"]["max_age"] = json!(duration(age));
    }
    if let Some(b) = g.update.service_budget {
        file["update"]["service_budget"] = match b {
            ServiceBudget::MaxUnavailable(a) => json!({"max_unavailable": a.to_string()}),
            ServiceBudget::MinAvailable(a) => json!({"min_available": a.to_string()}),
        };
    }
    if let Some(ms) = g.rollout_after {
        file["rollout"] = json!({"after": timestamp(ms)});
    }
    if !g.hooks.is_empty() {
        let hooks = HookPoint::ALL
            .iter()
            .filter_map(|p| Some((p.as_str().to_string(), hook_file(g.hooks.at(*p)?))));
        file["hooks"] = Value::Object(hooks.collect());
    }
    file
}

fn hook_file(h: &Hook) -> Value {
    let mut file = match &h.call {
        HookCall::Command(argv) => json!({"command": argv}),
        HookCall::Http(url) => json!({"http": url}),
    };
    file["timeout"] = json!(duration(h.timeout));
    file["on_failure"] = json!(h.on_failure);
    file
}

fn window_file(w: &super::Window) -> Value {
    let t = w.text();
    json!({"start": t.start, "duration": duration(t.duration), "time_zone": t.time_zone})
}

/// A duration in the plainest unit that holds it exactly (`600s`, `1500ms`).
fn duration(d: Duration) -> String {
    if d.subsec_nanos() == 0 {
        format!("{}s", d.as_secs())
    } else if d.subsec_nanos().is_multiple_of(1_000_000) {
        format!("{}ms", d.as_millis())
    } else {
        format!("{}ns", d.as_nanos())
    }
}

/// `rollout.after` as RFC 3339 with milliseconds; past year 9999 (no RFC
/// 3339 time) as the bare number, which the decoder refuses.
fn timestamp(ms: u64) -> Value {
    const LAST_RFC3339_MS: u64 = 253_402_300_799_999;
    if ms > LAST_RFC3339_MS {
        return json!(ms);
    }
    let at = UNIX_EPOCH + Duration::from_millis(ms);
    json!(humantime::format_rfc3339_millis(at).to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spec::parse_str;

    const FILE: &str = "groups:
- name: managers
  role: manager
  allocation: {logical_ids: [{id: 127.0.0.1, zone: a}, 127.0.0.2, 127.0.0.3]}
  instance: {provider: local, properties: {image: v1, cpus: 1.5, n: 3, on: true, list: [a, 1]}}
- name: workers
  role: worker
  allocation: {size: 2, zones: [a, b]}
  instance: {provider: local}
  flavor: {engine_labels: {tier: web}}
  update: {watch: 1500ms, step_timeout: 1h30m, on_failure: rollback, max_in_flight: 2, service_budget: {min_available: 80%}, windows: [{start: '0 2 * * SAT', duration: 90m, time_zone: Europe/Berlin}]}
  health: {max_unhealthy: 1, unhealthy_after: 90s, max_age: 30d}
  drain: {timeout: 1m, on_timeout: force}
  rollout: {after: 2026-12-01T10:00:00.250Z}
  hooks:
    pre_drain: {command: [/usr/local/bin/notify, drain], timeout: 45s}
    post_join: {http: http://127.0.0.1:9000/joined, on_failure: continue}
- name: edge
  role: plain
  allocation: {size: 1}
  instance: {provider: local}
gc: {orphan_grace: 15m}
";

    fn spec(text: &str) -> ClusterSpec {
        let loaded = parse_str(text);
        loaded
            .spec
            .unwrap_or_else(|| panic!("{:#?}", loaded.diagnostics))
    }

    fn refused(previous: Option<&ClusterSpec>, next: ClusterSpec) -> Vec<Problem> {
        validate_commit(previous, next)
            .expect_err("committed")
            .problems
    }

    #[test]
    fn every_valid_file_reads_back_as_itself() {
        let s = spec(FILE);
        assert_eq!(validate_commit(Some(&s), s.clone()).unwrap().spec(), &s);
        let corpus = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/good-specs");
        for entry in std::fs::read_dir(corpus).unwrap() {
            let path = entry.unwrap().path();
            if path.extension().is_some_and(|e| e == "warnings") {
                continue;
            }
            let s = spec(&std::fs::read_to_string(&path).unwrap());
            assert!(validate_commit(None, s).is_ok(), "{}", path.display());
        }
    }

    #[test]
    fn a_retired_group_may_be_committed_a_file_may_not_declare_one() {
        let mut s = spec(FILE);
        for g in &mut s.groups {
            g.allocation = Allocation::Size {
                size: 0,
                zones: vec![],
            };
        }
        assert!(validate_commit(Some(&spec(FILE)), s).is_ok());
        assert!(
            parse_str(&FILE.replace("size: 2, zones: [a, b]", "size: 0"))
                .spec
                .is_none()
        );
    }

    #[test]
    fn what_a_file_may_not_say_is_refused_naming_group_and_field() {
        let mut s = spec(FILE);
        s.groups[1].name = "Bad_Name".into();
        s.groups[0].allocation = Allocation::LogicalIds(s.groups[0].slots()[..2].to_vec());
        s.groups[0].update.watch = Duration::ZERO;
        s.groups[2].flavor.boot_script = "{{ nope(".into();
        s.groups[2]
            .flavor
            .engine_labels
            .insert("drover.group".into(), "x".into());
        let paths: Vec<String> = refused(None, s).iter().map(ToString::to_string).collect();
        for want in [
            "groups[1].name (group Bad_Name): `Bad_Name` is not a valid name",
            "groups[0].allocation.logical_ids (group managers): a manager group needs an odd number",
            "groups[0].update.watch (group managers): managers need a non-zero watch",
            "groups[2].flavor.boot_script (group edge): template does not render",
            "groups[2].flavor.engine_labels.drover.group (group edge): labels starting with `drover.`",
        ] {
            assert!(
                paths.iter().any(|p| p.starts_with(want)),
                "{want} not in {paths:#?}"
            );
        }
    }

    #[test]
    fn cross_group_rules_hold_for_a_merged_state() {
        let mut s = spec(FILE);
        let mut control = s.groups[0].clone();
        control.name = "control".into();
        s.groups.push(control);
        let problems = refused(Some(&spec(FILE)), s);
        assert!(
            problems.iter().any(|p| p.path == "groups[3].role"
                && p.group.as_deref() == Some("control")
                && p.message.contains("only one manager group")),
            "{problems:#?}"
        );
        assert!(
            problems
                .iter()
                .any(|p| p.message.contains("duplicate logical id `127.0.0.1`")),
            "{problems:#?}"
        );
    }

    #[test]
    fn a_value_no_file_can_give_is_refused() {
        let mut s = spec(FILE);
        s.groups[1].flavor.kind = FlavorKind::Vanilla;
        let problems = refused(None, s);
        assert_eq!(problems[0].path, "groups[1].flavor.kind", "{problems:#?}");
        // Reads without error but as something else: a big id as a float.
        let mut s = spec(FILE);
        s.groups[0].instance.properties["n"] = json!(u64::MAX);
        let problems = refused(None, s);
        assert_eq!(problems[0].path, "groups[0]", "{problems:#?}");
    }

    #[test]
    fn a_group_never_disappears_nor_changes_role() {
        let previous = spec(FILE);
        let mut s = previous.clone();
        s.groups.remove(2);
        let problems = refused(Some(&previous), s);
        assert_eq!(problems.len(), 1, "{problems:#?}");
        assert!(problems[0].message.contains("drover destroy edge"));

        for role in [Role::Plain, Role::Manager] {
            let mut s = previous.clone();
            s.groups[1].role = role;
            s.groups[1].flavor = FlavorSpec {
                kind: if role == Role::Plain {
                    FlavorKind::Vanilla
                } else {
                    FlavorKind::Swarm
                },
                boot_script: crate::template::default_boot_script(
                    crate::spec::LOCAL_PROVIDER,
                    role,
                )
                .into(),
                engine_labels: Default::default(),
                drover: None,
            };
            s.groups[1].update.max_in_flight = 1;
            s.groups[1].allocation = Allocation::Size {
                size: 1,
                zones: vec![],
            };
            s.groups[1].update.strategy = Strategy::Surge;
            let problems = refused(Some(&previous), s.clone());
            let role_change: Vec<_> = problems
                .iter()
                .filter(|p| p.message.contains("never changes in place"))
                .collect();
            assert_eq!(role_change.len(), 1, "{problems:#?}");
            assert_eq!(role_change[0].path, "groups[1].role");
            assert!(
                role_change[0].message.contains("drained")
                    && role_change[0].message.contains("under a new name"),
                "{problems:#?}"
            );
            // The same spec as a first commit has no transition to refuse.
            if role == Role::Plain {
                assert!(validate_commit(None, s).is_ok());
            }
        }
    }

    /// A desired state stored before the roll floor existed (3 cattle
    /// managers replaced in place, the default then; no
    /// `min_fault_tolerance`) still takes
    /// every later commit: the floor's rule for it is a warning, never a
    /// refusal that would block `destroy`, `rollback` or an automatic
    /// rollback of another group.
    #[test]
    fn a_spec_stored_before_the_roll_floor_still_takes_commits() {
        let file = "groups:\n- name: managers\n  role: manager\n  allocation: {size: 3}\n  instance: {provider: sim}\n  update: {strategy: replace}\n- name: workers\n  role: worker\n  allocation: {size: 2}\n  instance: {provider: sim}\n";
        let stored = parse_str(file).spec.expect("valid");
        assert_eq!(stored.groups[0].update.strategy, Strategy::Replace);
        assert_eq!(stored.groups[0].update.min_fault_tolerance, None);
        assert_eq!(
            stored.groups[0].roll_floor(),
            0,
            "no deadlock: in place of 3"
        );
        let mut next = stored.clone();
        next.groups[1].allocation = Allocation::Size {
            size: 0,
            zones: Vec::new(),
        };
        assert!(validate_commit(Some(&stored), next).is_ok());
    }

    /// `--forget-machines`: exactly the named group leaves the desired
    /// state; any other group that would vanish is still refused, and the
    /// rest of the spec is held to every rule as before.
    #[test]
    fn forgetting_a_group_takes_only_that_group_out() {
        let current = spec(FILE);
        let forgotten = validate_forget(&current, "edge").expect("edge may be forgotten");
        let names: Vec<&str> = forgotten
            .spec()
            .groups
            .iter()
            .map(|g| g.name.as_str())
            .collect();
        assert_eq!(names, ["managers", "workers"]);
        assert_eq!(forgotten.spec().group("workers"), current.group("workers"));
        // The ordinary rule still refuses the same change.
        let refused = validate_commit(Some(&current), forgotten.spec().clone())
            .expect_err("a group vanished without the operator's word");
        assert_eq!(refused.problems[0].group.as_deref(), Some("edge"));
        // An import recreates the forget as it was committed...
        let past = validate_past(Some(&current), forgotten.spec().clone());
        assert_eq!(past.as_ref().ok(), Some(&forgotten));
        // ...but not a group gone along with any other change.
        let mut more = forgotten.spec().clone();
        more.groups.retain(|g| g.name != "workers");
        assert!(validate_past(Some(&current), more).is_err());
    }
}
