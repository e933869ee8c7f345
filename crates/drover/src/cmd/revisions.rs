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
use drover_core::spec::secret_value;
use drover_core::spec::{ClusterSpec, GroupSpec, validate_past};
use drover_spi::{Controls, Imported, Revision, Store, StoreError};
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
    let store = wiring::store_to_read(store).await?;
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
        secret_value::redact(&mut v);
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
    /// The revisions in which `export` redacted a secret (a store written
    /// before secrets were refused): they cannot be imported as they were.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    redacted: Vec<u64>,
}

const EXPORT_FORMAT: &str = "drover-export/1";

/// Prints the store's specs and history as JSON.
pub async fn export(store: &StoreArgs) -> Result<ExitCode, MainError> {
    let store = wiring::store_to_read(store).await?;
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
        redacted: Vec::new(),
    };
    println!(
        "{}",
        serde_json::to_string_pretty(&redacted(&doc)?).map_err(anyhow::Error::from)?
    );
    Ok(ExitCode::SUCCESS)
}

/// `doc` as printed: every revision and the controls redacted exactly as
/// `diff` redacts ([`secret_value::redact`]), and the revisions that held a
/// secret listed in `redacted`. A spec accepted since secrets are refused
/// holds none, so its export is unchanged and imports as it was.
fn redacted(doc: &Export) -> Result<serde_json::Value, MainError> {
    let mut v = serde_json::to_value(doc).map_err(anyhow::Error::from)?;
    let mut revs = Vec::new();
    if let Some(revisions) = v["revisions"].as_array_mut() {
        for (r, value) in doc.revisions.iter().zip(revisions) {
            if secret_value::redact(value) {
                revs.push(r.rev);
            }
        }
    }
    secret_value::redact(&mut v["controls"]);
    if !revs.is_empty() {
        v["redacted"] = revs.into();
    }
    Ok(v)
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
    refuse_redacted(&doc, &name)?;
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
        // A forget revision (`destroy --forget-machines`) is recreated as one.
        let spec = validate_past(previous, r.spec.clone())
            .map_err(|refused| MainError::Refused { what, refused })?;
        revisions.push(Revision {
            spec: spec.spec().clone(),
            ..r.clone()
        });
        previous = Some(&r.spec);
    }
    // The newest revision's control must suit the store it comes to.
    if let Some(last) = doc.revisions.last() {
        drover_core::control::spec_fits(&last.spec, wiring::reach(store_args)?)
            .map_err(|m| MainError::BadInput(format!("-f {name}: {m}")))?;
    }
    let store = wiring::store_with(store_args, wiring::Open::OrCreate).await?;
    let already = |id: &str| {
        MainError::BadInput(format!(
            "the store {} already holds cluster {id}: import only into an empty store",
            store_args.url
        ))
    };
    if let Some(id) = store.cluster_id().await.map_err(anyhow::Error::from)? {
        return Err(already(&id));
    }
    // One atomic write: cut short, it leaves no cluster behind.
    let cluster = Imported {
        cluster_id: doc.cluster_id.clone(),
        revisions,
        controls: doc.controls.clone(),
    };
    store.import(&cluster).await.map_err(|e| match e {
        StoreError::ClusterMismatch { current, .. } => already(&current),
        e => MainError::Failed(e.into()),
    })?;
    println!(
        "imported cluster {} with {} revisions",
        doc.cluster_id,
        doc.revisions.len()
    );
    Ok(ExitCode::SUCCESS)
}

/// An export that redacted a secret (a store written before secrets were
/// refused) cannot recreate what it came from: refused whole, naming the
/// revisions, and what to do instead. A placeholder left by hand-editing
/// the `redacted` list away is found too.
fn refuse_redacted(doc: &Export, name: &str) -> Result<(), MainError> {
    let placeholder = format!("\"{}\"", secret_value::REDACTED);
    let revs: Vec<u64> = doc
        .revisions
        .iter()
        .filter(|r| {
            doc.redacted.contains(&r.rev)
                || serde_json::to_string(r).is_ok_and(|t| t.contains(&placeholder))
        })
        .map(|r| r.rev)
        .collect();
    if revs.is_empty() {
        return Ok(());
    }
    let list: Vec<String> = revs.iter().map(u64::to_string).collect();
    Err(MainError::BadInput(format!(
        "-f {name}: revision(s) {} held a secret that export replaced with {} (a spec may hold none): this export cannot recreate them; apply the cluster file, without the secret, to the new store instead",
        list.join(", "),
        secret_value::REDACTED
    )))
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
    fn line_diff_marks_only_changed_lines() {
        let d = line_diff("a\nb\nc", "a\nB\nc\nd");
        assert_eq!(d, [" a", "-b", "+B", " c", "+d"]);
    }
}
