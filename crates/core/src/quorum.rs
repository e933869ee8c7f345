//! Raft quorum arithmetic: the numbers every manager step is judged by.

/// Votes needed for a raft of `members`: `members / 2 + 1`.
pub fn quorum(members: usize) -> usize {
    members / 2 + 1
}

/// Fault tolerance: reachable voters minus quorum. Negative means no quorum.
pub fn fault_tolerance(members: usize, reachable: usize) -> i64 {
    reachable as i64 - quorum(members) as i64
}

/// The failures a whole raft of `members` survives (every member
/// reachable): 0 for one or two, 1 for three or four, 2 for five.
pub fn tolerance_when_whole(members: usize) -> u32 {
    fault_tolerance(members, members).max(0) as u32
}

/// Fault tolerance after voluntarily removing one *reachable* member,
/// assuming the worst: its replacement never joins.
pub fn ft_after_removing_healthy(members: usize, reachable: usize) -> i64 {
    if members == 0 || reachable == 0 {
        return -1;
    }
    fault_tolerance(members - 1, reachable - 1)
}

/// Fault tolerance after removing one *unreachable* member from the raft.
pub fn ft_after_removing_unreachable(members: usize, reachable: usize) -> i64 {
    if members == 0 {
        return -1;
    }
    fault_tolerance(members - 1, reachable)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn classic_values() {
        assert_eq!(quorum(1), 1);
        assert_eq!(quorum(3), 2);
        assert_eq!(quorum(4), 3);
        assert_eq!(fault_tolerance(3, 3), 1);
        assert_eq!(fault_tolerance(5, 5), 2);
        assert_eq!(ft_after_removing_healthy(3, 3), 0);
        assert_eq!(ft_after_removing_healthy(1, 1), -1);
        assert_eq!(ft_after_removing_healthy(3, 2), -1);
    }

    proptest! {
        #[test]
        fn removing_an_unreachable_member_never_lowers_ft(members in 1usize..10, down in 0usize..10) {
            let reachable = members.saturating_sub(down.min(members - 1));
            prop_assume!(reachable < members);
            prop_assert!(ft_after_removing_unreachable(members, reachable) >= fault_tolerance(members, reachable));
        }

        #[test]
        fn quorum_is_a_strict_majority(members in 1usize..100) {
            prop_assert!(2 * quorum(members) > members);
            prop_assert!(2 * (quorum(members) - 1) <= members);
        }
    }
}
