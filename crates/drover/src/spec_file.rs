//! Reading a cluster file: all problems at once, as `FILE:LINE:COL: path: reason`.

use crate::error::MainError;
use drover_core::spec::{ClusterSpec, Diagnostic, Severity, load_bytes};
use serde::Serialize;
use std::io::Read;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};

/// How standard input is named in messages (`-f -`).
const STDIN_NAME: &str = "<stdin>";

/// Whether standard input was read already (it can be, once per process).
static STDIN_TAKEN: AtomicBool = AtomicBool::new(false);

/// How `-f PATH` is named in messages: the path, or `<stdin>` for `-`.
pub fn display_name(path: &Path) -> String {
    if path == Path::new("-") {
        STDIN_NAME.into()
    } else {
        path.display().to_string()
    }
}

/// The bytes of `-f PATH`, with the name messages give it: `-` is standard
/// input (`generate-spec | drover apply -f -`), like docker and kubectl.
/// `what` says what the file should be, for the message when it cannot be read.
pub fn read_input(path: &Path, what: &str) -> Result<(String, Vec<u8>), MainError> {
    let failed = |name: &str, e: std::io::Error| {
        MainError::BadInput(format!("cannot read -f {name}: {e}; give {what}"))
    };
    let name = display_name(path);
    if path == Path::new("-") && STDIN_TAKEN.swap(true, Ordering::SeqCst) {
        // A second `-` would read an empty stream and report an empty file.
        return Err(MainError::BadInput(
            "standard input can be read once: give - for one file only (-f, --from or --to)".into(),
        ));
    }
    let bytes = if path == Path::new("-") {
        let mut bytes = Vec::new();
        std::io::stdin().read_to_end(&mut bytes).map(|_| bytes)
    } else {
        std::fs::read(path)
    };
    Ok((name.clone(), bytes.map_err(|e| failed(&name, e))?))
}

/// A cluster file as read: its name in messages and what the decoder found.
pub struct Decoded {
    /// The path, or `<stdin>`.
    pub name: String,
    /// The spec, when there is no error.
    pub spec: Option<ClusterSpec>,
    /// Every error and warning, in file order.
    pub diagnostics: Vec<Diagnostic>,
}

/// Reads and decodes `path` without judging it (`validate -o json` reports
/// the problems itself).
pub fn decode(path: &Path) -> Result<Decoded, MainError> {
    let (name, bytes) = read_input(
        path,
        "the path of a cluster file (YAML or JSON), or - for standard input",
    )?;
    let loaded = load_bytes(&bytes);
    Ok(Decoded {
        name,
        spec: loaded.spec,
        diagnostics: loaded.diagnostics,
    })
}

/// Reads and validates `path`. Warnings go to stderr; errors become one
/// `InvalidSpec` listing every problem.
pub fn load(path: &Path) -> Result<ClusterSpec, MainError> {
    let Decoded {
        name,
        spec,
        diagnostics,
    } = decode(path)?;
    let (errors, warnings): (Vec<_>, Vec<_>) = diagnostics
        .iter()
        .partition(|d| d.severity == Severity::Error);
    for w in &warnings {
        eprintln!("{}", w.render(&name));
    }
    match spec {
        Some(spec) => Ok(spec),
        None => Err(MainError::InvalidSpec(
            errors.iter().map(|d| d.render(&name)).collect(),
        )),
    }
}

/// One diagnostic as `validate -o json` prints it: the fields of the
/// `FILE:LINE:COL: path: reason` line, each on its own.
#[derive(Debug, Serialize)]
pub struct Problem<'a> {
    /// The file's path, or `<stdin>`.
    pub file: &'a str,
    /// 1-based line.
    pub line: usize,
    /// 1-based column.
    pub col: usize,
    /// The offending field, e.g. `groups[1].allocation.logical_ids`.
    pub path: &'a str,
    /// `error` (the file is refused) or `warning`.
    pub severity: &'static str,
    /// What is wrong and what to do instead.
    pub reason: &'a str,
}

impl<'a> Problem<'a> {
    /// `d`, found in `file`.
    pub fn new(file: &'a str, d: &'a Diagnostic) -> Problem<'a> {
        Problem {
            file,
            line: d.pos.line,
            col: d.pos.col,
            path: &d.path,
            severity: match d.severity {
                Severity::Error => "error",
                Severity::Warning => "warning",
            },
            reason: &d.message,
        }
    }
}
