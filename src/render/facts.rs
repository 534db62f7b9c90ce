//! Readings of the plan model that more than one view needs: changes in display order,
//! attribute diffs, node counts, cost and policy lines.
//!
//! These only restate what the model says in words; they never decide anything. Cost and
//! policies are free-form JSON filled by `cost/` and `policy/`, so they are read
//! generically: known keys get a friendlier line, unknown keys are still shown.

use serde_json::Value as Json;

use crate::addr::Kind;
use crate::json_text::JsonText;
use crate::model::Placement;
use crate::model::secret::SecretRef;
use crate::plan::diff::{IMMUTABLE, changed_paths};
use crate::plan::model::{Action, Plan, Reason, ReasonCode, ResourceChange};

/// How a sensitive value prints in every view.
pub const SENSITIVE: &str = crate::plan::inputs::SENSITIVE;

/// Changes in display order: by address (kind, then name, then instance key).
pub(crate) fn sorted_changes(plan: &Plan) -> Vec<&ResourceChange> {
    let mut v: Vec<&ResourceChange> = plan.changes.iter().collect();
    v.sort_by(|a, b| a.address.cmp(&b.address));
    v
}

/// Changes that do something (everything but `no-op`), in display order.
pub(crate) fn actionable(plan: &Plan) -> Vec<&ResourceChange> {
    sorted_changes(plan).into_iter().filter(|c| c.action != Action::NoOp).collect()
}

/// `"A100-80GB"`, `8`, `["a", "b"]`, `{ team = "ml" }`: HCL-like, one line.
pub(crate) fn value(v: &Json) -> String {
    if let Some(r) = SecretRef::in_json(v) {
        return r.shown();
    }
    match v {
        Json::String(s) => serde_json::to_string(s).unwrap_or_else(|_| format!("{s:?}")),
        Json::Array(items) => format!("[{}]", items.iter().map(value).collect::<Vec<_>>().join(", ")),
        Json::Object(map) if map.is_empty() => "{}".into(),
        Json::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            let parts: Vec<String> = keys.iter().map(|k| format!("{k} = {}", value(&map[k.as_str()]))).collect();
            format!("{{ {} }}", parts.join(", "))
        }
        other => other.to_string(),
    }
}

/// A change's reasons that its own lines do not say already, in the model's order: the
/// text view puts the first on the header line and the rest under the `nodes:` line.
/// Said already: `new` by "will be created", `destroy` by "will be destroyed",
/// `changed:<path>` by the attribute line of that path, the node count and the mix by
/// the `nodes:` line, `immutable` by the attributes marked `# forces replacement`,
/// deferred removals and adoptions by their node lines.
pub(crate) fn unsaid_reasons<'c>(c: &'c ResourceChange, attrs: &[AttrLine]) -> Vec<&'c Reason> {
    c.reasons.iter().filter(|r| !said(c, attrs, r)).collect()
}

fn said(c: &ResourceChange, attrs: &[AttrLine], r: &Reason) -> bool {
    let pool = c.pool.as_ref();
    let under = |a: &str, b: &str| a.len() > b.len() && a.starts_with(b) && a.as_bytes()[b.len()] == b'.';
    match &r.code {
        ReasonCode::New => c.action == Action::Create,
        ReasonCode::Destroy => c.action == Action::Delete,
        ReasonCode::Changed(p) => attrs.iter().any(|a| a.path == *p || under(&a.path, p) || under(p, &a.path)),
        ReasonCode::NodeCount | ReasonCode::Mix => pool.is_some(),
        ReasonCode::Immutable => attrs.iter().any(|a| a.forces_replacement),
        ReasonCode::Deferred => pool.is_some_and(|p| !p.deferred.is_empty()),
        ReasonCode::Adopt => pool.is_some_and(|p| !p.adopt.is_empty()),
        _ => false,
    }
}

/// How one attribute line is marked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Marker {
    Add,
    Change,
    Remove,
}

impl Marker {
    pub(crate) fn symbol(self) -> &'static str {
        match self {
            Marker::Add => "+",
            Marker::Change => "~",
            Marker::Remove => "-",
        }
    }
}

