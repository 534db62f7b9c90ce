//! Policies: checks over a plan and its cost, written as HCL in `policies/*.hcl`, plus
//! the quotas of the spec. Pure once the policy files are read.
//!
//! ```hcl
//! policy "fleet_hourly_cap" {
//!   enforcement = "hard"                 # advisory | soft | hard
//!   assert      = plan.cost.hourly_after <= 500
//!   message     = "fleet would cost ${plan.cost.hourly_after} USD/h"
//! }
//! ```
//!
//! A plan with changes is denied when a hard policy fails, or a soft one fails without
//! `--override-policy NAME` (`Plan::denied`). Denied plans exit 3 and cannot be applied. A
//! plan without changes is never denied: what fails there fails on the fleet as it stands
//! ([`standing`]).

pub mod check;
pub mod facts;
pub mod load;
pub mod model;
pub mod overlap;
pub mod quota;
pub mod reads;
pub mod standing;

use std::borrow::Cow;
use std::collections::BTreeMap;

use crate::cost::CostReport;
use crate::diag::Diagnostic;
use crate::jobs::running::RunningJobs;
use crate::plan::Plan;
use crate::spec::Spec;
use crate::spec::eval::{EvalError, Scope, Value, eval, eval_arg};
use crate::spec::raw::{Expr, ExprKind};

pub use model::{Enforcement, Policy, PolicyResult};

#[cfg(test)]
mod tests;

/// What policies are checked against besides the plan: its cost, the spec, and what
/// runs now.
pub struct Facts<'a> {
    pub plan: &'a Plan,
    pub cost: &'a CostReport,
    pub spec: &'a Spec,
    /// The jobs running on each pool (from state, as refresh last saw them).
    pub running_jobs: &'a RunningJobs,
    /// Month-to-date spend per quota address; empty: budgets are not checked against it.
    pub month_to_date: &'a BTreeMap<String, f64>,
    /// The time `month_to_date` is counted to (RFC 3339), which its verdicts name: a
    /// saved plan shown or applied hours later says how old its figure is.
    pub month_to_date_as_of: Option<&'a str>,
}

/// Evaluate policies and quotas. A policy whose expression cannot be evaluated fails
/// with the evaluation error as its message (a broken guard must not pass silently).
pub fn evaluate(policies: &[Policy], facts: &Facts<'_>, overrides: &[String]) -> Vec<PolicyResult> {
    evaluate_reading(policies, facts, overrides, &reads::Reads::of(policies))
}

/// [`evaluate`] over a `plan` whose facts hold the members `reads` names.
fn evaluate_reading(
    policies: &[Policy],
    facts: &Facts<'_>,
    overrides: &[String],
    reads: &reads::Reads,
) -> Vec<PolicyResult> {
    let mut out = quota::check(facts.spec, facts.cost, (facts.month_to_date, facts.month_to_date_as_of));
    if policies.is_empty() {
        return out;
    }
    let plan_value = facts::plan_value_reading(facts.plan, facts.cost, facts.spec, facts.running_jobs, reads);
    let mut extra = BTreeMap::new();
    extra.insert("plan".to_string(), plan_value);
    // Policies are independent: over a large plan they run on the machine's cores, each
    // policy whole on one thread, their results in the files' order as on one thread.
    let threads = if facts.plan.changes.len() >= PARALLEL_FROM { crate::par::cores() } else { 1 };
    let results = crate::par::runs_in_order(policies, threads, 1, |run| {
        run.iter().flat_map(|p| one(p, &extra, overrides)).collect::<Vec<_>>()
    });
    out.extend(results.into_iter().flatten());
    // The input tree is freed beside what the command does next (rendering the plan).
    crate::par::drop_aside(extra);
    out
}

/// Changes in a plan from which its policies are evaluated on several threads.
const PARALLEL_FROM: usize = 256;

