//! The terminal view of a plan, Terraform-like: drift, then one block per change, then
//! cost, policies, errors and the `Plan: …` summary line.
//!
//! Colour is used only when [`TextOptions::color`] is set; otherwise the output holds no
//! escape codes. `width` wraps prose (reasons, messages, hints), never data lines.

use crate::plan::model::{Action, DriftItem, Plan, PoolChange, ResourceChange};
use crate::render::facts::{self, AttrLine};
use crate::render::style::{Paint, paragraph};

/// Notes shown before `… and N more`.
const MAX_NOTES: usize = 10;

/// Node lines shown per list (deletes, adoptions) before `… and N more`.
const MAX_NODE_LINES: usize = 10;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TextOptions {
    /// Emit ANSI colour codes.
    pub color: bool,
    /// Wrap prose at this many columns (0: no wrapping).
    pub width: usize,
    /// List the policies that passed too (otherwise they are only counted).
    pub verbose: bool,
}

impl Default for TextOptions {
    fn default() -> Self {
        TextOptions { color: false, width: 100, verbose: false }
    }
}

/// The whole plan as terminal text.
pub fn plan_text(plan: &Plan, opts: &TextOptions) -> String {
    render_plan(plan, opts, Out { text: String::new(), sink: None, failed: None, spilled: false }).text
}

/// [`plan_text`] written to `w` as it is rendered: the text of a 100,000-pool plan is
/// about 80 MB, never held whole. The bytes are the same.
pub fn write_plan_text(plan: &Plan, opts: &TextOptions, w: &mut dyn std::io::Write) -> std::io::Result<()> {
    render_plan(plan, opts, Out { text: String::new(), sink: Some(w), failed: None, spilled: false }).finish()
}

/// Rendered text on its way out: collected whole without a sink, else written out each
/// time [`SPILL`] bytes have gathered.
struct Out<'w> {
    text: String,
    sink: Option<&'w mut dyn std::io::Write>,
    /// The first write error; nothing more is written after it.
    failed: Option<std::io::Error>,
    /// Some text went to the sink already.
    spilled: bool,
}

/// Bytes gathered before they are written to the sink.
const SPILL: usize = 1 << 16;

impl Out<'_> {
    fn push(&mut self, c: char) {
        self.text.push(c);
        self.spill();
    }

    fn spill(&mut self) {
        if self.text.len() < SPILL {
            return;
        }
        if let Some(w) = self.sink.as_mut() {
            if self.failed.is_none()
                && let Err(e) = w.write_all(self.text.as_bytes())
            {
                self.failed = Some(e);
            }
            self.text.clear();
            self.spilled = true;
        }
    }

    fn finish(mut self) -> std::io::Result<()> {
        if let Some(e) = self.failed.take() {
            return Err(e);
        }
        match self.sink.as_mut() {
            Some(w) => w.write_all(self.text.as_bytes()),
            None => Ok(()),
        }
    }
}

impl std::ops::AddAssign<&str> for Out<'_> {
    fn add_assign(&mut self, text: &str) {
        self.text.push_str(text);
        self.spill();
    }
}

