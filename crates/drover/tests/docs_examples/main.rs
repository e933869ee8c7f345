//! Docs that are executed: every ```` ```console ```` transcript in README.md,
//! the other top-level markdown files and docs/*.md is run with the built
//! binary and its output compared with what the doc shows, so a doc that
//! drifts from the tool fails CI. Transcripts that need an engine or etcd are
//! marked `<!-- docs-test: not executed: WHY -->`. The convention:
//! docs/testing.md, "Docs that are executed".

mod markdown;
mod session;
mod transcript;

use markdown::Item;
use session::Session;
use std::path::{Path, PathBuf};

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// README.md and its siblings, then docs/*.md.
fn docs(repo: &Path) -> Vec<PathBuf> {
    let mut docs = Vec::new();
    for dir in [repo.to_path_buf(), repo.join("docs")] {
        let mut here: Vec<PathBuf> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.extension().is_some_and(|e| e == "md"))
            .collect();
        here.sort();
        docs.extend(here);
    }
    docs
}

/// Runs one doc's items in one session; returns (commands run, failures).
fn check(repo: &Path, doc: &Path) -> (usize, Vec<String>) {
    let name = doc.strip_prefix(repo).unwrap_or(doc).display().to_string();
    let items = match markdown::parse(&std::fs::read_to_string(doc).unwrap()) {
        Ok(items) => items,
        Err(e) => return (0, vec![format!("{name}: {e}")]),
    };
    let mut session = Session::new(repo);
    let (mut ran, mut failures) = (0, Vec::new());
    for (_, item) in items {
        match item {
            Item::File { path, text } => session.write(&path, &text),
            Item::Seed { store, file } => session.seed(&store, &file),
            Item::Console(steps) => {
                for step in steps {
                    let actual = session.run(&step.command);
                    ran += 1;
                    if !transcript::matches(&step.expected, &actual) {
                        failures.push(format!(
                            "{name}:{}: `{}` printed what the doc does not show.\n--- the doc shows:\n{}\n--- it printed:\n{}\n",
                            step.line,
                            step.command,
                            step.expected.join("\n"),
                            actual.join("\n")
                        ));
                    }
                }
            }
        }
    }
    (ran, failures)
}

#[test]
fn the_docs_show_what_the_engine_free_commands_print() {
    let repo = repo();
    let mut failures = Vec::new();
    let mut ran = Vec::new();
    for doc in docs(&repo) {
        let (n, f) = check(&repo, &doc);
        ran.push((doc.file_name().unwrap().to_string_lossy().into_owned(), n));
        failures.extend(f);
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    // The docs whose examples are the tour of the engine-free commands.
    for must in ["README.md", "cli.md", "spec.md"] {
        let n = ran.iter().find(|(d, _)| d == must).map_or(0, |r| r.1);
        assert!(n > 0, "{must}: no example was executed ({ran:?})");
    }
}
