//! `variable` blocks: their types, and the value each gets (`--var`, `--var-file` and
//! `*.auto.vars.hcl`, then `GPUPLAN_VAR_<name>`, then `default`); values given for
//! variables no block declares are reported. Also how a saved plan's values are read
//! back ([`input_value`]).

use std::collections::{BTreeMap, BTreeSet};

use crate::addr::Kind;
use crate::diag::{Diagnostic, Diagnostics, Span, did_you_mean};
use crate::spec::eval::Scope;
use crate::spec::eval::Value;
use crate::spec::fields::{Cx, Fields, enum_error, type_error};
use crate::spec::model::*;
use crate::spec::raw::{Block, Expr, ExprKind, head, label};
use crate::spec::varfile::{VarFrom, VarInput, VarValue};
use crate::spec::{LoadOptions, Spec};

const VAR_TYPES: &[(&str, VarType)] = &[
    ("any", VarType::Any),
    ("string", VarType::String),
    ("number", VarType::Number),
    ("bool", VarType::Bool),
    ("list", VarType::List),
    ("map", VarType::Map),
];

/// `var.NAME` of each variable declared without a value: it was reported where it is
/// declared, so references to it are poisoned, not reported again where it is used.
pub(super) fn unset_variables(blocks: &[&Block], vars: &BTreeMap<String, Value>) -> BTreeSet<String> {
    blocks.iter().map(|b| label(b)).filter(|name| !vars.contains_key(*name)).map(|name| format!("var.{name}")).collect()
}

/// Decode variable blocks and fix each variable's value: the last of `inputs` that sets
/// it (var files and `--var`, [`crate::spec::varfile`]), else `GPUPLAN_VAR_<name>`, else
/// its `default`.
pub(super) fn variables(
    blocks: &[&Block],
    opts: &LoadOptions,
    inputs: &[VarInput],
    diags: &mut Diagnostics,
    spec: &mut Spec,
) -> BTreeMap<String, Value> {
    let declared: BTreeMap<Kind, BTreeSet<String>> = BTreeMap::new();
    let mut values = BTreeMap::new();
    let names: Vec<&str> = blocks.iter().map(|b| label(b)).collect();
    undeclared_inputs(inputs, &names, diags);
    for b in blocks {
        let name = label(b).to_string();
        let no_files = BTreeSet::new();
        let mut cx = Cx { scope: Scope::default(), diags, declared: &declared, yaml_files: &no_files };
        let mut f = Fields::from_body(format!("variable {name:?}"), head(b), &b.body, cx.diags);
        // `type = string` is a bare keyword in HCL and a string in YAML.
        let ty = match f.raw("type") {
            Some(Expr { kind: ExprKind::Traversal { root, steps }, span }) if steps.is_empty() => {
                var_type(&mut cx, &root.name, *span)
            }
            Some(Expr { kind: ExprKind::Call { name: fname, .. }, span }) => var_type(&mut cx, &fname.name, *span),
            Some(Expr { kind: ExprKind::String(s), span }) => var_type(&mut cx, s, *span),
            Some(e) => {
                cx.error(
                    Diagnostic::error(
                        "gpuplan::spec::variable_type",
                        "a variable `type` must be a type name such as `string`",
                    )
                    .at(e.span, "not a type"),
                );
                None
            }
            None => Some(Spanned::new(VarType::Any, f.head)),
        };
        let default = f.value(&mut cx, "default");
        let description = f.string(&mut cx, "description");
        let sensitive = f.bool(&mut cx, "sensitive");
        let sensitive = f.or(sensitive, false);
        f.raw("nullable");
        let failed = f.failed;
        f.finish(&mut cx, &["type", "default", "description", "sensitive", "nullable"]);
        let Some(ty) = ty else { continue };
        if failed {
            continue;
        }
        let given = given_value(&name, inputs, opts);
        let Some((value, from)) = variable_value(&mut cx, b, &name, &ty, default.as_ref(), given) else { continue };
        values.insert(name.clone(), value.value.clone());
        spec.variables.insert(name, Variable { ty, default, description, sensitive, value, from });
    }
    values
}

/// Values for variables the spec does not declare: an error for `--var` (a typo sets
/// nothing), a warning for a var file (one file may serve several specs), as Terraform.
fn undeclared_inputs(inputs: &[VarInput], names: &[&str], diags: &mut Diagnostics) {
    for input in inputs.iter().filter(|i| !names.contains(&i.name.as_str())) {
        let name = &input.name;
        let mut d = match &input.from {
            VarFrom::File { file, key, .. } => Diagnostic::warning(
                "gpuplan::spec::undeclared_variable",
                format!("`{file}` sets `{name}`, a variable the spec does not declare; it is ignored"),
            )
            .at(*key, "not declared"),
            VarFrom::Flag => Diagnostic::error(
                "gpuplan::spec::undeclared_variable",
                format!("`--var {name}=...` sets a variable the spec does not declare"),
            ),
            VarFrom::Given(from) => Diagnostic::error(
                "gpuplan::spec::undeclared_variable",
                format!("{from} sets `{name}`, a variable the spec does not declare"),
            ),
        };
        d = match did_you_mean(name, names.iter().copied()) {
            Some(s) => d.help(format!("did you mean `{s}`?")),
            None => d.help(format!("declare it: variable \"{name}\" {{ type = string }}")),
        };
        diags.push(d);
    }
}

