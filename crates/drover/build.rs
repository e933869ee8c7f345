//! Records what `drover version` reports about the build: the git commit
//! (`DROVER_GIT_COMMIT` when set, e.g. by a packager building from a
//! tarball; else `git rev-parse`; else `unknown`), the target, the profile
//! and the cargo features enabled.

use std::path::Path;
use std::process::Command;

fn main() {
    println!("cargo:rerun-if-env-changed=DROVER_GIT_COMMIT");
    let commit = std::env::var("DROVER_GIT_COMMIT")
        .ok()
        .filter(|c| !c.trim().is_empty())
        .or_else(|| git(&["rev-parse", "--short=12", "HEAD"]))
        .unwrap_or_else(|| "unknown".into());
    println!("cargo:rustc-env=DROVER_GIT_COMMIT={}", commit.trim());
    // Build again when HEAD moves (a commit, a checkout). Only files that
    // exist: cargo reruns a script whose watched file is missing every time.
    let mut watched = vec!["HEAD".to_string(), "packed-refs".to_string()];
    if let Some(head_ref) = git(&["symbolic-ref", "-q", "HEAD"]) {
        watched.push(head_ref);
    }
    for name in watched {
        if let Some(path) = git(&["rev-parse", "--git-path", &name])
            && Path::new(&path).exists()
        {
            println!("cargo:rerun-if-changed={path}");
        }
    }
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

/// `git ARGS` in this crate's directory, trimmed; `None` when git is
/// missing, this is no clone, or it fails.
fn git(args: &[&str]) -> Option<String> {
    let out = Command::new("git").args(args).output().ok()?;
    let text = String::from_utf8(out.stdout).ok()?.trim().to_string();
    (out.status.success() && !text.is_empty()).then_some(text)
}
