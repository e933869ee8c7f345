//! Commands that commit a new desired revision derived from the history:
//! `rollback`, `restart` (and `destroy`, in its own module); reading it: `diff`, `export`; and
//! `import` into an empty store. Every change is validated as a whole
//! (`cmd::commit::validated`: as a cluster file, plus the transition rules)
//! and goes through the store's compare-and-swap commit, so the planner
//! carries it out with the same safety rules as an `apply`.

use crate::cli::StoreArgs;
use crate::cmd::commit::{commit, validated};
use crate::error::MainError;
use crate::wiring;
use drover_controller::wall_ms;
use drover_core::revision::{rollback_target, with_group};
use drover_core::spec::{ClusterSpec, GroupSpec};
use drover_spi::{Controls, Revision, Store};
use serde::{Deserialize, Serialize};
use std::path::Path;
use std::process::ExitCode;

/// Commits the group's spec from `to` (default: the newest converged
/// revision before the current one in which the group differs).
pub async fn rollback(
    group: &str,
    to: Option<u64>,
    store: &StoreArgs,
) -> Result<ExitCode, MainError> {
    let store = wiring::store(store).await?;
    let history = history(store.as_ref()).await?;
    let current = current(&history)?;
    declared(current, group)?;
    let (target, old) = match to {
        Some(rev) => {
            let r = history.iter().find(|r| r.rev == rev).ok_or_else(|| {
                MainError::BadInput(format!(
                    "--to {rev}: no such revision (revisions: 1..{}); see drover history",
                    current.rev
                ))
            })?;
            let old = r.spec.group(group).ok_or_else(|| {
                MainError::BadInput(format!(
                    "group {group} does not exist in revision {rev}: choose another --to"
                ))
            })?;
            (rev, old)
        }
        None => rollback_target(history.iter().map(Revision::past), current.past(), group).ok_or_else(
            || {
                MainError::BadInput(format!(
                    "group {group} has no earlier converged revision that differs from the current one: nothing to roll back to (see drover history)"
                ))
            },
        )?,
    };
    let what = format!("rollback of {group} to revision {target}");
    let spec = validated(
        Some(&current.spec),
        with_group(&current.spec, old.clone()),
        &what,
    )?;
    let rev = commit(store.as_ref(), current.rev, &spec, &what, true).await?;
    println!("committed revision {rev}: {group} as in revision {target}");
    Ok(ExitCode::SUCCESS)
}

/// A forced roll: every member created before now is replaced.
pub async fn restart(group: &str, store: &StoreArgs) -> Result<ExitCode, MainError> {
    let store = wiring::store(store).await?;
    let history = history(store.as_ref()).await?;
    let current = current(&history)?;
    let mut g = declared(current, group)?.clone();
    g.rollout_after = Some(wall_ms());
    let what = format!("restart of {group}");
    let spec = validated(Some(&current.spec), with_group(&current.spec, g), &what)?;
    let rev = commit(store.as_ref(), current.rev, &spec, &what, false).await?;
    println!(
        "committed revision {rev}: every member of {group} is rolled (follow with drover status)"
    );
    Ok(ExitCode::SUCCESS)
}

/// Shows what changed between two revisions (default: `from` → current),
/// with secrets redacted.
pub async fn diff(from: u64, to: Option<u64>, store: &StoreArgs) -> Result<ExitCode, MainError> {
    let store = wiring::store(store).await?;
    let history = history(store.as_ref()).await?;
    let current = current(&history)?;
    let find = |rev: u64| {
        history.iter().find(|r| r.rev == rev).ok_or_else(|| {
            MainError::BadInput(format!(
                "no revision {rev} (revisions: 1..{}); see drover history",
                current.rev
            ))
        })
    };
    let (a, b) = (find(from)?, find(to.unwrap_or(current.rev))?);
    let text = |r: &Revision| {
        let mut v = serde_json::to_value(&r.spec).unwrap_or_default();
        redact(&mut v);
        serde_json::to_string_pretty(&v).unwrap_or_default()
    };
    println!("--- revision {}\n+++ revision {}", a.rev, b.rev);
    let lines = line_diff(&text(a), &text(b));
    if lines.iter().all(|l| l.starts_with(' ')) {
        println!("(no difference)");
    }
    for l in lines.iter().filter(|l| !l.starts_with(' ')) {
        println!("{l}");
    }
    Ok(ExitCode::SUCCESS)
}