/// One attribute line of a change body: `~ nodes.desired = 2 -> 3`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct AttrLine {
    pub marker: Marker,
    pub path: String,
    /// The value, or `before -> after`.
    pub text: String,
    /// The attribute cannot change in place (only marked on replacements).
    pub forces_replacement: bool,
}

/// The attribute lines of a change: every attribute for creates and deletes, the changed
/// leaves (as `plan::diff::changed_paths` finds them) for updates and replacements.
pub(crate) fn attr_lines(change: &ResourceChange) -> Vec<AttrLine> {
    let mut lines = plain_attr_lines(change);
    for l in lines.iter_mut().filter(|l| sensitive_at(sensitive_of(change), &l.path)) {
        l.text = SENSITIVE.to_string();
    }
    lines
}

/// The paths of a change derived from a sensitive variable.
pub(crate) fn sensitive_of(change: &ResourceChange) -> &[String] {
    change.sensitive.as_deref().map_or(&[], Vec::as_slice)
}

/// Is the attribute at `path` derived from a sensitive variable: at or under one of
/// `paths`, or above one (a leaf that holds it)?
pub(crate) fn sensitive_at(paths: &[String], path: &str) -> bool {
    let under = |a: &str, b: &str| a.strip_prefix(b).is_some_and(|rest| rest.is_empty() || rest.starts_with('.'));
    paths.iter().any(|p| under(path, p) || under(p, path))
}

/// A configuration as a view may show it: the value at each sensitive path replaced by
/// `(sensitive)` (`plan --json`, `state show`).
pub(crate) fn masked(config: &JsonText, paths: &[String]) -> JsonText {
    if paths.is_empty() {
        return config.clone();
    }
    let mut v = config.to_value();
    for p in paths {
        let pointer: String = p.split('.').map(|k| format!("/{}", k.replace('~', "~0").replace('/', "~1"))).collect();
        if let Some(at) = v.pointer_mut(&pointer).filter(|at| !at.is_null()) {
            *at = Json::String(SENSITIVE.to_string());
        }
    }
    JsonText::from_value(&v)
}

fn plain_attr_lines(change: &ResourceChange) -> Vec<AttrLine> {
    leaf_lines(change).unwrap_or_else(|| tree_attr_lines(change))
}

/// [`plain_attr_lines`] read from the parsed configurations: every change, any text.
pub(super) fn tree_attr_lines(change: &ResourceChange) -> Vec<AttrLine> {
    let before = change.before.as_ref().map(JsonText::to_value);
    let after = change.after.as_ref().map(JsonText::to_value);
    match (change.action, &before, &after) {
        (Action::NoOp, _, _) => vec![],
        (Action::Update | Action::Replace, Some(before), Some(after)) => changed_paths(before, after)
            .into_iter()
            .map(|path| {
                let (b, a) = (lookup(before, &path), lookup(after, &path));
                let (marker, text) = match (b, a) {
                    (None, Some(a)) => (Marker::Add, value(a)),
                    (Some(b), None) => (Marker::Remove, format!("{} -> null", value(b))),
                    (b, a) => (Marker::Change, format!("{} -> {}", or_null(b), or_null(a))),
                };
                let top = path.split('.').next().unwrap_or("");
                let forces_replacement = change.action == Action::Replace && IMMUTABLE.contains(&top);
                AttrLine { marker, path, text, forces_replacement }
            })
            .collect(),
        (_, _, Some(after)) if change.action != Action::Delete => all_leaves(change, after, Marker::Add),
        (_, Some(before), _) => all_leaves(change, before, Marker::Remove),
        _ => vec![],
    }
}

/// Every attribute of a resource created or destroyed, but those that say nothing: empty
/// ones (`lifecycle = {}`, `labels = {}`), those at the value the spec gives them when
/// they are left out, and an instance's `count` (its index is in its address).
fn all_leaves(change: &ResourceChange, v: &Json, marker: Marker) -> Vec<AttrLine> {
    let mut out = Vec::new();
    leaves(v, String::new(), &mut out);
    out.into_iter()
        .filter(|(path, v)| !is_empty(v) && !at_default(change.address.kind, path, v))
        .filter(|(path, _)| !(change.address.key.is_some() && matches!(path.as_str(), "count" | "for_each")))
        .map(|(path, v)| AttrLine { marker, path, text: value(v), forces_replacement: false })
        .collect()
}

