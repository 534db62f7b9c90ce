//! What the health commands share: reading a raw GPU capture (`sim fault --from FILE`)
//! into the findings it shows, with `health::parse`.

use super::CliError;
use crate::model::health::NodeHealth;

/// The findings of a raw capture (nvidia-smi XML, DCGM JSON or kernel `NVRM: Xid` lines),
/// first seen at `seen_ms`.
pub fn capture(path: &std::path::Path, seen_ms: u64) -> Result<NodeHealth, CliError> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| CliError::new(format!("cannot read the capture `{}`: {e}", path.display())))?;
    crate::health::parse::capture(&text, seen_ms).map_err(|e| {
        CliError::new(format!("`{}` is not a capture gpuplan reads: {e}", path.display()))
            .hint("give the output of `nvidia-smi -q -x`, `dcgmi health -c -j` or the kernel log's `NVRM: Xid` lines")
    })
}
