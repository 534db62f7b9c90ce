//! Saved plan files (`plan --out FILE`, `apply FILE`): writing one atomically and reading
//! it back, with errors that name the file.

use std::path::{Path, PathBuf};

use crate::plan::Plan;
use crate::plan::model::FORMAT_VERSION;

/// A plan file that cannot be written or read. The message names the file.
#[derive(Debug, thiserror::Error)]
pub enum PlanFileError {
    #[error("cannot write `{}`: {error}", path.display())]
    Write { path: PathBuf, error: std::io::Error },
    #[error("cannot read the plan file `{}`: {error}", path.display())]
    Read { path: PathBuf, error: std::io::Error },
    #[error("`{}` is not a gpuplan plan file: {message}", path.display())]
    Invalid { path: PathBuf, message: String },
    #[error("plan file format {found} is not supported (expected {FORMAT_VERSION})")]
    Version { path: PathBuf, found: u32 },
}

impl PlanFileError {
    /// The next step for the user.
    pub fn hint(&self) -> Option<&'static str> {
        match self {
            PlanFileError::Write { .. } => None,
            PlanFileError::Read { .. } | PlanFileError::Invalid { .. } => {
                Some("save a plan with `gpuplan plan --out FILE`")
            }
            PlanFileError::Version { .. } => Some("make the plan with this version of gpuplan"),
        }
    }
}

/// Write a saved plan atomically.
pub fn save(path: &Path, plan: &Plan) -> Result<(), PlanFileError> {
    let tmp = path.with_extension("tmp");
    // Streamed to the file: a 100,000-pool plan is hundreds of MB of text.
    let write = || -> std::io::Result<()> {
        let mut out = std::io::BufWriter::new(std::fs::File::create(&tmp)?);
        serde_json::to_writer_pretty(&mut out, plan)?;
        out.into_inner().map_err(|e| e.into_error())?.sync_all()
    };
    write().and_then(|()| std::fs::rename(&tmp, path)).map_err(|error| {
        let _ = std::fs::remove_file(&tmp);
        PlanFileError::Write { path: path.to_path_buf(), error }
    })
}

/// Read a saved plan.
pub fn load(path: &Path) -> Result<Plan, PlanFileError> {
    let bytes = std::fs::read(path).map_err(|error| PlanFileError::Read { path: path.to_path_buf(), error })?;
    let plan: Plan = serde_json::from_slice(&bytes)
        .map_err(|e| PlanFileError::Invalid { path: path.to_path_buf(), message: e.to_string() })?;
    if plan.format_version != FORMAT_VERSION {
        return Err(PlanFileError::Version { path: path.to_path_buf(), found: plan.format_version });
    }
    Ok(plan)
}