/// [`all_leaves`] read from the configuration's text ([`super::leaf_text`]), for a
/// resource created or destroyed whose text that reading covers; `None` otherwise.
pub(super) fn leaf_lines(change: &ResourceChange) -> Option<Vec<AttrLine>> {
    let (text, marker) = match (change.action, &change.before, &change.after) {
        (Action::NoOp, _, _) | (Action::Update | Action::Replace, Some(_), Some(_)) => return None,
        (action, _, Some(after)) if action != Action::Delete => (after, Marker::Add),
        (_, Some(before), _) => (before, Marker::Remove),
        _ => return None,
    };
    let kind = change.address.kind;
    let keyed = change.address.key.is_some();
    let lines = super::leaf_text::leaves(text.as_str())?
        .into_iter()
        .filter(|(path, v)| !matches!(v.as_str(), "\"\"" | "[]" | "{}" | "null") && !text_at_default(kind, path, v))
        .filter(|(path, _)| !(keyed && matches!(path.as_str(), "count" | "for_each")))
        .map(|(path, text)| AttrLine { marker, path, text, forces_replacement: false })
        .collect();
    Some(lines)
}

/// [`at_default`] of a leaf's canonical text (the defaults are written canonically).
fn text_at_default(kind: Kind, path: &str, v: &str) -> bool {
    (path == "lifecycle.prevent_destroy" && v == "false")
        || DEFAULTS.iter().any(|(k, p, d)| *k == kind && *p == path && *d == v)
}

fn is_empty(v: &Json) -> bool {
    match v {
        Json::Array(a) => a.is_empty(),
        Json::Object(o) => o.is_empty(),
        Json::String(s) => s.is_empty(),
        Json::Null => true,
        _ => false,
    }
}

/// The values the spec gives attributes left out (`spec/blocks.rs`), by kind and path.
const DEFAULTS: &[(Kind, &str, &str)] = &[
    (Kind::GpuPool, "nodes.min", "0"),
    (Kind::GpuPool, "mix.on_demand_base", "0"),
    (Kind::GpuPool, "mix.spot_percent", "0"),
    (Kind::GpuPool, "mix.fallback", "\"on_demand\""),
    (Kind::JobTemplate, "gpus", "1"),
    (Kind::JobTemplate, "priority", "\"medium\""),
    (Kind::JobTemplate, "preemptible", "false"),
    (Kind::JobTemplate, "retries", "0"),
    (Kind::Job, "replicas", "1"),
];

/// Is `v` the value the spec gives the attribute at `path` when it is left out?
/// `lifecycle.prevent_destroy` is off unless set, whatever the kind.
fn at_default(kind: Kind, path: &str, v: &Json) -> bool {
    if path == "lifecycle.prevent_destroy" && *v == Json::Bool(false) {
        return true;
    }
    DEFAULTS.iter().any(|(k, p, d)| *k == kind && *p == path && serde_json::from_str::<Json>(d).is_ok_and(|d| d == *v))
}

/// Leaf paths in key order; arrays, scalars and empty objects are leaves.
fn leaves<'a>(v: &'a Json, path: String, out: &mut Vec<(String, &'a Json)>) {
    match v {
        // A secret reference is one leaf, printed `(secret: …)` by `value`.
        Json::Object(map) if !map.is_empty() && SecretRef::in_json(v).is_none() => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            for k in keys {
                let p = if path.is_empty() { k.clone() } else { format!("{path}.{k}") };
                leaves(&map[k.as_str()], p, out);
            }
        }
        Json::Null => {}
        _ => out.push((path, v)),
    }
}

/// The value at a dotted path; `null` counts as absent, as it does in `changed_paths`.
fn lookup<'a>(v: &'a Json, path: &str) -> Option<&'a Json> {
    let mut cur = v;
    for part in path.split('.') {
        cur = cur.as_object()?.get(part)?;
    }
    (!cur.is_null()).then_some(cur)
}

fn or_null(v: Option<&Json>) -> String {
    v.map(value).unwrap_or_else(|| "null".into())
}

