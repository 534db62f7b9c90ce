//! The `plan` object policies see: cost, pools, quotas, changes and the summary, built
//! from the plan, its cost and the spec. Names are documented in `policies/README.md`.

use std::collections::BTreeMap;

use crate::cost::{CostReport, PoolCost, QuotaCost};
use crate::jobs::running::RunningJobs;
use crate::plan::model::PoolChange;
use crate::plan::{Action, Plan, ResourceChange};
use crate::spec::Spec;
use crate::spec::eval::Value;

fn num(n: impl Into<f64>) -> Value {
    Value::Number(n.into())
}

fn s(x: impl Into<String>) -> Value {
    Value::String(x.into())
}

/// `plan.cost`, `plan.pools` (by address), `plan.quotas` (by address), `plan.changes`,
/// `plan.summary`. `running` says which jobs run on each pool now (from state).
pub fn plan_value(plan: &Plan, cost: &CostReport, spec: &Spec, running: &RunningJobs) -> Value {
    let mut pools = BTreeMap::new();
    let costs: BTreeMap<&crate::addr::Address, &PoolCost> = cost.pools.iter().map(|p| (&p.address, p)).collect();
    for c in &plan.changes {
        let Some(pc) = &c.pool else { continue };
        pools.insert(c.address.to_string(), pool_fact(c, pc, costs.get(&c.address).copied(), spec, running));
    }
    let mut quotas = BTreeMap::new();
    for q in &cost.quotas {
        quotas.insert(q.address.to_string(), quota_fact(q, spec));
    }
    let changes = plan
        .changes
        .iter()
        .map(|c| {
            let mut o = BTreeMap::new();
            o.insert("address".into(), s(c.address.to_string()));
            o.insert("kind".into(), s(c.address.kind.as_str()));
            o.insert("action".into(), s(c.action.as_str()));
            Value::Object(o)
        })
        .collect();
    let mut summary = BTreeMap::new();
    summary.insert("add".into(), num(plan.summary.add as f64));
    summary.insert("change".into(), num(plan.summary.change as f64));
    summary.insert("destroy".into(), num(plan.summary.destroy as f64));
    summary.insert("import".into(), num(plan.summary.import as f64));
    // Per-pool and per-quota cost is already under `plan.pools` / `plan.quotas`; copying
    // it again here would double the facts for a large fleet.
    let mut cost_value = serde_json::to_value(cost.clone_summary()).map(|j| Value::from_json(&j)).unwrap_or_default();
    if let Value::Object(o) = &mut cost_value {
        o.remove("pools");
        o.remove("quotas");
    }
    let mut root = BTreeMap::new();
    root.insert("cost".into(), cost_value);
    root.insert("pools".into(), Value::Object(pools));
    root.insert("quotas".into(), Value::Object(quotas));
    root.insert("changes".into(), Value::List(changes));
    root.insert("summary".into(), Value::Object(summary));
    // Floating pools this plan moves to another candidate (docs/design/floating-pools.md).
    let moves = plan.placements.iter().filter(|p| p.action == crate::plan::model::PlacementAction::Move).count();
    root.insert("moves".into(), num(moves as f64));
    // Reservations by address (docs/design/big-runs.md), as `plan --json` lists them.
    let reservations = plan.reservations.iter().map(|r| (r.address.to_string(), Value::from_json(&r.doc()))).collect();
    root.insert("reservations".into(), Value::Object(reservations));
    Value::Object(root)
}