/// Keys whose values are never shown.
fn is_secret_key(key: &str) -> bool {
    let k = key.to_ascii_lowercase();
    ["secret", "token", "password", "passwd", "key", "credential"]
        .iter()
        .any(|s| k.contains(s))
        && k != "engine_labels"
}

/// Replaces secret-looking values (by key, or swarm token/unlock key
/// prefixes anywhere) with `<redacted>`.
pub fn redact(v: &mut serde_json::Value) {
    match v {
        serde_json::Value::Object(map) => {
            for (k, val) in map.iter_mut() {
                if is_secret_key(k) && !val.is_object() && !val.is_array() {
                    *val = "<redacted>".into();
                } else {
                    redact(val);
                }
            }
        }
        serde_json::Value::Array(items) => items.iter_mut().for_each(redact),
        serde_json::Value::String(s) if s.contains("SWMTKN-") || s.contains("SWMKEY-") => {
            *s = "<redacted>".into();
        }
        _ => {}
    }
}

/// A line diff (longest common subsequence): `-`, `+` or ` ` per line.
fn line_diff(a: &str, b: &str) -> Vec<String> {
    let (a, b): (Vec<&str>, Vec<&str>) = (a.lines().collect(), b.lines().collect());
    let mut lcs = vec![vec![0usize; b.len() + 1]; a.len() + 1];
    for i in (0..a.len()).rev() {
        for j in (0..b.len()).rev() {
            lcs[i][j] = if a[i] == b[j] {
                lcs[i + 1][j + 1] + 1
            } else {
                lcs[i + 1][j].max(lcs[i][j + 1])
            };
        }
    }
    let (mut i, mut j, mut out) = (0, 0, Vec::new());
    while i < a.len() || j < b.len() {
        if i < a.len() && j < b.len() && a[i] == b[j] {
            out.push(format!(" {}", a[i]));
            i += 1;
            j += 1;
        } else if i < a.len() && (j == b.len() || lcs[i + 1][j] >= lcs[i][j + 1]) {
            out.push(format!("-{}", a[i]));
            i += 1;
        } else {
            out.push(format!("+{}", b[j]));
            j += 1;
        }
    }
    out
}

/// Everything `import` needs to recreate a store: the cluster id (every
/// machine is tagged with it), every revision, the operator controls.
#[derive(Debug, Serialize, Deserialize)]
struct Export {
    format: String,
    cluster_id: String,
    revisions: Vec<Revision>,
    controls: Controls,
}

const EXPORT_FORMAT: &str = "drover-export/1";

/// Prints the store's specs and history as JSON.
pub async fn export(store: &StoreArgs) -> Result<ExitCode, MainError> {
    let store = wiring::store(store).await?;
    let cluster_id = store
        .cluster_id()
        .await
        .map_err(anyhow::Error::from)?
        .ok_or_else(|| {
            MainError::BadInput("the store holds no cluster yet: nothing to export".into())
        })?;
    let doc = Export {
        format: EXPORT_FORMAT.into(),
        cluster_id,
        revisions: history(store.as_ref()).await?,
        controls: store.controls().await.map_err(anyhow::Error::from)?,
    };
    println!(
        "{}",
        serde_json::to_string_pretty(&doc).map_err(anyhow::Error::from)?
    );
    Ok(ExitCode::SUCCESS)
}

