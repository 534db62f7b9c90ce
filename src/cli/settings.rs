//! Raw arguments and the process environment, resolved once into [`Settings`].
//!
//! Commands read only `Settings` (and their own clap struct), never `std::env` or the
//! terminal: every default, path join and colour decision happens here, in one place that
//! unit tests can drive with a fake [`Environment`].

use std::collections::BTreeMap;
use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::time::Duration;

use super::vars::RawVar;
use super::{CliError, GlobalArgs};
use crate::spec::LoadOptions;
use crate::spec::varfile::VarArg;

/// Width when `COLUMNS` is unset or unusable and stdout is not a terminal (a file, a pipe,
/// a CI log): fixed, so such output does not depend on where it ran.
pub const DEFAULT_WIDTH: usize = 100;

/// Everything a command needs to know about its invocation.
#[derive(Debug, Clone, PartialEq)]
pub struct Settings {
    /// Absolute working directory (`-C DIR`, else the current directory); it exists.
    pub dir: PathBuf,
    /// Absolute state file: `--state PATH` (relative to `dir`), else `<dir>/state/<workspace>.json`.
    pub state_path: PathBuf,
    pub workspace: String,
    /// Where [`Settings::workspace`] came from.
    pub workspace_from: WorkspaceFrom,
    /// `--state PATH` was given: the state file is named, not the workspace's own.
    pub state_given: bool,
    pub lock_timeout: Duration,
    /// Colour on stdout / stderr: off with `--no-color`, a non-empty `NO_COLOR`, or no terminal.
    pub color_stdout: bool,
    pub color_stderr: bool,
    /// Both stdin and stderr are terminals, so the user can answer a confirmation prompt.
    pub interactive: bool,
    /// Confirmations may be asked (`--input=false`: refuse instead); off a terminal the
    /// answer is read from standard input.
    pub input: bool,
    /// Columns for rendering diagnostics and tables: `COLUMNS`, else the terminal's width
    /// when stdout is one, else [`DEFAULT_WIDTH`].
    pub width: usize,
    /// `--var NAME=VALUE` pairs and `--var-file`s (absolute) in command-line order
    /// (later wins).
    pub vars: Vec<VarArg>,
    /// The process environment (UTF-8 entries only), for `env("X")` and `GPUPLAN_VAR_*`.
    pub env: BTreeMap<String, String>,
}

/// What resolution reads from the process; [`Environment::capture`] takes the real one.
#[derive(Debug, Clone, Default)]
pub struct Environment {
    pub cwd: PathBuf,
    pub vars: BTreeMap<String, String>,
    pub stdin_tty: bool,
    pub stdout_tty: bool,
    pub stderr_tty: bool,
    /// Columns of the terminal stdout writes to (`None`: not a terminal, or unknown).
    pub stdout_columns: Option<usize>,
}

impl Environment {
    pub fn capture() -> Result<Self, CliError> {
        let cwd = std::env::current_dir().map_err(|e| {
            CliError::new(format!("cannot read the current directory: {e}")).hint("pass `-C DIR` with an absolute path")
        })?;
        let vars = std::env::vars_os().filter_map(|(k, v)| Some((k.into_string().ok()?, v.into_string().ok()?)));
        Ok(Environment {
            cwd,
            vars: vars.collect(),
            stdin_tty: std::io::stdin().is_terminal(),
            stdout_tty: std::io::stdout().is_terminal(),
            stderr_tty: std::io::stderr().is_terminal(),
            stdout_columns: terminal_size::terminal_size_of(std::io::stdout()).map(|(w, _)| w.0 as usize),
        })
    }

    fn no_color(&self) -> bool {
        self.vars.get("NO_COLOR").is_some_and(|v| !v.is_empty())
    }
}