fn render_plan<'w>(plan: &Plan, opts: &TextOptions, mut out: Out<'w>) -> Out<'w> {
    let p = Paint::new(opts.color);
    let changes = facts::actionable(plan);
    if !plan.refreshed {
        out += &paragraph(
            "Note: ",
            &p.bold("Note: "),
            6,
            "the clouds were not refreshed; the state's record of nodes was taken as the truth.",
            opts.width,
        );
        out.push('\n');
    }
    if !plan.targets.is_empty() {
        let targets: Vec<String> = plan.targets.iter().map(|t| format!("`{t}`")).collect();
        let text = format!("this plan is limited to {} and what they depend on.", targets.join(", "));
        out += &paragraph("Note: ", &p.bold("Note: "), 6, &text, opts.width);
        out.push('\n');
    }
    if !plan.drift.is_empty() {
        out += &drift_section(&plan.drift, opts, &p);
        out.push('\n');
    }
    out += &notes_section(plan, opts, &p);
    out += &super::placement::text(plan);
    let adopted = super::adopt::lines(plan);
    if !adopted.is_empty() {
        out += "gpuplan will take over, rename or let go of what runs:\n\n";
        for line in &adopted {
            out += &format!("  {}\n", p.bold(line));
        }
        out.push('\n');
    }
    if changes.is_empty() && !adopted.is_empty() {
        out += &format!("{} Nothing is launched or terminated.\n", p.bold("No resource changes."));
    } else if changes.is_empty() && !plan.has_changes() && plan.has_output_changes() {
        // Only output values change: the outputs section below says so.
    } else if changes.is_empty() && !plan.has_changes() && plan.records_stops() {
        out += &format!("{} A job's node stopped: the state records when.\n", p.bold("No changes to the fleet."));
    } else if changes.is_empty() && !plan.has_changes() {
        out += &format!("{} Your fleet matches the spec.\n", p.bold("No changes."));
    } else if changes.is_empty() {
        out += &format!("{} Only jobs to launch.\n", p.bold("No resource changes."));
    } else {
        out += &legend(&changes, &p);
        out += "\ngpuplan will perform the following actions:\n";
        for text in blocks(&changes, opts, &p, crate::par::cores()) {
            out += &text;
        }
    }
    let outputs = super::outputs::text_section(plan, &p);
    if !outputs.is_empty() {
        out += if out.text.is_empty() && !out.spilled { "" } else { "\n" };
        out += &outputs;
    }
    if !plan.jobs.is_empty() {
        out += &format!("\n{}\n", p.bold("Jobs (admission order):"));
        let lines = super::jobs::lines(plan);
        let pad = lines.iter().map(|(_, a, _)| a.chars().count()).max().unwrap_or(0);
        for (sym, addr, text) in lines {
            let first = format!("  {sym} {addr:pad$}  ");
            out += &paragraph(&first, &first, pad + 6, &text, opts.width);
        }
    }
    if let Some(report) = &plan.cost {
        out += &format!("\n{}\n", p.bold("Cost:"));
        out += &super::cost::cost_text(report, false, opts.width);
    }
    out += &policy_section(plan, opts, &p);
    for e in &plan.errors {
        out.push('\n');
        let message = match &e.location {
            Some(at) => format!("{at}: {}", e.message),
            None => e.message.clone(),
        };
        out += &paragraph("Error: ", &format!("{} ", p.error("Error:")), 7, &message, opts.width);
        if let Some(hint) = &e.hint {
            out += &paragraph("  hint: ", &format!("  {} ", p.cyan("hint:")), 8, hint, opts.width);
        }
    }
    if !changes.is_empty() || !plan.adoptions.is_empty() {
        out += &format!("\n{} {}.\n", p.bold("Plan:"), facts::summary_counts(plan));
    }
    if !plan.jobs.is_empty() {
        let lead = if changes.is_empty() { "\n" } else { "" };
        out += &format!("{lead}{} {}.\n", p.bold("Jobs:"), super::jobs::summary(plan));
    }
    out
}

/// The plan's notes (pools in their fallback placement), at most [`MAX_NOTES`], then a
/// blank line.
fn notes_section(plan: &Plan, opts: &TextOptions, p: &Paint) -> String {
    let mut out = String::new();
    for n in plan.notes.iter().take(MAX_NOTES) {
        out += &paragraph("Note: ", &p.bold("Note: "), 6, &format!("`{}`: {}", n.address, n.message), opts.width);
    }
    if plan.notes.len() > MAX_NOTES {
        let more = plan.notes.len() - MAX_NOTES;
        let text = format!("… and {more} more pool(s) run in their fallback placement (`plan --json` lists them).");
        out += &paragraph("Note: ", &p.bold("Note: "), 6, &text, opts.width);
    }
    if !plan.notes.is_empty() {
        out.push('\n');
    }
    out
}

/// Changes whose blocks are rendered per round: a round's text, not the whole plan's, is
/// held at once.
const BLOCK_ROUND: usize = 8_192;

