//! What the `state` subcommands share: reading state for display, turning a
//! [`StateError`] into an `error:`/`hint:` pair, and naming unknown addresses.

use miette::Diagnostic;

use super::output::{self, Style};
use super::{CliError, Settings};
use crate::diag::did_you_mean;
use crate::state::{Backend, State, StateError, StateLock};

/// The library's diagnostic as the CLI's plain message plus hint.
pub fn cli_error(e: StateError) -> CliError {
    let hint = e.help().map(|h| h.to_string());
    CliError { message: e.to_string(), hint }
}

/// The current state without locking or writing (a crashed apply's journal is replayed in
/// memory). `None` when there is no state yet.
pub fn read(settings: &Settings) -> Result<Option<State>, CliError> {
    backend(settings)?.read().map_err(cli_error)
}

/// The state backend the spec directory configures (`gpuplan { backend ... }`), else the
/// local file. A backend block with errors stops the command: falling back to local state
/// would read or write the wrong state.
pub fn backend(settings: &Settings) -> Result<Backend, CliError> {
    let loaded = crate::spec::load_dir(&settings.dir, &settings.load_options()).map_err(|e| {
        CliError::new(format!("cannot read the spec in `{}`: {e}", crate::spec::display_path(&settings.dir)))
    })?;
    if let Some(d) = loaded.diags.items.iter().find(|d| d.code.starts_with("gpuplan::backend")) {
        return Err(CliError::new(format!("the state backend is misconfigured: {}", d.message))
            .hint("`gpuplan validate` shows where; nothing was read or written"));
    }
    settings.workspace().with_backend(&loaded.spec).backend().map_err(cli_error)
}

/// Where the state lives, for messages: a path relative to the directory, or a URL.
pub fn location(backend: &Backend) -> String {
    match backend {
        Backend::Local(b) => crate::spec::display_path(b.path()),
        Backend::Remote(b) => b.url().to_string(),
    }
}

/// Tell the user when we took over a lock a dead process left behind.
pub fn warn_stale(lock: &StateLock, settings: &Settings) {
    if let Some(dead) = &lock.stale {
        if dead.expires.is_some() {
            output::stderr(&super::common::takeover_warning(dead));
            return;
        }
        let warning = output::paint("warning:", Style::Warning, settings.color_stderr);
        output::stderr(&format!(
            "{warning} took over a lock left by {} (pid {}, `{}` since {}), which is no longer running\n",
            dead.who, dead.pid, dead.operation, dead.created
        ));
    }
}

/// `no resource `x` in state` with a did-you-mean, or a pointer to `state list`.
pub fn unknown_address(address: &str, state: Option<&State>, settings: &Settings) -> CliError {
    let path =
        backend(settings).map(|b| location(&b)).unwrap_or_else(|_| crate::spec::display_path(&settings.state_path));
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