/// One policy verdict as the views show it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Verdict {
    pub name: String,
    pub enforcement: String,
    /// `None` when the verdict does not say (shown as unknown, never as passed).
    pub passed: Option<bool>,
    pub message: String,
    /// A soft failure accepted with `--override-policy` (failed, but does not block).
    pub overridden: bool,
    /// Passed, but close to a limit (quota warnings).
    pub warning: bool,
    /// Failed on the fleet as it stands, before the plan.
    pub standing: bool,
    /// The plan changes nothing, so a standing failure blocks nothing.
    pub unchanged: bool,
}

impl Verdict {
    /// Passed, not near a limit, not overridden: only counted unless asked for.
    pub(crate) fn is_plain_pass(&self) -> bool {
        self.passed == Some(true) && !self.warning && !self.overridden
    }

    /// A soft or hard failure of the fleet as it stands, in a plan that changes nothing:
    /// shown as a warning, not a denial.
    pub(crate) fn is_standing_warning(&self) -> bool {
        self.passed == Some(false) && self.standing && self.unchanged && self.rank() == 2
    }

    /// Display order: what blocks the plan first (hard, then soft failures), then what
    /// does not block it (standing, overridden and advisory failures), what is unknown,
    /// what is near a limit, what passed.
    pub(crate) fn rank(&self) -> u8 {
        match self.passed {
            Some(false) if self.overridden => 3,
            Some(false) => match self.enforcement.as_str() {
                "hard" | "soft" if self.standing && self.unchanged => 2,
                "hard" => 0,
                "soft" => 1,
                _ => 4,
            },
            None => 5,
            Some(true) if self.warning => 6,
            Some(true) => 7,
        }
    }

    /// `soft`, `soft, standing` (a plan without changes), `soft, failing before this
    /// change`, `soft, overridden`.
    pub(crate) fn enforcement_note(&self) -> String {
        let extra = if self.overridden {
            ", overridden"
        } else if self.passed == Some(false) && self.standing && self.unchanged {
            ", standing"
        } else if self.passed == Some(false) && self.standing {
            ", failing before this change"
        } else {
            ""
        };
        format!("{}{extra}", self.enforcement)
    }
}

/// `12 passed, 1 soft failure`: the passes counted (unless none did), then each kind of
/// failure. Warnings (passed, near a limit) count as passed and are said in brackets.
pub(crate) fn verdict_counts(verdicts: &[Verdict]) -> String {
    let count = |rank: u8| verdicts.iter().filter(|v| v.rank() == rank).count();
    let (warned, passed) = (count(6), count(6) + count(7));
    let mut parts = Vec::new();
    if passed > 0 {
        let near = if warned > 0 { format!(" ({warned} near a limit)") } else { String::new() };
        parts.push(format!("{passed} passed{near}"));
    }
    for (rank, one, many) in [
        (0, "hard failure", "hard failures"),
        (1, "soft failure", "soft failures"),
        (2, "standing failure", "standing failures"),
        (3, "overridden soft failure", "overridden soft failures"),
        (4, "advisory failure", "advisory failures"),
        (5, "unknown", "unknown"),
    ] {
        let n = count(rank);
        if n > 0 {
            parts.push(plural(n, one, many));
        }
    }
    parts.join(", ")
}

pub(crate) fn verdicts(plan: &Plan) -> Vec<Verdict> {
    let unchanged = !plan.has_changes();
    plan.policies
        .iter()
        .map(|p| Verdict {
            name: p.name.clone(),
            enforcement: p.enforcement.as_str().to_string(),
            passed: Some(p.passed),
            message: p.message.clone(),
            overridden: p.overridden,
            warning: p.warning,
            standing: p.standing,
            unchanged,
        })
        .collect()
}

/// What a plan launches, terminates and requeues: the counts that cost money and
/// interrupt work, beside Terraform's resource counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct Tally {
    /// Pool nodes created, plus the nodes job launches boot (cloud VM pools).
    pub nodes_launch: usize,
    /// Pool nodes removed, plus the nodes of ended job runs and job nodes no run owns.
    pub nodes_terminate: usize,
    /// Jobs launched without stopping a run first.
    pub jobs_launch: usize,
    /// Jobs whose runs this plan stops (a node removed, a preemption): they go back to
    /// the queue, launched again at once or waiting.
    pub jobs_requeue: usize,
    /// Jobs that wait (quota, capacity, priority, dependency) and are not requeued.
    pub jobs_waiting: usize,
}

