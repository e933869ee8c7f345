//! The binary's error: one clear sentence plus what to do next, and an exit
//! code (2 for bad input, 1 for everything else).

use std::process::ExitCode;

/// What went wrong, as the user should read it.
#[derive(Debug, thiserror::Error)]
pub enum MainError {
    /// The user's input is wrong (arguments, files): exit code 2.
    #[error("{0}")]
    BadInput(String),
    /// A cluster file failed validation: one `FILE:LINE:COL: path: reason`
    /// line per problem, printed as is; exit code 2.
    #[error("{}", .0.join("\n"))]
    InvalidSpec(Vec<String>),
    /// Anything else: exit code 1.
    #[error("{0:#}")]
    Failed(#[from] anyhow::Error),
}

impl MainError {
    /// The process exit code for this error.
    pub fn exit_code(&self) -> ExitCode {
        match self {
            MainError::BadInput(_) | MainError::InvalidSpec(_) => ExitCode::from(2),
            MainError::Failed(_) => ExitCode::from(1),
        }
    }
}