impl Settings {
    /// Resolve against the real process environment.
    pub fn resolve(global: &GlobalArgs, vars: &[RawVar<'_>]) -> Result<Settings, CliError> {
        Settings::resolve_in(global, vars, Environment::capture()?)
    }

    pub fn resolve_in(global: &GlobalArgs, vars: &[RawVar<'_>], env: Environment) -> Result<Settings, CliError> {
        let dir = working_dir(global.dir.as_deref(), &env.cwd)?;
        let (workspace, workspace_from) = chosen_workspace(global, &env.vars, &dir)?;
        let workspace = workspace_name(&workspace, workspace_from)?;
        let state_path = match &global.state {
            Some(p) => absolute(&dir.join(p)),
            None => dir.join("state").join(format!("{workspace}.json")),
        };
        let no_color = global.no_color || env.no_color();
        // Shells set COLUMNS without exporting it, so a terminal's width is asked for.
        let width = env.vars.get("COLUMNS").and_then(|c| c.trim().parse().ok()).filter(|w| *w > 0);
        let terminal = env.stdout_columns.filter(|w| env.stdout_tty && *w > 0);
        let vars = vars
            .iter()
            .map(|v| match v {
                RawVar::Pair(raw) => parse_var(raw).map(|(name, value)| VarArg::Flag(name, value)),
                RawVar::File(path) => Ok(VarArg::File(absolute(&dir.join(path)))),
            })
            .collect::<Result<_, _>>()?;
        Ok(Settings {
            dir,
            state_path,
            workspace,
            workspace_from,
            state_given: global.state.is_some(),
            lock_timeout: global.lock_timeout,
            color_stdout: !no_color && env.stdout_tty,
            color_stderr: !no_color && env.stderr_tty,
            interactive: env.stdin_tty && env.stderr_tty,
            input: global.input,
            width: width.or(terminal).unwrap_or(DEFAULT_WIDTH),
            vars,
            env: env.vars,
        })
    }

    /// Inputs for [`crate::spec::load_dir`].
    /// The engine's view of this run: paths, environment, lock timeout.
    pub fn workspace(&self) -> crate::engine::Workspace {
        crate::engine::Workspace {
            dir: self.dir.clone(),
            state_path: self.state_path.clone(),
            env: self.env.clone(),
            lock_timeout: self.lock_timeout,
            workspace: self.workspace.clone(),
            backend: None,
            encryption: None,
            read_only: false,
        }
    }

    pub fn load_options(&self) -> LoadOptions {
        LoadOptions { vars: self.vars.clone(), env: self.env.clone(), ..LoadOptions::default() }
    }

    /// The variable arguments of this command line that set a value: `--var` and
    /// `--var-file`, not the environment or `*.auto.vars.hcl`.
    pub fn given_vars(&self) -> &[VarArg] {
        &self.vars
    }

    /// `path` as typed on the command line, resolved like `-C` says: relative to `dir`.
    pub fn resolve_path(&self, path: &Path) -> PathBuf {
        absolute(&self.dir.join(path))
    }
}

/// Colour for errors raised before [`Settings`] exist.
pub fn stderr_color_from_env(no_color_flag: bool) -> bool {
    let no_color = std::env::var_os("NO_COLOR").is_some_and(|v| !v.is_empty());
    !no_color_flag && !no_color && std::io::stderr().is_terminal()
}

fn absolute(path: &Path) -> PathBuf {
    std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf())
}

fn working_dir(given: Option<&Path>, cwd: &Path) -> Result<PathBuf, CliError> {
    let Some(given) = given else {
        return Ok(cwd.to_path_buf());
    };
    let dir = absolute(&cwd.join(given));
    let shown = given.display();
    match std::fs::metadata(&dir) {
        Ok(m) if m.is_dir() => Ok(dir),
        Ok(_) => Err(CliError::new(format!("`-C {shown}` is not a directory: `{}`", dir.display()))
            .hint("`-C` takes the directory that holds your spec files")),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            Err(CliError::new(format!("directory `{}` does not exist (from `-C {shown}`)", dir.display()))
                .hint(format!("check the path, or create it with `mkdir -p {shown}` and run `gpuplan init` there")))
        }
        Err(e) => Err(CliError::new(format!("cannot open directory `{}`: {e}", dir.display()))
            .hint("check the permissions of the path given to `-C`")),
    }
}

/// Where the workspace in use was chosen.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WorkspaceFrom {
    Flag,
    Env,
    /// `gpuplan workspace select` (`state/.workspace`).
    Selected,
    Default,
}

impl WorkspaceFrom {
    /// How the user chose it, for messages.
    pub fn describe(self) -> &'static str {
        match self {
            WorkspaceFrom::Flag => "`--workspace`",
            WorkspaceFrom::Env => "`GPUPLAN_WORKSPACE`",
            WorkspaceFrom::Selected => "`state/.workspace` (`gpuplan workspace select`)",
            WorkspaceFrom::Default => "the default",
        }
    }
}

