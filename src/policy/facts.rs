//! The `plan` object policies see: cost, pools, quotas, changes and the summary, built
//! from the plan, its cost and the spec. Names are documented in `policies/README.md`.

use std::collections::BTreeMap;

use crate::cost::{CostReport, PoolCost, QuotaCost};
use crate::jobs::running::RunningJobs;
use crate::plan::model::PoolChange;
use crate::plan::{Action, Plan, ResourceChange};
use crate::policy::reads::{POOL_FIELDS, Reads};
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
///
/// Over a large plan the pools' facts (most of the work: a 2,000-pool plan has 50,000
/// members) are built on the machine's cores, in runs whose results come back in order;
/// each object is built from its members in key order at once, not member by member.
pub fn plan_value(plan: &Plan, cost: &CostReport, spec: &Spec, running: &RunningJobs) -> Value {
    plan_value_reading(plan, cost, spec, running, &Reads::ALL)
}

/// [`plan_value`] with only the members `reads` names ([`Reads::of`] the policies that
/// read them): what those policies see of it is the same.
pub fn plan_value_reading(plan: &Plan, cost: &CostReport, spec: &Spec, running: &RunningJobs, reads: &Reads) -> Value {
    let costs: BTreeMap<&crate::addr::Address, &PoolCost> = cost.pools.iter().map(|p| (&p.address, p)).collect();
    let threads = if plan.changes.len() >= PARALLEL_FROM { crate::par::cores() } else { 1 };
    let runs = crate::par::runs_in_order(&plan.changes, threads, PARALLEL_FROM / 2, |run| {
        run.iter()
            .filter_map(|c| {
                let pc = c.pool.as_ref()?;
                let address = c.address.to_string();
                let cost = costs.get(&c.address).copied();
                let fact = pool_fact(&PoolView { c, pc, address: &address, cost, spec, running }, reads);
                Some((address, fact))
            })
            .collect::<Vec<_>>()
    });
    // As inserting one by one would: of two entries with one address, the last stays.
    let pools: BTreeMap<String, Value> = runs.into_iter().flatten().collect();
    let quotas = cost.quotas.iter().map(|q| (q.address.to_string(), quota_fact(q, spec))).collect();
    // Built only for policies that name `plan.changes`: no other can see it.
    let changes = plan
        .changes
        .iter()
        .filter(|_| reads.changes())
        .map(|c| {
            Value::Object(BTreeMap::from([
                ("action".to_string(), s(c.action.as_str())),
                ("address".to_string(), s(c.address.to_string())),
                ("kind".to_string(), s(c.address.kind.as_str())),
            ]))
        })
        .collect();
    let summary = BTreeMap::from([
        ("add".to_string(), num(plan.summary.add as f64)),
        ("change".to_string(), num(plan.summary.change as f64)),
        ("destroy".to_string(), num(plan.summary.destroy as f64)),
        ("import".to_string(), num(plan.summary.import as f64)),
    ]);
    // Per-pool and per-quota cost is already under `plan.pools` / `plan.quotas`; copying
    // it again here would double the facts for a large fleet.
    let mut cost_value = serde_json::to_value(cost.clone_summary()).map(|j| Value::from_json(&j)).unwrap_or_default();
    if let Value::Object(o) = &mut cost_value {
        o.remove("pools");
        o.remove("quotas");
    }
    // Floating pools this plan moves to another candidate (docs/design/floating-pools.md).
    let moves = plan.placements.iter().filter(|p| p.action == crate::plan::model::PlacementAction::Move).count();
    // Reservations by address (docs/design/big-runs.md), as `plan --json` lists them.
    let reservations = plan.reservations.iter().map(|r| (r.address.to_string(), Value::from_json(&r.doc()))).collect();
    Value::Object(BTreeMap::from([
        ("changes".to_string(), Value::List(changes)),
        ("cost".to_string(), cost_value),
        ("moves".to_string(), num(moves as f64)),
        ("pools".to_string(), Value::Object(pools)),
        ("quotas".to_string(), Value::Object(quotas)),
        ("reservations".to_string(), Value::Object(reservations)),
        ("summary".to_string(), Value::Object(summary)),
    ]))
}

