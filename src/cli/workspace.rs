//! `gpuplan workspace list|new NAME|select NAME|show|delete NAME`, and the check every
//! command that reads or writes a workspace's state makes first: a workspace that does not
//! exist is an error, never a new fleet (`engine::workspaces` owns the rules).

use clap::Subcommand;

use super::output::{self, Style};
use super::settings::WorkspaceFrom;
use super::{CliError, Command, ExitStatus, Settings, state_common};
use crate::engine::{self, workspaces};

#[derive(Debug, Subcommand)]
pub enum WorkspaceCommand {
    /// List the workspaces; `*` marks the current one
    List,
    /// Create a workspace (an empty state of its own) and switch to it
    New {
        /// Letters, digits, `-`, `_` and `.`; its state is `state/NAME.json` (or `env:/NAME/<key>`)
        #[arg(value_name = "NAME")]
        name: String,
    },
    /// Switch to an existing workspace (kept in `state/.workspace`)
    Select {
        /// A workspace that exists (`gpuplan workspace list`)
        #[arg(value_name = "NAME")]
        name: String,
    },
    /// Print the current workspace's name
    Show,
    /// Delete a workspace's state: not `default`, not the current one, and, unless
    /// `--force`, not one whose state still manages resources
    Delete {
        /// A workspace that exists, other than `default` and the current one
        #[arg(value_name = "NAME")]
        name: String,
        /// Delete even a state that still manages resources (they keep running and billing)
        #[arg(long)]
        force: bool,
    },
}

pub fn run(settings: &Settings, command: &WorkspaceCommand) -> miette::Result<ExitStatus> {
    if let WorkspaceCommand::Show = command {
        output::stdout(&format!("{}\n", settings.workspace));
        return Ok(ExitStatus::Success);
    }
    let project = project(settings)?;
    match command {
        WorkspaceCommand::Show => {}
        WorkspaceCommand::List => {
            let names = workspaces::list(&project).map_err(state_common::cli_error)?;
            let lines: String =
                names.iter().map(|n| format!("{} {n}\n", if *n == settings.workspace { "*" } else { " " })).collect();
            output::stdout(&lines);
        }
        WorkspaceCommand::New { name } => {
            workspaces::create(&project.named(name)).map_err(cli_error)?;
            let ok = output::paint("Created", Style::Success, settings.color_stderr);
            output::stderr(&format!("{ok} workspace `{name}`: an empty state of its own.\n"));
            switch(settings, name)?;
        }
        WorkspaceCommand::Select { name } => {
            if let Some(over) = overridden(settings) {
                return Err(over.into());
            }
            let ws = project.named(name);
            if !workspaces::is_valid_name(name) || !workspaces::exists(&ws).map_err(state_common::cli_error)? {
                return Err(cli_error(workspaces::missing(&ws)).into());
            }
            switch(settings, name)?;
        }
        WorkspaceCommand::Delete { name, force } => {
            let deleted = workspaces::delete(&project.named(name), &settings.workspace, *force).map_err(cli_error)?;
            let mut text = format!("Deleted workspace `{name}`.\n");
            if deleted.resources > 0 {
                let warning = output::paint("warning:", Style::Warning, settings.color_stderr);
                text.push_str(&format!(
                    "{warning} its state managed {} with {}: they keep running and billing, and no state knows them now\n",
                    crate::model::words::count(deleted.resources, "resource", "resources"),
                    crate::model::words::count(deleted.nodes, "live node", "live nodes")
                ));
            }
            output::stderr(&text);
        }
    }
    Ok(ExitStatus::Success)
}

/// Select `name` in `state/.workspace`, unless `--workspace` or `GPUPLAN_WORKSPACE`
/// chooses for this shell (then say so: the selection would not be the one in use).
fn switch(settings: &Settings, name: &str) -> Result<(), CliError> {
    if let Some(over) = overridden(settings) {
        output::stderr(&format!("Not switched: {}\n", over.message));
        return Ok(());
    }
    workspaces::select(&settings.dir, name).map_err(|e| {
        let path = workspaces::selection_path(&settings.dir);
        CliError::new(format!("cannot write `{}`: {e}", crate::spec::display_path(&path)))
            .hint("check the permissions of the state folder")
    })?;
    output::stderr(&format!("Switched to workspace `{name}`.\n"));
    Ok(())
}

