//! The machine view of a plan (`plan --json`) and of drift (`drift --json`).
//!
//! Top-level keys of [`plan_json`], always all present:
//!
//! - the contract in `docs/design/files.md`: `format_version`, `changes`, `drift`, `cost` (the cost
//!   object `{hourly_before, hourly_after, monthly_delta, currency}` as `cost/` fills it,
//!   or `null` before it has run), `policies` (`[{name, enforcement, passed, message}]`
//!   as `policy/` fills them), `summary` (`{add, change, destroy, import, nodes_launch,
//!   nodes_terminate, jobs_launch, jobs_requeue}`; `import` only when some);
//! - extras for scripts: `errors` (`[{address, message, hint, location}]`: the plan cannot be
//!   applied while this is non-empty), `lineage` and `serial` (the prior state the plan
//!   was made against), `refreshed` (false with `--refresh=false`), `targets`, `replace`
//!   when `--replace` named pools (their addresses), and
//!   `jobs` when the plan has any (`[{address, pool, quota, priority, preemptible, replicas, gpus_per_replica,
//!   gpus, placement, capacity, attempt, retries, retries_spent, before, after, reason,
//!   first_seen, waiting_since, launches}]` in admission order; `placement` is `launch`,
//!   `waiting`, `running`, `preempt`, `succeeded`, `failed` or `cancelled`; `before` and
//!   `after` are what the job is before and once the plan is applied (`new`, `pending`,
//!   `running`, `requeued`, `succeeded`, `failed`, `cancelled`); `reason` is `{code,
//!   message}`: `node_removed` when a node removal interrupts it (with `interrupted`),
//!   `removal_deferred` when its node stays for it, else why it waits (`quota`,
//!   `capacity`, `priority`, `dependency`); `output_changes` when the spec or the state has
//!   outputs (`{NAME: {actions, before, after, before_sensitive, after_sensitive}}`, as
//!   Terraform's; a sensitive value is `null`); `variables` when the plan is saved
//!   (`{NAME: {value, from, sensitive}}`, `render::variables`; `"(sensitive)"` for a
//!   sensitive variable's value).
//!
//! Each change is `{address, action, before, after, reasons}` where `reasons` are objects
//! `{code, message}` (the code is stable, the message is for people), plus `pool` for GPU
//! pools (node counts before/after and the node operations) and `depends_on`, and
//! `sensitive` (the paths derived from a sensitive variable, printed `"(sensitive)"` in
//! `before` and `after`) when there are any. Every change is listed, `no-op` ones
//! included, ordered by address.

use std::borrow::Cow;
use std::fmt::Display;
use std::io::Write;

use schemars::JsonSchema;
use serde::{Serialize, Serializer};
use serde_json::{Value as Json, json};

use crate::json_text::JsonText;
use crate::plan::model::{DriftItem, NodeCounts, Plan, PoolChange, ResourceChange};
use crate::plan::report::{CostReport, PolicyResult};
use crate::render::facts;

/// The `plan --json` document as a tree (tests, and reports that embed it). Large plans
/// should be written with [`write_plan_json`], which never builds the tree.
pub fn plan_json(plan: &Plan) -> Json {
    serde_json::to_value(PlanDoc::new(plan)).unwrap_or(Json::Null)
}

/// Write the `plan --json` document, pretty-printed with a final newline, streaming: at
/// 100,000 pools its tree would take GBs, the text goes out as it is made. The bytes are
/// those of [`plan_json`] printed with `{:#}`.
pub fn write_plan_json(plan: &Plan, out: impl Write) -> std::io::Result<()> {
    let mut out = std::io::BufWriter::new(out);
    serde_json::to_writer_pretty(&mut out, &PlanDoc::new(plan))?;
    out.write_all(b"\n")?;
    out.flush()
}

/// The JSON Schema of the `plan --json` document (`schemas/plan.schema.json`), generated
/// from the very structs that write it.
pub fn plan_schema(generator: schemars::SchemaGenerator) -> schemars::Schema {
    generator.into_root_schema_for::<PlanDoc<'static>>()
}

