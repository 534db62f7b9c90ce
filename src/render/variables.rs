//! The variable values a saved plan was made with (`PlanInputs`), as `show PLANFILE`
//! prints them and `plan --json`/`show --json` carry them (`variables`, as Terraform's
//! `show -json PLANFILE`): a reviewer sees what the plan will be applied with. A
//! sensitive variable's value is `(sensitive)` in every view (docs/design/secrets.md).

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::Serialize;

use crate::plan::Plan;

/// One variable of the `variables` object.
#[derive(Serialize, JsonSchema)]
pub(crate) struct VariableDoc<'a> {
    /// Where the value came from: `default`, `--var`, a var file, the environment.
    from: &'a str,
    /// Present and true for a variable declared `sensitive = true` (its value is then
    /// `"(sensitive)"`).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    sensitive: bool,
    value: serde_json::Value,
}

/// The `variables` object: absent from a plan that was not saved (no inputs recorded).
pub(crate) fn docs(plan: &Plan) -> Option<BTreeMap<&str, VariableDoc<'_>>> {
    let inputs = plan.inputs.as_ref()?;
    let docs = inputs.variables.iter().map(|(name, v)| {
        let doc = VariableDoc { from: &v.from, sensitive: v.sensitive != Some(false), value: v.shown() };
        (name.as_str(), doc)
    });
    Some(docs.collect())
}

/// `name = value (from)`, one line each, names aligned.
fn lines(plan: &Plan) -> Vec<String> {
    let Some(inputs) = &plan.inputs else { return Vec::new() };
    let pad = inputs.variables.keys().map(|n| n.chars().count()).max().unwrap_or(0);
    inputs.variables.iter().map(|(name, v)| format!("{name:pad$} = {}  ({})", v.shown_text(), v.from)).collect()
}

/// The text `show PLANFILE` prints before the plan: the workspace, when the plan was made
/// and how long ago, and each variable's value as planned; empty for a plan that records
/// none.
pub fn text(plan: &Plan) -> String {
    text_at(plan, std::time::SystemTime::now())
}

/// [`text`] as of `now`.
pub(crate) fn text_at(plan: &Plan, now: std::time::SystemTime) -> String {
    let Some(inputs) = &plan.inputs else { return String::new() };
    let made = made(inputs, now);
    let lines = lines(plan);
    if lines.is_empty() {
        let made = if made.is_empty() { made } else { format!(", made{made}") };
        return format!("Saved plan of workspace `{}`{made}; the spec declares no variables.\n\n", inputs.workspace);
    }
    let mut out = format!("Saved plan of workspace `{}`, made{made} with these variables:\n", inputs.workspace);
    for l in lines {
        out += &format!("  {l}\n");
    }
    out.push('\n');
    out
}

/// ` 2026-12-07T19:24:00Z (2h 5m ago)`: when the plan was made, to the minute ago;
/// empty for a plan file that did not record it. A time ahead of `now` (another machine's
/// clock) is given without its age.
fn made(inputs: &crate::plan::inputs::PlanInputs, now: std::time::SystemTime) -> String {
    let Some(at) = &inputs.made_at else { return String::new() };
    // A time that does not parse (a hand-edited file) or lies ahead of `now` is shown as
    // written, without an age: the age is a courtesy, the time itself is always printed.
    let age = humantime::parse_rfc3339(at).ok().and_then(|t| now.duration_since(t).ok());
    match age {
        Some(age) if age.as_secs() < 60 => format!(" {at} (less than a minute ago)"),
        Some(age) => {
            let minutes = std::time::Duration::from_secs(age.as_secs() / 60 * 60);
            format!(" {at} ({} ago)", humantime::format_duration(minutes))
        }
        None => format!(" {at}"),
    }
}

/// The same as a collapsed block closing a pull-request comment; empty when none.
pub fn markdown(plan: &Plan) -> String {
    let Some(inputs) = &plan.inputs else { return String::new() };
    let lines = lines(plan);
    if lines.is_empty() {
        return String::new();
    }
    let made = inputs.made_at.as_deref().map(|at| format!(", made {at}")).unwrap_or_default();
    let summary = format!("Variables of this saved plan (workspace <code>{}</code>{made})", inputs.workspace);
    let body: String = lines.iter().map(|l| format!("{l}\n")).collect();
    let fence = "`".repeat(body.split(|c| c != '`').map(str::len).max().unwrap_or(0).max(2) + 1);
    format!("\n<details><summary>{summary}</summary>\n\n{fence}text\n{body}{fence}\n\n</details>\n")
}
