//! Records what `drover version` reports about the build: the git commit
//! (`DROVER_GIT_COMMIT` when set, e.g. by a packager building from a
//! tarball; else `git rev-parse`, with `+dirty` when the sources differ
//! from it; else `unknown`), the target, the profile and the cargo
//! features enabled. Never fails the build: without git, or outside a
//! clone, the commit is `unknown`.

use std::path::Path;
use std::process::Command;

/// What goes into the binary, relative to the top of the clone: a change
/// to a tracked file here (staged or not) makes the build `+dirty`.
const SOURCES: [&str; 4] = ["crates", "Cargo.toml", "Cargo.lock", "rust-toolchain.toml"];

fn main() {
    println!("cargo:rerun-if-env-changed=DROVER_GIT_COMMIT");
    let commit = match std::env::var("DROVER_GIT_COMMIT")
        .ok()
        .filter(|c| !c.trim().is_empty())
    {
        Some(given) => given.trim().to_string(),
        None => from_git().unwrap_or_else(|| "unknown".into()),
    };
    println!("cargo:rustc-env=DROVER_GIT_COMMIT={commit}");
    let mut features: Vec<String> = std::env::vars()
        .filter_map(|(k, _)| k.strip_prefix("CARGO_FEATURE_").map(str::to_lowercase))
        .collect();
    features.sort();
    println!("cargo:rustc-env=DROVER_FEATURES={}", features.join(","));
    for var in ["TARGET", "PROFILE"] {
        let value = std::env::var(var).unwrap_or_else(|_| "unknown".into());
        println!("cargo:rustc-env=DROVER_BUILD_{var}={value}");
    }
}

/// The commit of the clone this crate is tracked in, `+dirty` when
/// [`SOURCES`] differ from it; `None` when git is missing or this crate is
/// not tracked by the repository around it (a tarball unpacked inside some
/// other clone must not borrow that clone's commit).
fn from_git() -> Option<String> {
    git(&["ls-files", "--error-unmatch", "build.rs"])?;
    let top = git(&["rev-parse", "--show-toplevel"])?;
    let hash = git(&["rev-parse", "--short=12", "HEAD"])?;
    // Build again when HEAD moves (a commit, a checkout) or a source changes
    // (dirty, or clean again: a stash, a checkout of a file). Not on the
    // index: staging changes nothing here, and `git status` rewrites it.
    // Only paths that exist: cargo reruns a script whose watched path is
    // missing every time. A directory is watched whole (every file's mtime).
    let mut watched: Vec<String> = SOURCES.iter().map(|s| format!("{top}/{s}")).collect();
    let mut git_files = vec!["HEAD".to_string(), "packed-refs".into()];
    git_files.extend(git(&["symbolic-ref", "-q", "HEAD"]));
    for name in git_files {
        watched.extend(git(&[
            "rev-parse",
            "--path-format=absolute",
            "--git-path",
            &name,
        ]));
    }
    for path in watched.iter().filter(|p| Path::new(p).exists()) {
        println!("cargo:rerun-if-changed={path}");
    }
    // No optional locks: a build must not take the index lock from a git
    // command the developer runs meanwhile.
    let mut status = vec![
        "--no-optional-locks",
        "-C",
        &top,
        "status",
        "--porcelain",
        "--untracked-files=no",
        "--",
    ];
    status.extend(SOURCES);
    let changed = Command::new("git").args(&status).output().ok()?;
    if !changed.status.success() {
        return None;
    }
    let dirty = if changed.stdout.is_empty() {
        ""
    } else {
        "+dirty"
    };
    Some(format!("{hash}{dirty}"))
}

/// `git ARGS` in this crate's directory, trimmed; `None` when git is
/// missing, this is no clone, or it fails.
fn git(args: &[&str]) -> Option<String> {
    let out = Command::new("git").args(args).output().ok()?;
    let text = String::from_utf8(out.stdout).ok()?.trim().to_string();
    (out.status.success() && !text.is_empty()).then_some(text)
}
