//! Workspaces, as Terraform has them: each is a state of its own (and a simulated cloud
//! of its own), `default` always exists, and the one a checkout works on is selected in
//! the state folder ([`SELECTION`]). Which others exist is read from where the states
//! live: the local state folder (`state/<W>.json`), or the object store (`env:/W/<key>`).
//! A workspace exists once it has a state, which `gpuplan workspace new` writes (empty).
//!
//! This module owns naming, listing, creating, deleting and selecting workspaces; the
//! commands in `cli/` only print. It never plans.

#![allow(clippy::result_large_err)]

use std::path::{Path, PathBuf};

use super::Workspace;
use crate::state::{Backend, StateError};

/// The workspace that always exists.
pub const DEFAULT: &str = "default";

/// The file in the state folder beside the specs (`state/.workspace`) that holds the
/// selected workspace's name (Terraform keeps it in `.terraform/environment`). Without
/// it, `default`. `--workspace` and `GPUPLAN_WORKSPACE` override it.
pub const SELECTION: &str = ".workspace";

#[derive(Debug, thiserror::Error, miette::Diagnostic)]
pub enum WorkspaceError {
    #[error("workspace `{name}` does not exist")]
    #[diagnostic(code(gpuplan::workspace::missing), help("{}", missing_help(name, suggestion.as_deref())))]
    Missing { name: String, suggestion: Option<String> },
    #[error("workspace `{name}` already exists")]
    #[diagnostic(code(gpuplan::workspace::exists), help("switch to it with `gpuplan workspace select {name}`"))]
    Exists { name: String },
    #[error("invalid workspace name `{name}`")]
    #[diagnostic(
        code(gpuplan::workspace::name),
        help("workspace names use letters, digits, `-`, `_` and `.`, do not start with `.` nor end with `.sim`")
    )]
    Name { name: String },
    #[error("the `default` workspace cannot be deleted")]
    #[diagnostic(code(gpuplan::workspace::default), help("it always exists; `gpuplan destroy` empties it"))]
    Default,
    #[error("workspace `{name}` is the current workspace")]
    #[diagnostic(
        code(gpuplan::workspace::current),
        help("switch to another first, e.g. `gpuplan workspace select default`, then delete it")
    )]
    Current { name: String },
    #[error(
        "workspace `{name}` still manages {} with {}",
        crate::model::words::count(*.resources, "resource", "resources"),
        crate::model::words::count(*.nodes, "live node", "live nodes")
    )]
    #[diagnostic(
        code(gpuplan::workspace::not_empty),
        help(
            "destroy them first (`gpuplan --workspace {name} destroy`), or pass --force to delete the workspace anyway: its nodes keep running and billing, and no state knows them"
        )
    )]
    NotEmpty { name: String, resources: usize, nodes: usize },
    #[error(transparent)]
    #[diagnostic(transparent)]
    State(#[from] StateError),
}

fn missing_help(name: &str, suggestion: Option<&str>) -> String {
    let new = format!("create it with `gpuplan workspace new {name}`; `gpuplan workspace list` shows those there are");
    match suggestion {
        Some(s) => format!("did you mean `{s}`? Or {new}"),
        None => new.replacen("create", "Create", 1),
    }
}

/// Whether `name` can name a workspace: a file name in the state folder that cannot leave
/// it, nor be taken for another workspace's simulated cloud (`<W>.sim.json`).
pub fn is_valid_name(name: &str) -> bool {
    !name.is_empty()
        && !name.starts_with('.')
        && !name.ends_with(".sim")
        && name.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
}

/// `state/.workspace` under the spec directory `dir`.
pub fn selection_path(dir: &Path) -> PathBuf {
    dir.join("state").join(SELECTION)
}

/// The workspace selected in `dir` (`None`: none is, which means `default`).
pub fn selected(dir: &Path) -> std::io::Result<Option<String>> {
    match std::fs::read_to_string(selection_path(dir)) {
        Ok(text) => Ok(Some(text.trim().to_string()).filter(|n| !n.is_empty())),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e),
    }
}

/// Select `name` in `dir` (for `default`, remove the selection: nothing is left behind).
pub fn select(dir: &Path, name: &str) -> std::io::Result<()> {
    let path = selection_path(dir);
    if name == DEFAULT {
        return match std::fs::remove_file(&path) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(e),
            _ => Ok(()),
        };
    }
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent)?;
    }
    std::fs::write(&path, format!("{name}\n"))
}

