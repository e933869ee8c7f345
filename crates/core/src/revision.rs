//! Revisions of the declared spec: each decision about them made by one
//! rule, which the CLI (`drover rollback`), the controller (automatic
//! rollback) and the simulator all call.

use crate::spec::{ClusterSpec, GroupSpec};

/// One stored revision, as the rules read it.
#[derive(Debug, Clone, Copy)]
pub struct Past<'a> {
    /// Its number.
    pub rev: u64,
    /// The cluster converged on it at some point.
    pub converged: bool,
    /// Its spec.
    pub spec: &'a ClusterSpec,
}

/// The revision a rollback of `group` returns to, and the group as it was
/// declared there: the newest converged revision before `current` that
/// declares the group differently. A revision the cluster never converged
/// on is no known-good state; one that declares the group as `current`
/// does would change nothing. `None` when there is no such revision.
pub fn rollback_target<'a>(
    history: impl DoubleEndedIterator<Item = Past<'a>>,
    current: Past<'_>,
    group: &str,
) -> Option<(u64, &'a GroupSpec)> {
    let now = current.spec.group(group);
    history
        .rev()
        .filter(|r| r.rev < current.rev && r.converged)
        .find_map(|r| {
            let then = r.spec.group(group)?;
            (Some(then) != now).then_some((r.rev, then))
        })
}

/// `spec` with `group` in place of the group of the same name (a group
/// `spec` does not declare is not added).
pub fn with_group(spec: &ClusterSpec, group: GroupSpec) -> ClusterSpec {
    let mut out = spec.clone();
    if let Some(g) = out.groups.iter_mut().find(|g| g.name == group.name) {
        *g = group;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spec::parse_str;

    fn spec(workers: usize, managers: usize) -> ClusterSpec {
        parse_str(&format!(
            "groups:\n\
             - name: managers\n  role: manager\n  allocation: {{size: {managers}}}\n  instance: {{provider: sim}}\n\
             - name: workers\n  role: worker\n  allocation: {{size: {workers}}}\n  instance: {{provider: sim}}\n"
        ))
        .spec
        .expect("test spec")
    }

    #[test]
    fn the_target_is_the_newest_converged_revision_that_declares_the_group_differently() {
        let specs = [spec(1, 3), spec(2, 3), spec(2, 5), spec(3, 5), spec(4, 5)];
        // 1 and 2 and 3 converged; 4 never did; 5 is current.
        let converged = [true, true, true, false, false];
        let history = || {
            specs
                .iter()
                .zip(converged)
                .enumerate()
                .map(|(k, (spec, converged))| Past {
                    rev: k as u64 + 1,
                    converged,
                    spec,
                })
        };
        let current = history().next_back().unwrap();
        // Workers: 4 never converged; 3 declares 2 workers (differs).
        let (rev, g) = rollback_target(history(), current, "workers").unwrap();
        assert_eq!((rev, g.allocation.size()), (3, 2));
        // Managers: 3 and 4 declare 5 as now; 2 declares 3.
        let (rev, g) = rollback_target(history(), current, "managers").unwrap();
        assert_eq!((rev, g.allocation.size()), (2, 3));
        // From revision 2: nothing converged earlier declares managers differently.
        let two = history().nth(1).unwrap();
        assert!(rollback_target(history(), two, "managers").is_none());
        assert!(rollback_target(history(), current, "nope").is_none());
    }

    #[test]
    fn with_group_replaces_its_namesake_and_adds_nothing() {
        let now = spec(2, 3);
        let then = spec(5, 3);
        let merged = with_group(&now, then.group("workers").unwrap().clone());
        assert_eq!(merged.group("workers").unwrap().allocation.size(), 5);
        assert_eq!(merged.group("managers"), now.group("managers"));
        let mut other = then.group("workers").unwrap().clone();
        other.name = "other".into();
        assert_eq!(with_group(&now, other), now);
    }
}