/// `--workspace`, else `GPUPLAN_WORKSPACE`, else the selection in `state/.workspace`, else
/// `default` (Terraform's order: `TF_WORKSPACE` overrides the selected workspace).
fn chosen_workspace(
    global: &GlobalArgs,
    vars: &BTreeMap<String, String>,
    dir: &Path,
) -> Result<(String, WorkspaceFrom), CliError> {
    if let Some(w) = &global.workspace {
        return Ok((w.clone(), WorkspaceFrom::Flag));
    }
    if let Some(w) = vars.get("GPUPLAN_WORKSPACE").filter(|w| !w.is_empty()) {
        return Ok((w.clone(), WorkspaceFrom::Env));
    }
    let path = crate::engine::workspaces::selection_path(dir);
    match crate::engine::workspaces::selected(dir) {
        Ok(Some(w)) => Ok((w, WorkspaceFrom::Selected)),
        Ok(None) => Ok((crate::engine::workspaces::DEFAULT.to_string(), WorkspaceFrom::Default)),
        Err(e) => Err(CliError::new(format!("cannot read the selected workspace in `{}`: {e}", path.display()))
            .hint("check the file's permissions, or remove it to use the `default` workspace")),
    }
}

fn workspace_name(name: &str, from: WorkspaceFrom) -> Result<String, CliError> {
    if crate::engine::workspaces::is_valid_name(name) {
        return Ok(name.to_string());
    }
    let fix = match from {
        WorkspaceFrom::Selected => "; fix or remove `state/.workspace`",
        _ => "",
    };
    Err(CliError::new(format!("invalid workspace name `{name}` (from {})", from.describe())).hint(format!(
        "workspace names use letters, digits, `-`, `_` and `.`, and do not end with `.sim`; each names `state/<workspace>.json`{fix}"
    )))
}

