//! Property test of the cluster-file decoder: whatever the bytes, it
//! returns (no panic, no hang, memory bounded by `yaml::MAX_*`), and every
//! finding carries a position in the file (line and column from 1). Inputs
//! are generated YAML and JSON documents made of drover's own field names
//! and tricky scalars, and corpus files mutated byte by byte.
//!
//! Boot script templates are generated too (loops, repetition, macros,
//! nesting, broken syntax), and that property runs in a child process of
//! this test binary under an address-space limit ([`MEMORY_LIMIT_KIB`]) and
//! a CPU-time limit, so a render that allocates or loops without bound fails
//! the test instead of the machine.
//!
//! The normal test run tries 256 cases per property (a few seconds); a
//! longer search: `PROPTEST_CASES=100000 cargo test -p drover-core --release
//! --test decoder_fuzz` (docs/testing.md).

use drover_core::spec::{Severity, load_bytes};
use proptest::prelude::*;
use proptest::test_runner::{Config, TestRunner};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

/// Far above any real file's decode time (well under a millisecond): a
/// case this slow means some input makes the decoder do far too much work.
const SLOW: Duration = Duration::from_secs(2);

/// Decodes `bytes` and checks the properties every input must have.
fn check(bytes: &[u8]) -> Result<(), TestCaseError> {
    let started = Instant::now();
    let loaded = load_bytes(bytes);
    let took = started.elapsed();
    prop_assert!(took < SLOW, "decoding took {took:?}");
    let errors = loaded
        .diagnostics
        .iter()
        .filter(|d| d.severity == Severity::Error)
        .count();
    prop_assert_eq!(
        loaded.spec.is_some(),
        errors == 0,
        "{:?}",
        loaded.diagnostics
    );
    for d in &loaded.diagnostics {
        prop_assert!(
            d.pos.line >= 1 && d.pos.col >= 1,
            "no position: {}",
            d.render("SPEC")
        );
        prop_assert!(!d.message.is_empty() && !d.path.is_empty());
    }
    Ok(())
}

/// Field names drover knows, and a few it does not, so generated documents
/// reach deep into the decoder instead of stopping at the first unknown key.
const KEYS: &[&str] = &[
    "groups",
    "gc",
    "orphan_grace",
    "name",
    "role",
    "allocation",
    "size",
    "logical_ids",
    "zones",
    "zone",
    "id",
    "instance",
    "provider",
    "properties",
    "flavor",
    "kind",
    "boot_script",
    "engine_labels",
    "update",
    "strategy",
    "max_in_flight",
    "canaries",
    "watch",
    "step_timeout",
    "on_failure",
    "health",
    "startup_timeout",
    "unhealthy_after",
    "max_attempts",
    "max_unhealthy",
    "drain",
    "timeout",
    "on_timeout",
    "rollout",
    "after",
    "<<",
    "drover.link",
    "x",
    "",
];

/// Scalars that sit on the decoder's edges.
const SCALARS: &[&str] = &[
    "manager",
    "worker",
    "plain",
    "local",
    "sim",
    "locl",
    "swarm",
    "vanilla",
    "surge",
    "replace",
    "pause",
    "rollback",
    "force",
    "block",
    "0",
    "1",
    "3",
    "-1",
    "100000",
    "100001",
    "4294967295",
    "99999999999999999999999",
    "1.5",
    "30s",
    "0s",
    "2M",
    "30S",
    "5 min",
    "1h30m",
    "366d",
    "50%",
    "0%",
    "101%",
    "127.0.0.1",
    "10.0.0.1",
    "::1",
    "2026-12-01T00:00:00Z",
    "{{ nope }}",
    "{% if %}",
    "null",
    "~",
    "true",
    "",
    "é",
];

/// A generated document tree.
#[derive(Debug, Clone)]
enum Doc {
    Scalar(String),
    Seq(Vec<Doc>),
    Map(Vec<(String, Doc)>),
}

fn doc() -> impl Strategy<Value = Doc> {
    let leaf = prop_oneof![
        prop::sample::select(SCALARS).prop_map(|s| Doc::Scalar(s.to_string())),
        "[a-z0-9 .:%-]{0,12}".prop_map(Doc::Scalar),
    ];
    leaf.prop_recursive(6, 64, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..5).prop_map(Doc::Seq),
            prop::collection::vec(
                (prop::sample::select(KEYS).prop_map(str::to_string), inner),
                0..6
            )
            .prop_map(Doc::Map),
        ]
    })
}

/// `s` as a JSON string, which is also a YAML double-quoted scalar.
fn quote(s: &str) -> String {
    serde_json::Value::String(s.to_string()).to_string()
}