impl Tally {
    pub(crate) fn of(plan: &Plan) -> Tally {
        let mut t = Tally::default();
        for pool in plan.changes.iter().filter(|c| c.action != Action::NoOp).filter_map(|c| c.pool.as_ref()) {
            t.nodes_launch += pool.creates.iter().map(|b| b.count as usize).sum::<usize>();
            t.nodes_terminate += pool.deletes.len();
        }
        for j in &plan.jobs {
            let requeued = !j.interrupted.is_empty() || j.placement == Placement::Preempt;
            t.jobs_requeue += usize::from(requeued);
            t.jobs_launch += usize::from(!requeued && j.needs_launch());
            t.jobs_waiting += usize::from(!requeued && j.placement == Placement::Waiting);
            t.nodes_launch += j.launches.iter().filter(|l| l.request.shape.is_some()).count();
            t.nodes_terminate += j.nodes_to_release().count();
        }
        t.nodes_terminate += plan.orphan_job_nodes.len();
        t
    }

    /// Anything for the `Jobs:` part of the summary to say.
    pub(crate) fn has_jobs(&self) -> bool {
        self.jobs_launch + self.jobs_requeue + self.jobs_waiting > 0
    }
}

/// `1 to add, 1 to change, 0 to destroy. Nodes: 3 to launch, 1 to terminate. Jobs: 1 to
/// launch, 1 to requeue` (the `Plan:` label and the last full stop are the caller's).
/// `Nodes:` is always said; `Jobs:` when a job launches, requeues or waits, with `N
/// waiting` only when some do.
pub(crate) fn summary_counts(plan: &Plan) -> String {
    let s = &plan.summary;
    let t = Tally::of(plan);
    let import = if s.import > 0 { format!("{} to import, ", s.import) } else { String::new() };
    let mut out = format!(
        "{import}{} to add, {} to change, {} to destroy. Nodes: {} to launch, {} to terminate",
        s.add, s.change, s.destroy, t.nodes_launch, t.nodes_terminate
    );
    let cordons = plan.cordons().count();
    if cordons > 0 {
        out += &format!(", {cordons} to cordon");
    }
    if t.has_jobs() {
        out += &format!(". Jobs: {} to launch, {} to requeue", t.jobs_launch, t.jobs_requeue);
        if t.jobs_waiting > 0 {
            out += &format!(", {} waiting", t.jobs_waiting);
        }
    }
    out
}

/// `1 change`, `37 changes`.
pub(crate) fn plural(n: usize, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

/// The lineage names derived from it (placement groups) are made under: the state's, or
/// `None` while no state exists (serial 0). Such a plan's lineage is its own, kept only by
/// applying the plan saved (`plan --out`, `engine::run::begin_state_of`); an `apply`
/// without one plans again under another, so the names are known only after apply.
pub(crate) fn state_lineage(plan: &crate::plan::Plan) -> Option<&str> {
    (plan.serial > 0).then_some(plan.lineage.as_str())
}

/// A create batch's disks, fabric and group, as its plan line ends:
/// `, disks root 500 GB gp3, data 2000 GB gp3, fabric efa, placement group gpuplan-…`; the
/// group named by the pool's cloud's word (`provider_kind`: `HPC cluster` on Tencent
/// Cloud), and `placement group (known after apply)` where the name is not known yet
/// (`names_known`, see [`state_lineage`]).
pub(crate) fn hardware(h: &crate::model::hardware::Hardware, provider_kind: &str, names_known: bool) -> String {
    let mut out = String::new();
    if let Some(d) = &h.disks {
        out += &format!(", disks {d}");
    }
    if let Some(f) = h.fabric {
        out += &format!(", fabric {f}");
    }
    if let Some(g) = &h.placement_group {
        let noun = crate::model::hardware::group_noun(provider_kind);
        if names_known {
            out += &format!(", {noun} {g}");
        } else {
            out += &format!(", {noun} (known after apply)");
        }
    }
    out
}
