//! `gpuplan state pull` and `gpuplan state push FILE`: the whole state out and in, for
//! backups, repairs and moving between backends. Both work on whichever backend the spec
//! configures (local or remote).

use std::path::Path;

use super::output::{self, Style};
use super::{CliError, ExitStatus, Settings, state_common};

/// Print the current state as JSON (stdout), as the backend holds it.
pub fn pull(settings: &Settings) -> miette::Result<ExitStatus> {
    let backend = state_common::backend(settings)?;
    let Some(state) = backend.read().map_err(state_common::cli_error)? else {
        return Err(CliError::new(format!("there is no state yet at `{}`", state_common::location(&backend)))
            .hint("`gpuplan apply` creates it")
            .into());
    };
    output::stdout_with(|out| {
        serde_json::to_writer_pretty(&mut *out, &state).map_err(std::io::Error::from)?;
        out.write_all(b"\n")
    });
    Ok(ExitStatus::Success)
}

/// Replace the state with FILE under the lock. Refused, unless `force`, when FILE has
/// another lineage or a serial lower than the current state's (an older copy would
/// forget what was created since).
pub fn push(settings: &Settings, file: &Path, force: bool) -> miette::Result<ExitStatus> {
    let path = settings.resolve_path(file);
    let shown = crate::spec::display_path(&path);
    let bytes = std::fs::read(&path).map_err(|e| CliError::new(format!("cannot read `{shown}`: {e}")))?;
    let backend = state_common::backend(settings)?;
    let mut pushed = crate::state::local::parse_state(&path, &path.with_extension("backup"), &bytes, backend.keys())
        .map_err(state_common::cli_error)?;
    let lock = backend.lock("state push", settings.lock_timeout).map_err(state_common::cli_error)?;
    state_common::warn_stale(&lock, settings);
    let current = backend.recover(&lock).map_err(state_common::cli_error)?;
    let at = state_common::location(&backend);
    if let Some(cur) = &current {
        let refuse = |why: String| -> miette::Result<ExitStatus> {
            Err(CliError::new(format!("refusing to push `{shown}` to `{at}`: {why}"))
                .hint("nothing was written; `gpuplan state pull` shows the current state, and --force pushes anyway")
                .into())
        };
        if cur.lineage != pushed.lineage && !force {
            return refuse(format!(
                "it has lineage `{}`, the current state `{}` (another fleet's state)",
                pushed.lineage, cur.lineage
            ));
        }
        if pushed.serial < cur.serial && !force {
            return refuse(format!(
                "its serial {} is lower than the current state's {} (an older copy)",
                pushed.serial, cur.serial
            ));
        }
    }
    // Written above whatever is there, so every reader sees a newer serial.
    pushed.serial = pushed.serial.max(current.as_ref().map_or(0, |c| c.serial));
    pushed.history.push(crate::engine::history("state_push", format!("pushed from {shown}")));
    backend.replace(&lock, &mut pushed).map_err(state_common::cli_error)?;
    let ok = output::paint("Pushed", Style::Success, settings.color_stderr);
    output::stderr(&format!(
        "{ok} `{shown}` to `{at}` (lineage {}, serial {}, {})\n",
        pushed.lineage,
        pushed.serial,
        crate::model::words::count(pushed.resources.len(), "resource", "resources")
    ));
    Ok(ExitStatus::Success)
}

/// `init --migrate-state`: copy the local state file into the configured remote backend.
/// Refused when the remote holds resources of another lineage; nothing to do when it already holds this
/// state or a newer one. The local file stays (delete it once the remote is in use).
pub fn migrate(settings: &Settings, text: &mut String) -> Result<(), CliError> {
    let backend = state_common::backend(settings)?;
    if !backend.is_remote() {
        return Err(CliError::new("--migrate-state needs a remote backend in the spec")
            .hint("add `gpuplan { backend \"s3\" { bucket = \"...\" key = \"...\" } }`, then run `gpuplan init --migrate-state`"));
    }
    let local = crate::state::LocalBackend::new(&settings.state_path).with_keys(backend.keys().clone());
    let Some(mut state) = local.read().map_err(state_common::cli_error)? else {
        text.push_str(&format!(
            "No local state at `{}` to migrate.\n",
            crate::spec::display_path(&settings.state_path)
        ));
        return Ok(());
    };
    let at = state_common::location(&backend);
    let lock = backend.lock("init -migrate-state", settings.lock_timeout).map_err(state_common::cli_error)?;
    match backend.recover(&lock).map_err(state_common::cli_error)? {
        // A remote state of another lineage that holds nothing was only created by a plan
        // run against the new backend before migrating: replacing it loses nothing.
        Some(remote) if remote.lineage != state.lineage && !remote.resources.is_empty() => {
            return Err(CliError::new(format!(
                "refusing to migrate: `{at}` holds lineage `{}`, the local state `{}`",
                remote.lineage, state.lineage
            ))
            .hint(
                "the remote belongs to another fleet: pick another `key`, or `gpuplan state push --force` deliberately",
            ));
        }
        Some(remote) if remote.serial >= state.serial => {
            text.push_str(&format!(
                "`{at}` already holds this state (serial {} ≥ local {}); nothing copied.\n",
                remote.serial, state.serial
            ));
            return Ok(());
        }
        _ => {}
    }
    let from = crate::spec::display_path(&settings.state_path);
    state.history.push(crate::engine::history("migrate_state", format!("copied from {from}")));
    let resources = crate::model::words::count(state.resources.len(), "resource", "resources");
    backend.replace(&lock, &mut state).map_err(state_common::cli_error)?;
    let ok = output::paint("Migrated", Style::Success, settings.color_stderr);
    text.push_str(&format!(
        "{ok} `{from}` to `{at}` (lineage {}, serial {}, {resources}); the local file is kept: remove it once you use the remote\n",
        state.lineage, state.serial
    ));
    Ok(())
}
