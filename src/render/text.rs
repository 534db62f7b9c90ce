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
    render_plan(plan, opts, &[], Out { text: String::new(), sink: None, failed: None, spilled: false }).text
}

/// [`plan_text`] written to `w` as it is rendered: the text of a 100,000-pool plan is
/// about 80 MB, never held whole. The bytes are the same.
pub fn write_plan_text(plan: &Plan, opts: &TextOptions, w: &mut dyn std::io::Write) -> std::io::Result<()> {
    write_plan_text_framed(plan, opts, &[], w)
}

/// [`write_plan_text`], with `frames[i]` drawn for `plan.errors[i]` where there is one:
/// the error with its source line, as `validate` draws its problems (the caller, which
/// holds the spec's sources, draws them; see `diag::render_text`).
pub fn write_plan_text_framed(
    plan: &Plan,
    opts: &TextOptions,
    frames: &[Option<String>],
    w: &mut dyn std::io::Write,
) -> std::io::Result<()> {
    render_plan(plan, opts, frames, Out { text: String::new(), sink: Some(w), failed: None, spilled: false }).finish()
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

fn render_plan<'w>(plan: &Plan, opts: &TextOptions, frames: &[Option<String>], mut out: Out<'w>) -> Out<'w> {
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
    out += &super::health::text(plan);
    out += &notes_section(plan, opts, &p);
    out += &super::placement::text(plan);
    out += &super::reservations::text(plan);
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
    } else if changes.is_empty() && !plan.has_changes() && !plan.evidence.is_empty() {
        let what = "GPU faults read on the nodes: the state records when each was first seen.";
        out += &format!("{} {what}\n", p.bold("No changes to the fleet."));
    } else if changes.is_empty() && !plan.has_changes() && !plan.errors.is_empty() {
        // Not "No changes": the errors below keep this plan from saying what would change.
        out += &format!("{} Fix the errors below and plan again.\n", p.bold("Planning failed."));
    } else if changes.is_empty() && !plan.has_changes() {
        out += &format!("{} Your fleet matches the spec.\n", p.bold("No changes."));
    } else if changes.is_empty() && !plan.jobs.iter().any(|j| j.needs_launch()) && plan.cordons().next().is_some() {
        out += &format!("{} Only quarantined nodes to cordon.\n", p.bold("No resource changes."));
    } else if changes.is_empty() {
        out += &format!("{} Only jobs to launch.\n", p.bold("No resource changes."));
    } else {
        out += &legend(&changes, &p);
        out += "\ngpuplan will perform the following actions:\n";
        for text in blocks(&changes, facts::state_lineage(plan), opts, &p, crate::par::cores()) {
            out += &text;
        }
    }
    let outputs = super::outputs::text_section(plan, &p);
    if !outputs.is_empty() {
        out += if out.text.is_empty() && !out.spilled { "" } else { "\n" };
        out += &outputs;
    }
    let lines = super::jobs::lines(plan, opts.verbose);
    if !lines.is_empty() {
        out += &format!("\n{}\n", p.bold("Jobs (admission order):"));
        let pad = lines.iter().map(|(_, a, _)| a.chars().count()).max().unwrap_or(0);
        for (sym, addr, text) in lines {
            let first = format!("  {sym} {addr:pad$}  ");
            out += &paragraph(&first, &first, pad + 6, &one_arrow(&text), opts.width);
        }
    }
    if let Some(report) = &plan.cost {
        out += &format!("\n{}\n", p.bold("Cost:"));
        out += &super::cost::cost_text(report, false, opts.width);
    }
    out += &policy_section(plan, opts, &p);
    out += &errors_section(plan, opts, frames, &p);
    if plan.has_changes() {
        out += &format!("\n{}", summary_line(plan, opts.width, &p));
    }
    out
}

/// `Plan: 0 to add, 1 to change, 0 to destroy. Nodes: 3 to launch, 1 to terminate.` on
/// one line where it fits in `width`, else a sentence a line (`Nodes:` and `Jobs:` under
/// the counts they follow), never a count cut from its words.
fn summary_line(plan: &Plan, width: usize, p: &Paint) -> String {
    let text = facts::summary_counts(plan) + ".";
    let lead = "Plan: ";
    if width == 0 || lead.len() + text.chars().count() <= width {
        return format!("{} {text}\n", p.bold("Plan:"));
    }
    let sentences: Vec<&str> = text.split_inclusive(". ").map(str::trim_end).collect();
    format!("{} {}\n", p.bold("Plan:"), sentences.join(&format!("\n{}", " ".repeat(lead.len()))))
}

