//! A run's verdict: its `expect_failures` against what failed (policies that denied,
//! quotas, plan and apply errors, spec errors by block), then its `assert`s. A false
//! assert names its location, its message and the value of each operand that decided it.

use std::collections::BTreeMap;

use crate::diag::{Diagnostic, Severity, Sources, Span};
use crate::plan::Plan;
use crate::policy::PolicyResult;
use crate::spec::eval::{EvalError, Scope, Value, eval};
use crate::spec::raw::{BinaryOp, Expr, ExprKind, UnaryOp};
use crate::spec::{Loaded, Spec};
use crate::state::State;
use crate::testing::file::{Assert, RunBlock};
use crate::testing::{Failure, Shown, Status};

/// What asserts can read: `plan`, `state`, `output` and `var`.
pub struct Values {
    extra: BTreeMap<String, Value>,
    vars: BTreeMap<String, Value>,
}

impl Values {
    /// `plan` is the `plan --json` document plus `pools` and `quotas` as policies see them;
    /// `state` is filled in by [`Values::with_state`].
    pub fn new(plan: &Plan, spec: &Spec, state: &State) -> Values {
        let mut plan_value = Value::from_json(&crate::render::plan_json(plan));
        if let (Value::Object(o), Some(cost)) = (&mut plan_value, &plan.cost) {
            let running = crate::jobs::running::by_pool(state, None);
            if let Value::Object(mut facts) = crate::policy::facts::plan_value(plan, cost, spec, &running) {
                for key in ["pools", "quotas"] {
                    if let Some(v) = facts.remove(key) {
                        o.insert(key.to_string(), v);
                    }
                }
            }
        }
        let mut extra = BTreeMap::new();
        extra.insert("plan".to_string(), plan_value);
        extra.insert(
            "output".to_string(),
            Value::Object(spec.outputs.iter().map(|(k, o)| (k.clone(), o.value.value.clone())).collect()),
        );
        let vars = spec.variables.iter().map(|(k, v)| (k.clone(), v.value.value.clone())).collect();
        Values { extra, vars }
    }

    /// The state as the run left it (after its apply).
    pub fn with_state(mut self, state: &State) -> Values {
        let json = serde_json::to_value(state).unwrap_or(serde_json::Value::Null);
        self.extra.insert("state".to_string(), Value::from_json(&json));
        self
    }

    fn scope(&self) -> Scope<'_> {
        Scope { vars: Some(&self.vars), extra: Some(&self.extra), ..Scope::default() }
    }
}

/// The address a verdict is about: `policy.NAME`, or the quota's address.
fn verdict_address(r: &PolicyResult) -> String {
    if r.name.starts_with("quota.") { r.source.clone() } else { format!("policy.{}", r.name) }
}

/// The verdict of a run that planned: expectations first, then every assert.
pub fn verdict(
    run: &RunBlock,
    sources: &Sources,
    plan: &Plan,
    apply_failed: &[(String, String)],
    values: &Values,
) -> (Status, Vec<Failure>) {
    let expected = |a: &str| run.expect_failures.iter().any(|(e, _)| e == a);
    let here = sources.location(run.span);
    let mut failures = Vec::new();
    let failed: Vec<String> = plan.policies.iter().filter(|r| !r.passed).map(verdict_address).collect();
    let errored: Vec<String> = plan
        .errors
        .iter()
        .map(|e| e.address.base().to_string())
        .chain(apply_failed.iter().map(|(a, _)| a.clone()))
        .collect();
    for (e, span) in &run.expect_failures {
        if !failed.contains(e) && !errored.contains(e) {
            failures.push(failure(sources, *span, format!("`{e}` was expected to fail, but it passed")));
        }
    }
    // A plan without changes is never denied (its failures are standing violations).
    for r in plan.policies.iter().filter(|r| plan.has_changes() && r.denies()) {
        let a = verdict_address(r);
        if !expected(&a) {
            let message = format!("`{a}` denied the plan: {}", r.message);
            failures.push(Failure { location: here.clone(), message, values: Vec::new() });
        }
    }
    let errors = plan.errors.iter().map(|e| (e.address.base().to_string(), e.address.to_string(), &e.message));
    let applied = apply_failed.iter().map(|(a, m)| (a.clone(), a.clone(), m));
    for (base, address, message) in errors.chain(applied) {
        if !expected(&base) {
            failures.push(Failure {
                location: here.clone(),
                message: format!("`{address}`: {message}"),
                values: vec![],
            });
        }
    }
    let mut status = if failures.is_empty() { Status::Pass } else { Status::Fail };
    for a in &run.asserts {
        match assert(a, sources, values) {
            Ok(None) => {}
            Ok(Some(f)) => {
                failures.push(f);
                if status == Status::Pass {
                    status = Status::Fail;
                }
            }
            Err(f) => {
                failures.push(f);
                status = Status::Error;
            }
        }
    }
    (status, failures)
}