/// The `plan --json` document as a value to serialize, for documents that embed it and
/// are streamed too (`reconcile --json`).
pub fn plan_document(plan: &Plan) -> impl Serialize + '_ {
    PlanDoc::new(plan)
}

// The document's structs list their fields in key order: a `Value` object sorts its keys,
// and the streamed text must be the same as the tree's.

#[derive(Serialize, JsonSchema)]
struct PlanDoc<'a> {
    /// Imports (one entry per instance), moves and forgets; absent when none.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    adoptions: Vec<super::adopt::AdoptionDoc>,
    changes: Vec<ChangeDoc<'a>>,
    /// `null` until `cost/` has run.
    cost: &'a Option<CostReport>,
    drift: Vec<DriftDoc<'a>>,
    errors: Vec<ErrorDoc<'a>>,
    format_version: u32,
    /// Unhealthy nodes with their evidence and fate: `{address, node, signal, gpu, xid,
    /// seen, action, held_by, evidence}` (absent when none; docs/design/gpu-health.md).
    // A tree (a few entries), so its keys are sorted as `plan_json`'s are.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Option<Vec<serde_json::Value>>")]
    health: Option<Json>,
    /// Present when the plan has jobs (see the module docs for the fields).
    #[serde(skip_serializing_if = "Option::is_none")]
    jobs: Option<Json>,
    lineage: &'a str,
    /// What the reader should know that is not a change (a pool in its fallback placement).
    #[serde(skip_serializing_if = "Option::is_none")]
    notes: Option<Vec<NoteDoc<'a>>>,
    /// Every output of the spec or the state with what the plan does to it (Terraform's
    /// `{actions, before, after, before_sensitive, after_sensitive}`); absent when none.
    #[serde(skip_serializing_if = "Option::is_none")]
    output_changes: Option<std::collections::BTreeMap<&'a str, super::outputs::OutputChangeDoc>>,
    /// Each floating pool's candidates, prices, capacity and choice.
    // A tree (a few entries), so its keys are sorted as `plan_json`'s are.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Option<Vec<crate::plan::model::PlacementDecision>>")]
    placements: Option<Json>,
    policies: &'a [PolicyResult],
    refreshed: bool,
    /// `--replace` addresses (absent when none).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Option<Vec<String>>")]
    replace: Option<Vec<Shown<'a>>>,
    /// Every reservation with what it commits (`{address, action, kind, instance_type,
    /// count, zone, start, end, commitment_usd, usd_per_hour, cancellable, used}`);
    /// absent when none.
    #[serde(skip_serializing_if = "Option::is_none")]
    reservations: Option<Vec<Json>>,
    serial: u64,
    /// Month-to-date spend from the ledger, when the plan was refreshed and there is one.
    #[serde(skip_serializing_if = "Option::is_none")]
    spend: &'a Option<crate::state::spend::SpendReport>,
    summary: SummaryDoc,
    #[schemars(with = "Vec<String>")]
    targets: Vec<Shown<'a>>,
    /// When a saved plan was made (RFC 3339, UTC), as Terraform's plan document says;
    /// absent from a plan not saved, and from a plan file that did not record it.
    #[serde(skip_serializing_if = "Option::is_none")]
    timestamp: Option<&'a str>,
    /// A saved plan's variables as planned, by name: `{value, from, sensitive}`, the value
    /// `"(sensitive)"` for a sensitive one (absent from a plan not saved).
    #[serde(skip_serializing_if = "Option::is_none")]
    variables: Option<std::collections::BTreeMap<&'a str, super::variables::VariableDoc<'a>>>,
}

