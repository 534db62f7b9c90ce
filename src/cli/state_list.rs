//! `gpuplan state list`: every address in state, one per line on stdout.

use super::{ExitStatus, Settings, output, state_common};

pub fn run(settings: &Settings) -> miette::Result<ExitStatus> {
    let state = state_common::read(settings)?;
    let lines: String = state.iter().flat_map(|s| s.resources.keys()).map(|a| format!("{a}\n")).collect();
    output::stdout(&lines);
    Ok(ExitStatus::Success)
}
