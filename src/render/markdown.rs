//! The pull-request view of a plan, led by what the reviewer must decide: the verdict
//! (ready, or blocked by which policy and how to override it) with the counts and the
//! money, errors and failed policies (passes as a count), the pool table with each pool's
//! changed attributes, jobs and cost, then drift and one collapsed `diff` block per change.
//!
//! GitHub refuses comments over 65,536 characters, so the output stays under a `limit`
//! (in characters). Detail blocks are dropped from the end first and one closing line
//! says what was cut; the title, errors, policies, the fleet table and cost always stay,
//! and if even they do not fit, table rows are cut (and that is said too).

use crate::model::money::usd_delta;
use crate::plan::model::{Action, Plan, ResourceChange};
use crate::plan::report::Enforcement;
use crate::render::facts;
use crate::render::style::Paint;
use crate::render::text::{self, TextOptions};

/// The plan as a pull-request comment of at most `limit` characters.
pub fn plan_markdown(plan: &Plan, limit: usize) -> String {
    let mut out = assemble(plan, limit);
    // Blocks end with a blank line; the comment ends with exactly one newline.
    out.truncate(out.trim_end().len());
    out.push('\n');
    if out.chars().count() > limit {
        out = out.chars().take(limit).collect();
    }
    out
}

fn assemble(plan: &Plan, limit: usize) -> String {
    let title = title(plan);
    let rows = table_rows(plan);
    // What blocks the plan leads: errors, then policy failures; then the pools, jobs, cost.
    let lead = [errors(plan), policies(plan), super::health::markdown(plan)].concat();
    let tail = [
        notes(plan),
        super::placement::markdown(plan),
        super::reservations::markdown(plan),
        super::outputs::markdown_section(plan),
        jobs(plan),
        cost(plan),
    ]
    .concat();
    let mut blocks: Vec<String> = Vec::new();
    let has_drift = !plan.drift.is_empty();
    if has_drift {
        blocks.push(drift_block(plan));
    }
    let adopted = super::adopt::lines(plan);
    if !adopted.is_empty() {
        blocks.push(details(&format!("Import, move, forget: {}", adopted.len()), &(adopted.join("\n") + "\n"), "text"));
    }
    blocks.extend(facts::actionable(plan).into_iter().map(|c| change_block(c, facts::state_lineage(plan))));

    let len = |s: &str| s.chars().count();
    let head = |kept_rows: usize| {
        let mut s = title.clone();
        s += &lead;
        s += &table(&rows[..kept_rows], rows.len() - kept_rows, limit);
        s += &tail;
        s
    };
    let full = head(rows.len());
    let footer = |kept: usize| {
        let drift_cut = has_drift && kept == 0;
        cut_line(blocks.len() - kept - usize::from(drift_cut), drift_cut, limit)
    };

    // Keep as many detail blocks as fit, in order.
    let mut used = len(&full);
    let mut kept = 0;
    for b in &blocks {
        if used + len(b) + len(&footer(kept + 1)) > limit {
            break;
        }
        used += len(b);
        kept += 1;
    }
    if len(&full) + len(&footer(kept)) <= limit || kept > 0 {
        return [full, blocks[..kept].concat(), footer(kept)].concat();
    }
    // Not even the head fits: cut table rows from the end.
    for r in (0..rows.len()).rev() {
        let out = [head(r), footer(0)].concat();
        if len(&out) <= limit {
            return out;
        }
    }
    // Only a limit smaller than the title and the closing line gets here.
    [head(0), footer(0)].concat().chars().take(limit).collect()
}