impl Workspace {
    /// Workspace `name` of the same project: its own state file and simulated cloud
    /// (`state/<name>.json`, or `env:/<name>/<key>` in a store).
    pub fn named(&self, name: &str) -> Workspace {
        let mut ws = self.clone();
        ws.state_path = self.state_path.with_file_name(format!("{name}.json"));
        ws.workspace = name.to_string();
        ws
    }
}

/// Whether the workspace exists: `default` always does; another once it has a state.
pub fn exists(ws: &Workspace) -> Result<bool, StateError> {
    if ws.workspace == DEFAULT {
        return Ok(true);
    }
    ws.backend()?.exists()
}

/// Every workspace of the project `ws` belongs to: `default` first, then the others by name.
pub fn list(ws: &Workspace) -> Result<Vec<String>, StateError> {
    let mut names = match ws.named(DEFAULT).backend()? {
        Backend::Local(b) => local_names(b.path())?,
        Backend::Remote(b) => b.named_workspaces()?,
    };
    names.retain(|n| n != DEFAULT && is_valid_name(n));
    names.insert(0, DEFAULT.to_string());
    Ok(names)
}

/// The workspaces whose state files sit beside the default workspace's (`default_path`).
fn local_names(default_path: &Path) -> Result<Vec<String>, StateError> {
    let dir = default_path.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new("."));
    let entries = match std::fs::read_dir(dir) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(StateError::io("list the workspaces in", dir)(e)),
    };
    let mut names = Vec::new();
    for entry in entries {
        let entry = entry.map_err(StateError::io("list the workspaces in", dir))?;
        let file = entry.file_name();
        let Some(file) = file.to_str() else { continue };
        if Some(file) == default_path.file_name().and_then(|f| f.to_str()) {
            continue;
        }
        if let Some(name) = file.strip_suffix(".json").filter(|n| !n.ends_with(".sim")) {
            names.push(name.to_string());
        }
    }
    names.sort();
    Ok(names)
}

/// The error for a workspace that does not exist, with the closest one that does.
pub fn missing(ws: &Workspace) -> WorkspaceError {
    // The listing only improves the message: a store that cannot be listed leaves it out.
    let known = list(ws).unwrap_or_default();
    let suggestion = crate::diag::did_you_mean(&ws.workspace, known.iter().map(String::as_str)).map(str::to_string);
    WorkspaceError::Missing { name: ws.workspace.clone(), suggestion }
}

/// `gpuplan workspace new`: write workspace `ws.workspace`'s first (empty) state.
pub fn create(ws: &Workspace) -> Result<(), WorkspaceError> {
    let name = ws.workspace.clone();
    if !is_valid_name(&name) {
        return Err(WorkspaceError::Name { name });
    }
    if exists(ws)? {
        return Err(WorkspaceError::Exists { name });
    }
    let backend = ws.backend()?;
    if let Backend::Local(local) = &backend
        && let Some(parent) = local.path().parent()
    {
        std::fs::create_dir_all(parent).map_err(StateError::io("create the state folder", parent))?;
    }
    let lock = backend.lock("workspace new", ws.lock_timeout)?;
    if backend.recover(&lock)?.is_some() {
        return Err(WorkspaceError::Exists { name });
    }
    let mut state = super::new_state();
    state.history.push(super::history("workspace_new", format!("workspace `{name}` created")));
    backend.write(&lock, &mut state)?;
    Ok(())
}

/// What `gpuplan workspace delete` removed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Deleted {
    /// Resources the deleted state still recorded (only with `force`).
    pub resources: usize,
    /// Their live nodes, which keep running.
    pub nodes: usize,
}

/// `gpuplan workspace delete`: remove workspace `ws.workspace`'s state, under its lock.
/// Refused for `default`, for `current` (the workspace in use), and, unless `force`, for
/// a state that still records resources.
pub fn delete(ws: &Workspace, current: &str, force: bool) -> Result<Deleted, WorkspaceError> {
    let name = ws.workspace.clone();
    if name == DEFAULT {
        return Err(WorkspaceError::Default);
    }
    if name == current {
        return Err(WorkspaceError::Current { name });
    }
    if !exists(ws)? {
        return Err(missing(ws));
    }
    let backend = ws.backend()?;
    let lock = backend.lock("workspace delete", ws.lock_timeout)?;
    let state = backend.recover(&lock)?;
    let resources = state.as_ref().map_or(0, |s| s.resources.len());
    let nodes = state.iter().flat_map(|s| s.resources.values()).flat_map(|r| &r.nodes).filter(|n| n.is_live()).count();
    if resources > 0 && !force {
        return Err(WorkspaceError::NotEmpty { name, resources, nodes });
    }
    backend.delete_state(&lock)?;
    Ok(Deleted { resources, nodes })
}