/// The tree in flow style (JSON when every scalar is quoted).
fn flow(d: &Doc, quote_all: bool) -> String {
    match d {
        Doc::Scalar(s) if quote_all => quote(s),
        Doc::Scalar(s) => s.clone(),
        Doc::Seq(items) => format!(
            "[{}]",
            items
                .iter()
                .map(|i| flow(i, quote_all))
                .collect::<Vec<_>>()
                .join(", ")
        ),
        Doc::Map(entries) => format!(
            "{{{}}}",
            entries
                .iter()
                .map(|(k, v)| format!("{}: {}", quote(k), flow(v, quote_all)))
                .collect::<Vec<_>>()
                .join(", ")
        ),
    }
}

/// The tree in block style, as operators write YAML.
fn block(d: &Doc, indent: usize, out: &mut String) {
    let pad = " ".repeat(indent);
    match d {
        Doc::Scalar(s) => *out += &format!("{pad}{}\n", quote(s)),
        Doc::Seq(items) if items.is_empty() => *out += &format!("{pad}[]\n"),
        Doc::Map(entries) if entries.is_empty() => *out += &format!("{pad}{{}}\n"),
        Doc::Seq(items) => {
            for item in items {
                *out += &format!("{pad}-\n");
                block(item, indent + 2, out);
            }
        }
        Doc::Map(entries) => {
            for (k, v) in entries {
                match v {
                    Doc::Scalar(s) => *out += &format!("{pad}{k}: {s}\n"),
                    _ => {
                        *out += &format!("{pad}{}:\n", quote(k));
                        block(v, indent + 2, out);
                    }
                }
            }
        }
    }
}

/// Every spec file of the corpus and the examples.
fn corpus() -> Vec<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut out = Vec::new();
    for dir in ["tests/bad-specs", "tests/good-specs", "../../examples"] {
        for entry in std::fs::read_dir(root.join(dir)).expect("corpus directory") {
            let path = entry.expect("directory entry").path();
            if matches!(
                path.extension().and_then(|e| e.to_str()),
                Some("yaml" | "yml" | "json")
            ) {
                out.push(path);
            }
        }
    }
    out.sort();
    out
}

/// Byte strings that tend to break parsers: indentation, flow, anchors and
/// aliases, merge keys, document markers, tabs, invalid UTF-8.
const SPLICES: &[&[u8]] = &[
    b"\t",
    b"  ",
    b"\n",
    b"- ",
    b": ",
    b"{",
    b"}",
    b"[",
    b"]",
    b"&a ",
    b"*a",
    b"<<: *a",
    b"---\n",
    b"...\n",
    b"\"",
    b"'",
    b"#",
    b"|\n",
    b">-\n",
    b"!!str ",
    b"%YAML 1.2\n",
    b"\xff",
    b"\xc3",
    b"\x00",
    b"99999999999999999999",
    b"{{ nope }}",
];

#[derive(Debug, Clone)]
enum Mutation {
    Delete { at: usize, len: usize },
    Insert { at: usize, what: Vec<u8> },
    Duplicate { at: usize, len: usize },
}

fn mutation() -> impl Strategy<Value = Mutation> {
    prop_oneof![
        (any::<usize>(), 1..20usize).prop_map(|(at, len)| Mutation::Delete { at, len }),
        (
            any::<usize>(),
            prop_oneof![
                prop::sample::select(SPLICES).prop_map(<[u8]>::to_vec),
                prop::collection::vec(any::<u8>(), 1..4),
            ]
        )
            .prop_map(|(at, what)| Mutation::Insert { at, what }),
        (any::<usize>(), 1..200usize).prop_map(|(at, len)| Mutation::Duplicate { at, len }),
    ]
}

fn apply(bytes: &mut Vec<u8>, m: &Mutation) {
    let n = bytes.len();
    match m {
        Mutation::Delete { at, len } if n > 0 => {
            let at = at % n;
            bytes.drain(at..(at + len).min(n));
        }
        Mutation::Insert { at, what } => {
            let at = at % (n + 1);
            bytes.splice(at..at, what.iter().copied());
        }
        Mutation::Duplicate { at, len } if n > 0 => {
            let at = at % n;
            let piece = bytes[at..(at + len).min(n)].to_vec();
            bytes.splice(at..at, piece);
        }
        _ => {}
    }
}

proptest! {
    #[test]
    fn generated_block_yaml_is_decoded_or_rejected_with_positions(d in doc()) {
        let mut text = String::new();
        block(&d, 0, &mut text);
        check(text.as_bytes())?;
    }

    #[test]
    fn generated_flow_yaml_and_json_are_decoded_or_rejected_with_positions(
        d in doc(),
        json in any::<bool>(),
    ) {
        check(flow(&d, json).as_bytes())?;
    }

    #[test]
    fn mutated_corpus_files_are_decoded_or_rejected_with_positions(
        file in prop::sample::select(corpus()),
        mutations in prop::collection::vec(mutation(), 1..6),
    ) {
        let mut bytes = std::fs::read(&file).expect("corpus file");
        for m in &mutations {
            apply(&mut bytes, m);
        }
        check(&bytes)?;
    }
}

/// The address space the template property may use: the test binary and
/// its threads need far less, a render past the budget far more.
const MEMORY_LIMIT_KIB: u64 = 768 * 1024;

