//! Validation findings, printed as `FILE:LINE:COL: path: reason`.

use crate::yaml::Pos;

/// How bad a finding is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Severity {
    /// The file is accepted but the operator should look.
    Warning,
    /// The file is rejected.
    Error,
}

/// One problem found in a cluster file.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Diagnostic {
    /// Where in the file.
    pub pos: Pos,
    /// Path of the offending field, e.g. `groups[1].allocation.logical_ids`.
    pub path: String,
    /// Error or warning.
    pub severity: Severity,
    /// What is wrong and what to do instead.
    pub message: String,
}

impl Diagnostic {
    /// Renders the finding as one line naming `file`.
    pub fn render(&self, file: &str) -> String {
        let tag = match self.severity {
            Severity::Error => "",
            Severity::Warning => "warning: ",
        };
        format!(
            "{file}:{}:{}: {tag}{}: {}",
            self.pos.line, self.pos.col, self.path, self.message
        )
    }
}
