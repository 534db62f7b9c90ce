//! `gpuplan state unlock ID`: remove a lock left by a run that is gone, if ID matches.

use super::output::{self, Style};
use super::{ExitStatus, Settings, state_common};
pub fn run(settings: &Settings, id: &str) -> miette::Result<ExitStatus> {
    let backend = state_common::backend(settings)?;
    let holder = backend.unlock(id).map_err(state_common::cli_error)?;
    let ok = output::paint("Unlocked", Style::Success, settings.color_stderr);
    output::stderr(&format!(
        "{ok} `{}` (was held by {} pid {} for `{}` since {})\n",
        state_common::location(&backend),
        holder.who,
        holder.pid,
        holder.operation,
        holder.created
    ));
    Ok(ExitStatus::Success)
}
