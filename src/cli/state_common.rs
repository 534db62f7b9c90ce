//! What the `state` subcommands share: reading state for display, turning a
//! [`StateError`] into an `error:`/`hint:` pair, and naming unknown addresses.

use miette::Diagnostic;

use super::addresses::{self, Lookup};
use super::output::{self, Style};
use super::{CliError, Settings};
use crate::addr::Address;
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
    let misconfigured = |d: &&crate::diag::Diagnostic| {
        d.code.starts_with("gpuplan::backend") || d.code.starts_with("gpuplan::encryption")
    };
    if let Some(d) = loaded.diags.items.iter().find(misconfigured) {
        let what = if d.code.starts_with("gpuplan::encryption") { "encryption" } else { "the state backend" };
        return Err(CliError::new(format!("{what} is misconfigured: {}", d.message))
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

/// How the `state` commands look addresses up ([`super::addresses::resolve`]): in the
/// state, named by where it lives.
pub fn lookup(settings: &Settings) -> Lookup<'static> {
    Lookup {
        what: "resource",
        place: format!("in state `{}`", state_path(settings)),
        otherwise: "`gpuplan state list` shows the addresses in state".into(),
    }
}

fn state_path(settings: &Settings) -> String {
    backend(settings).map(|b| location(&b)).unwrap_or_else(|_| crate::spec::display_path(&settings.state_path))
}

/// `input` as the one address it means in `state`, or why not (no state yet, no such
/// resource with a did-you-mean, more than one).
pub fn resolve_one(input: &str, state: Option<&State>, settings: &Settings) -> Result<Address, CliError> {
    let Some(state) = state else { return Err(no_state(input, settings)) };
    addresses::resolve_one(input, &addresses::in_state(state), &lookup(settings))
}

/// `no resource `x``: there is no state at all yet.
pub fn no_state(address: &str, settings: &Settings) -> CliError {
    CliError::new(format!("no resource `{address}`: there is no state yet at `{}`", state_path(settings)))
        .hint("`gpuplan apply` creates the state")
}