/// Each change's block, after a blank line, in order: rendered on up to `threads` cores
/// in rounds of [`BLOCK_ROUND`] changes (a destroy at 100,000 pools shows 100,000 blocks,
/// which took about a tenth of its CPU on one thread). The text is the one thread's.
pub(crate) fn blocks<'a>(
    changes: &'a [&'a ResourceChange],
    opts: &'a TextOptions,
    p: &'a Paint,
    threads: usize,
) -> impl Iterator<Item = String> + 'a {
    changes.chunks(BLOCK_ROUND).flat_map(move |round| {
        crate::par::runs_in_order(round, threads, 256, |run| {
            let mut text = String::new();
            for c in run {
                text.push('\n');
                text += &block(c, opts, p);
            }
            text
        })
    })
}

/// `Policies: 12 passed, 1 soft failure`, then one line per verdict the reader must look
/// at (failures first, then overrides, unknowns and near-limit warnings); the passes
/// follow only with [`TextOptions::verbose`]. Empty when no policy ran.
fn policy_section(plan: &Plan, opts: &TextOptions, p: &Paint) -> String {
    let verdicts = facts::verdicts(plan);
    if verdicts.is_empty() {
        return String::new();
    }
    let mut out = format!("\n{} {}\n", p.bold("Policies:"), facts::verdict_counts(&verdicts));
    let mut shown: Vec<&facts::Verdict> = verdicts.iter().filter(|v| opts.verbose || !v.is_plain_pass()).collect();
    // Stable: within a rank, the order the policies ran in.
    shown.sort_by_key(|v| v.rank());
    for v in shown {
        let (mark, painted) = match v.passed {
            Some(true) if v.warning => ("warn", p.yellow("warn")),
            Some(true) => ("pass", p.green("pass")),
            Some(false) if v.is_standing_warning() => ("warn", p.yellow("warn")),
            Some(false) if v.overridden => ("FAIL", p.yellow("FAIL")),
            Some(false) => ("FAIL", p.red("FAIL")),
            None => ("????", p.yellow("????")),
        };
        let enf = if v.enforcement.is_empty() { String::new() } else { format!(" ({})", v.enforcement_note()) };
        let msg = if v.message.is_empty() { String::new() } else { format!(": {}", v.message) };
        let text = format!("{}{enf}{msg}", v.name);
        out += &paragraph(&format!("  {mark} "), &format!("  {painted} "), 7, &text, opts.width);
    }
    out
}

/// Drift alone, for `gpuplan drift`.
pub fn drift_text(drift: &[DriftItem], opts: &TextOptions) -> String {
    if drift.is_empty() {
        return "No drift.\n".into();
    }
    let p = Paint::new(opts.color);
    let mut resources: Vec<_> = drift.iter().map(|d| &d.address).collect();
    resources.sort();
    resources.dedup();
    format!(
        "{}\n{}.\n",
        drift_section(drift, opts, &p),
        p.bold(&format!(
            "Drift: {} in {}",
            facts::plural(drift.len(), "item", "items"),
            facts::plural(resources.len(), "resource", "resources")
        ))
    )
}

fn drift_section(drift: &[DriftItem], opts: &TextOptions, p: &Paint) -> String {
    let mut items: Vec<&DriftItem> = drift.iter().collect();
    items.sort_by(|a, b| a.address.cmp(&b.address)); // stable: keeps the model's order within an address
    let mut out = format!("{}\n", p.bold("Objects have changed outside of gpuplan:"));
    let mut last = None;
    for d in items {
        if last != Some(&d.address) {
            out += &format!("\n  # {}\n", p.bold(&d.address.to_string()));
            last = Some(&d.address);
        }
        let prefix = format!("      {}: ", d.kind);
        out += &paragraph(
            &prefix,
            &format!("      {}: ", p.yellow(d.kind.as_str())),
            prefix.len(),
            &d.message,
            opts.width,
        );
    }
    out
}

/// `Resource actions are indicated with the following symbols:` for the symbols used.
fn legend(changes: &[&ResourceChange], p: &Paint) -> String {
    let mut actions: Vec<Action> = changes.iter().map(|c| c.action).collect();
    actions.sort();
    actions.dedup();
    let mut out = "Resource actions are indicated with the following symbols:\n".to_string();
    for a in actions {
        out += &format!("  {} {}\n", p.action(a), a.as_str());
    }
    out
}