/// Recreates an exported cluster's specs and history in an empty store.
pub async fn import(file: &Path, store_args: &StoreArgs) -> Result<ExitCode, MainError> {
    let (name, bytes) = crate::spec_file::read_input(
        file,
        "a file written by drover export, or - for standard input",
    )?;
    let doc: Export = serde_json::from_slice(&bytes).map_err(|e| {
        MainError::BadInput(format!(
            "-f {name}: not a drover export ({e}); give a file written by drover export"
        ))
    })?;
    if doc.format != EXPORT_FORMAT {
        return Err(MainError::BadInput(format!(
            "-f {name}: format {} is not {EXPORT_FORMAT}; export it again with this drover",
            doc.format
        )));
    }
    // The id becomes a tag on every machine, as a group's name does.
    if !drover_core::spec::is_name(&doc.cluster_id) {
        return Err(MainError::BadInput(format!(
            "-f {name}: cluster id {:?} is not a valid cluster id: use {}",
            doc.cluster_id,
            drover_core::spec::NAME_RULE
        )));
    }
    // Each revision is a commit like any other: all are checked before the
    // store is touched, each against the one before it.
    let mut previous: Option<&ClusterSpec> = None;
    let mut revisions = Vec::with_capacity(doc.revisions.len());
    for r in &doc.revisions {
        let what = format!("import of revision {} of -f {name}", r.rev);
        revisions.push((r, validated(previous, r.spec.clone(), &what)?));
        previous = Some(&r.spec);
    }
    let store = wiring::store_with(store_args, wiring::Open::OrCreate).await?;
    if let Some(id) = store.cluster_id().await.map_err(anyhow::Error::from)? {
        return Err(MainError::BadInput(format!(
            "the store {} already holds cluster {id}: import only into an empty store",
            store_args.url
        )));
    }
    store
        .init_cluster(&doc.cluster_id)
        .await
        .map_err(anyhow::Error::from)?;
    let mut rev = 0;
    let mut converged = Vec::new();
    for (r, spec) in &revisions {
        rev = store
            .commit(rev, spec.spec(), r.provenance.clone(), r.is_rollback)
            .await
            .map_err(anyhow::Error::from)?;
        if r.converged {
            converged.push(rev);
        }
    }
    mark_converged(store.as_ref(), &converged).await?;
    store
        .set_controls(&doc.controls)
        .await
        .map_err(anyhow::Error::from)?;
    println!(
        "imported cluster {} with {} revisions",
        doc.cluster_id,
        doc.revisions.len()
    );
    Ok(ExitCode::SUCCESS)
}

/// Marks the imported revisions that had converged where they were
/// exported: `rollback`'s default target is the newest converged one, so
/// without the marks a copy would have nothing to roll back to. The mark is
/// a controller's (fenced) write, so the import takes the new store's first
/// epoch; a controller started later campaigns past it.
async fn mark_converged(store: &dyn Store, revs: &[u64]) -> Result<(), MainError> {
    if revs.is_empty() {
        return Ok(());
    }
    let epoch = store
        .campaign("drover import")
        .await
        .map_err(anyhow::Error::from)?;
    for rev in revs {
        store
            .mark_converged(epoch, *rev)
            .await
            .map_err(anyhow::Error::from)?;
    }
    Ok(())
}

pub(crate) async fn history(store: &dyn Store) -> Result<Vec<Revision>, MainError> {
    Ok(store.history().await.map_err(anyhow::Error::from)?)
}

pub(crate) fn current(history: &[Revision]) -> Result<&Revision, MainError> {
    history.last().ok_or_else(|| {
        MainError::BadInput("the store holds no desired state yet: run drover apply first".into())
    })
}

pub(crate) fn declared<'a>(rev: &'a Revision, group: &str) -> Result<&'a GroupSpec, MainError> {
    rev.spec.group(group).ok_or_else(|| {
        let known: Vec<&str> = rev.spec.groups.iter().map(|g| g.name.as_str()).collect();
        MainError::BadInput(format!(
            "no group named {group} in the desired state (groups: {})",
            known.join(", ")
        ))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn redaction_hides_secret_keys_and_swarm_tokens_anywhere() {
        let mut v = serde_json::json!({
            "instance": {"properties": {"api_token": "abc", "region": "x", "nested": ["SWMTKN-1-zzz"]}},
            "flavor": {"engine_labels": {"release": "v1"}, "boot_script": "join SWMKEY-1-k"}
        });
        redact(&mut v);
        let text = v.to_string();
        assert!(
            !text.contains("abc") && !text.contains("SWMTKN") && !text.contains("SWMKEY"),
            "{text}"
        );
        assert!(
            text.contains("\"region\":\"x\"") && text.contains("\"release\":\"v1\""),
            "{text}"
        );
    }

    #[test]
    fn line_diff_marks_only_changed_lines() {
        let d = line_diff("a\nb\nc", "a\nB\nc\nd");
        assert_eq!(d, [" a", "-b", "+B", " c", "+d"]);
    }
}
