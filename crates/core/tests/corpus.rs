//! The spec corpus, read as the commands read a file ([`load_bytes`]):
//! every file under `tests/bad-specs` must be rejected with exactly the diagnostics in its `.expected` twin, and every file under
//! `tests/good-specs` (and `examples/`) must be accepted with exactly the
//! warnings in its `.warnings` twin (examples must have none).
//!
//! Regenerate expectations with `UPDATE_EXPECT=1 cargo test -p drover-core --test corpus`,
//! then review every changed line by eye: right path, right line:col, and a
//! reason that says what to do.

use drover_core::hash::config_hash;
use drover_core::spec::{Severity, load_bytes};
use std::fs;
use std::path::{Path, PathBuf};

const MIN_BAD_SPECS: usize = 35;

fn dir(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(rel)
}

/// The spec files (`.yaml`, `.yml`, `.json`) in `rel`, sorted by name.
fn specs(rel: &str) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = fs::read_dir(dir(rel))
        .unwrap_or_else(|e| panic!("reading {rel}: {e}"))
        .map(|e| e.expect("directory entry").path())
        .filter(|p| {
            matches!(
                p.extension().and_then(|e| e.to_str()),
                Some("yaml" | "yml" | "json")
            )
        })
        .collect();
    out.sort();
    out
}

fn name(path: &Path) -> String {
    path.file_name().unwrap().to_string_lossy().into_owned()
}

/// The file's bytes: the commands read bytes, so a file that is not UTF-8
/// is reported like any other mistake.
fn read(path: &Path) -> Vec<u8> {
    fs::read(path).unwrap_or_else(|e| panic!("reading {}: {e}", path.display()))
}

fn update_mode() -> bool {
    std::env::var_os("UPDATE_EXPECT").is_some_and(|v| v == "1")
}

/// The diagnostics of `path` of the given severity (`None` = all), rendered as `SPEC:...`.
fn rendered(path: &Path, only: Option<Severity>) -> Vec<String> {
    load_bytes(&read(path))
        .diagnostics
        .iter()
        .filter(|d| only.is_none_or(|s| d.severity == s))
        .map(|d| d.render("SPEC"))
        .collect()
}

/// A line diff of `expected` against `actual` (`-` missing, `+` unexpected).
fn diff(expected: &[String], actual: &[String]) -> String {
    let mut out = String::new();
    for line in expected {
        if !actual.contains(line) {
            out += &format!("  - {line}\n");
        }
    }
    for line in actual {
        if !expected.contains(line) {
            out += &format!("  + {line}\n");
        }
    }
    if out.is_empty() {
        out = format!(
            "  (same lines, different order)\n  expected:\n    {}\n  actual:\n    {}\n",
            expected.join("\n    "),
            actual.join("\n    ")
        );
    }
    out
}

/// Compares `actual` with the lines of `expect_path`, or rewrites it in update mode.
/// Returns a failure description, if any.
fn check_lines(spec: &Path, expect_path: &Path, actual: &[String]) -> Option<String> {
    if update_mode() {
        let mut text = actual.join("\n");
        if !text.is_empty() {
            text.push('\n');
        }
        fs::write(expect_path, text).unwrap();
        return None;
    }
    let Ok(text) = fs::read_to_string(expect_path) else {
        return Some(format!(
            "{}: missing {} (run with UPDATE_EXPECT=1, then review it)\n",
            name(spec),
            name(expect_path)
        ));
    };
    let expected: Vec<String> = text.lines().map(str::to_string).collect();
    (expected != actual).then(|| {
        format!(
            "{}: diagnostics differ from {}\n{}",
            name(spec),
            name(expect_path),
            diff(&expected, actual)
        )
    })
}

fn finish(failures: Vec<String>) {
    assert!(
        failures.is_empty(),
        "{} file(s) failed:\n\n{}",
        failures.len(),
        failures.join("\n")
    );
}

