//! The code's shape, kept: no source file over 700 lines outside tests, and
//! the binary's crate smaller than the controller's (the binary parses,
//! makes one call and prints; procedures live in `drover-controller`).
//! Function length (80 lines outside tests) is clippy's `too_many_lines`,
//! switched on in every crate's root for non-test builds (`clippy.toml`).

use std::path::{Path, PathBuf};

const MAX_FILE_LINES: usize = 700;

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .canonicalize()
        .expect("the workspace's directory")
}

/// Every production source file of every crate: `src/**.rs`, without the
/// test modules kept in files of their own (`tests.rs`, `*_tests.rs`,
/// `tests/`).
fn production_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).expect("read a source directory") {
        let path = entry.expect("a directory entry").path();
        let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
        if path.is_dir() {
            if name != "tests" {
                production_files(&path, out);
            }
        } else if name.ends_with(".rs") && name != "tests.rs" && !name.ends_with("_tests.rs") {
            out.push(path);
        }
    }
}

fn lines(path: &Path) -> usize {
    std::fs::read_to_string(path)
        .expect("read a source file")
        .lines()
        .count()
}

fn crate_lines(name: &str) -> usize {
    let mut files = Vec::new();
    production_files(
        &workspace().join("crates").join(name).join("src"),
        &mut files,
    );
    files.iter().map(|f| lines(f)).sum()
}

#[test]
fn no_source_file_is_over_700_lines_outside_tests() {
    let mut files = Vec::new();
    for krate in std::fs::read_dir(workspace().join("crates")).expect("read crates/") {
        let src = krate.expect("a crate").path().join("src");
        if src.is_dir() {
            production_files(&src, &mut files);
        }
    }
    assert!(files.len() > 50, "found only {} source files", files.len());
    let long: Vec<String> = files
        .iter()
        .map(|f| (f, lines(f)))
        .filter(|(_, n)| *n > MAX_FILE_LINES)
        .map(|(f, n)| format!("{} ({n} lines)", f.display()))
        .collect();
    assert!(long.is_empty(), "over {MAX_FILE_LINES} lines: {long:#?}");
}

#[test]
fn the_binary_is_smaller_than_the_controller() {
    let binary = crate_lines("drover");
    let controller = crate_lines("controller");
    assert!(
        binary < controller,
        "crates/drover/src has {binary} lines, crates/controller/src {controller}: \
         a procedure that decides belongs in the controller crate"
    );
}
