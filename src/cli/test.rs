//! `gpuplan test`: run `tests/*.test.hcl` against private sim worlds; one line per run,
//! `N passed, N failed` last, exit 0 only when every run passed. `--junit-xml FILE` also
//! writes the results for CI, `--json` prints them as JSON instead of text.

use std::path::PathBuf;

use super::output;
use super::{CliError, ExitStatus, Settings, TestArgs, load};
use crate::diag::{self, Diagnostics, Sources};
use crate::testing::{self, report};

pub fn run(settings: &Settings, args: &TestArgs) -> miette::Result<ExitStatus> {
    let started = std::time::SystemTime::now();
    let files = selected_files(settings, &args.filter)?;
    let mut sources = Sources::default();
    let mut diags = Diagnostics::default();
    let parsed = testing::file::load(&files, &mut sources, &mut diags);
    if !diags.items.is_empty() {
        output::stderr(&diag::render_text(&sources, &diags.items, settings.width, settings.color_stderr));
    }
    if diags.has_errors() {
        output::stderr(
            "error: the test files have problems; nothing was run\nhint: `gpuplan validate` checks them too\n",
        );
        return Ok(ExitStatus::Error);
    }
    for name in &args.run {
        if !parsed.iter().any(|f| f.runs.iter().any(|r| &r.name == name)) {
            return Err(CliError::new(format!("no test file has a run named `{name}`"))
                .hint("`--run` takes the label of a `run \"NAME\" {}` block")
                .into());
        }
    }
    if files.is_empty() {
        output::stderr(&format!(
            "warning: no test files in `{}`: `gpuplan test` runs `tests/*.test.hcl`\n",
            crate::spec::display_path(&settings.dir)
        ));
    }
    let Some(policies) = load::policies(settings, &[])? else { return Ok(ExitStatus::Error) };
    let opts =
        testing::Options { dir: settings.dir.clone(), env: settings.env.clone(), policies, runs: args.run.clone() };
    let report = testing::run_files(&parsed, &sources, &opts);
    if args.json {
        let json = report::json(&report);
        output::stdout(&format!("{}\n", serde_json::to_string_pretty(&json).unwrap_or_else(|_| json.to_string())));
    } else {
        output::stdout(&report::text(&report));
    }
    if let Some(path) = &args.junit_xml {
        let path = settings.resolve_path(path);
        let stamp = humantime::format_rfc3339_seconds(started).to_string();
        // JUnit readers expect a local-style timestamp without a zone; it is UTC.
        let xml = testing::junit::xml(&report, stamp.trim_end_matches('Z'));
        std::fs::write(&path, xml)
            .map_err(|e| CliError::new(format!("cannot write the JUnit report `{}`: {e}", path.display())))?;
    }
    Ok(if report::all_passed(&report) { ExitStatus::Success } else { ExitStatus::Error })
}

/// The test files, or those `--filter` names (by path from the spec folder or the working
/// directory, or by file name); a filter that names none is an error.
fn selected_files(settings: &Settings, filters: &[PathBuf]) -> Result<Vec<PathBuf>, CliError> {
    let all = testing::test_files(&settings.dir)
        .map_err(|e| CliError::new(format!("cannot read `{}`: {e}", settings.dir.join("tests").display())))?;
    if filters.is_empty() {
        return Ok(all);
    }
    let mut out = Vec::new();
    for filter in filters {
        let wanted = settings.resolve_path(filter);
        let cwd_relative = std::path::absolute(filter).unwrap_or_else(|_| filter.clone());
        let found: Vec<&PathBuf> = all
            .iter()
            .filter(|p| **p == wanted || **p == cwd_relative || p.file_name() == Some(filter.as_os_str()))
            .collect();
        if found.is_empty() {
            let names: Vec<String> = all.iter().map(|p| format!("`{}`", crate::spec::display_path(p))).collect();
            return Err(CliError::new(format!("`--filter {}` names no test file", filter.display())).hint(
                if names.is_empty() {
                    "there are no `tests/*.test.hcl` files".to_string()
                } else {
                    format!("the test files: {}", names.join(", "))
                },
            ));
        }
        out.extend(found.into_iter().cloned());
    }
    out.sort();
    out.dedup();
    Ok(out)
}
