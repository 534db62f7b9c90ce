//! `gpuplan validate`: load every spec file of the working directory, the policy files
//! `plan` would read and the test files `test` would run, and report all problems at
//! once: rendered on stderr, or as JSON on stdout with `--json`.

use std::collections::BTreeSet;

use super::output::{self, Style};
use super::{CliError, ExitStatus, Settings, ValidateArgs, load};
use crate::diag::{self, Diagnostic, Severity};

pub fn run(settings: &Settings, args: &ValidateArgs) -> miette::Result<ExitStatus> {
    // `validate` ends once the spec is checked: its raw tree is left to the exit.
    let opts = crate::spec::LoadOptions { raw_tree_to_exit: true, ..settings.load_options() };
    let mut loaded = crate::graph::load_checked(load::read_spec(settings)?, &opts);
    load::say_skipped(settings, &loaded.skipped);
    // The policies `plan` would load, checked the same way and reported in the same run.
    let policy_files = load::policy_files(settings, &args.policy_dir)?;
    crate::policy::load::load(&policy_files, &mut loaded.sources, &mut loaded.diags);
    // And the test files `gpuplan test` would run.
    let test_files = crate::testing::test_files(&settings.dir)
        .map_err(|e| CliError::new(format!("cannot read `{}`: {e}", settings.dir.join("tests").display())))?;
    crate::testing::file::load(&test_files, &mut loaded.sources, &mut loaded.diags);
    loaded.diags.sort();
    let diags = &loaded.diags.items;
    if args.json {
        let json = diag::to_json(&loaded.sources, diags);
        output::stdout(&format!("{}\n", serde_json::to_string_pretty(&json).unwrap_or_else(|_| json.to_string())));
    } else {
        output::stderr(&diag::render_text(&loaded.sources, diags, settings.width, settings.color_stderr));
        output::stderr(&summary(diags, settings.color_stderr));
    }
    let failed = loaded.diags.has_errors();
    super::common::leave_to_exit(loaded);
    Ok(if failed { ExitStatus::Error } else { ExitStatus::Success })
}

/// `error: 3 problems in 2 files` or `Success! The configuration is valid.`, with warnings.
fn summary(diags: &[Diagnostic], color: bool) -> String {
    let errors = diags.iter().filter(|d| d.severity == Severity::Error).count();
    let warnings = diags.len() - errors;
    let warned = match warnings {
        0 => String::new(),
        n => format!(", with {}", plural(n, "warning")),
    };
    if errors == 0 {
        let success = output::paint("Success!", Style::Success, color);
        return format!("{success} The configuration is valid{warned}.\n");
    }
    let files: BTreeSet<u32> = diags.iter().filter_map(|d| d.primary()).map(|s| s.file).collect();
    let place = match files.len() {
        0 => String::new(),
        n => format!(" in {}", plural(n, "file")),
    };
    format!("{} {}{place}{warned}\n", output::paint("error:", Style::Error, color), plural(errors, "problem"))
}

fn plural(n: usize, word: &str) -> String {
    if n == 1 { format!("1 {word}") } else { format!("{n} {word}s") }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::diag::Span;

    #[test]
    fn summaries_count_problems_files_and_warnings() {
        let at = |f| Diagnostic::error("t", "x").at(Span::new(f, 0, 1), "here");
        let diags = [at(0), at(1), at(1), Diagnostic::warning("t", "w")];
        assert_eq!(summary(&diags, false), "error: 3 problems in 2 files, with 1 warning\n");
        assert_eq!(summary(&[Diagnostic::error("t", "x")], false), "error: 1 problem\n");
        assert_eq!(summary(&[], false), "Success! The configuration is valid.\n");
        let warn = [Diagnostic::warning("t", "w"), Diagnostic::warning("t", "v")];
        assert_eq!(summary(&warn, false), "Success! The configuration is valid, with 2 warnings.\n");
    }
}
