//! The binary's error: one clear sentence plus what to do next, and an exit
//! code (2 for bad input, credentials the store refused included; 1 for
//! everything else).

use drover_spi::StoreError;
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
    /// What a command would commit is not a valid desired state
    /// (`drover_core::spec::validate_commit`): every problem, one a line,
    /// naming the field and its group; nothing was written; exit code 2.
    #[error("{what}: the desired state it would commit is not valid; nothing was committed:{}", refused.problems.iter().map(|p| format!("\n  {p}")).collect::<String>())]
    Refused {
        /// The change, as the operator asked for it.
        what: String,
        /// Why it may not be committed.
        refused: drover_core::spec::Refused,
    },
    /// Anything else: exit code 1 (2 when it is, or wraps, the store's
    /// refusal of the credentials, `StoreError::Refused`).
    #[error("{0:#}")]
    Failed(#[from] anyhow::Error),
}

impl MainError {
    /// The process exit code for this error.
    pub fn exit_code(&self) -> ExitCode {
        match self {
            MainError::BadInput(_) | MainError::InvalidSpec(_) | MainError::Refused { .. } => {
                ExitCode::from(2)
            }
            // Credentials the store refused, wherever a command met them (a
            // user who may read but not write fails at its first write):
            // retrying cannot help, so bad input too.
            MainError::Failed(e) if is_refusal(e) => ExitCode::from(2),
            MainError::Failed(_) => ExitCode::from(1),
        }
    }
}

/// True when `e` is, or wraps, [`StoreError::Refused`].
fn is_refusal(e: &anyhow::Error) -> bool {
    e.chain()
        .any(|c| matches!(c.downcast_ref::<StoreError>(), Some(StoreError::Refused(_))))
}