/// One policy's results: one per `for_each` item, or one.
fn one(p: &Policy, extra: &BTreeMap<String, Value>, overrides: &[String]) -> Vec<PolicyResult> {
    let mut out = Vec::new();
    let mut scope = Scope { extra: Some(extra), ..Scope::default() };
    // `for_each` is read in place when it is a reference (`for_each = plan.pools`),
    // and each item is lent to `each.value`, not copied.
    let kept = p.for_each.as_ref().and_then(|fe| kept_in_place(fe, &mut scope));
    let items: Vec<(Option<String>, Option<(Value, Cow<'_, Value>)>)> = match (&p.for_each, kept) {
        (None, _) => vec![(None, None)],
        (Some(_), Some(kept)) => kept
            .into_iter()
            .map(|(k, v)| (Some(k.clone()), Some((Value::String(k.clone()), Cow::Borrowed(v)))))
            .collect(),
        (Some(fe), None) => match eval_arg(fe, &mut scope) {
            Ok(Cow::Owned(Value::Object(o))) => {
                o.into_iter().map(|(k, v)| (Some(k.clone()), Some((Value::String(k), Cow::Owned(v))))).collect()
            }
            Ok(Cow::Borrowed(Value::Object(o))) => {
                o.iter().map(|(k, v)| (Some(k.clone()), Some((Value::String(k.clone()), Cow::Borrowed(v))))).collect()
            }
            Ok(Cow::Owned(Value::List(l))) => {
                l.into_iter().enumerate().map(|(i, v)| list_item(i, Cow::Owned(v))).collect()
            }
            Ok(Cow::Borrowed(Value::List(l))) => {
                l.iter().enumerate().map(|(i, v)| list_item(i, Cow::Borrowed(v))).collect()
            }
            Ok(other) => {
                out.push(broken(p, format!("`for_each` must be a map or list, found {}", other.type_name())));
                return out;
            }
            Err(e) => {
                out.push(broken(p, error_text(e)));
                return out;
            }
        },
    };
    for (key, each) in items {
        scope.each = each;
        let passed = match eval(&p.assert, &mut scope) {
            Ok(Value::Bool(b)) => b,
            Ok(other) => {
                out.push(broken(p, format!("`assert` must be true or false, found {}", other.type_name())));
                continue;
            }
            Err(e) => {
                out.push(broken(p, error_text(e)));
                continue;
            }
        };
        // Every view shows the verdict's name beside its message, so a default
        // message says what happened without repeating the name.
        let message = match &p.message {
            Some(m) if !passed => match eval(m, &mut scope) {
                Ok(v) => v.to_string(),
                Err(e) => format!("failed (its message could not be rendered: {})", error_text(e)),
            },
            _ => {
                let what = match &p.description {
                    Some(d) => d.clone(),
                    None if passed => "passed".to_string(),
                    None => "`assert` is false".to_string(),
                };
                match &key {
                    Some(k) => format!("{k}: {what}"),
                    None => what,
                }
            }
        };
        out.push(PolicyResult {
            name: p.name.clone(),
            enforcement: p.enforcement,
            passed,
            message,
            key,
            overridden: !passed && p.enforcement == Enforcement::Soft && overrides.contains(&p.name),
            source: p.location.clone(),
            standing: false,
            warning: false,
        });
    }
    out
}

/// `for_each = { for k, v in COLLECTION : k => v if COND }` over an object the scope lends
/// (`plan.pools`): the members COND keeps, lent where they lie rather than copied into a
/// new object (two of the starter policies filter `plan.pools` so; copying each kept pool's
/// facts and dropping them again was a fifth of a no-op plan's policy work). `None` for any
/// other `for_each`, and where COND is not true or false for a member (or fails): the
/// expression is then evaluated whole, which gives its value or its error as before.
fn kept_in_place<'a>(fe: &Expr, scope: &mut Scope<'a>) -> Option<Vec<(&'a String, &'a Value)>> {
    let ExprKind::For(f) = &fe.kind else { return None };
    let key_var = f.key_var.as_ref()?;
    let is_var = |e: &Expr, name: &str| matches!(&e.kind, ExprKind::Traversal { root, steps } if root.name == name && steps.is_empty());
    let plain = !f.grouping
        && key_var.name != f.value_var.name
        && f.key_expr.as_ref().is_some_and(|k| is_var(k, &key_var.name))
        && is_var(&f.value_expr, &f.value_var.name);
    if !plain {
        return None;
    }
    let Ok(Cow::Borrowed(Value::Object(members))) = eval_arg(&f.collection, scope) else { return None };
    let mut kept = Vec::new();
    for (k, v) in members {
        let depth = scope.bound.len();
        scope.bound.push((key_var.name.clone(), Cow::Owned(Value::String(k.clone()))));
        scope.bound.push((f.value_var.name.clone(), Cow::Borrowed(v)));
        let keep = f.cond.as_ref().map(|c| eval(c, scope));
        scope.bound.truncate(depth);
        match keep {
            None | Some(Ok(Value::Bool(true))) => kept.push((k, v)),
            Some(Ok(Value::Bool(false))) => {}
            Some(_) => return None,
        }
    }
    Some(kept)
}

/// A `for_each` list's item: keyed by its text when it is a string, else by its index.
fn list_item(i: usize, v: Cow<'_, Value>) -> (Option<String>, Option<(Value, Cow<'_, Value>)>) {
    let key = v.as_str().map(str::to_string).unwrap_or_else(|| i.to_string());
    (Some(key), Some((Value::Number(i as f64), v)))
}

fn broken(p: &Policy, why: String) -> PolicyResult {
    PolicyResult {
        name: p.name.clone(),
        enforcement: p.enforcement,
        passed: false,
        message: format!("could not be evaluated: {why}"),
        key: None,
        overridden: false,
        source: p.location.clone(),
        standing: false,
        warning: false,
    }
}

fn error_text(e: EvalError) -> String {
    match e {
        EvalError::Diag(d) => diag_text(&d),
        EvalError::Poisoned => "it refers to something that failed".into(),
    }
}

fn diag_text(d: &Diagnostic) -> String {
    match &d.help {
        Some(h) => format!("{} ({h})", d.message),
        None => d.message.clone(),
    }
}

/// Names given to `--override-policy` that match no soft failure (typos, or hard ones).
pub fn unused_overrides(results: &[PolicyResult], overrides: &[String]) -> Vec<String> {
    overrides.iter().filter(|o| !results.iter().any(|r| &r.name == *o && r.overridden)).cloned().collect()
}