impl<'a> PlanDoc<'a> {
    fn new(plan: &'a Plan) -> Self {
        PlanDoc {
            adoptions: super::adopt::docs(plan),
            changes: facts::sorted_changes(plan).into_iter().map(|c| ChangeDoc::new(c, &plan.lineage)).collect(),
            cost: &plan.cost,
            drift: drift_docs(&plan.drift),
            health: (!plan.health.is_empty()).then(|| serde_json::to_value(&plan.health).unwrap_or(Json::Null)),
            errors: plan
                .errors
                .iter()
                .map(|e| ErrorDoc {
                    address: Shown(&e.address),
                    hint: &e.hint,
                    location: &e.location,
                    message: &e.message,
                })
                .collect(),
            format_version: crate::plan::model::FORMAT_VERSION,
            jobs: (!plan.jobs.is_empty()).then(|| super::jobs::json(plan)),
            lineage: &plan.lineage,
            notes: (!plan.notes.is_empty()).then(|| {
                plan.notes.iter().map(|n| NoteDoc { address: Shown(&n.address), message: &n.message }).collect()
            }),
            output_changes: (!plan.outputs.is_empty()).then(|| super::outputs::docs(plan)),
            placements: (!plan.placements.is_empty())
                .then(|| serde_json::to_value(&plan.placements).unwrap_or(Json::Null)),
            policies: &plan.policies,
            refreshed: plan.refreshed,
            reservations: (!plan.reservations.is_empty()).then(|| plan.reservations.iter().map(|r| r.doc()).collect()),
            serial: plan.serial,
            spend: &plan.spend,
            summary: SummaryDoc::new(plan),
            targets: plan.targets.iter().map(|t| Shown(t)).collect(),
            replace: (!plan.replace.is_empty()).then(|| plan.replace.iter().map(|t| Shown(t)).collect()),
            timestamp: plan.inputs.as_ref().and_then(|i| i.made_at.as_deref()),
            variables: super::variables::docs(plan),
        }
    }
}

/// A value serialized as its `Display` text (addresses), without an intermediate `String`.
struct Shown<'a>(&'a dyn Display);

impl Serialize for Shown<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self.0)
    }
}

/// Terraform's resource counts, then what costs money and interrupts work (the text
/// view's `Nodes:` and `Jobs:` counts).
#[derive(Serialize, JsonSchema)]
struct SummaryDoc {
    add: usize,
    change: usize,
    destroy: usize,
    /// Instances to import; absent when none.
    #[serde(default, skip_serializing_if = "is_zero")]
    import: usize,
    /// Jobs launched without stopping a run first.
    jobs_launch: usize,
    /// Jobs whose runs the plan stops (a node removed, a preemption), to run again.
    jobs_requeue: usize,
    /// Nodes launched: pool nodes, and nodes that job launches boot.
    nodes_launch: usize,
    /// Nodes terminated: pool nodes, nodes of ended job runs, job nodes no run owns.
    nodes_terminate: usize,
}

impl SummaryDoc {
    fn new(plan: &Plan) -> Self {
        let t = facts::Tally::of(plan);
        SummaryDoc {
            add: plan.summary.add,
            change: plan.summary.change,
            destroy: plan.summary.destroy,
            import: plan.summary.import,
            jobs_launch: t.jobs_launch,
            jobs_requeue: t.jobs_requeue,
            nodes_launch: t.nodes_launch,
            nodes_terminate: t.nodes_terminate,
        }
    }
}

fn is_zero(n: &usize) -> bool {
    *n == 0
}

#[derive(Serialize, JsonSchema)]
struct ErrorDoc<'a> {
    #[schemars(with = "String")]
    address: Shown<'a>,
    hint: &'a Option<String>,
    /// `file:line:col` of the spec block, when the spec has one.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Option<String>")]
    location: &'a Option<String>,
    message: &'a str,
}

#[derive(Serialize, JsonSchema)]
struct DriftDoc<'a> {
    #[schemars(with = "String")]
    address: Shown<'a>,
    kind: crate::plan::model::DriftKind,
    message: &'a str,
    node_id: &'a Option<String>,
}

