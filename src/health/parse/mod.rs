//! Raw captures of a node's GPU tools into [`NodeHealth`] (`docs/design/gpu-health.md`,
//! "Formats"): [`capture`] sniffs what it was given and hands it to [`nvidia_smi`]
//! (`nvidia-smi -q -x`), [`dcgm`] (`dcgmi health -c -j`) or [`kernel`] (`NVRM: Xid`
//! lines). The run-command agents print all three at once between [`MARK_NVIDIA_SMI`],
//! [`MARK_DCGM`], [`MARK_KERNEL`] and [`MARK_END`]; then the XML also tells which GPU a
//! kernel line's PCI bus is. Pure functions over text: no I/O, no clock (the caller says
//! when it read the capture).

pub mod dcgm;
pub mod kernel;
pub mod nvidia_smi;

use crate::model::health::NodeHealth;

/// Opens the `nvidia-smi -q -x` section of an agent's capture.
pub const MARK_NVIDIA_SMI: &str = "--- gpuplan health: nvidia-smi ---";
/// Opens the `dcgmi health -c -j` section (empty where DCGM is not installed).
pub const MARK_DCGM: &str = "--- gpuplan health: dcgm ---";
/// Opens the kernel log's `NVRM:` lines.
pub const MARK_KERNEL: &str = "--- gpuplan health: kernel ---";
/// Ends the capture: without it the agent's output was cut short.
pub const MARK_END: &str = "--- gpuplan health: end ---";

/// Why a capture could not be read. Each names the format it was read as and, where the
/// parser knows one, the line and column.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ParseError {
    #[error("the capture is empty")]
    Empty,
    #[error(
        "not a capture gpuplan reads (starts with {start:?}): expected `nvidia-smi -q -x` XML, `dcgmi health -c -j` JSON or kernel `NVRM:` lines"
    )]
    Unrecognized { start: String },
    #[error("nvidia-smi XML, line {line}, column {column}: {message}")]
    NvidiaSmi { line: usize, column: usize, message: String },
    #[error("dcgmi JSON, line {line}, column {column}: {message}")]
    Dcgm { line: usize, column: usize, message: String },
    #[error("the agent's capture was cut short (no `{MARK_END}` line): {detail}")]
    Truncated { detail: String },
}

/// Line and column (both from 1) of byte `offset` in `text`.
pub(crate) fn line_col(text: &str, offset: usize) -> (usize, usize) {
    let before = &text[..offset.min(text.len())];
    let line = before.matches('\n').count() + 1;
    let column = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
    (line, column)
}

/// Reads one node's capture: an agent's marked sections, or one tool's output alone (what
/// `gpuplan sim fault --from FILE` takes). `seen_ms` is when it was read; the findings
/// carry it. The node id is left empty for the caller to fill.
pub fn capture(text: &str, seen_ms: u64) -> Result<NodeHealth, ParseError> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    if text.trim().is_empty() {
        return Err(ParseError::Empty);
    }
    if text.lines().any(|l| l.trim() == MARK_NVIDIA_SMI || l.trim() == MARK_KERNEL || l.trim() == MARK_DCGM) {
        return marked(text, seen_ms);
    }
    let start = text.trim_start();
    if start.starts_with('<') {
        let report = nvidia_smi::parse(text)?;
        return Ok(NodeHealth {
            findings: report.findings(seen_ms),
            gpus_seen: Some(report.gpus.len() as u32),
            ..NodeHealth::default()
        });
    }
    if start.starts_with('{') {
        return Ok(NodeHealth { findings: dcgm::parse(text, seen_ms)?, ..NodeHealth::default() });
    }
    if text.contains("NVRM:") {
        return Ok(NodeHealth { findings: kernel::findings(text, None, seen_ms), ..NodeHealth::default() });
    }
    Err(ParseError::Unrecognized { start: start.chars().take(40).collect() })
}

/// The sections of an agent's capture, by marker.
#[derive(Default)]
struct Sections<'a> {
    nvidia_smi: Option<&'a str>,
    dcgm: Option<&'a str>,
    kernel: Option<&'a str>,
}

fn split(text: &str) -> Result<Sections<'_>, ParseError> {
    let mut sections = Sections::default();
    let mut open: Option<(&str, usize)> = None;
    let mut offset = 0;
    let mut ended = false;
    for line in text.split_inclusive('\n') {
        let mark = line.trim();
        let is_mark = [MARK_NVIDIA_SMI, MARK_DCGM, MARK_KERNEL, MARK_END].contains(&mark);
        if is_mark {
            if let Some((name, start)) = open.take() {
                let body = &text[start..offset];
                match name {
                    MARK_NVIDIA_SMI => sections.nvidia_smi = Some(body),
                    MARK_DCGM => sections.dcgm = Some(body),
                    _ => sections.kernel = Some(body),
                }
            }
            if mark == MARK_END {
                ended = true;
                break;
            }
            open = Some((mark, offset + line.len()));
        }
        offset += line.len();
    }
    if !ended {
        let last = open.map_or("the start", |(name, _)| name);
        return Err(ParseError::Truncated { detail: format!("the output ends inside `{last}`") });
    }
    Ok(sections)
}

fn marked(text: &str, seen_ms: u64) -> Result<NodeHealth, ParseError> {
    let sections = split(text)?;
    let mut health = NodeHealth::default();
    let mut report = None;
    if let Some(xml) = sections.nvidia_smi.filter(|s| !s.trim().is_empty()) {
        let parsed = nvidia_smi::section(xml)?;
        health.gpus_seen = Some(parsed.gpus.len() as u32);
        health.findings.extend(parsed.findings(seen_ms));
        report = Some(parsed);
    }
    if let Some(json) = sections.dcgm.filter(|s| !s.trim().is_empty()) {
        health.findings.extend(dcgm::parse(json, seen_ms)?);
    }
    if let Some(lines) = sections.kernel {
        health.findings.extend(kernel::findings(lines, report.as_ref(), seen_ms));
    }
    Ok(health)
}

#[cfg(test)]
mod tests;