#[test]
fn bad_specs_are_rejected_with_exactly_the_expected_diagnostics() {
    let files = specs("tests/bad-specs");
    assert!(
        files.len() >= MIN_BAD_SPECS,
        "only {} bad specs, want at least {MIN_BAD_SPECS}",
        files.len()
    );
    let mut failures = Vec::new();
    for path in &files {
        let loaded = load_bytes(&read(path));
        if loaded.spec.is_some() {
            failures.push(format!("{}: accepted, but it is a bad spec\n", name(path)));
        }
        if !loaded
            .diagnostics
            .iter()
            .any(|d| d.severity == Severity::Error)
        {
            failures.push(format!("{}: no error reported\n", name(path)));
        }
        let actual = rendered(path, None);
        failures.extend(check_lines(path, &path.with_extension("expected"), &actual));
    }
    finish(failures);
}

#[test]
fn expectations_have_a_spec() {
    let mut failures = Vec::new();
    for (rel, ext) in [
        ("tests/bad-specs", "expected"),
        ("tests/good-specs", "warnings"),
    ] {
        for entry in fs::read_dir(dir(rel)).unwrap() {
            let path = entry.unwrap().path();
            if path.extension().and_then(|e| e.to_str()) != Some(ext) {
                continue;
            }
            let has_spec = ["yaml", "yml", "json"]
                .iter()
                .any(|e| path.with_extension(e).exists());
            if !has_spec {
                failures.push(format!("{}: no spec file beside it\n", name(&path)));
            }
        }
    }
    finish(failures);
}

#[test]
fn good_specs_are_accepted_with_exactly_the_expected_warnings() {
    let files = specs("tests/good-specs");
    assert!(files.len() >= 3, "only {} good specs", files.len());
    let mut failures = Vec::new();
    for path in &files {
        let loaded = load_bytes(&read(path));
        if loaded.spec.is_none() {
            failures.push(format!(
                "{}: rejected:\n  {}\n",
                name(path),
                rendered(path, None).join("\n  ")
            ));
            continue;
        }
        let warnings = rendered(path, Some(Severity::Warning));
        failures.extend(check_lines(
            path,
            &path.with_extension("warnings"),
            &warnings,
        ));
    }
    finish(failures);
}

#[test]
fn examples_validate_without_errors_or_warnings() {
    let files = specs("../../examples");
    assert!(!files.is_empty(), "no examples found");
    let mut failures = Vec::new();
    for path in &files {
        let diags = rendered(path, None);
        if load_bytes(&read(path)).spec.is_none() || !diags.is_empty() {
            failures.push(format!(
                "examples/{}: not clean:\n  {}\n",
                name(path),
                diags.join("\n  ")
            ));
        }
    }
    finish(failures);
}

#[test]
fn json_good_specs_resolve_and_hash_like_their_yaml_twins() {
    let mut pairs = 0;
    for json in specs("tests/good-specs") {
        if json.extension().and_then(|e| e.to_str()) != Some("json") {
            continue;
        }
        let yaml = json.with_extension("yaml");
        assert!(yaml.exists(), "{} has no YAML twin", name(&json));
        let j = load_bytes(&read(&json)).spec.expect("JSON twin parses");
        let y = load_bytes(&read(&yaml)).spec.expect("YAML twin parses");
        assert_eq!(
            j,
            y,
            "{} resolves differently from its YAML twin",
            name(&json)
        );
        for (gj, gy) in j.groups.iter().zip(&y.groups) {
            assert_eq!(
                config_hash(gj),
                config_hash(gy),
                "{}: group {} hashes differently from its YAML twin",
                name(&json),
                gj.name
            );
        }
        pairs += 1;
    }
    assert!(pairs >= 1, "no JSON good spec with a YAML twin");
}

/// Too many groups are refused whole, naming the limit, before any is decoded.
#[test]
fn a_cluster_of_more_groups_than_the_limit_is_rejected_naming_it() {
    let group = |i: usize| {
        format!(
            "  - {{name: g{i}, role: plain, allocation: {{size: 1}}, instance: {{provider: local}}}}\n"
        )
    };
    let text = |n: usize| format!("groups:\n{}", (0..n).map(group).collect::<String>());
    let max = drover_core::spec::MAX_GROUPS;
    assert!(load_bytes(text(max).as_bytes()).spec.is_some());
    let diags: Vec<String> = load_bytes(text(max + 1).as_bytes())
        .diagnostics
        .iter()
        .map(|d| d.render("SPEC"))
        .collect();
    assert_eq!(
        diags,
        [format!(
            "SPEC:2:3: groups: declares {} groups, more than the {max} a cluster may have",
            max + 1
        )]
    );
}
