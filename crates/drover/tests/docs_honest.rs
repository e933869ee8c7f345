//! Docs that cannot drift: the lists the docs keep in prose — the
//! providers, the store backends, the commands, the crates — compared with
//! what the built binary and the workspace say, both ways, so a provider or
//! command added without its docs fails here, and so does a doc naming one
//! that is gone. Transcripts are checked by `docs_examples`; these are the
//! lists no transcript shows.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn read(doc: &str) -> String {
    std::fs::read_to_string(repo().join(doc)).unwrap_or_else(|e| panic!("{doc}: {e}"))
}

/// What the binary prints for `args` (stdout and stderr), whatever its exit code.
fn drover(args: &[&str]) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_drover"))
        .args(args)
        .env_remove("DROVER_STORE")
        .output()
        .expect("the drover binary runs");
    let mut text = String::from_utf8_lossy(&out.stdout).into_owned();
    text.push_str(&String::from_utf8_lossy(&out.stderr));
    text
}

/// `drover version -o json`'s list under `key`.
fn version_list(key: &str) -> BTreeSet<String> {
    let json: serde_json::Value =
        serde_json::from_str(&drover(&["version", "-o", "json"])).expect("version prints JSON");
    json[key]
        .as_array()
        .unwrap_or_else(|| panic!("drover version has no {key} list"))
        .iter()
        .map(|v| v.as_str().expect("a name").to_string())
        .collect()
}

/// Every `` `word` `` in `text` (backquoted, letters/digits/`-`/`_` only).
fn backquoted(text: &str) -> BTreeSet<String> {
    text.split('`')
        .skip(1)
        .step_by(2)
        .filter(|w| {
            !w.is_empty()
                && w.chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
        })
        .map(str::to_string)
        .collect()
}

/// The paragraph of `doc` (lines up to a blank line) starting at the line
/// that contains `marker`.
fn paragraph(doc: &str, marker: &str) -> String {
    let text = read(doc);
    let start = text
        .find(marker)
        .unwrap_or_else(|| panic!("{doc} no longer contains {marker:?}"));
    let rest = &text[start..];
    rest[..rest.find("\n\n").unwrap_or(rest.len())].to_string()
}

/// The line of `doc` that contains `marker`, from the marker on.
fn line(doc: &str, marker: &str) -> String {
    let para = paragraph(doc, marker);
    para.lines().next().unwrap_or_default().to_string()
}

/// The subcommands `--help` lists for `args` (`help` left out).
fn subcommands(args: &[&str]) -> Vec<String> {
    let mut help_args = args.to_vec();
    help_args.push("--help");
    drover(&help_args)
        .lines()
        .skip_while(|l| !l.starts_with("Commands:"))
        .skip(1)
        .take_while(|l| !l.trim().is_empty())
        .filter_map(|l| l.split_whitespace().next())
        .filter(|c| *c != "help")
        .map(str::to_string)
        .collect()
}

fn assert_same(what: &str, documented: &BTreeSet<String>, real: &BTreeSet<String>) {
    let missing: Vec<_> = real.difference(documented).collect();
    let stale: Vec<_> = documented.difference(real).collect();
    assert!(
        missing.is_empty() && stale.is_empty(),
        "{what}: not documented {missing:?}; documented but not real {stale:?}"
    );
}

#[test]
fn the_providers_the_docs_name_are_the_ones_drover_version_lists() {
    let providers = version_list("providers");
    assert!(providers.contains("plugin") && providers.contains("ec2"));
    let readme = backquoted(&paragraph("README.md", "Machines come from the providers"));
    let readme: BTreeSet<String> = readme.into_iter().filter(|w| w != "dockerd").collect();
    assert_same("README.md's providers", &readme, &providers);
    let field = backquoted(&line("docs/spec.md", "| `instance.provider` |"));
    let field: BTreeSet<String> = field.into_iter().filter(|w| w != "dockerd").collect();
    assert_same("docs/spec.md's instance.provider row", &field, &providers);
    let sketch = line("docs/spec.md", "# required: local");
    let sketch: BTreeSet<String> = sketch["# required: ".len()..]
        .split(", ")
        .map(str::to_string)
        .collect();
    assert_same(
        "docs/spec.md's sketch of instance.provider",
        &sketch,
        &providers,
    );
}

#[test]
fn the_providers_plugin_serve_offers_are_the_ones_cli_md_names() {
    // The refusal of a provider it cannot serve lists those it can.
    let refusal = drover(&["plugin", "serve", "nothing", "--socket", "/nonexistent/s"]);
    let can: BTreeSet<String> = refusal
        .rsplit(": ")
        .next()
        .unwrap_or_default()
        .trim()
        .split([',', ' '])
        .filter(|w| !w.is_empty() && *w != "or")
        .map(str::to_string)
        .collect();
    assert!(can.contains("local"), "unexpected refusal: {refusal}");
    let doc = paragraph("docs/cli.md", "Serves one of drover's providers");
    let doc = &doc[..doc.find(')').unwrap_or(doc.len())];
    assert_same("docs/cli.md's drover plugin serve", &backquoted(doc), &can);
}

#[test]
fn the_store_backends_the_docs_name_are_the_ones_drover_version_lists() {
    let stores = version_list("stores");
    let row = line("README.md", "| `crates/store` (`drover-store`) |");
    let named: BTreeSet<String> = stores
        .iter()
        .filter(|s| row.contains(&format!("`{s}")))
        .cloned()
        .collect();
    assert_same("README.md's crates/store row", &named, &stores);
}

#[test]
fn every_command_has_its_section_in_cli_md_and_every_section_a_command() {
    // `drover NAME [SUB]` as the binary knows them...
    let mut real = BTreeSet::new();
    for command in subcommands(&[]) {
        let subs = subcommands(&[&command]);
        if subs.is_empty() {
            real.insert(command);
        } else {
            real.extend(subs.iter().map(|s| format!("{command} {s}")));
        }
    }
    // ... and as the headings of docs/cli.md name them (a heading may name
    // two: "## `drover pause GROUP` / `drover resume GROUP`").
    let mut documented = BTreeSet::new();
    for heading in read("docs/cli.md").lines().filter(|l| l.starts_with("## ")) {
        for named in heading.split("`drover ").skip(1) {
            let words: Vec<&str> = named
                .split(['`', ' '])
                .take_while(|w| w.chars().all(|c| c.is_ascii_lowercase()) && !w.is_empty())
                .collect();
            let name = match words.as_slice() {
                [] => continue,
                [one] => (*one).to_string(),
                [one, sub, ..] if real.contains(&format!("{one} {sub}")) => {
                    format!("{one} {sub}")
                }
                [one, ..] => (*one).to_string(),
            };
            documented.insert(name);
        }
    }
    assert!(real.contains("plugin serve") && real.contains("recover"));
    assert_same("docs/cli.md's command sections", &documented, &real);
}

#[test]
fn the_crates_table_lists_every_crate() {
    let on_disk: BTreeSet<String> = std::fs::read_dir(repo().join("crates"))
        .expect("crates/")
        .map(|e| e.expect("an entry").path())
        .filter(|p| p.join("Cargo.toml").exists())
        .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
        .collect();
    let table: BTreeSet<String> = read("README.md")
        .lines()
        .filter_map(|l| l.strip_prefix("| `crates/"))
        .filter_map(|l| l.split('`').next())
        .map(str::to_string)
        .collect();
    assert_same("README.md's crates table", &table, &on_disk);
}