/// Each error after a blank line: its frame when the caller drew one, else `Error:` with
/// its location and the `hint:`.
fn errors_section(plan: &Plan, opts: &TextOptions, frames: &[Option<String>], p: &Paint) -> String {
    let mut out = String::new();
    for (i, e) in plan.errors.iter().enumerate() {
        out.push('\n');
        if let Some(frame) = frames.get(i).and_then(Option::as_ref) {
            out += frame;
            continue;
        }
        let message = match &e.location {
            Some(at) => format!("{at}: {}", e.message),
            None => e.message.clone(),
        };
        out += &paragraph("Error: ", &format!("{} ", p.error("Error:")), 7, &message, opts.width);
        if let Some(hint) = &e.hint {
            out += &paragraph("  hint: ", &format!("  {} ", p.cyan("hint:")), 8, hint, opts.width);
        }
    }
    out
}

/// The plan's notes (pools in their fallback placement), at most [`MAX_NOTES`], then a
/// blank line.
fn notes_section(plan: &Plan, opts: &TextOptions, p: &Paint) -> String {
    let mut out = String::new();
    for n in plan.notes.iter().take(MAX_NOTES) {
        let text = format!("`{}`: {}", n.address, one_arrow(&n.message));
        out += &paragraph("Note: ", &p.bold("Note: "), 6, &text, opts.width);
    }
    if plan.notes.len() > MAX_NOTES {
        let more = plan.notes.len() - MAX_NOTES;
        let text = format!("… and {more} more pools run in their fallback placement (`plan --json` lists them).");
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
    lineage: Option<&'a str>,
    opts: &'a TextOptions,
    p: &'a Paint,
    threads: usize,
) -> impl Iterator<Item = String> + 'a {
    changes.chunks(BLOCK_ROUND).flat_map(move |round| {
        crate::par::runs_in_order(round, threads, 256, |run| {
            let mut text = String::new();
            for c in run {
                text.push('\n');
                write_block(&mut text, c, lineage, opts, p);
            }
            text
        })
    })
}

/// Verdicts of one policy quoted in its block before `… and N more`.
const MAX_VERDICT_LINES: usize = 5;

/// `Policies: 12 passed, 1 soft failure`, then one block per policy the reader must look
/// at (failures first, then overrides, unknowns and near-limit warnings): one line when
/// it has one verdict, else a head line and at most [`MAX_VERDICT_LINES`] of its
/// messages (a `for_each` policy failing on 40 pools is one block, not 40). The passes
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
    let mut blocks: Vec<Vec<&facts::Verdict>> = Vec::new();
    for v in shown {
        match blocks.iter_mut().find(|b| b[0].name == v.name && b[0].rank() == v.rank()) {
            Some(b) => b.push(v),
            None => blocks.push(vec![v]),
        }
    }
    for block in blocks {
        out += &verdict_block(&block, opts, p);
    }
    out
}

/// One policy's verdicts of one kind (see [`policy_section`]).
fn verdict_block(block: &[&facts::Verdict], opts: &TextOptions, p: &Paint) -> String {
    let v = block[0];
    let (mark, painted) = match v.passed {
        Some(true) if v.warning => ("warn", p.yellow("warn")),
        Some(true) => ("pass", p.green("pass")),
        Some(false) if v.is_standing_warning() => ("warn", p.yellow("warn")),
        Some(false) if v.overridden => ("FAIL", p.yellow("FAIL")),
        Some(false) => ("FAIL", p.red("FAIL")),
        None => ("????", p.yellow("????")),
    };
    let enf = if v.enforcement.is_empty() { String::new() } else { format!(" ({})", v.enforcement_note()) };
    let (first, rest) = (format!("  {mark} "), format!("  {painted} "));
    if block.len() == 1 {
        let msg = if v.message.is_empty() { String::new() } else { format!(": {}", v.message) };
        return paragraph(&first, &rest, 7, &format!("{}{enf}{msg}", v.name), opts.width);
    }
    let what = match v.passed {
        Some(true) if v.warning => "near a limit",
        Some(true) => "passed",
        Some(false) => "failed",
        None => "unknown",
    };
    let mut out = paragraph(&first, &rest, 7, &format!("{}{enf}: {} {what}", v.name, block.len()), opts.width);
    for w in block.iter().take(MAX_VERDICT_LINES) {
        let msg = if w.message.is_empty() { "(no message)" } else { w.message.as_str() };
        out += &paragraph("       - ", "       - ", 9, msg, opts.width);
    }
    if block.len() > MAX_VERDICT_LINES {
        let more = block.len() - MAX_VERDICT_LINES;
        out += &format!("       … and {more} more (`gpuplan plan --json` lists every verdict)\n");
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
            &one_arrow(&d.message),
            opts.width,
        );
    }
    out
}

