//! Who acts on a commit: a command that commits groups whose provider it
//! was not given (`apply` without `--incus-engines` for an Incus group)
//! asks, before it commits anything, whether a controller elsewhere will
//! make their machines: one that published a status recently (so it
//! leads now) and is wired to that provider. Where nobody ever will (no
//! controller ever acted on the store, or the acting one lacks the
//! provider) the command refuses; where the cluster's controllers acted
//! before and are down now, it commits and says so (they run on the
//! cluster's managers and pick the revision up when they are back). A
//! follow (`apply --wait`) says when no controller has picked its revision
//! up. Pure: the status document and the time are passed in.

use crate::status::StatusDoc;
use drover_core::spec::ClusterSpec;
use std::collections::BTreeSet;
use std::fmt;
use std::time::Duration;

/// A status older than this means no controller acts (`drover status`
/// warns, `apply` does not count on it).
pub const STALE_AFTER: Duration = Duration::from_secs(30);

/// Why no controller is known to act on a store now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Absent {
    /// No controller ever published a status there.
    NoStatus,
    /// The last status is older than [`STALE_AFTER`].
    Stale {
        /// Who published it.
        controller: String,
        /// How old it is.
        age: Duration,
    },
}

impl fmt::Display for Absent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Absent::NoStatus => write!(f, "no controller has published a status in this store"),
            Absent::Stale { controller, age } => write!(
                f,
                "the last status ({controller}) is {}s old: no controller acts now",
                age.as_secs()
            ),
        }
    }
}

/// The controller acting on the store now, from its last status: `Err`
/// when none is (no status, or a stale one).
pub fn acting<'d, 's>(
    status: Option<&'d StatusDoc<'s>>,
    now_ms: u64,
) -> Result<&'d StatusDoc<'s>, Absent> {
    let doc = status.ok_or(Absent::NoStatus)?;
    let age = Duration::from_millis(now_ms.saturating_sub(doc.observed_at_ms));
    if age > STALE_AFTER {
        return Err(Absent::Stale {
            controller: doc.controller.to_string(),
            age,
        });
    }
    Ok(doc)
}

/// A group a commit changes whose provider neither the command nor the
/// acting controller is wired to: its machines would wait for nobody.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unserved {
    /// The group.
    pub group: String,
    /// Its `instance.provider` (a plugin's as `plugin:NAME[/TYPE]`).
    pub provider: String,
    /// Why no controller elsewhere acts on it.
    pub why: Elsewhere,
}

/// Why no controller elsewhere makes a group's machines.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Elsewhere {
    /// No controller ever acted on the store (no status, no revision
    /// converged): none will.
    Never,
    /// The cluster's controllers acted before, and none acts now.
    Down(Absent),
    /// The acting controller is not wired to the provider.
    Lacks {
        /// The acting controller.
        controller: String,
    },
}

impl Elsewhere {
    /// Whether the commit is refused: nobody will ever act on it. A
    /// cluster whose controllers are down is committed to (with a warning):
    /// they come back with its managers.
    pub fn refuses(&self) -> bool {
        !matches!(self, Elsewhere::Down(_))
    }
}

impl fmt::Display for Elsewhere {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Elsewhere::Never => write!(
                f,
                "no controller has ever acted on this store (no status published, no revision converged)"
            ),
            Elsewhere::Down(a) => write!(f, "{a}"),
            Elsewhere::Lacks { controller } => write!(
                f,
                "the acting controller ({controller}) is not wired to it either"
            ),
        }
    }
}

/// What a store says of the controllers that act on it.
#[derive(Debug, Clone, Copy)]
pub struct Store<'a> {
    /// Its last published status.
    pub status: Option<&'a StatusDoc<'a>>,
    /// Whether any of its revisions ever converged (a controller acted).
    pub converged_once: bool,
}

/// The groups `next` changes against `previous` (a new group with members,
/// or a changed declaration) whose provider is not in `here` and that the
/// controller acting on `store` now (at `now_ms`) is not wired to. A
/// status of an older controller, which does not say its providers, is
/// taken to serve them.
pub fn unserved(
    previous: Option<&ClusterSpec>,
    next: &ClusterSpec,
    here: &BTreeSet<String>,
    store: Store<'_>,
    now_ms: u64,
) -> Vec<Unserved> {
    let acting = acting(store.status, now_ms);
    let ever = store.status.is_some() || store.converged_once;
    next.groups
        .iter()
        .filter(|g| match previous.and_then(|p| p.group(&g.name)) {
            Some(old) => old != *g,
            None => g.allocation.size() > 0,
        })
        .filter_map(|g| {
            let provider = g.instance.provider_key();
            if here.contains(&provider) {
                return None;
            }
            let why = match &acting {
                Err(_) if !ever => Elsewhere::Never,
                Err(absent) => Elsewhere::Down(absent.clone()),
                Ok(doc) => match &doc.providers {
                    Some(wired) if !wired.contains(&provider) => Elsewhere::Lacks {
                        controller: doc.controller.to_string(),
                    },
                    _ => return None,
                },
            };
            Some(Unserved {
                group: g.name.clone(),
                provider,
                why,
            })
        })
        .collect()
}

/// Why a followed revision `rev` is not being acted on (for a follow to
/// say, past a few seconds): no controller acts, or the acting one has
/// not planned against `rev` yet. `None` while a controller works on it.
pub fn unattended(status: Option<&StatusDoc<'_>>, rev: u64, now_ms: u64) -> Option<Unattended> {
    match acting(status, now_ms) {
        Err(absent) => Some(Unattended::Absent(absent)),
        Ok(doc) if doc.revision < rev => Some(Unattended::Behind {
            controller: doc.controller.to_string(),
            revision: doc.revision,
        }),
        Ok(_) => None,
    }
}

