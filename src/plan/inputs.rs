//! What a saved plan was made with besides the spec files and the state: the workspace,
//! every variable's value, the policy overrides, and the spec's fingerprint. (Targets,
//! replacements and `destroy` are the plan's own fields.) `apply PLANFILE` executes the plan with
//! these and needs none of them repeated; one given again must say the same.
//!
//! [`saved_variables`] is the one place that decides which values go into the file.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::addr::Address;
use crate::spec::eval::Value;
use crate::spec::fingerprint::Fingerprint;
use crate::spec::model::VarType;
use crate::spec::varfile::{VarArg, VarFrom, VarInput};
use crate::spec::{Loaded, Spec};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PlanInputs {
    /// The workspace whose state the plan was made against.
    pub workspace: String,
    /// Every variable the spec declares, by name, with the value planned.
    pub variables: BTreeMap<String, SavedVar>,
    /// `--override-policy` names given when planning.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub overrides: Vec<String>,
    /// What the spec was loaded from ([`Fingerprint`]).
    pub sources: Fingerprint,
    /// When the plan was made: RFC 3339, UTC, to the second (`show` says how old a plan
    /// is; the JSON document's `timestamp`, as Terraform's). `None` in a plan file saved
    /// before this was recorded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub made_at: Option<String>,
}

/// One variable's value as planned.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SavedVar {
    pub value: serde_json::Value,
    /// The declared type, to read a `--var` given to `apply PLANFILE` as planning did.
    #[serde(rename = "type")]
    pub ty: VarType,
    /// Where the value came from: `default`, `--var`, a var file, the environment.
    pub from: String,
    /// `sensitive = true` on the variable: views print `(sensitive)` for its value (the
    /// file keeps the value, which apply needs; docs/design/secrets.md). `None` in a plan
    /// saved before this was recorded, whose values views hide too.
    #[serde(default)]
    pub sensitive: Option<bool>,
}

impl SavedVar {
    /// The value as views show it: `"(sensitive)"` for a sensitive variable (and for one
    /// of a plan file that does not say), else the value.
    pub fn shown(&self) -> serde_json::Value {
        if self.sensitive == Some(false) { self.value.clone() } else { serde_json::Value::from(SENSITIVE) }
    }

    /// The value as text views write it: JSON, or `(sensitive)` bare, as attributes print.
    pub fn shown_text(&self) -> String {
        if self.sensitive == Some(false) { self.value.to_string() } else { SENSITIVE.to_string() }
    }
}

/// What views print for a sensitive value.
pub const SENSITIVE: &str = "(sensitive)";

/// The variable values a plan file carries: every declared variable's value as planned.
/// Sensitive variables (`sensitive = true`, issue 50) are to be decided here, and only
/// here: what this leaves out, `apply PLANFILE` must be given again.
pub fn saved_variables(spec: &Spec) -> BTreeMap<String, SavedVar> {
    spec.variables
        .iter()
        .map(|(name, v)| {
            let saved = SavedVar {
                value: v.value.value.to_json(),
                ty: v.ty.value,
                from: v.from.to_string(),
                sensitive: Some(v.sensitive.value),
            };
            (name.clone(), saved)
        })
        .collect()
}

/// A saved plan applied with arguments that say otherwise: what differs, and the fix.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{message}")]
pub struct NotAsSaved {
    pub message: String,
    pub hint: String,
}

impl PlanInputs {
    /// What made a plan of `loaded`: `workspace`, `overrides`, and `env` (the process
    /// environment) for the variables the spec's `env()` read.
    pub fn of(loaded: &Loaded, workspace: &str, overrides: &[String], env: &BTreeMap<String, String>) -> Self {
        // A variable's own `GPUPLAN_VAR_<name>` is covered by its saved value.
        let own = |n: &String| n.strip_prefix("GPUPLAN_VAR_").is_some_and(|v| loaded.spec.variables.contains_key(v));
        let names: Vec<String> = loaded.env_read.iter().filter(|n| !own(n)).cloned().collect();
        PlanInputs {
            workspace: workspace.to_string(),
            variables: saved_variables(&loaded.spec),
            overrides: overrides.to_vec(),
            sources: Fingerprint::of(&loaded.sources, &loaded.var_files, &names, env),
            made_at: Some(humantime::format_rfc3339_seconds(std::time::SystemTime::now()).to_string()),
        }
    }

    /// The saved values as load arguments, which give every variable its value.
    pub fn var_args(&self) -> Vec<VarArg> {
        self.variables
            .iter()
            .map(|(name, v)| VarArg::Value {
                name: name.clone(),
                value: Value::from_json(&v.value),
                from: format!("the saved plan ({})", v.from),
            })
            .collect()
    }