/// `Resource actions are indicated with the following symbols:` for the symbols used,
/// in Terraform's words.
fn legend(changes: &[&ResourceChange], p: &Paint) -> String {
    let mut actions: Vec<Action> = changes.iter().map(|c| c.action).collect();
    actions.sort();
    actions.dedup();
    let mut out = "Resource actions are indicated with the following symbols:\n".to_string();
    for a in actions {
        let words = match a {
            Action::Create => "create",
            Action::Update => "update in-place",
            // Not Terraform's "destroy and then create": the `nodes:` line says which go
            // first (new nodes first unless the pool's lifecycle says otherwise).
            Action::Replace => "replace",
            Action::Delete => "destroy",
            other => other.as_str(),
        };
        out += &format!("  {} {words}\n", p.action(a));
    }
    out
}

/// One change, as Terraform draws it: one header line with the main reason, the block
/// with its attributes (each reason about an attribute is that attribute's line) and node
/// operations, the other reasons as comments under the `nodes:` line.
/// `lineage`: the state's, which names the placement groups a change deletes.
pub(crate) fn block(c: &ResourceChange, lineage: Option<&str>, opts: &TextOptions, p: &Paint) -> String {
    let mut out = String::new();
    write_block(&mut out, c, lineage, opts, p);
    out
}

/// [`block`], written at the end of `out`: pieces pushed in place, no text made per
/// line and then copied (a 2,000-pool create's blocks were a fifth of `plan --out`).
fn write_block(out: &mut String, c: &ResourceChange, lineage: Option<&str>, opts: &TextOptions, p: &Paint) {
    let attrs = facts::attr_lines(c);
    let reasons = facts::unsaid_reasons(c, &attrs);
    let addr = c.address.to_string();
    let mut header = String::with_capacity(addr.len() + 64);
    header.push_str(&addr);
    header.push(' ');
    header.push_str(c.action.verb());
    if let Some(main) = reasons.first() {
        header.push_str(": ");
        header.push_str(&one_arrow(&main.message));
    }
    let bold_addr = |first: &str| if p.is_on() { first.replacen(&addr, &p.bold(&addr), 1) } else { first.to_string() };
    comment(out, "  # ", &header, opts.width, bold_addr);
    out.push_str("  ");
    p.push_symbol(out, c.action.symbol());
    out.push(' ');
    out.push_str(c.address.kind.as_str());
    out.push(' ');
    // An instance shows its index: `job "hello[0]"`.
    match &c.address.key {
        None if plain_debug(&c.address.name) => {
            out.push('"');
            out.push_str(&c.address.name);
            out.push('"');
        }
        key => {
            let key = key.as_ref().map(ToString::to_string).unwrap_or_default();
            out.push_str(&format!("{:?}", format!("{}{key}", c.address.name)));
        }
    }
    out.push_str(" {\n");
    attr_block(out, &attrs, p);
    if let Some(pool) = &c.pool {
        if !attrs.is_empty() {
            out.push('\n');
        }
        // A state that does not exist yet has deleted nothing: no group to name.
        let groups = lineage.map(|l| crate::plan::groups_to_delete(l, c)).unwrap_or_default();
        nodes_block(out, c.action, pool, &groups, lineage.is_some(), p);
    }
    for r in reasons.iter().skip(1) {
        comment(out, "      # ", &one_arrow(&r.message), opts.width, str::to_string);
    }
    out.push_str("    }\n");
}