/// The verdict of a run whose spec did not load: it passes only when every error lies in
/// a block the run expects to fail, and each of those failed.
pub fn spec_errors(run: &RunBlock, sources: &Sources, loaded: &Loaded) -> (Status, Vec<Failure>) {
    let errors: Vec<&Diagnostic> = loaded.diags.items.iter().filter(|d| d.severity == Severity::Error).collect();
    let blocks = object_blocks(&loaded.sources);
    let owner = |d: &Diagnostic| -> Option<String> {
        let s = d.primary()?;
        blocks.iter().find(|(_, b)| b.file == s.file && b.start <= s.start && s.end <= b.end).map(|(a, _)| a.clone())
    };
    let expected = |a: &str| run.expect_failures.iter().any(|(e, _)| e == a);
    let unexpected: Vec<Diagnostic> =
        errors.iter().filter(|d| !owner(d).is_some_and(|a| expected(&a))).map(|d| (*d).clone()).collect();
    if !unexpected.is_empty() {
        let text = crate::diag::render_text(&loaded.sources, &unexpected, 100, false);
        let message = format!("the spec does not load with this run's variables:\n{}", text.trim_end());
        return (Status::Error, vec![Failure { location: sources.location(run.span), message, values: vec![] }]);
    }
    let failed: Vec<String> = errors.iter().filter_map(|d| owner(d)).collect();
    let mut failures = Vec::new();
    for (e, span) in &run.expect_failures {
        if e.starts_with("policy.") || e.starts_with("quota.") {
            let message = format!("`{e}` was expected to fail, but the spec did not load, so it was never checked");
            failures.push(failure(sources, *span, message));
        } else if !failed.contains(e) {
            failures.push(failure(sources, *span, format!("`{e}` was expected to fail, but it passed")));
        }
    }
    (if failures.is_empty() { Status::Pass } else { Status::Fail }, failures)
}

/// Each block of the spec files by address (`gpu_pool.train`), with its span.
fn object_blocks(sources: &Sources) -> Vec<(String, Span)> {
    let mut out = Vec::new();
    for (id, f) in sources.files() {
        let mut scratch = crate::diag::Diagnostics::default();
        let body = if f.name.ends_with(".yaml") || f.name.ends_with(".yml") {
            crate::spec::yaml::parse(id, &f.text, &mut scratch)
        } else {
            crate::spec::hcl::parse(id, &f.text, &mut scratch)
        };
        for b in body.iter().flat_map(|b| &b.blocks) {
            if let Some(label) = b.labels.first() {
                out.push((format!("{}.{}", b.kind.name, label.name), b.span));
            }
        }
    }
    out
}

fn failure(sources: &Sources, span: Span, message: String) -> Failure {
    Failure { location: sources.location(span), message, values: Vec::new() }
}

/// `Ok(None)`: true; `Ok(Some)`: false; `Err`: the assert itself is broken.
fn assert(a: &Assert, sources: &Sources, values: &Values) -> Result<Option<Failure>, Failure> {
    let location = sources.location(a.condition.span);
    match eval(&a.condition, &mut values.scope()) {
        Ok(Value::Bool(true)) => Ok(None),
        Ok(Value::Bool(false)) => {
            let message = match eval(&a.error_message, &mut values.scope()) {
                Ok(v) => v.to_string(),
                Err(e) => format!("(its `error_message` could not be rendered: {})", error_text(&e)),
            };
            Ok(Some(Failure { location, message, values: operands(&a.condition, sources, values) }))
        }
        Ok(other) => Err(Failure {
            location,
            message: format!("`condition` must be true or false, found {}", other.type_name()),
            values: vec![Shown { expression: sources.text(a.condition.span).to_string(), value: show(&other) }],
        }),
        Err(e) => {
            let at = match &e {
                EvalError::Diag(d) => d.primary().map(|s| sources.location(s)),
                EvalError::Poisoned => None,
            };
            Err(Failure { location: at.unwrap_or(location), message: error_text(&e), values: vec![] })
        }
    }
}

fn error_text(e: &EvalError) -> String {
    match e {
        EvalError::Diag(d) => match &d.help {
            Some(h) => format!("{} ({h})", d.message),
            None => d.message.clone(),
        },
        EvalError::Poisoned => "it refers to something that failed".into(),
    }
}

/// The values behind a false condition: each operand of its comparisons (through `&&`,
/// `||` and `!`) that is not a literal, as written, with its value.
fn operands(condition: &Expr, sources: &Sources, values: &Values) -> Vec<Shown> {
    let mut exprs = Vec::new();
    collect(condition, &mut exprs);
    let mut out: Vec<Shown> = Vec::new();
    for e in exprs {
        let expression = sources.text(e.span).to_string();
        if out.iter().any(|s| s.expression == expression) {
            continue;
        }
        let value = match eval(e, &mut values.scope()) {
            Ok(v) => show(&v),
            Err(err) => format!("(error: {})", error_text(&err)),
        };
        out.push(Shown { expression, value });
    }
    out
}

fn collect<'e>(e: &'e Expr, out: &mut Vec<&'e Expr>) {
    match &e.kind {
        ExprKind::Binary { op: BinaryOp::And | BinaryOp::Or, lhs, rhs } => {
            collect(lhs, out);
            collect(rhs, out);
        }
        ExprKind::Binary { lhs, rhs, .. } => out.extend([lhs, rhs].into_iter().map(|b| &**b).filter(|x| !literal(x))),
        ExprKind::Unary { op: UnaryOp::Not, expr } => collect(expr, out),
        ExprKind::Call { args, .. } => out.extend(args.iter().filter(|x| !literal(x))),
        _ if !literal(e) => out.push(e),
        _ => {}
    }
}

fn literal(e: &Expr) -> bool {
    match &e.kind {
        ExprKind::Null | ExprKind::Bool(_) | ExprKind::Number(_) | ExprKind::String(_) => true,
        ExprKind::Unary { op: UnaryOp::Neg, expr } => literal(expr),
        ExprKind::Array(items) => items.iter().all(literal),
        _ => false,
    }
}

/// A value as HCL would write it, cut short when long.
fn show(v: &Value) -> String {
    let text = match v {
        Value::Number(n) => crate::spec::eval::format_number(*n),
        other => other.to_json().to_string(),
    };
    const MAX: usize = 300;
    if text.chars().count() > MAX {
        let cut: String = text.chars().take(MAX).collect();
        format!("{cut}… ({} more characters)", text.chars().count() - MAX)
    } else {
        text
    }
}
