//! Standing policy violations in `reconcile` (docs/design/cli.md, "The daily loop"): a soft or hard
//! policy that fails on the fleet as it stands does not fail a pass that has nothing to
//! change. It is reported once per verdict (policy and `for_each` key) while it stands:
//! posted to the spec's `notify` hooks through the budget alerts' path and recorded in
//! state (`standing`), and forgotten once it passes, so that a recurrence is reported
//! again. A verdict whose hooks all failed is not recorded, and is tried again next pass.
//!
//! Hooks: a quota's verdict goes to that quota's hooks, any other to every quota's.

use std::time::SystemTime;

use crate::plan::Plan;
use crate::policy::{Enforcement, PolicyResult};
use crate::spec::Spec;
use crate::state::State;
use crate::state::model::StandingRecord;

/// One standing violation reported in this pass.
#[derive(Debug, Clone, PartialEq)]
pub struct StandingAlert {
    /// `policy` or `policy[key]`.
    pub verdict: String,
    pub enforcement: Enforcement,
    pub message: String,
    /// Hooks asked, and those that accepted it.
    pub hooks: usize,
    pub delivered: usize,
    /// Why hooks refused or failed, one line per hook.
    pub errors: Vec<String>,
}

/// Does this verdict count as a standing violation (soft or hard, failing on the fleet as
/// it stands)?
pub fn counts(r: &PolicyResult) -> bool {
    !r.passed && r.standing && r.enforcement != Enforcement::Advisory
}

/// `policy` or `policy[key]`: what "once per verdict" counts.
pub fn verdict_id(r: &PolicyResult) -> String {
    match &r.key {
        Some(k) => format!("{}[{k}]", r.name),
        None => r.name.clone(),
    }
}

/// Report the plan's new standing violations and forget those that no longer stand.
/// Returns what was reported, and whether `state` changed (the caller writes it).
pub async fn report(spec: &Spec, state: &mut State, plan: &Plan, now: SystemTime) -> (Vec<StandingAlert>, bool) {
    if !plan.errors.is_empty() {
        // The policies were not all judged: nothing is known to have ended.
        return (Vec::new(), false);
    }
    let standing: Vec<&PolicyResult> = plan.policies.iter().filter(|r| counts(r)).collect();
    let before = state.standing.len();
    state.standing.retain(|id, _| standing.iter().any(|r| verdict_id(r) == *id));
    let mut changed = state.standing.len() != before;
    let new: Vec<&PolicyResult> =
        standing.into_iter().filter(|r| !state.standing.contains_key(&verdict_id(r))).collect();
    if new.is_empty() {
        return (Vec::new(), changed);
    }
    let client = crate::providers::http::client().map_err(|e| e.to_string());
    let since = humantime::format_rfc3339_seconds(now).to_string();
    let mut out = Vec::new();
    for r in new {
        let hooks = hooks(spec, r);
        let mut alert = StandingAlert {
            verdict: verdict_id(r),
            enforcement: r.enforcement,
            message: r.message.clone(),
            hooks: hooks.len(),
            delivered: 0,
            errors: Vec::new(),
        };
        let body = payload(&alert);
        for url in &hooks {
            let sent = match &client {
                Ok(c) => super::alerts::post(c, url, &body).await,
                Err(e) => Err(e.clone()),
            };
            match sent {
                Ok(()) => alert.delivered += 1,
                Err(e) => alert.errors.push(format!("{}: {e}", super::alerts::redact(url))),
            }
        }
        if hooks.is_empty() || alert.delivered > 0 {
            let record = StandingRecord { message: r.message.clone(), since: since.clone() };
            state.standing.insert(alert.verdict.clone(), record);
            changed = true;
        }
        out.push(alert);
    }
    (out, changed)
}

/// The hooks a verdict goes to: its quota's for a quota verdict, else every quota's.
fn hooks(spec: &Spec, r: &PolicyResult) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    let quota = r.name.starts_with("quota.").then_some(r.source.as_str());
    for (addr, q) in &spec.quotas {
        if quota.is_some_and(|a| a != addr.to_string()) {
            continue;
        }
        for url in &q.notify {
            if !out.contains(&url.value) {
                out.push(url.value.clone());
            }
        }
    }
    out
}

/// Slack-compatible, as budget alerts are.
fn payload(a: &StandingAlert) -> serde_json::Value {
    serde_json::json!({
        "text": format!(
            "gpuplan: policy `{}` ({}) fails on the fleet as it stands: {}. Plans without changes are not denied; every change is until it is fixed.",
            a.verdict,
            a.enforcement.as_str(),
            a.message
        ),
    })
}
