//! What the `state` subcommands share: reading state for display, turning a
//! [`StateError`] into an `error:`/`hint:` pair, and naming unknown addresses.

use miette::Diagnostic;

use super::output::{self, Style};
use super::{CliError, Settings};
use crate::diag::did_you_mean;
use crate::state::{LocalBackend, State, StateError, StateLock};

/// The library's diagnostic as the CLI's plain message plus hint.
pub fn cli_error(e: StateError) -> CliError {
    let hint = e.help().map(|h| h.to_string());
    CliError { message: e.to_string(), hint }
}

/// The current state without locking or writing (a crashed apply's journal is replayed in
/// memory). `None` when there is no state yet.
pub fn read(settings: &Settings) -> Result<Option<State>, CliError> {
    LocalBackend::new(&settings.state_path).read().map_err(cli_error)
}

/// Tell the user when we took over a lock a dead process left behind.
pub fn warn_stale(lock: &StateLock, settings: &Settings) {
    if let Some(dead) = &lock.stale {
        let warning = output::paint("warning:", Style::Warning, settings.color_stderr);
        output::stderr(&format!(
            "{warning} took over a lock left by {} (pid {}, `{}` since {}), which is no longer running\n",
            dead.who, dead.pid, dead.operation, dead.created
        ));
    }
}

/// `no resource `x` in state` with a did-you-mean, or a pointer to `state list`.
pub fn unknown_address(address: &str, state: Option<&State>, settings: &Settings) -> CliError {
    let path = crate::spec::display_path(&settings.state_path);
    let Some(state) = state else {
        return CliError::new(format!("no resource `{address}`: there is no state yet at `{path}`"))
            .hint("`gpuplan apply` creates the state");
    };
    let error = CliError::new(format!("no resource `{address}` in state `{path}`"));
    match did_you_mean(address, state.resources.keys().map(String::as_str)) {
        Some(near) => error.hint(format!("did you mean `{near}`?")),
        None => error.hint("`gpuplan state list` shows the addresses in state"),
    }
}