/// Changes in a plan from which the pools' facts are built on several threads (as the
/// policies are evaluated, `policy::evaluate`).
const PARALLEL_FROM: usize = 256;

/// `plan.pools[ADDRESS]`: one pool's change, its cost before and after (and at the peak of
/// a move), its labels and the jobs running on it; only the members `reads` names.
/// `address` is the change's address as text.
fn pool_fact(pool: &PoolView<'_>, reads: &Reads) -> Value {
    // In key order ([`POOL_FIELDS`]), so that the map is built in one pass.
    let members: Vec<(String, Value)> = POOL_FIELDS
        .iter()
        .enumerate()
        .filter(|&(i, _)| reads.pool_field(i))
        .map(|(_, name)| (name.to_string(), pool.member(name)))
        .collect();
    Value::Object(members.into_iter().collect())
}

/// What one pool's facts are made of.
struct PoolView<'a> {
    c: &'a ResourceChange,
    pc: &'a PoolChange,
    address: &'a str,
    cost: Option<&'a PoolCost>,
    spec: &'a Spec,
    running: &'a RunningJobs,
}

impl PoolView<'_> {
    /// The member `name` of [`POOL_FIELDS`].
    fn member(&self, name: &str) -> Value {
        let (c, pc, cost) = (self.c, self.pc, self.cost);
        let nodes_after = pc.after.nodes();
        let hourly_after = cost.map(|p| p.hourly_after).unwrap_or(0.0);
        // A move's peak, both sets of nodes running; any other change peaks at "after".
        let peak = cost.and_then(|p| p.peak);
        match name {
            "action" => s(c.action.as_str()),
            "address" => s(self.address),
            "destroys" => Value::Bool(matches!(c.action, Action::Delete | Action::Replace)),
            "gpu" => s(pc.gpu.clone()),
            "gpus_after" => num(pc.after.gpus() as f64),
            "gpus_before" => num(pc.before.gpus() as f64),
            "gpus_per_node" => num(pc.after.gpus_per_node),
            "hourly_after" => num(hourly_after),
            "hourly_before" => num(cost.map(|p| p.hourly_before).unwrap_or(0.0)),
            "instance_type" => s(cost.map(|p| p.instance_type.clone()).unwrap_or_default()),
            "labels" => Value::Object(
                self.spec
                    .gpu_pools
                    .get(&c.address)
                    .map(|p| p.labels.iter().map(|(k, v)| (k.clone(), s(v.value.clone()))).collect())
                    .unwrap_or_default(),
            ),
            "moving" => Value::Bool(peak.is_some()),
            "name" => s(c.address.name.clone()),
            "nodes_after" => num(nodes_after),
            "nodes_before" => num(pc.before.nodes()),
            "on_demand_after" => num(pc.after.on_demand),
            "peak_gpus" => num(peak.map_or(pc.after.gpus(), |k| k.gpus) as f64),
            "peak_hourly" => num(peak.map_or(hourly_after, |k| k.hourly_usd)),
            "peak_nodes" => num(peak.map_or(nodes_after, |k| k.nodes)),
            "price_per_gpu_hour" => num(cost.map(|p| p.price_per_gpu_hour).unwrap_or(0.0)),
            "provider" => s(pc.provider.clone()),
            "region" => s(pc.region.clone()),
            "running_jobs" => Value::List(self.running_jobs().map(|j| s(j.to_string())).collect()),
            "runs_jobs" => Value::Bool(self.running_jobs().next().is_some()),
            "spot_after" => num(pc.after.spot),
            "spot_share" => num(if nodes_after == 0 { 0.0 } else { pc.after.spot as f64 * 100.0 / nodes_after as f64 }),
            other => unreachable!("`{other}` is no member of POOL_FIELDS"),
        }
    }

    fn running_jobs(&self) -> impl Iterator<Item = &crate::addr::Address> {
        self.running.get(&self.c.address).into_iter().flatten()
    }
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