/// The verdict first (what the reviewer must decide), then the counts and the money.
fn title(plan: &Plan) -> String {
    // A plan without changes is never denied: its failures stand on the fleet as it is.
    let failed: Vec<&crate::plan::report::PolicyResult> =
        plan.policies.iter().filter(|p| p.denies() && (plan.has_changes() || !p.standing)).collect();
    let names = |ps: &[&crate::plan::report::PolicyResult]| {
        let mut v: Vec<String> = ps.iter().map(|p| code(&p.name)).collect();
        v.dedup();
        v
    };
    let hard: Vec<&crate::plan::report::PolicyResult> =
        failed.iter().copied().filter(|p| p.enforcement == Enforcement::Hard).collect();
    let (headline, next) = if !plan.errors.is_empty() {
        (
            format!("❌ Cannot be applied: {}", facts::plural(plan.errors.len(), "error", "errors")),
            "Fix the errors below and plan again.".to_string(),
        )
    } else if !hard.is_empty() {
        (
            format!("❌ Blocked by hard policy {}", names(&hard).join(", ")),
            "Hard policies cannot be overridden: change the spec (or the policy) and plan again.".to_string(),
        )
    } else if !failed.is_empty() {
        let mut soft: Vec<String> = failed.iter().map(|p| p.name.clone()).collect();
        soft.dedup();
        let flags: Vec<String> = soft.iter().map(|n| format!("--override-policy {n}")).collect();
        (
            format!("❌ Blocked by soft policy {}", names(&failed).join(", ")),
            format!("To apply anyway, plan again with `{}` (recorded in state history).", flags.join(" ")),
        )
    } else if plan.has_changes() {
        ("✅ Ready to apply".to_string(), String::new())
    } else if plan.has_output_changes() {
        ("✅ Ready to apply: output values only".to_string(), String::new())
    } else {
        ("✅ No changes".to_string(), standing_note(plan))
    };
    let what = if plan.has_changes() { facts::summary_counts(plan) } else { "no changes".to_string() };
    let money = plan
        .cost
        .as_ref()
        .filter(|c| c.hourly_delta.abs() >= 0.005)
        .map(|c| format!(" · **{} USD/h** ({} USD/month)", usd_delta(c.hourly_delta), usd_delta(c.monthly_delta)))
        .unwrap_or_default();
    let mut s = format!("### {headline}\n\n**gpuplan plan**: {what}{money}\n\n");
    if !next.is_empty() {
        s += &format!("{next}\n\n");
    }
    s
}

/// A plan without changes whose policies fail on the fleet as it stands: what that means.
fn standing_note(plan: &Plan) -> String {
    let mut names: Vec<String> = Vec::new();
    for p in plan.policies.iter().filter(|p| p.standing && p.denies()) {
        if !names.contains(&code(&p.name)) {
            names.push(code(&p.name));
        }
    }
    if names.is_empty() {
        return String::new();
    }
    format!(
        "⚠️ Standing policy violation: {} fails on the fleet as it stands. Nothing here is denied, but every plan that changes the fleet is until it is fixed.",
        names.join(", ")
    )
}

fn table_rows(plan: &Plan) -> Vec<String> {
    facts::sorted_changes(plan)
        .into_iter()
        .filter_map(|c| {
            let pool = c.pool.as_ref()?;
            let (b, a) = (&pool.before, &pool.after);
            let gpus = arrow(b.gpus().to_string(), a.gpus().to_string());
            let mix = arrow(format!("{} / {}", b.on_demand, b.spot), format!("{} / {}", a.on_demand, a.spot));
            let action = match c.action {
                Action::Replace | Action::Delete => format!("⚠️ {}", c.action.as_str()),
                Action::NoOp => "no change".to_string(),
                other => other.as_str().to_string(),
            };
            Some(format!("| {} | {action} | {gpus} | {mix} | {} |\n", code(&c.address.to_string()), changed_attrs(c)))
        })
        .collect()
}

fn table(rows: &[String], cut: usize, limit: usize) -> String {
    if rows.is_empty() && cut == 0 {
        return String::new();
    }
    let mut s = "| Pool | Action | GPUs | On-demand / Spot | What changes |\n".to_string();
    s += "|---|---|---|---|---|\n";
    s += &rows.concat();
    if cut > 0 {
        s += &format!(
            "\n_… {} not shown in this table (output limited to {limit} characters)._\n",
            facts::plural(cut, "more pool", "more pools")
        );
    }
    s.push('\n');
    s
}

/// What changes in a pool, in its row: `nodes.desired` 3 → 4, `mix.spot_percent` 70 → 50.
/// At most [`ATTRS_IN_ROW`] attributes; the rest are counted (all are in the details).
fn changed_attrs(c: &ResourceChange) -> String {
    match c.action {
        Action::Create => return "new pool".into(),
        Action::Delete => return "removed".into(),
        Action::NoOp => return String::new(),
        _ => {}
    }
    let lines = facts::attr_lines(c);
    let mut parts: Vec<String> = lines
        .iter()
        .take(ATTRS_IN_ROW)
        .map(|l| {
            let text = l.text.replace(" -> ", " → ");
            let mark = if l.forces_replacement { " (forces replacement)" } else { "" };
            format!("{} {}{mark}", code(&l.path), cell(&text))
        })
        .collect();
    if lines.len() > ATTRS_IN_ROW {
        parts.push(format!("and {} more", lines.len() - ATTRS_IN_ROW));
    }
    if parts.is_empty() {
        // Node-level work only (a reclaimed node replaced, a rebalance).
        let reasons: Vec<String> = c.reasons.iter().map(|r| r.message.clone()).collect();
        return cell(&reasons.join("; "));
    }
    parts.join(", ")
}