/// One change: header comment, reasons, body with attributes and node operations.
pub(crate) fn block(c: &ResourceChange, opts: &TextOptions, p: &Paint) -> String {
    let addr = c.address.to_string();
    let mut out = format!("  # {} {}\n", p.bold(&addr), c.action.verb());
    for r in &c.reasons {
        out += &paragraph("  # (", "  # (", 5, &format!("{})", r.message), opts.width);
    }
    if c.action == Action::Replace
        && let Some(pool) = &c.pool
    {
        let order = if pool.create_before_destroy {
            "new nodes are created before the old ones are destroyed"
        } else {
            "old nodes are destroyed before the new ones are created"
        };
        out += &format!("  # ({order})\n");
    }
    out += &format!("  {} {} {:?} {{\n", p.action(c.action), c.address.kind, c.address.name);
    let attrs = facts::attr_lines(c);
    out += &attr_block(&attrs, p);
    if let Some(pool) = &c.pool {
        if !attrs.is_empty() {
            out.push('\n');
        }
        out += &nodes_block(c.action, pool, p);
    }
    out += "    }\n";
    out
}

fn attr_block(attrs: &[AttrLine], p: &Paint) -> String {
    let pad = attrs.iter().map(|a| a.path.chars().count()).max().unwrap_or(0);
    let mut out = String::new();
    for a in attrs {
        let forces = if a.forces_replacement { format!(" {}", p.red("# forces replacement")) } else { String::new() };
        out += &format!("      {} {:pad$} = {}{forces}\n", p.symbol(a.marker.symbol()), a.path, a.text);
    }
    out
}

fn nodes_block(action: Action, pool: &PoolChange, p: &Paint) -> String {
    let (before, after) = (facts::counts(&pool.before), facts::counts(&pool.after));
    let has_ops =
        !pool.creates.is_empty() || !pool.deletes.is_empty() || !pool.adopt.is_empty() || !pool.forget.is_empty();
    let (sym, text) = match action {
        Action::Create => ("+", after),
        Action::Delete => ("-", before),
        _ if pool.before != pool.after => ("~", format!("{before} -> {after}")),
        _ if has_ops => ("~", after),
        _ => (" ", after),
    };
    let mut out = format!("      {} nodes: {text}\n", p.symbol(sym));
    let creates: Vec<String> = pool
        .creates
        .iter()
        .map(|b| {
            let types =
                if b.instance_types.is_empty() { String::new() } else { format!(" ({})", b.instance_types.join(", ")) };
            let place = if b.zones.is_empty() { format!("in {}", b.zone) } else { format!("across {}", b.placement()) };
            let join = b.join.as_ref().map(|j| format!(", {}", j.describe(b.capacity))).unwrap_or_default();
            format!("      {} {} {} {place}{types}{join}\n", p.symbol("+"), b.count, b.capacity)
        })
        .collect();
    let deletes: Vec<String> = pool
        .deletes
        .iter()
        .map(|d| format!("      {} {} {} {} ({})\n", p.symbol("-"), d.id, d.capacity, d.zone, d.reason))
        .collect();
    let deletes = capped(deletes, "to destroy");
    let deferred: Vec<String> = pool
        .deferred
        .iter()
        .map(|d| {
            format!(
                "      # {} {} {} ({}): removal deferred until {} ends\n",
                d.id, d.capacity, d.zone, d.reason, d.job
            )
        })
        .collect();
    let deletes = deletes + &capped(deferred, "deferred");
    if pool.create_before_destroy {
        out += &creates.concat();
        out += &deletes;
    } else {
        out += &deletes;
        out += &creates.concat();
    }
    let adopt = pool.adopt.iter().map(|n| format!("      {} adopt {}\n", p.symbol("~"), n.id)).collect();
    out += &capped(adopt, "to adopt");
    let forget =
        pool.forget.iter().map(|id| format!("      {} forget {id} (gone outside gpuplan)\n", p.symbol("~"))).collect();
    out += &capped(forget, "to forget");
    out
}

/// At most [`MAX_NODE_LINES`] lines, then `… and N more <what>`.
fn capped(lines: Vec<String>, what: &str) -> String {
    if lines.len() <= MAX_NODE_LINES {
        return lines.concat();
    }
    let more = lines.len() - MAX_NODE_LINES;
    let mut out = lines[..MAX_NODE_LINES].concat();
    out += &format!("        … and {more} more {what}\n");
    out
}