/// Why nobody works on a followed revision.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Unattended {
    /// No controller acts on the store now.
    Absent(Absent),
    /// The acting controller still plans against an older revision.
    Behind {
        /// The acting controller.
        controller: String,
        /// The revision it plans against.
        revision: u64,
    },
}

impl fmt::Display for Unattended {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Unattended::Absent(a) => write!(f, "{a}"),
            Unattended::Behind {
                controller,
                revision,
            } => write!(
                f,
                "the acting controller ({controller}) still plans against revision {revision}"
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use drover_core::plan::SwarmStatus;
    use std::borrow::Cow;

    const NOW: u64 = 1_800_000_000_000;

    fn spec(groups: &[(&str, &str, usize)]) -> ClusterSpec {
        let mut yaml = String::from("groups:\n");
        for (i, (name, provider, size)) in groups.iter().enumerate() {
            let role = if i == 0 { "manager" } else { "worker" };
            yaml.push_str(&format!(
                "- name: {name}\n  role: {role}\n  allocation: {{size: {size}}}\n  instance: {{provider: {provider}}}\n"
            ));
        }
        drover_core::spec::parse_str(&yaml)
            .spec
            .expect("a valid spec")
    }

    fn status(age_ms: u64, revision: u64, providers: Option<&[&str]>) -> StatusDoc<'static> {
        StatusDoc {
            observed_at_ms: NOW - age_ms,
            controller: Cow::Owned("m-1".into()),
            epoch: 1,
            revision,
            groups: Cow::Owned(Vec::new()),
            swarm: Cow::Owned(SwarmStatus::default()),
            instances: Cow::Owned(Vec::new()),
            operations: 0,
            explanation: Cow::Owned(Vec::new()),
            providers: providers.map(|p| p.iter().map(|s| s.to_string()).collect()),
            control: Default::default(),
        }
    }

    fn store<'a>(status: Option<&'a StatusDoc<'a>>, converged_once: bool) -> Store<'a> {
        Store {
            status,
            converged_once,
        }
    }

    fn here(keys: &[&str]) -> BTreeSet<String> {
        keys.iter().map(|k| k.to_string()).collect()
    }

    fn names(u: &[Unserved]) -> Vec<(&str, &str)> {
        u.iter()
            .map(|u| (u.group.as_str(), u.provider.as_str()))
            .collect()
    }

    #[test]
    fn a_new_cluster_needs_every_provider_here_when_no_controller_acts() {
        let next = spec(&[("managers", "local", 3), ("workers", "sim", 2)]);
        let none = unserved(None, &next, &here(&["local"]), store(None, false), NOW);
        assert_eq!(names(&none), [("workers", "sim")]);
        assert_eq!(none[0].why, Elsewhere::Never);
        assert!(none[0].why.refuses());
        let both = here(&["local", "sim"]);
        assert!(unserved(None, &next, &both, store(None, false), NOW).is_empty());
    }

    #[test]
    fn a_live_controller_wired_to_the_provider_serves_it_a_down_one_is_warned_of() {
        let next = spec(&[("managers", "sim", 3)]);
        let none = here(&[]);
        let live = status(5_000, 1, Some(&["sim"]));
        assert!(unserved(None, &next, &none, store(Some(&live), true), NOW).is_empty());
        let stale = status(31_000, 1, Some(&["sim"]));
        let u = unserved(None, &next, &none, store(Some(&stale), true), NOW);
        assert!(
            matches!(&u[0].why, Elsewhere::Down(Absent::Stale { age, .. }) if age.as_secs() == 31),
            "{u:?}"
        );
        assert!(!u[0].why.refuses());
        // Converged once, no status (an older store): down, not never.
        let u = unserved(None, &next, &none, store(None, true), NOW);
        assert_eq!(u[0].why, Elsewhere::Down(Absent::NoStatus));
        let other = status(5_000, 1, Some(&["local"]));
        let u = unserved(None, &next, &none, store(Some(&other), true), NOW);
        assert_eq!(
            u[0].why,
            Elsewhere::Lacks {
                controller: "m-1".into()
            }
        );
        assert!(u[0].why.refuses());
        // An older controller does not say: it is not refused.
        let older = status(5_000, 1, None);
        assert!(unserved(None, &next, &none, store(Some(&older), true), NOW).is_empty());
    }

    #[test]
    fn only_groups_the_commit_changes_need_a_provider() {
        let before = spec(&[("managers", "sim", 3), ("workers", "sim", 2)]);
        let next = spec(&[("managers", "sim", 3), ("workers", "sim", 4)]);
        let nobody = store(None, false);
        let u = unserved(Some(&before), &next, &here(&[]), nobody, NOW);
        assert_eq!(names(&u), [("workers", "sim")]);
        // Unchanged: nothing to make.
        let u = unserved(Some(&before), &before, &here(&[]), nobody, NOW);
        assert!(u.is_empty(), "{u:?}");
    }

    #[test]
    fn a_follow_is_unattended_without_a_live_controller_or_one_behind() {
        assert_eq!(
            unattended(None, 2, NOW),
            Some(Unattended::Absent(Absent::NoStatus))
        );
        let behind = status(1_000, 1, Some(&["sim"]));
        assert_eq!(
            unattended(Some(&behind), 2, NOW),
            Some(Unattended::Behind {
                controller: "m-1".into(),
                revision: 1
            })
        );
        let on_it = status(1_000, 2, Some(&["sim"]));
        assert_eq!(unattended(Some(&on_it), 2, NOW), None);
    }
}