/// `plan.pools[ADDRESS]`: one pool's change, its cost before and after (and at the peak of
/// a move), its labels and the jobs running on it.
fn pool_fact(
    c: &ResourceChange,
    pc: &PoolChange,
    pc_cost: Option<&PoolCost>,
    spec: &Spec,
    running: &RunningJobs,
) -> Value {
    let spec_pool = spec.gpu_pools.get(&c.address);
    let labels: BTreeMap<String, Value> =
        spec_pool.map(|p| p.labels.iter().map(|(k, v)| (k.clone(), s(v.value.clone()))).collect()).unwrap_or_default();
    let nodes_after = pc.after.nodes();
    let spot_share = if nodes_after == 0 { 0.0 } else { pc.after.spot as f64 * 100.0 / nodes_after as f64 };
    let running_jobs: Vec<Value> = running.get(&c.address).into_iter().flatten().map(|j| s(j.to_string())).collect();
    let destroys = matches!(c.action, Action::Delete | Action::Replace);
    let mut o = BTreeMap::new();
    o.insert("address".into(), s(c.address.to_string()));
    o.insert("name".into(), s(c.address.name.clone()));
    o.insert("action".into(), s(c.action.as_str()));
    o.insert("provider".into(), s(pc.provider.clone()));
    o.insert("region".into(), s(pc.region.clone()));
    o.insert("gpu".into(), s(pc.gpu.clone()));
    o.insert("gpus_per_node".into(), num(pc.after.gpus_per_node));
    o.insert("gpus_before".into(), num(pc.before.gpus() as f64));
    o.insert("gpus_after".into(), num(pc.after.gpus() as f64));
    o.insert("nodes_before".into(), num(pc.before.nodes()));
    o.insert("nodes_after".into(), num(nodes_after));
    o.insert("on_demand_after".into(), num(pc.after.on_demand));
    o.insert("spot_after".into(), num(pc.after.spot));
    o.insert("spot_share".into(), num(spot_share));
    o.insert("hourly_before".into(), num(pc_cost.map(|p| p.hourly_before).unwrap_or(0.0)));
    o.insert("hourly_after".into(), num(pc_cost.map(|p| p.hourly_after).unwrap_or(0.0)));
    o.insert("price_per_gpu_hour".into(), num(pc_cost.map(|p| p.price_per_gpu_hour).unwrap_or(0.0)));
    // A move's peak, both sets of nodes running; any other change peaks at "after".
    let peak = pc_cost.and_then(|p| p.peak);
    o.insert("moving".into(), Value::Bool(peak.is_some()));
    o.insert("peak_nodes".into(), num(peak.map_or(nodes_after, |k| k.nodes)));
    o.insert("peak_gpus".into(), num(peak.map_or(pc.after.gpus(), |k| k.gpus) as f64));
    o.insert("peak_hourly".into(), num(peak.map_or(pc_cost.map(|p| p.hourly_after).unwrap_or(0.0), |k| k.hourly_usd)));
    o.insert("instance_type".into(), s(pc_cost.map(|p| p.instance_type.clone()).unwrap_or_default()));
    o.insert("labels".into(), Value::Object(labels));
    o.insert("destroys".into(), Value::Bool(destroys));
    o.insert("runs_jobs".into(), Value::Bool(!running_jobs.is_empty()));
    o.insert("running_jobs".into(), Value::List(running_jobs));
    Value::Object(o)
}

/// `plan.quotas[ADDRESS]`: a quota's GPUs and spend after the plan and at its peak, and
/// its limits from the spec.
fn quota_fact(q: &QuotaCost, spec: &Spec) -> Value {
    let spec_q = spec.quotas.get(&q.address);
    let mut o = BTreeMap::new();
    o.insert("address".into(), s(q.address.to_string()));
    o.insert("pools".into(), Value::List(q.pools.iter().map(|p| s(p.to_string())).collect()));
    o.insert("gpus_after".into(), num(q.gpus_after as f64));
    o.insert("gpus_max".into(), num(q.gpus_max as f64));
    o.insert("hourly_after".into(), num(q.hourly_after));
    o.insert("monthly_after".into(), num(q.monthly_after));
    o.insert("gpus_peak".into(), num(q.peak.map_or(q.gpus_after, |k| k.gpus) as f64));
    o.insert("hourly_peak".into(), num(q.peak.map_or(q.hourly_after, |k| k.hourly_usd)));
    o.insert("max_gpus".into(), spec_q.and_then(|q| q.max_gpus.as_ref()).map(|m| num(m.value)).unwrap_or(Value::Null));
    o.insert(
        "allowed_gpus".into(),
        Value::List(spec_q.map(|q| q.allowed_gpus.iter().map(|g| s(g.value.clone())).collect()).unwrap_or_default()),
    );
    Value::Object(o)
}