/// Does `{name:?}` print `name` between quotes, unchanged: printable ASCII without `"`
/// or `\\`.
fn plain_debug(name: &str) -> bool {
    name.bytes().all(|b| (0x20..0x7f).contains(&b) && b != b'"' && b != b'\\')
}

/// `text` as comment lines after `lead`, wrapped at `width`, written at the end of `out`;
/// `paint` styles the first.
fn comment(out: &mut String, lead: &str, text: &str, width: usize, paint: impl Fn(&str) -> String) {
    let room = if width == 0 { 0 } else { width.saturating_sub(lead.chars().count()).max(20) };
    if room == 0 || one_line(text, room) {
        // What wrapping gives a text that fits: the text itself.
        out.push_str(lead);
        out.push_str(&paint(text));
        out.push('\n');
        return;
    }
    for (i, line) in crate::render::style::wrap(text, room).into_iter().enumerate() {
        let line = if i == 0 { paint(&line) } else { line };
        out.push_str(lead);
        out.push_str(&line);
        out.push('\n');
    }
}

/// Does [`crate::render::style::wrap`] give `text` back as one line at `room` columns: it
/// fits, and its words are apart by single spaces with none before or after them.
fn one_line(text: &str, room: usize) -> bool {
    !text.is_empty()
        && text.len() <= room
        && !text.starts_with(' ')
        && !text.ends_with(' ')
        && !text.contains("  ")
        && text.chars().all(|c| c == ' ' || !c.is_whitespace())
}

/// The text view's one arrow, `->` (a terminal may lack the glyph): reasons and messages
/// written for every view may carry `→`, which markdown's prose keeps.
pub(crate) fn one_arrow(text: &str) -> String {
    text.replace('→', "->")
}

fn attr_block(out: &mut String, attrs: &[AttrLine], p: &Paint) {
    let pad = attrs.iter().map(|a| a.path.chars().count()).max().unwrap_or(0);
    for a in attrs {
        out.push_str("      ");
        p.push_symbol(out, a.marker.symbol());
        out.push(' ');
        out.push_str(&a.path);
        out.extend(std::iter::repeat_n(' ', pad.saturating_sub(a.path.chars().count())));
        out.push_str(" = ");
        out.push_str(&a.text);
        if a.forces_replacement {
            out.push(' ');
            out.push_str(&p.red("# forces replacement"));
        }
        out.push('\n');
    }
}

/// `2 on-demand + 1 spot (24 GPUs)`, written at the end of `out`.
fn push_counts(out: &mut String, c: &crate::plan::model::NodeCounts) {
    push_int(out, u64::from(c.on_demand));
    out.push_str(" on-demand + ");
    push_int(out, u64::from(c.spot));
    out.push_str(" spot (");
    let gpus = c.gpus();
    push_int(out, gpus);
    out.push_str(if gpus == 1 { " GPU)" } else { " GPUs)" });
}