const ATTRS_IN_ROW: usize = 4;

fn arrow(before: String, after: String) -> String {
    if before == after { before } else { format!("{before} → {after}") }
}

fn errors(plan: &Plan) -> String {
    let mut s = String::new();
    for e in &plan.errors {
        let at = e.location.as_ref().map(|l| format!("`{l}`: ")).unwrap_or_default();
        s += &format!("> [!CAUTION]\n> **Error:** {at}{}\n", one_line(&e.message));
        if let Some(hint) = &e.hint {
            s += &format!(">\n> hint: {}\n", one_line(hint));
        }
        s.push('\n');
    }
    s
}

/// The jobs the plan does something to, one sentence each (the title counts them).
fn jobs(plan: &Plan) -> String {
    let lines = super::jobs::lines(plan, false);
    if lines.is_empty() {
        return String::new();
    }
    let mut s = "**Jobs**\n\n| Job | What happens |\n|---|---|\n".to_string();
    for (_, addr, text) in lines {
        s += &format!("| {} | {} |\n", code(&addr), cell(&text));
    }
    s.push('\n');
    s
}

fn cost(plan: &Plan) -> String {
    let mut out = plan.cost.as_ref().map(super::cost::cost_markdown).unwrap_or_default();
    if let Some(spend) = &plan.spend {
        out += &super::cost::spend_markdown(spend);
    }
    out
}

fn policies(plan: &Plan) -> String {
    let verdicts = facts::verdicts(plan);
    if verdicts.is_empty() {
        return String::new();
    }
    // Failures (and overrides, warnings) in the table; passes as a count.
    let (passed, shown): (Vec<_>, Vec<_>) =
        verdicts.into_iter().partition(|v| v.passed == Some(true) && !v.warning && !v.overridden);
    let count = facts::plural(passed.len(), "policy check", "policy checks");
    if shown.is_empty() {
        let all = if passed.len() > 1 { "all " } else { "" };
        return passed_details(&passed, &format!("<b>Policies</b>: ✅ {all}{count} passed"));
    }
    let mut s = "**Policies**\n\n| Policy | Enforcement | Result | Message |\n|---|---|---|---|\n".to_string();
    // One row per policy and result: a `for_each` policy failing on 40 pools is one row.
    let mut rows: Vec<(&facts::Verdict, &str, Vec<&str>)> = Vec::new();
    for v in &shown {
        let result = match v.passed {
            Some(true) if v.warning => "⚠️ passed, near the limit",
            Some(true) => "✅ passed",
            Some(false) if v.is_standing_warning() => "⚠️ failing on the fleet as it stands",
            Some(false) if v.overridden => "⚠️ failed, overridden",
            Some(false) if v.standing => "❌ failed (already before this change)",
            Some(false) => "❌ failed",
            None => "❔ unknown",
        };
        match rows.iter_mut().find(|(r, res, _)| r.name == v.name && *res == result) {
            Some((_, _, messages)) => messages.push(&v.message),
            None => rows.push((v, result, vec![&v.message])),
        }
    }
    for (v, result, messages) in rows {
        let mut text = messages.iter().take(MESSAGES_IN_ROW).map(|m| cell(m)).collect::<Vec<_>>().join("<br>");
        if messages.len() > MESSAGES_IN_ROW {
            text += &format!("<br>… and {} more", messages.len() - MESSAGES_IN_ROW);
        }
        s += &format!("| {} | {} | {result} | {text} |\n", code(&v.name), cell(&v.enforcement));
    }
    if !passed.is_empty() {
        s += &format!("\n{}", passed_details(&passed, &format!("✅ {count} passed")));
    } else {
        s.push('\n');
    }
    s
}

/// Verdicts of one policy quoted in its row before `… and N more`.
const MESSAGES_IN_ROW: usize = 5;

