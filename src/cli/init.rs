//! `gpuplan init`: create the state folder (with a README documenting its files) and, in a
//! folder without specs or policies, the starter `main.hcl` and default policies. In an
//! existing project it only creates the state folder or migrates state, and says what it
//! left alone: starter policies dropped into a fleet that planned clean would deny it.
//! Never overwrites anything.

use std::fs::OpenOptions;
use std::io::Write;
use std::path::Path;

use super::output::{self, Style};
use super::{CliError, ExitStatus, InitArgs, Settings, state_common, state_remote};
use crate::spec;

const STATE_README: &str = include_str!("templates/state-README.md");
const STARTER_SPEC: &str = include_str!("templates/main.hcl");
/// `gpuplan test`'s starter file: each starter policy passing and failing.
const STARTER_TEST: &str = include_str!("templates/tests/starter.test.hcl");
/// The shipped default policies (`policies/` at the repository root).
const DEFAULT_POLICIES: &[(&str, &str)] = &[
    ("fleet_hourly_cap.hcl", include_str!("../../policies/fleet_hourly_cap.hcl")),
    ("min_spot_share.hcl", include_str!("../../policies/min_spot_share.hcl")),
    ("allowed_gpu_models.hcl", include_str!("../../policies/allowed_gpu_models.hcl")),
    ("max_gpu_hour_price.hcl", include_str!("../../policies/max_gpu_hour_price.hcl")),
    ("no_destroy_pool_with_jobs.hcl", include_str!("../../policies/no_destroy_pool_with_jobs.hcl")),
];

pub fn run(settings: &Settings, args: &InitArgs) -> miette::Result<ExitStatus> {
    let mut created = Vec::new();
    let state_dir = settings.state_path.parent().unwrap_or(&settings.dir);
    if !state_dir.is_dir() {
        std::fs::create_dir_all(state_dir).map_err(|e| {
            CliError::new(format!("cannot create `{}`: {e}", spec::display_path(state_dir)))
                .hint("check the permissions of the directory, or pass `--state PATH`")
        })?;
        created.push(format!("{}/", spec::display_path(state_dir)));
    }
    if create_new(&state_dir.join("README.md"), STATE_README)? {
        created.push(spec::display_path(&state_dir.join("README.md")));
    }
    let specs = spec::spec_files(&settings.dir).map_err(|e| {
        CliError::new(format!("cannot list `{}`: {e}", spec::display_path(&settings.dir)))
            .hint("check that the directory is readable")
    })?;
    let policy_dir = settings.dir.join("policies");
    let project = project_files(&specs, &policy_dir);
    if project.is_empty() {
        created.extend(write_starter(&settings.dir, &policy_dir)?);
    }

    let ok = output::paint("Created", Style::Success, settings.color_stderr);
    let mut text: String = created.iter().map(|c| format!("{ok} `{c}`\n")).collect();
    if created.is_empty() {
        text.push_str("Nothing to do: the state folder and its README already exist.\n");
    }
    if !project.is_empty() {
        text.push_str(&left_alone(&project));
    }
    // What was done so far is said even when the remote steps fail.
    let remote = remote_steps(settings, args, !specs.is_empty(), &mut text);
    if remote.is_err() {
        output::stderr(&text);
    }
    remote?;
    match super::workspace::create_for_init(settings) {
        Ok(Some(ws)) => {
            let ok = output::paint("Created", Style::Success, settings.color_stderr);
            text.push_str(&format!("{ok} {ws}: an empty state of its own\n"));
        }
        Ok(None) => {}
        Err(e) => {
            output::stderr(&text);
            return Err(e.into());
        }
    }
    if project.is_empty() {
        text.push_str("hint: run `gpuplan plan` to see what the starter fleet would create\n");
    } else if specs.is_empty() {
        text.push_str("hint: add spec files (`*.hcl`, `*.yaml`) to this folder, then run `gpuplan plan`\n");
    } else {
        text.push_str("hint: run `gpuplan validate` to check your specs, then `gpuplan plan`\n");
    }
    output::stderr(&text);
    Ok(ExitStatus::Success)
}