/// `NAME=VALUE` → `(NAME, VALUE)`; the value may be empty or contain `=`.
pub fn parse_var(raw: &str) -> Result<(String, String), CliError> {
    let Some((name, value)) = raw.split_once('=') else {
        return Err(CliError::new(format!("invalid `--var {raw}`: expected `NAME=VALUE`"))
            .hint("for example `--var team=ml`; quote values with spaces: `--var 'owner=ML platform'`"));
    };
    if !crate::addr::is_ident(name) {
        return Err(CliError::new(format!("invalid `--var {raw}`: `{name}` is not a variable name"))
            .hint("variable names start with a letter or `_`, then letters, digits, `_` or `-`"));
    }
    Ok((name.to_string(), value.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn global(dir: Option<&Path>) -> GlobalArgs {
        GlobalArgs {
            dir: dir.map(Path::to_path_buf),
            state: None,
            workspace: None,
            no_color: false,
            lock_timeout: Duration::ZERO,
            input: true,
        }
    }

    fn env(cwd: &Path, vars: &[(&str, &str)]) -> Environment {
        Environment {
            cwd: cwd.to_path_buf(),
            vars: vars.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect(),
            stdin_tty: true,
            stdout_tty: true,
            stderr_tty: true,
            stdout_columns: None,
        }
    }

    #[test]
    fn width_is_the_terminal_s_unless_columns_says_or_stdout_is_not_one() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let mut e = env(tmp.path(), &[]);
        e.stdout_columns = Some(72);
        let s = Settings::resolve_in(&global(None), &[], e.clone()).expect("settings");
        assert_eq!(s.width, 72);
        e.vars.insert("COLUMNS".into(), "90".into());
        assert_eq!(Settings::resolve_in(&global(None), &[], e.clone()).expect("settings").width, 90);
        // Piped: a fixed width, whatever terminal the process started in.
        e.vars.clear();
        e.stdout_tty = false;
        assert_eq!(Settings::resolve_in(&global(None), &[], e).expect("settings").width, DEFAULT_WIDTH);
    }

    #[test]
    fn defaults_follow_the_working_dir() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let s = Settings::resolve_in(&global(None), &[], env(tmp.path(), &[])).expect("settings");
        assert_eq!(s.dir, tmp.path());
        assert_eq!(s.state_path, tmp.path().join("state/default.json"));
        assert_eq!(s.width, DEFAULT_WIDTH);
        assert!(s.color_stderr && s.color_stdout && s.interactive);
    }

    #[test]
    fn relative_paths_resolve_against_dash_c() {
        let tmp = tempfile::tempdir().expect("tempdir");
        std::fs::create_dir(tmp.path().join("fleet")).expect("mkdir");
        let mut g = global(Some(Path::new("fleet/.")));
        g.state = Some("s/prod.json".into());
        let s = Settings::resolve_in(&g, &[], env(tmp.path(), &[("COLUMNS", "80")])).expect("settings");
        assert_eq!(s.dir, tmp.path().join("fleet"));
        assert_eq!(s.state_path, tmp.path().join("fleet/s/prod.json"));
        assert_eq!(s.width, 80);
    }

    #[test]
    fn var_files_resolve_against_dash_c_and_keep_their_place_among_vars() {
        let tmp = tempfile::tempdir().expect("tempdir");
        std::fs::create_dir(tmp.path().join("fleet")).expect("mkdir");
        let raw = [RawVar::File(Path::new("ci.vars.hcl")), RawVar::Pair("n=2")];
        let s = Settings::resolve_in(&global(Some(Path::new("fleet"))), &raw, env(tmp.path(), &[])).expect("settings");
        assert_eq!(s.vars, [VarArg::File(tmp.path().join("fleet/ci.vars.hcl")), VarArg::Flag("n".into(), "2".into())]);
        assert_eq!(s.load_options().vars, s.vars);
    }

    #[test]
    fn no_color_env_and_flag_turn_colour_off() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let s = Settings::resolve_in(&global(None), &[], env(tmp.path(), &[("NO_COLOR", "1")])).expect("settings");
        assert!(!s.color_stderr && !s.color_stdout);
        let mut g = global(None);
        g.no_color = true;
        let s = Settings::resolve_in(&g, &[], env(tmp.path(), &[])).expect("settings");
        assert!(!s.color_stderr);
    }

    #[test]
    fn missing_dir_names_the_path() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let e = Settings::resolve_in(&global(Some(Path::new("nope"))), &[], env(tmp.path(), &[])).unwrap_err();
        assert!(e.message.contains(&tmp.path().join("nope").display().to_string()), "{e:?}");
        assert!(e.hint.is_some());
    }

    #[test]
    fn vars_parse_and_malformed_ones_are_explained() {
        assert_eq!(parse_var("team=ml").expect("var"), ("team".into(), "ml".into()));
        assert_eq!(parse_var("q=a=b").expect("var"), ("q".into(), "a=b".into()));
        assert_eq!(parse_var("empty=").expect("var"), ("empty".into(), String::new()));
        assert!(parse_var("team").unwrap_err().message.contains("expected `NAME=VALUE`"));
        assert!(parse_var("=x").unwrap_err().message.contains("not a variable name"));
        assert!(parse_var("9x=1").is_err());
    }

    #[test]
    fn workspace_names_cannot_escape_the_state_dir() {
        let name = |n| workspace_name(n, WorkspaceFrom::Flag);
        assert!(name("prod-eu_1").is_ok());
        assert!(name("../etc").is_err());
        assert!(name("a/b").is_err());
        assert!(name("").is_err());
        assert!(name("dev.sim").is_err(), "`dev.sim.json` is workspace dev's simulated cloud");
    }

    /// `--var`, `--var-file`, `--override-policy` and `--policy-dir` are declared once
    /// (`VarArgs`, `PolicyArgs`) and read alike by every command that takes them.
    #[test]
    fn var_and_policy_flags_are_one_group_in_every_command() {
        use super::super::{Cli, Command};
        use clap::Parser;
        let parse = |cmd: &str, rest: &[&str]| {
            let args: Vec<&str> = ["gpuplan", cmd].into_iter().chain(rest.iter().copied()).collect();
            Cli::try_parse_from(args).unwrap_or_else(|e| panic!("{cmd}: {e}")).command
        };
        for cmd in ["validate", "plan", "apply", "destroy", "reconcile"] {
            let parsed = parse(cmd, &["--var", "team=ml", "--var-file", "ml.tfvars", "--var", "x=1"]);
            let (vars, files) = parsed.vars().expect("takes --var");
            assert_eq!(vars, ["team=ml", "x=1"], "{cmd}");
            assert_eq!(files, [PathBuf::from("ml.tfvars")], "{cmd}");
        }
        for cmd in ["plan", "apply", "destroy", "reconcile"] {
            let policy = match parse(cmd, &["--override-policy", "no_spot", "--policy-dir", "extra"]) {
                Command::Plan(a) => a.policy,
                Command::Apply(a) => a.policy,
                Command::Destroy(a) => a.policy,
                Command::Reconcile(a) => a.policy,
                _ => unreachable!("{cmd} is one of the four"),
            };
            assert_eq!(policy.override_policy, ["no_spot"], "{cmd}");
            assert_eq!(policy.policy_dir, [PathBuf::from("extra")], "{cmd}");
        }
    }
}
