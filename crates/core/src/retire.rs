//! Retiring a group: the one rule `drover destroy` and `apply --prune`
//! both commit.
//!
//! A group is retired by scaling it to zero rather than forgetting it, so
//! the planner takes its members away one safe step at a time (drained
//! first, through the manager gate for managers, the leader last). Its
//! spare slots go with it: they exist to hold a manager group's fault
//! tolerance while a member is replaced, and a retired group replaces
//! nobody — a cattle group of size 0 that kept them would not even be a
//! valid spec (spare slots serve pets).

use crate::spec::{Allocation, ClusterSpec, GroupSpec};

/// `g` retired: no member declared, no zone to spread over, no spare slot.
pub fn retired(g: &GroupSpec) -> GroupSpec {
    GroupSpec {
        allocation: Allocation::Size {
            size: 0,
            zones: Vec::new(),
        },
        spares: Vec::new(),
        ..g.clone()
    }
}

/// True when `g` is already retired: nothing of it is left to commit.
pub fn is_retired(g: &GroupSpec) -> bool {
    g.allocation.size() == 0
}

/// The groups still declaring members that must be retired before manager
/// group `group`: a manager group carries the swarm and the controllers,
/// so it goes last.
pub fn before_managers<'a>(spec: &'a ClusterSpec, group: &str) -> Vec<&'a str> {
    spec.groups
        .iter()
        .filter(|o| o.name != group && !is_retired(o))
        .map(|o| o.name.as_str())
        .collect()
}

/// What committing cluster file `file` makes of the `current` spec: the
/// file's groups, then each current group the file lacks — [`retired`]
/// when `prune`, else kept as it is: a group is never deleted by omission.
pub fn with_file(current: Option<&ClusterSpec>, file: &ClusterSpec, prune: bool) -> ClusterSpec {
    let mut spec = file.clone();
    for old in current.map(|c| c.groups.as_slice()).unwrap_or_default() {
        if file.group(&old.name).is_none() {
            spec.groups
                .push(if prune { retired(old) } else { old.clone() });
        }
    }
    spec
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spec::{parse_str, validate_commit};

    fn pets_with_spares() -> crate::spec::ClusterSpec {
        parse_str(
            "groups:\n\
             - name: managers\n  role: manager\n  allocation: {logical_ids: [127.0.0.1, 127.0.0.2, 127.0.0.3], spare_ids: [127.0.0.4]}\n  instance: {provider: sim}\n\
             - name: workers\n  role: worker\n  allocation: {size: 2, zones: [a, b]}\n  instance: {provider: sim}\n",
        )
        .spec
        .expect("test spec")
    }

    #[test]
    fn a_retired_group_declares_no_member_no_zone_and_no_spare_slot() {
        let spec = pets_with_spares();
        for g in &spec.groups {
            let r = retired(g);
            assert!(is_retired(&r), "{}", g.name);
            assert_eq!(
                r.allocation,
                Allocation::Size {
                    size: 0,
                    zones: Vec::new()
                }
            );
            assert!(r.spares.is_empty(), "{}: spare slots kept", g.name);
            // Everything else is the group as it was: its members are
            // retired under the spec they were built from.
            assert_eq!(r.instance, g.instance);
            assert_eq!(r.flavor, g.flavor);
            assert_eq!(r.update, g.update);
            assert_eq!(crate::hash::config_hash(&r), crate::hash::config_hash(g));
        }
        assert!(!is_retired(&spec.groups[0]));
    }

    #[test]
    fn a_retired_pet_manager_group_with_spare_slots_can_be_committed() {
        let spec = pets_with_spares();
        let gone = crate::revision::with_group(&spec, retired(&spec.groups[0]));
        let committed = validate_commit(Some(&spec), gone);
        assert!(committed.is_ok(), "{:?}", committed.err());
    }

    #[test]
    fn a_manager_group_goes_after_every_group_still_declaring_members() {
        let spec = pets_with_spares();
        assert_eq!(before_managers(&spec, "managers"), vec!["workers"]);
        let workers_gone = crate::revision::with_group(&spec, retired(&spec.groups[1]));
        assert!(before_managers(&workers_gone, "managers").is_empty());
    }

    #[test]
    fn a_group_the_file_lacks_is_kept_or_pruned_as_destroy_retires_it() {
        let current = pets_with_spares();
        let file = crate::spec::ClusterSpec {
            groups: vec![current.groups[1].clone()],
            ..current.clone()
        };
        let kept = with_file(Some(&current), &file, false);
        assert_eq!(kept.group("managers"), current.group("managers"));
        let pruned = with_file(Some(&current), &file, true);
        let managers = pruned.group("managers").expect("pruned, not forgotten");
        assert_eq!(managers, &retired(&current.groups[0]));
        assert!(managers.spares.is_empty(), "prune kept the spare slots");
        assert_eq!(pruned.group("workers"), file.group("workers"));
        assert_eq!(with_file(None, &file, true), file);
    }
}
