//! What a pass prints: a short text report, or one JSON object per pass (`--json`).

use std::io::Write;

use serde::Serialize;
use serde_json::{Value as Json, json};

use super::{Outcome, Pass};
use crate::apply::Status;
use crate::plan::Action;
use crate::render;

/// Counts of what apply did: resources added/changed/destroyed, nodes launched/terminated.
fn applied_counts(pass: &Pass) -> Option<Json> {
    let r = pass.apply.as_ref()?;
    let (mut added, mut changed, mut destroyed) = (0, 0, 0);
    let mut failed = Vec::new();
    for o in &r.outcomes {
        match &o.status {
            Status::Done | Status::Partial(_) => match o.action {
                Action::Create => added += 1,
                Action::Update => changed += 1,
                Action::Delete => destroyed += 1,
                Action::Replace => {
                    added += 1;
                    destroyed += 1;
                }
                Action::NoOp | Action::Read => {}
            },
            Status::Failed(m) | Status::Skipped(m) => {
                failed.push(json!({"address": o.address.to_string(), "message": m}))
            }
        }
    }
    Some(json!({
        "added": added,
        "changed": changed,
        "destroyed": destroyed,
        "nodes_launched": r.outcomes.iter().map(|o| o.created).sum::<usize>(),
        "nodes_terminated": r.outcomes.iter().map(|o| o.deleted).sum::<usize>(),
        "nodes_missing": r.missing(),
        "failed": failed,
        "interrupted": r.cancelled,
    }))
}

/// One pass as a JSON object: `{at, outcome, summary, drift, autoscale, apply, plan, ...}`.
pub fn json(pass: &Pass) -> Json {
    serde_json::to_value(pass_doc(pass)).unwrap_or(Json::Null)
}

/// [`json`] written as one line, streamed (the embedded plan is large for large fleets).
pub fn write_json(pass: &Pass, out: impl Write) -> std::io::Result<()> {
    let mut out = std::io::BufWriter::new(out);
    serde_json::to_writer(&mut out, &pass_doc(pass))?;
    out.write_all(b"\n")?;
    out.flush()
}

/// Fields in key order, as a `Value` object would print them; the small parts are trees.
#[derive(Serialize)]
struct PassDoc<P: Serialize> {
    apply: Option<Json>,
    at: String,
    autoscale: Json,
    drift: usize,
    #[serde(skip_serializing_if = "Option::is_none")]
    max_destroy: Option<Json>,
    outcome: &'static str,
    plan: P,
    summary: Json,
}

fn pass_doc(pass: &Pass) -> PassDoc<impl Serialize + '_> {
    PassDoc {
        apply: applied_counts(pass),
        at: humantime::format_rfc3339_seconds(pass.at).to_string(),
        autoscale: serde_json::to_value(&pass.decisions).unwrap_or(Json::Null),
        drift: pass.plan.drift.len(),
        max_destroy: match pass.outcome {
            Outcome::MaxDestroy { nodes, limit } => Some(json!({"nodes": nodes, "limit": limit})),
            _ => None,
        },
        outcome: pass.outcome.as_str(),
        plan: render::plan_document(&pass.plan),
        summary: json!({
            "add": pass.plan.summary.add,
            "change": pass.plan.summary.change,
            "destroy": pass.plan.summary.destroy,
            "nodes_destroyed": pass.nodes_destroyed,
        }),
    }
}

/// The pass's one-line verdict, e.g. `applied: 1 to add, 0 to change, 0 to destroy`.
pub fn headline(pass: &Pass) -> String {
    let s = &pass.plan.summary;
    let changes = format!("{} to add, {} to change, {} to destroy", s.add, s.change, s.destroy);
    let at = humantime::format_rfc3339_seconds(pass.at);
    match &pass.outcome {
        Outcome::NoChanges => {
            let standing = pass.plan.policies.iter().filter(|r| super::standing::counts(r)).count();
            match standing {
                0 => format!("reconcile {at}: no changes; the fleet matches the spec"),
                1 => {
                    format!("reconcile {at}: no changes; the fleet matches the spec, but 1 policy verdict fails on it")
                }
                n => format!(
                    "reconcile {at}: no changes; the fleet matches the spec, but {n} policy verdicts fail on it"
                ),
            }
        }
        Outcome::Applied => format!("reconcile {at}: applied ({changes})"),
        Outcome::DryRun => format!("reconcile {at}: dry run, nothing applied ({changes})"),
        Outcome::Denied => format!("reconcile {at}: a policy denied the plan; nothing applied ({changes})"),
        Outcome::MaxDestroy { nodes, limit } => format!(
            "reconcile {at}: refused: the plan would terminate {}, more than --max-destroy {limit}; nothing applied",
            crate::model::words::nodes(*nodes as usize)
        ),
        Outcome::PlanErrors => format!("reconcile {at}: the plan has errors; nothing applied"),
        Outcome::ApplyFailed => match pass.apply.as_ref().filter(|r| only_short(r)).map(|r| r.missing()) {
            // A pool the cloud could not fill (spot with `fallback = "wait"`) is short, not broken.
            Some(n) => format!(
                "reconcile {at}: apply incomplete: {} fewer than planned, the next pass tries again ({changes})",
                crate::model::words::nodes(n as usize)
            ),
            None => format!("reconcile {at}: apply failed ({changes})"),
        },
        Outcome::Interrupted => format!("reconcile {at}: interrupted during apply; finished work was saved"),
    }
}

/// Every change went through, but some pool got fewer nodes than planned.
fn only_short(r: &crate::apply::ApplyReport) -> bool {
    r.missing() > 0 && r.outcomes.iter().all(|o| matches!(o.status, Status::Done | Status::Partial(_)))
}

/// The text report: the plan when it has changes, drift, autoscaler verdicts, the headline.
pub fn text(pass: &Pass, opts: &render::TextOptions) -> String {
    let mut out = String::new();
    if pass.plan.has_work() || !pass.plan.errors.is_empty() {
        out += &render::plan_text(&pass.plan, opts);
        out.push('\n');
    } else if !pass.plan.drift.is_empty() {
        out += &render::drift_text(&pass.plan.drift, opts);
    }
    for d in &pass.decisions {
        let line = match d.action {
            crate::autoscale::Direction::Hold => {
                format!("autoscale {}: hold at {}: {}\n", d.pool, crate::model::words::nodes(d.from as usize), d.reason)
            }
            // The text view's arrow (docs/design/cli.md, "one arrow per format").
            verb => format!("autoscale {}: {verb} {} -> {}: {}\n", d.pool, d.from, d.to, d.reason),
        };
        out += &line;
    }
    if let Some(a) = applied_counts(pass) {
        out += &format!("nodes: {} launched, {} terminated\n", a["nodes_launched"], a["nodes_terminated"]);
        for f in a["failed"].as_array().into_iter().flatten() {
            out +=
                &format!("error: {}: {}\n", f["address"].as_str().unwrap_or(""), f["message"].as_str().unwrap_or(""));
        }
    }
    out += &headline(pass);
    out.push('\n');
    if let Outcome::MaxDestroy { .. } = pass.outcome {
        out += "hint: review the plan with `gpuplan plan`, then apply it by hand or raise --max-destroy\n";
    }
    out
}
