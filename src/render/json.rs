//! The machine view of a plan (`plan --json`) and of drift (`drift --json`).
//!
//! Top-level keys of [`plan_json`], always all present:
//!
//! - the contract in DESIGN.md: `format_version`, `changes`, `drift`, `cost` (the cost
//!   object `{hourly_before, hourly_after, monthly_delta, currency}` as `cost/` fills it,
//!   or `null` before it has run), `policies` (`[{name, enforcement, passed, message}]`
//!   as `policy/` fills them), `summary` (`{add, change, destroy}`);
//! - extras for scripts: `errors` (`[{address, message, hint}]`: the plan cannot be
//!   applied while this is non-empty), `lineage` and `serial` (the prior state the plan
//!   was made against), `refreshed` (false with `--refresh=false`), `targets`, and
//!   `jobs` when the plan has any (`[{address, pool, quota, priority, preemptible, replicas, gpus_per_replica,
//!   gpus, placement, capacity, attempt, retries, reason, first_seen, waiting_since,
//!   launches}]` in admission order; `placement` is `launch`, `waiting`, `running`,
//!   `succeeded`, `failed` or `cancelled`; `reason` is `{code, message}` with code
//!   `quota`, `capacity` or `priority` when the job waits).
//!
//! Each change is `{address, action, before, after, reasons}` where `reasons` are objects
//! `{code, message}` (the code is stable, the message is for people), plus `pool` for GPU
//! pools (node counts before/after and the node operations) and `depends_on`. Every change
//! is listed, `no-op` ones included, ordered by address.

use serde_json::{Value as Json, json};

use crate::plan::model::{DriftItem, NodeCounts, Plan, PoolChange, ResourceChange};
use crate::render::facts;

/// The `plan --json` document.
pub fn plan_json(plan: &Plan) -> Json {
    let mut doc = json!({
        "format_version": plan.format_version,
        "changes": facts::sorted_changes(plan).into_iter().map(change).collect::<Vec<_>>(),
        "drift": drift_items(&plan.drift),
        "cost": plan.cost,
        "policies": plan.policies,
        "summary": {
            "add": plan.summary.add,
            "change": plan.summary.change,
            "destroy": plan.summary.destroy,
        },
        "errors": plan.errors.iter().map(|e| json!({
            "address": e.address.to_string(),
            "message": e.message,
            "hint": e.hint,
        })).collect::<Vec<_>>(),
        "lineage": plan.lineage,
        "serial": plan.serial,
        "refreshed": plan.refreshed,
        "targets": plan.targets.iter().map(ToString::to_string).collect::<Vec<_>>(),
    });
    if !plan.jobs.is_empty() {
        doc["jobs"] = super::jobs::json(plan);
    }
    doc
}

/// The `drift --json` document: `{format_version, drift: [{address, kind, node_id,
/// message}], summary: {items, resources}}`.
pub fn drift_json(drift: &[DriftItem]) -> Json {
    let mut resources: Vec<_> = drift.iter().map(|d| &d.address).collect();
    resources.sort();
    resources.dedup();
    json!({
        "format_version": crate::plan::model::FORMAT_VERSION,
        "drift": drift_items(drift),
        "summary": { "items": drift.len(), "resources": resources.len() },
    })
}

fn drift_items(drift: &[DriftItem]) -> Vec<Json> {
    let mut items: Vec<&DriftItem> = drift.iter().collect();
    items.sort_by(|a, b| a.address.cmp(&b.address));
    items
        .into_iter()
        .map(|d| {
            json!({
                "address": d.address.to_string(),
                "kind": d.kind,
                "node_id": d.node_id,
                "message": d.message,
            })
        })
        .collect()
}

fn change(c: &ResourceChange) -> Json {
    let mut v = json!({
        "address": c.address.to_string(),
        "action": c.action.as_str(),
        "before": c.before,
        "after": c.after,
        "reasons": c.reasons.iter().map(|r| json!({"code": r.code, "message": r.message})).collect::<Vec<_>>(),
        "depends_on": c.after_changes.iter().map(ToString::to_string).collect::<Vec<_>>(),
    });
    if let Some(pool) = &c.pool {
        v["pool"] = pool_json(pool);
    }
    v
}

fn pool_json(p: &PoolChange) -> Json {
    json!({
        "provider": p.provider,
        "provider_kind": p.provider_kind,
        "region": p.region,
        "gpu": p.gpu,
        "before": counts(&p.before),
        "after": counts(&p.after),
        "creates": p.creates.iter().map(|b| json!({
            "zone": b.zone,
            "capacity": b.capacity,
            "count": b.count,
            "instance_types": b.instance_types,
        })).collect::<Vec<_>>(),
        "deletes": p.deletes.iter().map(|d| json!({
            "id": d.id,
            "zone": d.zone,
            "instance_type": d.instance_type,
            "capacity": d.capacity,
            "reason": d.reason,
        })).collect::<Vec<_>>(),
        "adopt": p.adopt.iter().map(|n| n.id.as_str()).collect::<Vec<_>>(),
        "forget": p.forget,
        "create_before_destroy": p.create_before_destroy,
    })
}

fn counts(c: &NodeCounts) -> Json {
    json!({
        "on_demand": c.on_demand,
        "spot": c.spot,
        "gpus_per_node": c.gpus_per_node,
        "nodes": c.nodes(),
        "gpus": c.gpus(),
    })
}