fn drift_docs(drift: &[DriftItem]) -> Vec<DriftDoc<'_>> {
    let mut items: Vec<&DriftItem> = drift.iter().collect();
    items.sort_by(|a, b| a.address.cmp(&b.address));
    items
        .into_iter()
        .map(|d| DriftDoc { address: Shown(&d.address), kind: d.kind, message: &d.message, node_id: &d.node_id })
        .collect()
}

#[derive(Serialize, JsonSchema)]
struct ChangeDoc<'a> {
    #[schemars(with = "crate::plan::Action")]
    action: &'static str,
    #[schemars(with = "String")]
    address: Shown<'a>,
    /// The configuration once applied; `"(sensitive)"` at each of `sensitive`.
    #[schemars(with = "Option<serde_json::Value>")]
    after: Option<Cow<'a, JsonText>>,
    #[schemars(with = "Option<serde_json::Value>")]
    before: Option<Cow<'a, JsonText>>,
    #[schemars(with = "Vec<String>")]
    depends_on: Vec<Shown<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pool: Option<PoolDoc<'a>>,
    reasons: Vec<ReasonDoc<'a>>,
    /// Paths of `before` and `after` derived from a sensitive variable (`env.HF_TOKEN`).
    #[serde(default, skip_serializing_if = "<[String]>::is_empty")]
    sensitive: &'a [String],
}

impl<'a> ChangeDoc<'a> {
    fn new(c: &'a ResourceChange, lineage: &str) -> Self {
        ChangeDoc {
            action: c.action.as_str(),
            address: Shown(&c.address),
            after: c.after.as_ref().map(|t| shown_config(t, facts::sensitive_of(c))),
            before: c.before.as_ref().map(|t| shown_config(t, facts::sensitive_of(c))),
            depends_on: c.after_changes.iter().map(|a| Shown(a)).collect(),
            pool: c.pool.as_ref().map(|p| PoolDoc::new(p, crate::plan::groups_to_delete(lineage, c))),
            reasons: c.reasons.iter().map(|r| ReasonDoc { code: &r.code, message: &r.message }).collect(),
            sensitive: facts::sensitive_of(c),
        }
    }
}

/// A configuration as `plan --json` prints it: borrowed, or masked where sensitive.
fn shown_config<'a>(config: &'a JsonText, sensitive: &[String]) -> Cow<'a, JsonText> {
    if sensitive.is_empty() { Cow::Borrowed(config) } else { Cow::Owned(facts::masked(config, sensitive)) }
}

#[derive(Serialize, JsonSchema)]
struct NoteDoc<'a> {
    #[schemars(with = "String")]
    address: Shown<'a>,
    message: &'a str,
}

#[derive(Serialize, JsonSchema)]
struct ReasonDoc<'a> {
    #[schemars(with = "String")]
    code: &'a crate::plan::model::ReasonCode,
    message: &'a str,
}

#[derive(Serialize, JsonSchema)]
struct PoolDoc<'a> {
    adopt: Vec<&'a str>,
    after: CountsDoc,
    before: CountsDoc,
    create_before_destroy: bool,
    creates: Vec<CreateDoc<'a>>,
    /// Removals deferred until the job on the node (not preemptible) ends; absent: none.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    #[schemars(default)]
    deferred: Vec<DeferredDoc<'a>>,
    deletes: Vec<DeleteDoc<'a>>,
    /// Cluster placement groups apply deletes after the pool's nodes (a pool removed or
    /// destroyed); absent: none.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    #[schemars(default)]
    delete_groups: Vec<String>,
    forget: &'a [String],
    gpu: &'a str,
    provider: &'a str,
    provider_kind: &'a str,
    region: &'a str,
}

