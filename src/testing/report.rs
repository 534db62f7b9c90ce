//! The terminal and JSON views of a test report. One line per run; a run that did not
//! pass is followed by its failures (location, message, the values that decided), and
//! the last line is `N passed, N failed` (`, N skipped` when some were).

use crate::testing::{Counts, Report, Status};

/// The text `gpuplan test` prints on stdout.
pub fn text(report: &Report) -> String {
    let mut out = String::new();
    for f in &report.files {
        out.push_str(&format!("{}\n", f.file));
        for r in &f.runs {
            out.push_str(&format!("  run {:?}... {}\n", r.name, r.status.as_str()));
            for failure in &r.failures {
                let mut lines = failure.message.lines();
                out.push_str(&format!("    {}: {}\n", failure.location, lines.next().unwrap_or("")));
                for l in lines {
                    out.push_str(&format!("      {l}\n"));
                }
                for v in &failure.values {
                    out.push_str(&format!("      {} = {}\n", v.expression, v.value));
                }
            }
        }
    }
    if !report.files.is_empty() {
        out.push('\n');
    }
    out.push_str(&summary(report.counts()));
    out.push('\n');
    out
}

/// `3 passed, 1 failed` (`, 2 skipped`).
pub fn summary(c: Counts) -> String {
    let mut s = format!("{} passed, {} failed", c.passed, c.failed);
    if c.skipped > 0 {
        s.push_str(&format!(", {} skipped", c.skipped));
    }
    s
}

/// `gpuplan test --json`: `{files: [{file, duration, runs: [{name, location, status,
/// duration, failures: [{location, message, values: [{expression, value}]}]}]}],
/// summary: {passed, failed, skipped}}`; durations in seconds.
pub fn json(report: &Report) -> serde_json::Value {
    serde_json::json!({
        "files": report.files,
        "summary": report.counts(),
    })
}

/// Did every selected run pass?
pub fn all_passed(report: &Report) -> bool {
    report.files.iter().flat_map(|f| &f.runs).all(|r| r.status == Status::Pass)
}
