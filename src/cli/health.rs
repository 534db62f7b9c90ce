//! What the health commands share: reading a raw GPU capture (`sim fault --from FILE`)
//! into the findings it shows.

use super::CliError;
use crate::model::health::NodeHealth;

/// The findings of a raw capture (nvidia-smi XML, DCGM JSON or kernel `NVRM: Xid` lines).
pub fn capture(path: &std::path::Path) -> Result<NodeHealth, CliError> {
    let _text = std::fs::read_to_string(path)
        .map_err(|e| CliError::new(format!("cannot read the capture `{}`: {e}", path.display())))?;
    Err(CliError::new(format!("cannot read `{}` yet: gpuplan has no capture parser in this build", path.display()))
        .hint("script the fault with `--xid`, `--ecc`, `--missing-gpu` or `--readiness-fail`"))
}
