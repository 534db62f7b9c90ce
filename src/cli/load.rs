//! Loading the spec for commands that need a valid one: diagnostics go to stderr, and
//! the caller stops with exit 1 if there were errors.

use super::output;
use super::{CliError, Settings};
use crate::diag;
use crate::spec::{self, Loaded};

/// `Ok(None)` when the spec has errors (already printed).
pub fn valid_spec(settings: &Settings) -> miette::Result<Option<Loaded>> {
    valid_spec_read(settings, read_spec(settings)?)
}

/// The spec files of `-C DIR`, read and not yet parsed.
pub fn read_spec(settings: &Settings) -> miette::Result<spec::ReadDir> {
    spec::read_dir(&settings.dir).map_err(|e| {
        CliError::new(format!("cannot read `{}`: {e}", settings.dir.display()))
            .hint("check that the directory exists and is readable")
            .into()
    })
}

/// [`valid_spec`] of files already read ([`read_spec`]).
pub fn valid_spec_read(settings: &Settings, read: spec::ReadDir) -> miette::Result<Option<Loaded>> {
    valid_spec_with(settings, read, &settings.load_options())
}

/// [`valid_spec_read`] with other load options (a saved plan's variable values).
pub fn valid_spec_with(
    settings: &Settings,
    read: spec::ReadDir,
    opts: &spec::LoadOptions,
) -> miette::Result<Option<Loaded>> {
    let loaded = crate::graph::load_checked(read, opts);
    say_skipped(settings, &loaded.skipped);
    if !loaded.diags.items.is_empty() {
        output::stderr(&diag::render_text(&loaded.sources, &loaded.diags.items, settings.width, settings.color_stderr));
    }
    if loaded.diags.has_errors() {
        let n = loaded.diags.error_count();
        let problems = if n == 1 { "1 problem".to_string() } else { format!("{n} problems") };
        output::stderr(&format!(
            "error: the spec has {problems}; nothing was done\nhint: fix them and run `gpuplan validate` to check\n"
        ));
        return Ok(None);
    }
    Ok(Some(loaded))
}

/// One warning line naming the YAML files of other tools that the spec leaves out.
pub fn say_skipped(settings: &Settings, skipped: &[String]) {
    if skipped.is_empty() {
        return;
    }
    let warning = output::paint("warning:", output::Style::Warning, settings.color_stderr);
    let names: Vec<String> = skipped.iter().map(|n| format!("`{n}`")).collect();
    output::stderr(&format!(
        "{warning} skipped {}: their top-level keys are not gpuplan's, so they are not read as specs\n",
        names.join(", ")
    ));
}

/// Policies of `<DIR>/policies` and `--policy-dir`s; `Ok(None)` when a policy file has
/// errors (already printed).
pub fn policies(
    settings: &Settings,
    extra_dirs: &[std::path::PathBuf],
) -> miette::Result<Option<Vec<crate::policy::Policy>>> {
    let files = policy_files(settings, extra_dirs)?;
    let mut sources = crate::diag::Sources::default();
    let mut diags = crate::diag::Diagnostics::default();
    let policies = crate::policy::load::load(&files, &mut sources, &mut diags);
    if !diags.items.is_empty() {
        output::stderr(&diag::render_text(&sources, &diags.items, settings.width, settings.color_stderr));
    }
    if diags.has_errors() {
        output::stderr("error: the policy files have problems; nothing was done\n");
        return Ok(None);
    }
    Ok(Some(policies))
}

/// The policy files of `<DIR>/policies` and the `--policy-dir`s, which must exist.
pub fn policy_files(settings: &Settings, extra_dirs: &[std::path::PathBuf]) -> miette::Result<Vec<std::path::PathBuf>> {
    use crate::policy::load;
    let extra: Vec<_> = extra_dirs.iter().map(|d| settings.resolve_path(d)).collect();
    for d in &extra {
        if !d.is_dir() {
            return Err(CliError::new(format!("policy directory `{}` does not exist", d.display()))
                .hint("pass an existing directory to --policy-dir")
                .into());
        }
    }
    Ok(load::policy_files(&load::default_dirs(&settings.dir, &extra)))
}