/// The CPU time it may use: a render that loops without end is killed
/// (and the test fails) instead of running until someone notices.
const CPU_LIMIT_SECS: u64 = 120;

/// Set in the child process that runs the property under the limit.
const CHILD: &str = "DROVER_DECODER_FUZZ_CHILD";

/// Numbers that sit on the render budget's edges, and far past them.
const COUNTS: &[&str] = &[
    "0",
    "1",
    "-1",
    "64",
    "1000",
    "16384",
    "100000",
    "1048577",
    "1000000000",
    "4000000000",
];

/// A generated boot script template: literals, expressions and every kind
/// of block that repeats, nests or captures output.
fn template() -> impl Strategy<Value = String> {
    let count = prop::sample::select(COUNTS);
    let expr = prop_oneof![
        count.clone().prop_map(|n| format!("'xy' * {n}")),
        count
            .clone()
            .prop_map(|n| format!("range({n})|list|length")),
        (count.clone(), count.clone()).prop_map(|(a, b)| format!("{a} * {b}")),
        prop::sample::select(
            &[
                "role",
                "cluster_id ~ group ~ link",
                "engine_labels|tojson",
                "join_addr|upper",
                "nope",
                "init",
                "(role * 1000)|length",
            ][..]
        )
        .prop_map(str::to_string),
    ];
    let leaf = prop_oneof![
        "[a-z #!/\n]{0,12}",
        expr.clone().prop_map(|e| format!("{{{{ {e} }}}}")),
        prop::sample::select(&["{% for %}", "{{", "{% endfor %}", "{{ }}", "{% if init %}"][..])
            .prop_map(str::to_string),
    ];
    leaf.prop_recursive(5, 48, 4, move |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 1..4).prop_map(|parts| parts.concat()),
            (count.clone(), inner.clone())
                .prop_map(|(n, b)| format!("{{% for i in range({n}) %}}{b}{{% endfor %}}")),
            (inner.clone(), inner.clone())
                .prop_map(|(a, b)| format!("{{% if init %}}{a}{{% else %}}{b}{{% endif %}}")),
            inner.clone().prop_map(|b| format!(
                "{{% macro m(n) %}}{b}{{{{ m(n + 1) }}}}{{% endmacro %}}{{{{ m(0) }}}}"
            )),
            (expr.clone(), inner.clone())
                .prop_map(|(e, b)| format!("{{% set s = {e} %}}{b}{{{{ s ~ s }}}}")),
            inner
                .clone()
                .prop_map(|b| format!("{{% filter upper %}}{b}{{% endfilter %}}")),
        ]
    })
}

/// A cluster file whose one group boots with `script`.
fn cluster_with(script: &str, role: &str) -> String {
    format!(
        "groups:\n  - name: g\n    role: {role}\n    allocation: {{ size: 1 }}\n    \
         instance: {{ provider: local }}\n    flavor:\n      boot_script: {}\n",
        quote(script)
    )
}

/// Runs this test binary's `test` alone in a child process under
/// [`MEMORY_LIMIT_KIB`]: whether it passed there, and what it printed.
fn under_memory_limit(test: &str) -> (bool, String) {
    let exe = std::env::current_exe().expect("the test binary");
    let out = Command::new("sh")
        .arg("-c")
        .arg(format!(
            "ulimit -v {MEMORY_LIMIT_KIB} && ulimit -t {CPU_LIMIT_SECS} && exec \"$0\" \"$@\""
        ))
        .arg(exe)
        .args(["--exact", test, "--test-threads=1", "--nocapture"])
        .env(CHILD, "1")
        .output()
        .expect("running the test binary");
    let printed = format!(
        "{}\n{}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.success(), printed)
}

#[test]
fn generated_templates_are_rendered_within_the_budget_under_a_memory_limit() {
    if std::env::var_os(CHILD).is_none() {
        let (passed, printed) = under_memory_limit(
            "generated_templates_are_rendered_within_the_budget_under_a_memory_limit",
        );
        assert!(
            passed,
            "failed under a {MEMORY_LIMIT_KIB} KiB limit: {printed}"
        );
        return;
    }
    let roles = prop::sample::select(&["manager", "worker", "plain"][..]);
    let mut runner = TestRunner::new(Config {
        failure_persistence: None,
        ..Config::default()
    });
    runner
        .run(&(template(), roles), |(script, role)| {
            check(cluster_with(&script, role).as_bytes())
        })
        .unwrap_or_else(|e| panic!("{e}"));
}

#[test]
fn the_memory_limit_fails_a_test_that_allocates_past_it() {
    if std::env::var_os(CHILD).is_none() {
        let (passed, printed) =
            under_memory_limit("the_memory_limit_fails_a_test_that_allocates_past_it");
        assert!(!passed, "the limit did not hold: {printed}");
        return;
    }
    // What an unbounded render would do: one allocation past the limit.
    let v = vec![1u8; (MEMORY_LIMIT_KIB as usize + 1) * 1024];
    std::hint::black_box(&v);
}
