//! `gpuplan state unlock ID`: remove a lock left by a run that is gone, if ID matches.

use super::output::{self, Style};
use super::{ExitStatus, Settings, state_common};
use crate::state::LocalBackend;

pub fn run(settings: &Settings, id: &str) -> miette::Result<ExitStatus> {
    let backend = LocalBackend::new(&settings.state_path);
    let holder = backend.unlock(id).map_err(state_common::cli_error)?;
    let ok = output::paint("Unlocked", Style::Success, settings.color_stderr);
    output::stderr(&format!(
        "{ok} `{}` (was held by {} pid {} for `{}` since {})\n",
        crate::spec::display_path(&settings.state_path),
        holder.who,
        holder.pid,
        holder.operation,
        holder.created
    ));
    Ok(ExitStatus::Success)
}
