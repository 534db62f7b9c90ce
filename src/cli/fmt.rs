//! `gpuplan fmt`: rewrite spec files in canonical form (`spec::hcl::format`,
//! `spec::yaml::format`). Changed files are written atomically and named on stdout;
//! `--check` writes nothing and prints diffs instead; `--diff` prints them as it writes.

use std::fs;
use std::io::{self, Write};
use std::path::{Path, PathBuf};

use super::output::{self, Style};
use super::{CliError, ExitStatus, FmtArgs, Settings};
use crate::diag::{self, Diagnostic, Diagnostics, Sources};
use crate::spec::{self, display_path};

pub fn run(settings: &Settings, args: &FmtArgs) -> miette::Result<ExitStatus> {
    let (files, named) = targets(settings, &args.paths)?;
    if files.is_empty() {
        let warning = output::paint("warning:", Style::Warning, settings.color_stderr);
        output::stderr(&format!("{warning} no spec files (*.hcl, *.yaml, *.yml) to format\n"));
        return Ok(ExitStatus::Success);
    }
    let mut sources = Sources::default();
    let mut diags = Diagnostics::default();
    let mut unformatted = 0;
    let mut skipped = Vec::new();
    for path in &files {
        let name = display_path(path);
        let text = match fs::read_to_string(path) {
            Ok(text) => text,
            Err(e) => {
                diags.push(Diagnostic::error("gpuplan::fmt::io", format!("cannot read `{name}`: {e}")));
                continue;
            }
        };
        // Another tool's YAML found in a folder is not a spec: left as it is.
        if is_yaml(path) && !named.contains(path) && is_foreign(&text) {
            skipped.push(format!("`{name}`"));
            continue;
        }
        let id = sources.add(name.clone(), text.clone());
        let mut file_diags = Diagnostics::default();
        let formatted = if is_yaml(path) {
            spec::yaml::format(id, &text, &mut file_diags)
        } else {
            spec::hcl::format(id, &text, &mut file_diags)
        };
        let failed = file_diags.has_errors();
        diags.extend(file_diags);
        let Some(formatted) = formatted.filter(|f| !failed && *f != text) else { continue };
        unformatted += 1;
        if !args.check {
            write_atomic(path, &formatted).map_err(|e| {
                CliError::new(format!("cannot write `{name}`: {e}")).hint("check the file's permissions")
            })?;
            output::stdout(&format!("{name}\n"));
        }
        if args.check || args.diff {
            let diff = similar::TextDiff::from_lines(&text, &formatted);
            output::stdout(&diff.unified_diff().header(&name, &name).to_string());
        }
    }
    if !skipped.is_empty() {
        let warning = output::paint("warning:", Style::Warning, settings.color_stderr);
        output::stderr(&format!(
            "{warning} skipped {}: their top-level keys are not gpuplan's, so they are not specs\n",
            skipped.join(", ")
        ));
    }
    diags.sort();
    output::stderr(&diag::render_text(&sources, &diags.items, settings.width, settings.color_stderr));
    if diags.has_errors() {
        return Ok(ExitStatus::Error);
    }
    if args.check && unformatted > 0 {
        let error = output::paint("error:", Style::Error, settings.color_stderr);
        let hint = output::paint("hint:", Style::Hint, settings.color_stderr);
        let files = if unformatted == 1 { "1 file is".to_string() } else { format!("{unformatted} files are") };
        output::stderr(&format!("{error} {files} not formatted\n{hint} run `gpuplan fmt` to format them\n"));
        return Ok(ExitStatus::Error);
    }
    Ok(ExitStatus::Success)
}

/// The spec and var files to format: the working directory's, or those of the given paths
/// (files, or directories whose spec files are taken, not recursively); and the files
/// named themselves, which are formatted even when they look like another tool's.
fn targets(settings: &Settings, paths: &[PathBuf]) -> Result<(Vec<PathBuf>, Vec<PathBuf>), CliError> {
    let list_dir = |dir: &Path| {
        spec::spec_and_var_files(dir).map_err(|e| CliError::new(format!("cannot list `{}`: {e}", display_path(dir))))
    };
    if paths.is_empty() {
        return Ok((list_dir(&settings.dir)?, Vec::new()));
    }
    let mut files = Vec::new();
    let mut named = Vec::new();
    for given in paths {
        let path = settings.resolve_path(given);
        let meta = fs::metadata(&path).map_err(|e| {
            CliError::new(format!("cannot read `{}`: {e}", given.display()))
                .hint("pass spec files, or directories that hold them")
        })?;
        if meta.is_dir() {
            files.extend(list_dir(&path)?);
        } else if is_yaml(&path) || path.extension().is_some_and(|e| e == "hcl") {
            named.push(path.clone());
            files.push(path);
        } else {
            return Err(CliError::new(format!("`{}` is not a spec file", given.display()))
                .hint("`gpuplan fmt` formats `*.hcl`, `*.yaml` and `*.yml` files"));
        }
    }
    files.sort();
    files.dedup();
    Ok((files, named))
}

/// A YAML file of another tool (see `spec::yaml::parse_in_folder`).
fn is_foreign(text: &str) -> bool {
    let mut ignored = Diagnostics::default();
    matches!(spec::yaml::parse_in_folder(0, text, &mut ignored), spec::yaml::FolderFile::Foreign)
}

fn is_yaml(path: &Path) -> bool {
    path.extension().is_some_and(|e| e == "yaml" || e == "yml")
}

/// Replace `path` by writing a sibling temp file and renaming it over, so a crash never
/// leaves a half-written spec. Symlinks are followed so the link survives.
fn write_atomic(path: &Path, text: &str) -> io::Result<()> {
    let path = fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf());
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let tmp = path.with_file_name(format!(".{name}.{}.gpuplan-fmt", std::process::id()));
    let result = (|| {
        let mut file = fs::File::create(&tmp)?;
        file.write_all(text.as_bytes())?;
        file.sync_all()?;
        if let Ok(meta) = fs::metadata(&path) {
            fs::set_permissions(&tmp, meta.permissions())?;
        }
        fs::rename(&tmp, &path)
    })();
    if result.is_err() {
        let _ = fs::remove_file(&tmp);
    }
    result
}
