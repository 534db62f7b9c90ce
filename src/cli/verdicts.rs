//! What the commands say on stderr about policy verdicts: why a plan is denied and what
//! to do about each denying policy, and the standing violations of a plan that changes
//! nothing (docs/design/cli.md, "The daily loop": such a plan is never denied).
//!
//! `--override-policy` is offered only for soft policies; a hard one is told to be fixed
//! in the spec (or in the policy).

use super::output;
use crate::plan::Plan;
use crate::policy::{Enforcement, PolicyResult};

/// Failures of one policy quoted on stderr when the plan was not shown as text.
const QUOTED: usize = 5;

/// The denial of `plan`: the denying policies and the outcome (`it cannot be applied`,
/// `nothing was applied`) in one `error:` line, then the hints. When the text view was
/// `shown`, its policy block already quoted each failure, so they are named only; else
/// (`--json`, markdown, a saved plan) one line per policy quotes its failures, at most
/// [`QUOTED`] of them.
pub fn denial(plan: &Plan, outcome: &str, shown: bool) -> String {
    let denying: Vec<&PolicyResult> = plan.policies.iter().filter(|r| r.denies()).collect();
    let mut policies: Vec<(&PolicyResult, Vec<&str>)> = Vec::new();
    for r in &denying {
        match policies.iter_mut().find(|(p, _)| p.name == r.name) {
            Some((_, messages)) => messages.push(&r.message),
            None => policies.push((r, vec![&r.message])),
        }
    }
    let named = |r: &PolicyResult| {
        let before = if r.standing { ", already failing before this change" } else { "" };
        format!("`{}` ({}{before})", r.name, r.enforcement.as_str())
    };
    let mut text = String::from("\n");
    if shown {
        let names: Vec<String> = policies.iter().map(|(r, _)| named(r)).collect();
        let (noun, verb) = if names.len() == 1 { ("policy", "denies") } else { ("policies", "deny") };
        text += &format!("error: {noun} {} {verb} this plan; {outcome}\n", names.join(", "));
    } else {
        for (r, messages) in &policies {
            let mut quoted = messages.iter().take(QUOTED).copied().collect::<Vec<_>>().join("; ");
            if messages.len() > QUOTED {
                quoted += &format!("; and {} more", messages.len() - QUOTED);
            }
            text += &format!("error: policy {} denies this plan; {outcome}: {quoted}\n", named(r));
        }
    }
    text += &hints(&denying);
    if denying.iter().any(|r| r.standing) {
        text += "hint: a policy that was already failing fails on the fleet as it stands: plans without changes are \
                 not denied for it, but every change is until the spec brings the fleet back within it\n";
    }
    text
}

/// Print each soft or hard verdict that fails on the fleet as it stands, when the plan
/// changes nothing (it is not denied, so this is all that is said).
pub fn warn_standing(plan: &Plan) {
    if plan.has_changes() {
        return;
    }
    let standing: Vec<&PolicyResult> = plan.policies.iter().filter(|r| r.standing && r.denies()).collect();
    if standing.is_empty() {
        return;
    }
    let mut text = String::from("\n");
    for r in &standing {
        text += &format!(
            "warning: policy `{}` ({}) fails on the fleet as it stands: {}\n",
            r.name,
            r.enforcement.as_str(),
            r.message
        );
    }
    text += "note: this plan changes nothing, so it is not denied; a plan that changes the fleet is, until the \
             fleet is back within these policies\n";
    text += &hints(&standing);
    output::stderr(&text);
}

/// One hint for the hard policies (fix, no override) and one for the soft ones (fix, or
/// the override flags), naming each once.
fn hints(verdicts: &[&PolicyResult]) -> String {
    let names = |e: Enforcement| {
        let mut v: Vec<String> = Vec::new();
        for r in verdicts.iter().filter(|r| r.enforcement == e) {
            let name = format!("`{}`", r.name);
            if !v.contains(&name) {
                v.push(name);
            }
        }
        v
    };
    let (hard, soft) = (names(Enforcement::Hard), names(Enforcement::Soft));
    let mut text = String::new();
    if !hard.is_empty() {
        let (what, it) = if hard.len() == 1 { ("hard policy", "it passes") } else { ("hard policies", "they pass") };
        text += &format!(
            "hint: {what} {} cannot be overridden: change the spec until {it}, or change the policy itself\n",
            hard.join(", ")
        );
    }
    if !soft.is_empty() {
        let flags: Vec<String> = soft.iter().map(|n| format!("--override-policy {}", n.trim_matches('`'))).collect();
        let what = if soft.len() == 1 { "soft policy" } else { "soft policies" };
        text += &format!(
            "hint: fix the spec, or accept the {what} {} with `{}` (recorded in state history)\n",
            soft.join(", "),
            flags.join(" ")
        );
    }
    text
}