/// `n` in decimal, as `Display` writes it.
fn push_int(out: &mut String, mut n: u64) {
    let mut digits = [0u8; 20];
    let mut at = digits.len();
    loop {
        at -= 1;
        digits[at] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    out.extend(digits[at..].iter().map(|&d| char::from(d)));
}

/// The node operations of a pool change, then the placement groups it deletes after them
/// (`groups`, [`crate::plan::groups_to_delete`]), written at the end of `out`.
fn nodes_block(out: &mut String, action: Action, pool: &PoolChange, groups: &[String], names_known: bool, p: &Paint) {
    let has_ops =
        !pool.creates.is_empty() || !pool.deletes.is_empty() || !pool.adopt.is_empty() || !pool.forget.is_empty();
    out.push_str("      ");
    let sym = match action {
        Action::Create => "+",
        Action::Delete => "-",
        _ if pool.before != pool.after || has_ops => "~",
        _ => " ",
    };
    p.push_symbol(out, sym);
    out.push_str(" nodes: ");
    match action {
        Action::Delete => push_counts(out, &pool.before),
        Action::Create => push_counts(out, &pool.after),
        _ if pool.before != pool.after => {
            push_counts(out, &pool.before);
            out.push_str(" -> ");
            push_counts(out, &pool.after);
        }
        _ => push_counts(out, &pool.after),
    }
    if action == Action::Replace {
        out.push_str(if pool.create_before_destroy { ", new nodes first" } else { ", old nodes first" });
    }
    out.push('\n');
    if pool.create_before_destroy {
        create_lines(out, pool, names_known, p);
        delete_lines(out, pool, groups, p);
    } else {
        delete_lines(out, pool, groups, p);
        create_lines(out, pool, names_known, p);
    }
    capped(out, pool.adopt.len(), "to adopt", |out, i| {
        out.push_str("      ");
        p.push_symbol(out, "~");
        out.push_str(" adopt ");
        out.push_str(&pool.adopt[i].id);
        out.push('\n');
    });
    capped(out, pool.forget.len(), "to forget", |out, i| {
        out.push_str("      ");
        p.push_symbol(out, "~");
        out.push_str(" forget ");
        out.push_str(&pool.forget[i]);
        out.push_str(" (gone outside gpuplan)\n");
    });
}

/// `+ 1 spot in us-east-1b (p4de.24xlarge)`: one line per create batch.
fn create_lines(out: &mut String, pool: &PoolChange, names_known: bool, p: &Paint) {
    for b in &pool.creates {
        out.push_str("      ");
        p.push_symbol(out, "+");
        out.push(' ');
        push_int(out, u64::from(b.count));
        out.push(' ');
        out.push_str(b.capacity.as_str());
        if b.zones.is_empty() {
            out.push_str(" in ");
            out.push_str(&b.zone);
        } else {
            out.push_str(" across ");
            out.push_str(&b.placement());
        }
        out.push_str(&instance_types(&b.instance_types));
        if let Some(j) = &b.join {
            out.push_str(", ");
            out.push_str(&j.describe(b.capacity));
        }
        if let Some(h) = &b.hardware {
            out.push_str(&facts::hardware(h, &pool.provider_kind, names_known));
        }
        if let Some(r) = &b.reservation {
            out.push_str(&format!(", reserved: {} ({})", r.address, r.id));
        }
        out.push('\n');
    }
}

/// The nodes a pool change removes (capped), those whose removal waits for a job
/// (capped), then its placement groups deleted after them.
fn delete_lines(out: &mut String, pool: &PoolChange, groups: &[String], p: &Paint) {
    capped(out, pool.deletes.len(), "to destroy", |out, i| {
        let d = &pool.deletes[i];
        out.push_str("      ");
        p.push_symbol(out, "-");
        out.push_str(&format!(" {} {} {} ({})\n", d.id, d.capacity, d.zone, one_arrow(&d.reason)));
    });
    capped(out, pool.deferred.len(), "deferred", |out, i| {
        let d = &pool.deferred[i];
        out.push_str(&format!(
            "      # {} {} {} ({}): removal deferred until {} ends\n",
            d.id,
            d.capacity,
            d.zone,
            one_arrow(&d.reason),
            d.job
        ));
    });
    let noun = crate::model::hardware::group_noun(&pool.provider_kind);
    for g in groups {
        out.push_str("      ");
        p.push_symbol(out, "-");
        out.push_str(&format!(" {noun} {g} (after its nodes)\n"));
    }
}

/// ` (p4de.24xlarge)`, ` (g6.xlarge or 4 other types)`: the type apply tries first, and
/// how many it falls back to (`plan --json` lists them; the cost section prices them).
fn instance_types(types: &[String]) -> String {
    match types {
        [] => String::new(),
        [one] => format!(" ({one})"),
        [first, rest @ ..] => {
            let other = if rest.len() == 1 { "type" } else { "types" };
            format!(" ({first} or {} other {other})", rest.len())
        }
    }
}

/// At most [`MAX_NODE_LINES`] of `n` lines (`line` writes the `i`th), then `… and N
/// more <what>`.
fn capped(out: &mut String, n: usize, what: &str, mut line: impl FnMut(&mut String, usize)) {
    for i in 0..n.min(MAX_NODE_LINES) {
        line(out, i);
    }
    if n > MAX_NODE_LINES {
        out.push_str(&format!("        … and {} more {what}\n", n - MAX_NODE_LINES));
    }
}
