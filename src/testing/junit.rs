//! JUnit XML (`gpuplan test --junit-xml FILE`), as CI systems read it: `<testsuites>`,
//! one `<testsuite>` per test file, one `<testcase>` per run with `classname` the file,
//! and at most one of `<failure>`, `<error>` or `<skipped>`. The shape follows the schema
//! Jenkins reads (xunit's `junit-10.xsd`), which GitLab's and GitHub's report readers
//! accept too; `tests/junit/junit.xsd` restates it and a test validates this output
//! against it with an independent XML Schema validator.

use crate::testing::{FileReport, Report, RunReport, Status};

/// The document; `timestamp` is when the tests started (RFC 3339, no time zone suffix
/// as the schema's `xs:dateTime` without one is what Jenkins writes).
pub fn xml(report: &Report, timestamp: &str) -> String {
    let c = report.counts();
    let errors = count(report.files.iter().flat_map(|f| &f.runs), Status::Error);
    let time = report.duration.as_secs_f64();
    let mut out = String::from("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
    out.push_str(&format!(
        "<testsuites name=\"gpuplan test\" tests=\"{}\" failures=\"{}\" errors=\"{errors}\" time=\"{}\">\n",
        c.passed + c.failed + c.skipped,
        c.failed - errors,
        seconds(time)
    ));
    for (id, f) in report.files.iter().enumerate() {
        suite(&mut out, id, f, timestamp);
    }
    out.push_str("</testsuites>\n");
    out
}

fn count<'a>(runs: impl Iterator<Item = &'a RunReport>, status: Status) -> usize {
    runs.filter(|r| r.status == status).count()
}

fn suite(out: &mut String, id: usize, f: &FileReport, timestamp: &str) {
    out.push_str(&format!(
        "  <testsuite name=\"{}\" id=\"{id}\" tests=\"{}\" failures=\"{}\" errors=\"{}\" skipped=\"{}\" time=\"{}\" timestamp=\"{}\">\n",
        escape(&f.file),
        f.runs.len(),
        count(f.runs.iter(), Status::Fail),
        count(f.runs.iter(), Status::Error),
        count(f.runs.iter(), Status::Skip),
        seconds(f.duration.as_secs_f64()),
        escape(timestamp),
    ));
    for r in &f.runs {
        case(out, f, r);
    }
    out.push_str("  </testsuite>\n");
}

fn case(out: &mut String, f: &FileReport, r: &RunReport) {
    let open = format!(
        "    <testcase name=\"{}\" classname=\"{}\" time=\"{}\"",
        escape(&r.name),
        escape(&f.file),
        seconds(r.duration.as_secs_f64())
    );
    let body = details(r);
    let first = r.failures.first().map(|f| f.message.lines().next().unwrap_or("").to_string()).unwrap_or_default();
    match r.status {
        Status::Pass => out.push_str(&format!("{open}/>\n")),
        Status::Skip => out.push_str(&format!(
            "{open}>\n      <skipped message=\"an earlier run of this file failed with an error\"/>\n    </testcase>\n"
        )),
        Status::Fail | Status::Error => {
            let (tag, kind) = if r.status == Status::Fail { ("failure", "assert") } else { ("error", "error") };
            let message =
                if r.failures.len() > 1 { format!("{first} (and {} more)", r.failures.len() - 1) } else { first };
            out.push_str(&format!(
                "{open}>\n      <{tag} message=\"{}\" type=\"{kind}\">{}</{tag}>\n    </testcase>\n",
                escape(&message),
                escape(&body)
            ));
        }
    }
}

/// Every failure of a run, as the terminal shows it.
fn details(r: &RunReport) -> String {
    let mut s = String::new();
    for f in &r.failures {
        s.push_str(&format!("{}: {}\n", f.location, f.message));
        for v in &f.values {
            s.push_str(&format!("  {} = {}\n", v.expression, v.value));
        }
    }
    s
}

/// Seconds with millisecond precision, as JUnit writers print them.
fn seconds(s: f64) -> String {
    format!("{s:.3}")
}

/// Text for an attribute or element: markup escaped, and characters XML 1.0 forbids
/// (control characters from a failure message) dropped.
fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            '\n' | '\t' | '\r' => out.push(c),
            c if (c as u32) < 0x20 || c == '\u{FFFE}' || c == '\u{FFFF}' => {}
            c => out.push(c),
        }
    }
    out
}