/// With specs: a remote backend is checked once (a second create-only write must fail,
/// and so must a write with a wrong ETag, or the store cannot hold a lock safely), then
/// `--migrate-state` copies local state into it.
fn remote_steps(settings: &Settings, args: &InitArgs, has_specs: bool, text: &mut String) -> Result<(), CliError> {
    if !has_specs {
        if args.migrate_state {
            return Err(CliError::new("--migrate-state needs a spec with a remote backend in this directory"));
        }
        return Ok(());
    }
    let backend = state_common::backend(settings)?;
    if let crate::state::Backend::Remote(remote) = &backend {
        remote.probe().map_err(state_common::cli_error)?;
        let ok = output::paint("Checked", Style::Success, settings.color_stderr);
        let how = match remote.mode() {
            crate::state::remote::LockMode::Conditional => "If-None-Match and If-Match",
            crate::state::remote::LockMode::Cos => "x-cos-forbid-overwrite",
            crate::state::remote::LockMode::Oss => "x-oss-forbid-overwrite",
        };
        text.push_str(&format!(
            "{ok} remote state `{}`: the store refuses overwrites ({how}), so it can be locked\n",
            remote.url()
        ));
    }
    if args.migrate_state {
        state_remote::migrate(settings, text)?;
    }
    Ok(())
}

/// What makes the folder an existing project: its spec files and its `policies/` folder,
/// as users should see them. Empty: a new folder, which gets the starter files.
fn project_files(specs: &[std::path::PathBuf], policy_dir: &Path) -> Vec<String> {
    let mut found: Vec<String> = specs.iter().map(|p| spec::display_path(p)).collect();
    if policy_dir.exists() {
        found.push(format!("{}/", spec::display_path(policy_dir)));
    }
    found
}

/// `Left alone: ...`: what init did not touch in an existing project, and why.
fn left_alone(project: &[String]) -> String {
    const SHOWN: usize = 5;
    let mut names: Vec<String> = project.iter().take(SHOWN).map(|p| format!("`{p}`")).collect();
    if project.len() > SHOWN {
        names.push(format!("{} more", project.len() - SHOWN));
    }
    format!(
        "Left alone: the existing project ({}); the starter spec and default policies are only written into an empty folder\n",
        names.join(", ")
    )
}

/// The starter `main.hcl`, the default policies and a test file showing each of them pass
/// and fail, for a new folder; what was created.
fn write_starter(dir: &Path, policy_dir: &Path) -> Result<Vec<String>, CliError> {
    let mut created = Vec::new();
    if create_new(&dir.join("main.hcl"), STARTER_SPEC)? {
        created.push(spec::display_path(&dir.join("main.hcl")));
    }
    std::fs::create_dir_all(policy_dir).map_err(|e| {
        CliError::new(format!("cannot create `{}`: {e}", spec::display_path(policy_dir)))
            .hint("check the permissions of the directory")
    })?;
    for (name, text) in DEFAULT_POLICIES {
        if create_new(&policy_dir.join(name), text)? {
            created.push(spec::display_path(&policy_dir.join(name)));
        }
    }
    let tests = dir.join("tests");
    std::fs::create_dir_all(&tests).map_err(|e| {
        CliError::new(format!("cannot create `{}`: {e}", spec::display_path(&tests)))
            .hint("check the permissions of the directory")
    })?;
    if create_new(&tests.join("starter.test.hcl"), STARTER_TEST)? {
        created.push(spec::display_path(&tests.join("starter.test.hcl")));
    }
    Ok(created)
}

/// Write `text` to `path` only if nothing is there; `Ok(false)` when it already exists.
fn create_new(path: &Path, text: &str) -> Result<bool, CliError> {
    let file = OpenOptions::new().write(true).create_new(true).open(path);
    let mut file = match file {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => return Ok(false),
        Err(e) => {
            return Err(CliError::new(format!("cannot create `{}`: {e}", spec::display_path(path)))
                .hint("check the permissions of the directory"));
        }
    };
    file.write_all(text.as_bytes())
        .map_err(|e| CliError::new(format!("cannot write `{}`: {e}", spec::display_path(path))))?;
    Ok(true)
}
