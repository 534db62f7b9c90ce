//! Errors of the simulated cloud's own controls and storage.
//!
//! API calls made through [`crate::providers::Provider`] report [`ProviderError`]s; this
//! type covers opening the cloud's files and the `sim` commands. It converts into a
//! `ProviderError` so a storage fault inside an API call stops the executor (`Fatal`).

use std::path::PathBuf;
use std::time::Duration;

use crate::providers::{ErrorClass, ProviderError};

#[derive(Debug, thiserror::Error, miette::Diagnostic)]
pub enum SimError {
    #[error("cannot {action} `{}`: {source}", path.display())]
    #[diagnostic(code(gpuplan::sim::io))]
    Io {
        action: &'static str,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },

    #[error("`{}` is not a valid simulated cloud file{}: {message}", path.display(), line.map(|l| format!(" (line {l})")).unwrap_or_default())]
    #[diagnostic(
        code(gpuplan::sim::corrupt),
        help("the file was edited or damaged; move it aside to start an empty simulated cloud")
    )]
    Corrupt { path: PathBuf, line: Option<usize>, message: String },

    #[error("the simulated cloud `{}` is in use by another gpuplan process{holder}; gave up after {}", path.display(), humantime::format_duration(*waited))]
    #[diagnostic(
        code(gpuplan::sim::locked),
        help("wait for the other command to finish; the lock is released when its process exits")
    )]
    Locked { path: PathBuf, holder: String, waited: Duration },

    #[error(
        "the simulated cloud `{}` has its clock past {}, the last time gpuplan can print",
        path.display(),
        crate::model::time::LAST
    )]
    #[diagnostic(
        code(gpuplan::sim::clock),
        help(
            "move `{}` and `{}` aside to start an empty simulated cloud (`gpuplan apply` launches the fleet in it again)",
            path.display(),
            log.display()
        )
    )]
    ClockPastRange { path: PathBuf, log: PathBuf },

    /// A bad argument to a control (unknown zone, unknown node id).
    #[error("{0}")]
    #[diagnostic(code(gpuplan::sim::invalid))]
    Invalid(String),
}

impl SimError {
    pub(crate) fn io(action: &'static str, path: impl Into<PathBuf>) -> impl FnOnce(std::io::Error) -> SimError {
        let path = path.into();
        move |source| SimError::Io { action, path, source }
    }
}

impl From<SimError> for ProviderError {
    fn from(e: SimError) -> Self {
        match e {
            SimError::Invalid(m) => ProviderError::new(ErrorClass::Invalid, "SimInvalidParameter", m),
            other => ProviderError::new(ErrorClass::Fatal, "SimStorageError", other.to_string()),
        }
    }
}
