//! `gpuplan output [NAME] [--json|--raw]`: the fleet's output values from state, as
//! `terraform output` prints them; and the `Outputs:` that `apply` prints.
//!
//! Read-only: the state is read without a lock, and no file is written. Sensitive values
//! are hidden in the list (`(sensitive)`), and printed by `output NAME` and `--json`, as
//! Terraform does.

use super::output;
use super::{CliError, ExitStatus, OutputArgs, Settings, state_common};
use crate::diag::did_you_mean;
use crate::render::outputs as view;
use crate::state::State;
use crate::state::model::OutputState;

pub fn run(settings: &Settings, args: &OutputArgs) -> miette::Result<ExitStatus> {
    let state = state_common::read(settings)?;
    let outputs = state.as_ref().map(|s| &s.outputs);
    let Some(name) = &args.name else {
        if args.raw {
            return Err(CliError::new("`--raw` prints one output: name it")
                .hint("`gpuplan output NAME --raw`; `gpuplan output --json` prints them all")
                .into());
        }
        return Ok(all(outputs, args.json));
    };
    let o = find(name, state.as_ref())?;
    let text = if args.json {
        format!("{}\n", pretty(&o.value))
    } else if args.raw {
        raw(name, &o.value)?
    } else {
        format!("{}\n", view::value_text(&o.value))
    };
    output::stdout(&text);
    Ok(ExitStatus::Success)
}

/// Every output: `name = value` lines (sensitive ones hidden), or Terraform's JSON object.
fn all(outputs: Option<&std::collections::BTreeMap<String, OutputState>>, json: bool) -> ExitStatus {
    let empty = std::collections::BTreeMap::new();
    let outputs = outputs.unwrap_or(&empty);
    if json {
        let doc: serde_json::Map<String, serde_json::Value> = outputs
            .iter()
            .map(|(k, o)| {
                let entry =
                    serde_json::json!({"sensitive": o.sensitive, "type": view::type_of(&o.value), "value": o.value});
                (k.clone(), entry)
            })
            .collect();
        output::stdout(&format!("{}\n", pretty(&serde_json::Value::Object(doc))));
    } else if outputs.is_empty() {
        output::stderr(
            "warning: no outputs found: the state has none; add `output` blocks to the spec and apply to record them\n",
        );
    } else {
        output::stdout(&view::list(outputs));
    }
    ExitStatus::Success
}

/// The output `name` from state, or an error that says what there is.
fn find<'s>(name: &str, state: Option<&'s State>) -> Result<&'s OutputState, CliError> {
    let Some(state) = state else {
        return Err(CliError::new(format!("output `{name}` not found: there is no state yet"))
            .hint("`gpuplan apply` records the spec's outputs in state"));
    };
    if let Some(o) = state.outputs.get(name) {
        return Ok(o);
    }
    let error = CliError::new(format!("output `{name}` not found in state"));
    Err(match did_you_mean(name, state.outputs.keys().map(String::as_str)) {
        Some(near) => error.hint(format!("did you mean `{near}`?")),
        None if state.outputs.is_empty() => {
            error.hint("the state has no outputs: add `output` blocks to the spec and apply to record them")
        }
        None => error.hint("`gpuplan output` lists the outputs in state"),
    })
}

/// `--raw`: a string as it is, a number or bool as text, without a final newline.
fn raw(name: &str, v: &serde_json::Value) -> Result<String, CliError> {
    match v {
        serde_json::Value::String(s) => Ok(s.clone()),
        serde_json::Value::Number(n) => Ok(n.to_string()),
        serde_json::Value::Bool(b) => Ok(b.to_string()),
        other => {
            let what = match other {
                serde_json::Value::Null => "null",
                serde_json::Value::Array(_) => "a list",
                _ => "an object",
            };
            Err(CliError::new(format!("output `{name}` is {what}: `--raw` prints only strings, numbers and bools"))
                .hint(format!("`gpuplan output {name} --json` prints it as JSON")))
        }
    }
}

fn pretty(v: &serde_json::Value) -> String {
    serde_json::to_string_pretty(v).unwrap_or_else(|_| v.to_string())
}

/// After an apply: `Outputs:` and the values in state, on stdout, when there are any.
pub fn print_applied(state: &State) {
    if !state.outputs.is_empty() {
        output::stdout(&format!("\nOutputs:\n\n{}", view::list(&state.outputs)));
    }
}