/// The value given for `name`: the last input that sets it, else `GPUPLAN_VAR_<name>`
/// (looked up, and so noted, only then).
fn given_value(name: &str, inputs: &[VarInput], opts: &LoadOptions) -> Option<(VarValue, VarFrom)> {
    if let Some(input) = inputs.iter().rev().find(|i| i.name == name) {
        return Some((input.value.clone(), input.from.clone()));
    }
    let env_key = format!("GPUPLAN_VAR_{name}");
    opts.env_read.note(&env_key);
    let text = opts.env.get(&env_key)?;
    Some((VarValue::Text(text.clone()), VarFrom::Given(format!("the environment ({env_key})"))))
}

/// The variable's value in force and where it came from; `None` (reported) when it is
/// not of the declared type or there is none.
fn variable_value(
    cx: &mut Cx<'_, '_>,
    b: &Block,
    name: &str,
    ty: &Spanned<VarType>,
    default: Option<&Spanned<Value>>,
    given: Option<(VarValue, VarFrom)>,
) -> Option<(Spanned<Value>, VarSource)> {
    match (given, default) {
        (Some((value, from)), _) => match input_value(&value, ty.value) {
            Ok(v) => Some((Spanned::new(v, head(b)), source_of(&from))),
            Err(expected) => {
                let shown = match &value {
                    VarValue::Text(text) => format!("{text:?}"),
                    VarValue::Typed(v) => v.to_json().to_string(),
                };
                let mut d = Diagnostic::error(
                    "gpuplan::spec::variable_value",
                    format!("the value {shown} for variable `{name}` (from {}) is not {expected}", from.describe()),
                );
                if let VarFrom::File { value, .. } = &from {
                    d = d.at(*value, format!("not {expected}"));
                }
                cx.error(d.at(ty.span, format!("declared as {expected}")));
                None
            }
        },
        (None, Some(d)) => match coerce(&d.value, ty.value) {
            Some(v) => Some((Spanned::new(v, d.span), VarSource::Default)),
            None => {
                cx.error(
                    type_error(&format!("the default of variable `{name}`"), type_desc(ty.value), &d.value, d.span)
                        .at(ty.span, "declared type"),
                );
                None
            }
        },
        (None, None) => {
            cx.error(
                Diagnostic::error("gpuplan::spec::variable_unset", format!("variable `{name}` has no value"))
                    .at(head(b), "no default and not set")
                    .help(format!(
                        "pass `--var {name}=...` or a `--var-file`, set GPUPLAN_VAR_{name}, or add a `default`"
                    )),
            );
            None
        }
    }
}

fn source_of(from: &VarFrom) -> VarSource {
    match from {
        VarFrom::Flag => VarSource::Flag,
        VarFrom::File { file, .. } => VarSource::File(file.clone()),
        VarFrom::Given(from) => VarSource::Given(from.clone()),
    }
}

fn var_type(cx: &mut Cx<'_, '_>, name: &str, span: Span) -> Option<Spanned<VarType>> {
    let name = match name {
        "set" | "tuple" => "list",
        "object" => "map",
        other => other,
    };
    match VAR_TYPES.iter().find(|(n, _)| *n == name) {
        Some((_, t)) => Some(Spanned::new(*t, span)),
        None => {
            cx.error(enum_error("type", name, VAR_TYPES.iter().map(|(n, _)| *n), span));
            None
        }
    }
}

fn type_desc(t: VarType) -> &'static str {
    match t {
        VarType::Any => "any value",
        VarType::String => "a string",
        VarType::Number => "a number",
        VarType::Bool => "a bool",
        VarType::List => "a list",
        VarType::Map => "a map",
    }
}

fn coerce(v: &Value, t: VarType) -> Option<Value> {
    match (t, v) {
        (VarType::Any, v) => Some(v.clone()),
        (_, Value::Null) => Some(Value::Null),
        (VarType::String, Value::String(_) | Value::Number(_) | Value::Bool(_)) => Some(Value::String(v.to_string())),
        (VarType::Number, Value::Number(_)) => Some(v.clone()),
        (VarType::Number, Value::String(s)) => s.trim().parse().ok().map(Value::Number),
        (VarType::Bool, Value::Bool(_)) => Some(v.clone()),
        (VarType::Bool, Value::String(s)) if s == "true" || s == "false" => Some(Value::Bool(s == "true")),
        (VarType::List, Value::List(_)) | (VarType::Map, Value::Object(_)) => Some(v.clone()),
        _ => None,
    }
}

/// A given value as the declared type says: text ([`parse_var`]) or a value from a file
/// or a saved plan (converted as a default is). `Err`: what was expected.
pub fn input_value(value: &VarValue, t: VarType) -> Result<Value, &'static str> {
    match value {
        VarValue::Text(text) => parse_var(text, t),
        VarValue::Typed(v) => coerce(v, t).ok_or_else(|| expected(t)),
    }
}

fn expected(t: VarType) -> &'static str {
    match t {
        VarType::List => "a list (write it as JSON, e.g. [\"a\", \"b\"])",
        VarType::Map => "a map (write it as JSON, e.g. {\"k\": \"v\"})",
        other => type_desc(other),
    }
}

/// `--var` and environment values: strings as-is, numbers and bools parsed, lists and
/// maps as JSON.
fn parse_var(text: &str, t: VarType) -> Result<Value, &'static str> {
    let json = || serde_json::from_str::<serde_json::Value>(text).ok().map(|j| Value::from_json(&j));
    let v = match t {
        VarType::String => Some(Value::String(text.to_string())),
        VarType::Any => Some(json().unwrap_or_else(|| Value::String(text.to_string()))),
        VarType::Number | VarType::Bool => coerce(&Value::String(text.trim().to_string()), t),
        VarType::List | VarType::Map => json().and_then(|v| coerce(&v, t)),
    };
    v.ok_or_else(|| expected(t))
}