impl<'a> PoolDoc<'a> {
    fn new(p: &'a PoolChange, delete_groups: Vec<String>) -> Self {
        PoolDoc {
            adopt: p.adopt.iter().map(|n| n.id.as_str()).collect(),
            after: CountsDoc::new(&p.after),
            before: CountsDoc::new(&p.before),
            create_before_destroy: p.create_before_destroy,
            creates: p
                .creates
                .iter()
                .map(|b| CreateDoc {
                    capacity: b.capacity,
                    count: b.count,
                    instance_types: &b.instance_types,
                    zone: &b.zone,
                    zones: &b.zones,
                    hardware: b.hardware.as_deref(),
                    reservation: b.reservation.as_deref(),
                })
                .collect(),
            deferred: p
                .deferred
                .iter()
                .map(|d| DeferredDoc {
                    capacity: d.capacity,
                    id: &d.id,
                    job: Shown(&d.job),
                    reason: &d.reason,
                    zone: &d.zone,
                })
                .collect(),
            deletes: p
                .deletes
                .iter()
                .map(|d| DeleteDoc {
                    capacity: d.capacity,
                    id: &d.id,
                    instance_type: &d.instance_type,
                    provider: d.provider.as_deref(),
                    reason: &d.reason,
                    region: d.region.as_deref(),
                    zone: &d.zone,
                })
                .collect(),
            delete_groups,
            forget: &p.forget,
            gpu: &p.gpu,
            provider: &p.provider,
            provider_kind: &p.provider_kind,
            region: &p.region,
        }
    }
}

#[derive(Serialize, JsonSchema)]
struct CreateDoc<'a> {
    capacity: crate::providers::Capacity,
    count: u32,
    instance_types: &'a [String],
    zone: &'a str,
    /// Every zone the provider may place the batch in (EC2 fleets); absent: `zone` alone.
    #[serde(skip_serializing_if = "<[String]>::is_empty")]
    #[schemars(default)]
    zones: &'a [String],
    /// Disks, fabric and placement group (`disk {}`, `network {}`); absent: the cloud's
    /// defaults.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(default)]
    hardware: Option<&'a crate::model::hardware::Hardware>,
    /// The reservation the batch launches into (`capacity {}`); absent: the open market.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(default)]
    reservation: Option<&'a crate::model::reservation::ReservationTarget>,
}

#[derive(Serialize, JsonSchema)]
struct DeleteDoc<'a> {
    capacity: crate::providers::Capacity,
    id: &'a str,
    instance_type: &'a str,
    /// The provider block the node lives in, when it is not the pool's (a floating pool
    /// moving to another provider block).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(default)]
    provider: Option<&'a str>,
    reason: &'a str,
    /// The node's region, when it is not the pool's (a floating pool moving away).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(default)]
    region: Option<&'a str>,
    zone: &'a str,
}

#[derive(Serialize, JsonSchema)]
struct DeferredDoc<'a> {
    capacity: crate::providers::Capacity,
    id: &'a str,
    /// The job that keeps the node until it ends.
    #[schemars(with = "String")]
    job: Shown<'a>,
    reason: &'a str,
    zone: &'a str,
}

#[derive(Serialize, JsonSchema)]
struct CountsDoc {
    gpus: u64,
    gpus_per_node: u32,
    nodes: u32,
    on_demand: u32,
    spot: u32,
}

impl CountsDoc {
    fn new(c: &NodeCounts) -> Self {
        CountsDoc {
            gpus: c.gpus(),
            gpus_per_node: c.gpus_per_node,
            nodes: c.nodes(),
            on_demand: c.on_demand,
            spot: c.spot,
        }
    }
}

/// The `drift --json` document: `{format_version, drift: [{address, kind, node_id,
/// message}], summary: {items, resources}}`.
pub fn drift_json(drift: &[DriftItem]) -> Json {
    let mut resources: Vec<_> = drift.iter().map(|d| &d.address).collect();
    resources.sort();
    resources.dedup();
    json!({
        "format_version": crate::plan::model::FORMAT_VERSION,
        "drift": drift_docs(drift),
        "summary": { "items": drift.len(), "resources": resources.len() },
    })
}
