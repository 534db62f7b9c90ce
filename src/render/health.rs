//! The GPU health section of a plan's views (docs/design/gpu-health.md): one line per
//! unhealthy node with its evidence and its fate, from `plan.health` alone.

use crate::plan::Plan;

/// `GPU health:` with a line per node, `-/+ NODE replace: EVIDENCE` for a replacement,
/// `!   NODE quarantine: EVIDENCE` (`quarantine, cordon:` where apply cordons it in its
/// cluster), `#   NODE replace waits (max_repairs): EVIDENCE`; empty when no node is
/// unhealthy.
pub fn text(plan: &Plan) -> String {
    if plan.health.is_empty() {
        return String::new();
    }
    let mut out = "GPU health:\n".to_string();
    let mut entries: Vec<_> = plan.health.iter().collect();
    entries.sort_by(|a, b| (&a.address, &a.node).cmp(&(&b.address, &b.node)));
    for e in entries {
        let (sym, what) = match (e.action.as_str(), &e.held_by) {
            (_, Some(by)) => ("#  ", format!("{} waits ({by})", e.action)),
            ("quarantine", None) if e.cordon.is_some() => ("!  ", format!("{}, cordon", e.action)),
            ("quarantine", None) => ("!  ", e.action.clone()),
            _ => ("-/+", e.action.clone()),
        };
        out += &format!("  {sym} {} {what}: {} ({})\n", e.node, e.evidence, e.address);
    }
    out.push('\n');
    out
}

/// The same lines as a collapsed markdown block; empty when no node is unhealthy.
pub fn markdown(plan: &Plan) -> String {
    let body = text(plan);
    if body.is_empty() {
        return String::new();
    }
    let n = plan.health.len();
    let noun = if n == 1 { "node" } else { "nodes" };
    format!("<details><summary>GPU health: {n} unhealthy {noun}</summary>\n\n```text\n{}```\n</details>\n\n", body)
}
