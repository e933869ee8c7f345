//! What the local provider can carry: it starts each machine's `dockerd`
//! with every engine label as one process argument (`--label KEY=VALUE`),
//! and Linux refuses to start a process with an argument longer than
//! `MAX_ARG_STRLEN` (E2BIG), or with arguments and environment together
//! over `ARG_MAX`. One rule, asked by `validate` of each group on the
//! local provider and by the provider before it starts an engine.

use std::collections::BTreeMap;

/// Linux's longest single process argument, its terminating NUL included
/// (`MAX_ARG_STRLEN`: 32 pages of 4 KiB).
pub const MAX_ARG_STRLEN: usize = 131_072;
/// The most all of a machine's labels may take as arguments together:
/// half the usual `ARG_MAX` (2 MiB, a quarter of an 8 MiB stack), leaving
/// the rest for dockerd's other arguments and its environment.
pub const MAX_LABEL_ARGS: usize = 1024 * 1024;

/// The argument that carries one engine label.
pub fn label_argument(key: &str, value: &str) -> String {
    format!("{key}={value}")
}

/// Labels the local provider cannot pass to dockerd.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LabelTooLong {
    /// One label's argument is over [`MAX_ARG_STRLEN`].
    #[error(
        "engine label `{key}` is {len} bytes as dockerd's argument `{key}=…`: the local provider passes each label as one process argument, and Linux takes at most {} bytes in one; shorten it",
        MAX_ARG_STRLEN - 1
    )]
    One {
        /// The label's key.
        key: String,
        /// Its argument's length.
        len: usize,
    },
    /// All of them together are over [`MAX_LABEL_ARGS`].
    #[error(
        "the engine labels are {len} bytes as dockerd's arguments: the local provider passes them on one command line, which takes at most {MAX_LABEL_ARGS} bytes of labels; use fewer or shorter ones"
    )]
    All {
        /// Their arguments' length together (NULs included).
        len: usize,
    },
}

/// Every problem with `labels` as the local provider would pass them.
pub fn label_problems(labels: &BTreeMap<String, String>) -> Vec<LabelTooLong> {
    let mut out = Vec::new();
    let mut total = 0usize;
    for (k, v) in labels {
        // `--label` and the NUL after each of the two arguments.
        let len = label_argument(k, v).len();
        total = total.saturating_add(len + 1 + "--label".len() + 1);
        if len + 1 > MAX_ARG_STRLEN {
            out.push(LabelTooLong::One {
                key: k.clone(),
                len,
            });
        }
    }
    if total > MAX_LABEL_ARGS {
        out.push(LabelTooLong::All { len: total });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_argument_holds_at_most_max_arg_strlen_less_its_nul() {
        let fits = BTreeMap::from([("k".to_string(), "v".repeat(MAX_ARG_STRLEN - 3))]);
        assert_eq!(label_problems(&fits), []);
        let over = BTreeMap::from([("k".to_string(), "v".repeat(MAX_ARG_STRLEN - 2))]);
        assert_eq!(
            label_problems(&over),
            [LabelTooLong::One {
                key: "k".into(),
                len: MAX_ARG_STRLEN
            }]
        );
    }

    #[test]
    fn all_of_them_together_are_bounded() {
        let many: BTreeMap<String, String> = (0..10)
            .map(|i| (format!("k{i}"), "v".repeat(120_000)))
            .collect();
        let problems = label_problems(&many);
        assert!(
            matches!(problems.as_slice(), [LabelTooLong::All { len }] if *len > MAX_LABEL_ARGS),
            "{problems:?}"
        );
    }
}