    /// Check what `apply PLANFILE` was given against what the plan was made with: the
    /// workspace, variable values (`--var`, `--var-file`: each must be the saved value),
    /// and targets, replacements and overrides (if given, the saved ones). `plan_file` as typed, for hints.
    pub fn check_given(
        &self,
        plan_targets: &[Address],
        plan_replace: &[Address],
        given: &Given<'_>,
        plan_file: &str,
    ) -> Result<(), NotAsSaved> {
        if given.workspace != self.workspace {
            return Err(NotAsSaved {
                message: format!(
                    "the plan was saved in workspace `{}`, and this run is in workspace `{}`",
                    self.workspace, given.workspace
                ),
                hint: format!("apply it in its workspace: `gpuplan --workspace {} apply {plan_file}`", self.workspace),
            });
        }
        self.check_vars(given.vars, plan_file)?;
        let same = |a: &[String], b: &[String]| {
            let (mut a, mut b) = (a.to_vec(), b.to_vec());
            a.sort();
            a.dedup();
            b.sort();
            b.dedup();
            a == b
        };
        let shown = |t: &[Address]| t.iter().map(|a| a.to_string()).collect::<Vec<_>>();
        if !given.targets.is_empty() && !same(&shown(given.targets), &shown(plan_targets)) {
            return Err(flag_differs("--target", &shown(plan_targets), plan_file));
        }
        if !given.replace.is_empty() && !same(&shown(given.replace), &shown(plan_replace)) {
            return Err(flag_differs("--replace", &shown(plan_replace), plan_file));
        }
        if !given.overrides.is_empty() && !same(given.overrides, &self.overrides) {
            return Err(flag_differs("--override-policy", &self.overrides, plan_file));
        }
        Ok(())
    }

    /// Each given value (the last for each name) must be the saved one; a name the plan's
    /// spec does not declare is refused from `--var` and passed over in a var file.
    fn check_vars(&self, given: &[VarInput], plan_file: &str) -> Result<(), NotAsSaved> {
        let again =
            format!("drop it (the plan keeps its own values: `gpuplan apply {plan_file}`), or plan again with it");
        for (i, input) in given.iter().enumerate() {
            if given[i + 1..].iter().any(|later| later.name == input.name) {
                continue;
            }
            let name = &input.name;
            let Some(saved) = self.variables.get(name) else {
                if matches!(input.from, VarFrom::File { .. }) {
                    // As when planning: a var file may set more than this spec declares.
                    continue;
                }
                return Err(NotAsSaved {
                    message: format!(
                        "{} sets `{name}`, but the saved plan's spec declares no variable `{name}`",
                        input.from.describe()
                    ),
                    hint: again,
                });
            };
            let planned = Value::from_json(&saved.value);
            let now = crate::spec::decode::input_value(&input.value, saved.ty);
            if now.as_ref().ok() != Some(&planned) {
                // A sensitive value is named by neither side.
                let shown = match now {
                    _ if saved.sensitive != Some(false) => "another value".to_string(),
                    Ok(v) => v.to_json().to_string(),
                    Err(_) => "another value".to_string(),
                };
                return Err(NotAsSaved {
                    message: format!(
                        "{} sets variable `{name}` to {shown}, but the plan was saved with {} (from {})",
                        input.from.describe(),
                        saved.shown_text(),
                        saved.from
                    ),
                    hint: again,
                });
            }
        }
        Ok(())
    }
}

/// What `apply PLANFILE` was given that a plan is made with.
pub struct Given<'a> {
    pub workspace: &'a str,
    /// `--var` and `--var-file` values, in order ([`crate::spec::varfile::resolve`]).
    pub vars: &'a [VarInput],
    pub targets: &'a [Address],
    /// `--replace` addresses.
    pub replace: &'a [Address],
    pub overrides: &'a [String],
}

fn flag_differs(flag: &str, saved: &[String], plan_file: &str) -> NotAsSaved {
    let saved = if saved.is_empty() {
        format!("without {flag}")
    } else {
        format!("with {}", saved.iter().map(|s| format!("{flag} {s}")).collect::<Vec<_>>().join(" "))
    };
    NotAsSaved {
        message: format!("the plan was saved {saved}, and a saved plan is applied as it was made"),
        hint: format!("drop {flag} (`gpuplan apply {plan_file}` applies the plan's own), or plan again with it"),
    }
}

#[cfg(test)]
mod tests;