/// Passes listed in the comment's details; a `for_each` policy over every pool can pass
/// 100,000 times, and this block always stays in the comment.
const MAX_PASS_LINES: usize = 100;

/// The passes under `summary`, collapsed: the comment leads with what failed, and a
/// reviewer who wants to see what was checked opens this.
fn passed_details(passed: &[facts::Verdict], summary: &str) -> String {
    let mut s = format!("<details><summary>{summary}</summary>\n\n");
    for v in passed.iter().take(MAX_PASS_LINES) {
        let msg = if v.message.is_empty() { String::new() } else { format!(": {}", one_line(&v.message)) };
        s += &format!("- {} ({}){msg}\n", code(&v.name), v.enforcement);
    }
    if passed.len() > MAX_PASS_LINES {
        s += &format!("- … and {} more (`gpuplan plan --json` lists every verdict)\n", passed.len() - MAX_PASS_LINES);
    }
    s += "\n</details>\n\n";
    s
}

/// Notes that are not changes (pools in their fallback placement), one line each.
fn notes(plan: &Plan) -> String {
    if plan.notes.is_empty() {
        return String::new();
    }
    const SHOWN: usize = 10;
    let mut s = String::new();
    for n in plan.notes.iter().take(SHOWN) {
        s += &format!("> **Note:** `{}`: {}\n>\n", n.address, n.message);
    }
    if plan.notes.len() > SHOWN {
        let more = plan.notes.len() - SHOWN;
        s += &format!("> **Note:** … and {more} more pools run in their fallback placement.\n>\n");
    }
    s.truncate(s.len() - 2);
    s.push('\n');
    s
}

fn drift_block(plan: &Plan) -> String {
    let body = text::drift_text(&plan.drift, &TextOptions { color: false, width: 0, verbose: false });
    let summary = format!("Drift: {} outside gpuplan", facts::plural(plan.drift.len(), "item", "items"));
    details(&summary, &body, "text")
}

fn change_block(c: &ResourceChange, lineage: Option<&str>) -> String {
    let body = text::block(c, lineage, &TextOptions { color: false, width: 0, verbose: false }, &Paint::new(false));
    let warn = if matches!(c.action, Action::Replace | Action::Delete) { "⚠️ " } else { "" };
    let summary = format!("{warn}<code>{}</code> {}", html(&c.address.to_string()), c.action.verb());
    details(&summary, &diff_markers(&body), "diff")
}

fn details(summary: &str, body: &str, lang: &str) -> String {
    let fence = "`".repeat(longest_backtick_run(body).max(2) + 1);
    format!("<details><summary>{summary}</summary>\n\n{fence}{lang}\n{body}{fence}\n\n</details>\n\n")
}

/// Moves each line's marker to column 0, where GitHub's `diff` highlighting looks:
/// `+` and `-` stay, `~` and `-/+` become `!` (highlighted as changed).
fn diff_markers(body: &str) -> String {
    let mut out = String::new();
    for line in body.lines() {
        let indent = line.len() - line.trim_start().len();
        let rest = &line[indent..];
        let marker = ["-/+ ", "+ ", "- ", "~ "].into_iter().find(|m| rest.starts_with(m));
        match marker {
            Some(m) => {
                let sym = match m {
                    "+ " => "+",
                    "- " => "-",
                    _ => "!",
                };
                out += &format!("{sym}{} {}\n", " ".repeat(indent), &rest[m.len()..]);
            }
            None => {
                out += line;
                out.push('\n');
            }
        }
    }
    out
}

/// The closing line saying what was cut, or nothing.
fn cut_line(changes: usize, drift: bool, limit: usize) -> String {
    let what = match (changes, drift) {
        (0, false) => return String::new(),
        (0, true) => "the drift details".to_string(),
        (n, false) => facts::plural(n, "more change", "more changes"),
        (n, true) => format!("{} and the drift details", facts::plural(n, "more change", "more changes")),
    };
    format!(
        "_… {what} not shown (output limited to {limit} characters); run `gpuplan plan` locally for the full diff._\n"
    )
}

fn longest_backtick_run(s: &str) -> usize {
    s.split(|c| c != '`').map(str::len).max().unwrap_or(0)
}

fn code(s: &str) -> String {
    format!("`{}`", s.replace('|', "\\|"))
}

fn cell(s: &str) -> String {
    one_line(s).replace('|', "\\|")
}

fn one_line(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

fn html(s: &str) -> String {
    s.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;")
}