/// The error for selecting while `--workspace` or `GPUPLAN_WORKSPACE` overrides the selection.
fn overridden(settings: &Settings) -> Option<CliError> {
    let how = match settings.workspace_from {
        WorkspaceFrom::Flag => "`--workspace` chooses the workspace for this command",
        WorkspaceFrom::Env => "`GPUPLAN_WORKSPACE` chooses the workspace and overrides the selection",
        WorkspaceFrom::Selected | WorkspaceFrom::Default => return None,
    };
    Some(CliError::new(how).hint("unset `GPUPLAN_WORKSPACE` (or drop `--workspace`) and run the command again"))
}

/// The current workspace with the spec's backend: what the others are named against.
/// `--state` names one file, which no other workspace shares: refused here.
fn project(settings: &Settings) -> Result<engine::Workspace, CliError> {
    if settings.state_given {
        return Err(CliError::new("`--state` names one state file; workspaces live in the state folder")
            .hint("run `gpuplan workspace` without `--state`"));
    }
    let backend = backend_config(settings)?;
    Ok(engine::Workspace { backend, ..settings.workspace() })
}

/// The spec's `gpuplan { backend ... }`: from its providers' part when that decodes alone
/// (cheaper for a large spec), else from the whole spec. A misconfigured backend is an
/// error: the workspaces of the wrong store would be listed, created or deleted.
fn backend_config(settings: &Settings) -> Result<Option<crate::spec::backend::BackendConfig>, CliError> {
    let read = crate::spec::read_dir(&settings.dir).map_err(|e| {
        CliError::new(format!("cannot read the spec in `{}`: {e}", crate::spec::display_path(&settings.dir)))
    })?;
    let opts = settings.load_options();
    if let Some((spec, _)) = crate::spec::load_providers_part(&read, &opts) {
        return Ok(spec.backend);
    }
    let loaded = crate::spec::load_read(read, &opts);
    if let Some(d) = loaded.diags.items.iter().find(|d| d.code.starts_with("gpuplan::backend")) {
        return Err(CliError::new(format!("the state backend is misconfigured: {}", d.message))
            .hint("`gpuplan validate` shows where; nothing was read or written"));
    }
    Ok(loaded.spec.backend)
}

/// Before a command that reads or writes the workspace's state (or its simulated cloud):
/// the workspace must exist. `default` always does, and `--state` names its file itself.
pub fn check_exists(settings: &Settings, command: &Command) -> Result<(), CliError> {
    let exempt = matches!(
        command,
        Command::Init(_)
            | Command::Workspace(_)
            | Command::Validate(_)
            | Command::Fmt(_)
            | Command::Graph(_)
            | Command::Show(_)
            | Command::Offers(_)
            | Command::Test(_)
            | Command::Completions { .. }
    );
    if exempt || settings.state_given || settings.workspace == workspaces::DEFAULT {
        return Ok(());
    }
    let ws = project(settings)?;
    if workspaces::exists(&ws).map_err(state_common::cli_error)? {
        return Ok(());
    }
    let e = cli_error(workspaces::missing(&ws));
    let mut hint = e.hint.unwrap_or_default();
    if settings.workspace_from == WorkspaceFrom::Selected {
        hint.push_str("; or go back to `default` with `gpuplan workspace select default`");
    }
    Err(CliError::new(format!("{} (chosen by {}); nothing was done", e.message, settings.workspace_from.describe()))
        .hint(hint))
}

/// `gpuplan init` with a workspace that does not exist yet creates it (CI's first run:
/// `GPUPLAN_WORKSPACE=staging gpuplan init`). Returns what to report.
pub fn create_for_init(settings: &Settings) -> Result<Option<String>, CliError> {
    if settings.state_given || settings.workspace == workspaces::DEFAULT {
        return Ok(None);
    }
    let ws = project(settings)?;
    if workspaces::exists(&ws).map_err(state_common::cli_error)? {
        return Ok(None);
    }
    workspaces::create(&ws).map_err(cli_error)?;
    Ok(Some(format!("workspace `{}` (chosen by {})", settings.workspace, settings.workspace_from.describe())))
}

fn cli_error(e: workspaces::WorkspaceError) -> CliError {
    let hint = miette::Diagnostic::help(&e).map(|h| h.to_string());
    CliError { message: e.to_string(), hint }
}
