//! Output values as people and scripts read them: the plan's `Changes to Outputs:` (text
//! and markdown), its `output_changes` (`plan --json`, Terraform's shape), and the values
//! in state (`Outputs:` after apply, `gpuplan output`).
//!
//! Sensitive values print as `(sensitive)` in text, markdown and `plan --json`; only
//! `gpuplan output NAME` and `gpuplan output --json` print them, as Terraform does.

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::Serialize;
use serde_json::Value as Json;

use crate::plan::model::{Action, OutputChange, Plan};
use crate::render::facts;
use crate::render::style::Paint;
use crate::state::model::OutputState;

pub use crate::render::facts::SENSITIVE;

/// A value on one line, HCL-like: `"text"`, `16`, `["a", "b"]`, `{ k = "v" }`.
pub fn value_text(v: &Json) -> String {
    facts::value(v)
}

/// `name = value` per output, names aligned, sensitive values hidden: what `apply` prints
/// under `Outputs:` and `gpuplan output` without a name.
pub fn list(outputs: &BTreeMap<String, OutputState>) -> String {
    let pad = outputs.keys().map(|k| k.chars().count()).max().unwrap_or(0);
    let mut out = String::new();
    for (name, o) in outputs {
        let shown = if o.sensitive { SENSITIVE.to_string() } else { value_text(&o.value) };
        out += &format!("{name:pad$} = {shown}\n");
    }
    out
}

/// Terraform's type of a value (`output --json`): `string`, `number`, `bool`,
/// `["tuple", [...]]`, `["object", {...}]`, `dynamic` for null.
pub fn type_of(v: &Json) -> Json {
    match v {
        Json::Null => "dynamic".into(),
        Json::Bool(_) => "bool".into(),
        Json::Number(_) => "number".into(),
        Json::String(_) => "string".into(),
        Json::Array(items) => serde_json::json!(["tuple", items.iter().map(type_of).collect::<Vec<_>>()]),
        Json::Object(map) => {
            let fields: serde_json::Map<String, Json> = map.iter().map(|(k, v)| (k.clone(), type_of(v))).collect();
            serde_json::json!(["object", fields])
        }
    }
}

/// The changed outputs' lines, `  + name = value`, `  ~ name = old -> new`, names aligned.
fn change_lines(plan: &Plan, p: &Paint) -> Vec<String> {
    let changed: Vec<&OutputChange> = plan.outputs.iter().filter(|o| o.action != Action::NoOp).collect();
    let pad = changed.iter().map(|o| o.name.chars().count()).max().unwrap_or(0);
    let shown = |o: &OutputChange, v: &Option<OutputState>| match v {
        _ if o.sensitive() => SENSITIVE.to_string(),
        Some(v) => value_text(&v.value),
        None => "null".to_string(),
    };
    changed
        .iter()
        .map(|o| {
            let (sym, text) = match o.action {
                Action::Create => ("+", shown(o, &o.after)),
                Action::Delete => ("-", format!("{} -> null", shown(o, &o.before))),
                _ if o.sensitive() => ("~", SENSITIVE.to_string()),
                _ => ("~", format!("{} -> {}", shown(o, &o.before), shown(o, &o.after))),
            };
            format!("  {} {:pad$} = {text}", p.symbol(sym), o.name)
        })
        .collect()
}

/// `Changes to Outputs:` and a line per changed output; empty when none changes. A plan
/// that changes only outputs says applying it touches no cloud.
pub(crate) fn text_section(plan: &Plan, p: &Paint) -> String {
    let lines = change_lines(plan, p);
    if lines.is_empty() {
        return String::new();
    }
    let mut out = format!("{}\n", p.bold("Changes to Outputs:"));
    for l in lines {
        out += &l;
        out.push('\n');
    }
    if !plan.has_changes() {
        out += "\nYou can apply this plan to save these new output values to the state, without changing the fleet.\n";
    }
    out
}

/// The markdown view's block: the same lines in a `diff` block.
pub(crate) fn markdown_section(plan: &Plan) -> String {
    let lines = change_lines(plan, &Paint::new(false));
    if lines.is_empty() {
        return String::new();
    }
    let body: String = lines.iter().map(|l| format!("{}\n", l.trim_start())).collect();
    format!("**Changes to outputs**\n\n```diff\n{body}```\n\n")
}

/// One output in `plan --json`'s `output_changes`, as Terraform writes it. A sensitive
/// value is `null` with its `*_sensitive` flag set.
#[derive(Serialize, JsonSchema)]
pub(crate) struct OutputChangeDoc {
    /// One action: `create`, `update`, `delete` or `no-op`.
    actions: [&'static str; 1],
    #[schemars(with = "serde_json::Value")]
    after: Json,
    after_sensitive: bool,
    #[schemars(with = "serde_json::Value")]
    before: Json,
    before_sensitive: bool,
}

/// `output_changes`: every output by name.
pub(crate) fn docs(plan: &Plan) -> BTreeMap<&str, OutputChangeDoc> {
    let side = |v: &Option<OutputState>| match v {
        Some(v) if v.sensitive => (Json::Null, true),
        Some(v) => (v.value.clone(), false),
        None => (Json::Null, false),
    };
    plan.outputs
        .iter()
        .map(|o| {
            let (before, before_sensitive) = side(&o.before);
            let (after, after_sensitive) = side(&o.after);
            (
                o.name.as_str(),
                OutputChangeDoc { actions: [o.action.as_str()], after, after_sensitive, before, before_sensitive },
            )
        })
        .collect()
}
