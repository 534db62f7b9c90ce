//! Pricing a plan: per pool, quota and fleet; hourly and monthly (730 h); before and
//! after; split spot / on-demand; and a range (min / expected / max) where autoscaling
//! can move the node count. Pure: prices come in through a [`PriceBook`].

mod disks;
pub mod offers;
pub mod placement;
pub mod prices;
mod reserved;

use std::collections::{BTreeMap, HashMap};

use crate::addr::Address;
use crate::catalog;
use crate::plan::Plan;
use crate::plan::model::{PlanError, PoolChange, ResourceChange};
use crate::plan::shape;
use crate::providers::Capacity;
use crate::spec::Spec;
use crate::spec::model::{GpuPool, ProviderKind};

pub use crate::plan::report::{Alternative, CostReport, Peak, PoolCost, Price, QuotaCost, Range, Rate};
pub use prices::PriceBook;

/// Hours in a billing month, as the clouds' calculators use.
pub const HOURS_PER_MONTH: f64 = 730.0;

fn money(x: f64) -> f64 {
    (x * 10_000.0).round() / 10_000.0
}

/// A plan gpuplan cannot price. Never priced as something else instead: money is involved.
#[derive(Debug, thiserror::Error, miette::Diagnostic)]
pub enum CostError {
    #[error("cannot price `{address}`: its provider kind {} is not one gpuplan knows", describe_kind(.kind))]
    #[diagnostic(
        code(gpuplan::cost::provider_kind),
        help(
            "the kind comes from the spec's provider block `{provider}` or, for a pool the spec no longer has, from the state (`resources.\"{address}\".provider_kind`); gpuplan knows {known}"
        )
    )]
    UnknownProviderKind { address: Address, provider: String, kind: String, known: String },
}

fn describe_kind(kind: &str) -> String {
    if kind.is_empty() { "(none recorded)".into() } else { format!("`{kind}`") }
}

/// Price every pool change of a plan.
pub fn cost(plan: &Plan, spec: &Spec, prices: &PriceBook) -> Result<CostReport, CostError> {
    cost_on(plan, spec, prices, crate::par::cores())
}

/// [`cost`] on at most `threads` threads (the same report on any number).
pub(crate) fn cost_on(plan: &Plan, spec: &Spec, prices: &PriceBook, threads: usize) -> Result<CostReport, CostError> {
    cost_in_rounds(plan, spec, prices, threads, PER_ROUND)
}

/// [`cost_on`] in rounds of `round` changes (the same report for any size).
pub(crate) fn cost_in_rounds(
    plan: &Plan,
    spec: &Spec,
    prices: &PriceBook,
    threads: usize,
    round: usize,
) -> Result<CostReport, CostError> {
    // The report's vector sized once: a pool's cost is several hundred bytes, and doubling
    // growth of 100,000 of them leaves up to half unused.
    let mut pools = Vec::with_capacity(plan.changes.iter().filter(|c| c.pool.is_some()).count());
    let mut unpriced = Vec::new();
    let mut providers: Vec<(String, ProviderKind)> = Vec::new();
    // Each change is priced on its own, so a large plan's are priced on the machine's
    // cores and gathered in plan order: the same report, and the same first error, as on
    // one thread. In rounds, so that only one round's costs wait beside the report (at
    // 100,000 pools all of them at once were about 60 MB more at a no-op plan's peak).
    for round in plan.changes.chunks(round.max(1)) {
        let runs = crate::par::runs_in_order(round, threads, PER_THREAD, |run| {
            run.iter().map(|c| price_change(c, spec, prices)).collect::<Vec<_>>()
        });
        for (c, priced) in round.iter().zip(runs.into_iter().flatten()) {
            match priced? {
                Priced::NoPool => {}
                Priced::Unpriced => unpriced.push(c.address.clone()),
                Priced::Pool { cost, kind, cny, before_unpriced } => {
                    let provider = c.pool.as_ref().map_or("", |pc| pc.provider.as_str());
                    if cny && !providers.iter().any(|(n, _)| n == provider) {
                        providers.push((provider.to_string(), kind));
                    }
                    if before_unpriced {
                        unpriced.push(c.address.clone());
                    }
                    pools.push(*cost)
                }
            }
        }
    }
    // Pools are priced unrounded and rounded only once the totals are taken, so monthly
    // figures (× 730) do not multiply the rounding of every pool.
    let sum = |f: &dyn Fn(&PoolCost) -> f64| -> f64 { pools.iter().map(f).sum() };
    let hourly_before = sum(&|p| p.hourly_before);
    let hourly_after = sum(&|p| p.hourly_after);
    let range = Range {
        hourly_min: money(sum(&|p| p.range.map(|r| r.hourly_min).unwrap_or(p.hourly_after))),
        hourly_expected: money(hourly_after),
        hourly_max: money(sum(&|p| p.range.map(|r| r.hourly_max).unwrap_or(p.hourly_after))),
    };
    let quotas = quota_costs(spec, &pools);
    let on_demand_hourly_after = money(sum(&|p| p.on_demand_hourly_after));
    let spot_hourly_after = money(sum(&|p| p.spot_hourly_after));
    Ok(CostReport {
        currency: "USD".into(),
        hours_per_month: HOURS_PER_MONTH,
        hourly_before: money(hourly_before),
        hourly_after: money(hourly_after),
        hourly_delta: money(hourly_after - hourly_before),
        monthly_before: money(hourly_before * HOURS_PER_MONTH),
        monthly_after: money(hourly_after * HOURS_PER_MONTH),
        monthly_delta: money((hourly_after - hourly_before) * HOURS_PER_MONTH),
        on_demand_hourly_after,
        spot_hourly_after,
        range,
        pools: pools.into_iter().map(round_pool).collect(),
        quotas,
        exchange_rates: prices.rates_used(&providers),
        unpriced,
    })
}

/// Changes per thread below which one thread prices them all.
const PER_THREAD: usize = 256;

/// Changes priced per round (each round on the machine's cores).
const PER_ROUND: usize = 8_192;

/// What pricing one change found.
enum Priced {
    /// Not a pool.
    NoPool,
    /// A pool without a price.
    Unpriced,
    /// A pool's cost; whether it is priced in CNY; whether some of its nodes before have no price.
    Pool { cost: Box<PoolCost>, kind: ProviderKind, cny: bool, before_unpriced: bool },
}

fn price_change(c: &ResourceChange, spec: &Spec, prices: &PriceBook) -> Result<Priced, CostError> {
    let Some(pc) = &c.pool else { return Ok(Priced::NoPool) };
    let kind = ProviderKind::ALL.into_iter().find(|k| k.as_str() == pc.provider_kind).ok_or_else(|| {
        CostError::UnknownProviderKind {
            address: c.address.clone(),
            provider: pc.provider.clone(),
            kind: pc.provider_kind.clone(),
            known: ProviderKind::ALL.iter().map(|k| format!("`{k}`")).collect::<Vec<_>>().join(", "),
        }
    })?;
    let Some(cost) = pool_cost(&c.address, pc, kind, spec, prices) else { return Ok(Priced::Unpriced) };
    let cny = [&cost.on_demand_price, &cost.spot_price].iter().any(|x| x.as_ref().is_some_and(|x| x.native.is_some()));
    let (old, old_kind, old_region) = where_before(pc, kind, spec);
    let before_unpriced = pc
        .before_types
        .iter()
        .any(|t| prices.usd_per_hour(old, old_kind, old_region, &t.instance_type, t.capacity).is_none());
    Ok(Priced::Pool { cost: Box::new(cost), kind, cny, before_unpriced })
}

/// Plan errors for pools the plan would run at a price it does not know: nothing is free
/// by accident. A pool that keeps or launches nodes of an instance type without a price
/// is one; so is a pool that asks for nodes but is priced at nothing (it would launch
/// none of them). Nodes of an unknown type that the plan removes are no error (the plan
/// replacing them must stay possible): they are left out of "before", listed under
/// `unpriced`.
pub fn errors(plan: &Plan, report: &CostReport) -> Vec<PlanError> {
    let mut out = Vec::new();
    // Looked up by address: a scan per change was quadratic in pools (4 % of a no-op plan at
    // 2,000 pools).
    let mut priced: HashMap<&Address, &PoolCost> = HashMap::with_capacity(report.pools.len());
    for p in &report.pools {
        priced.entry(&p.address).or_insert(p);
    }
    for c in &plan.changes {
        let Some(pc) = &c.pool else { continue };
        if let Some(e) = unpriced_nodes(&c.address, pc) {
            out.push(e);
        } else if let Some(p) = priced.get(&c.address) {
            out.extend(priced_at_nothing(p));
        }
    }
    out
}

/// Nodes of `pc` that stay or launch with an instance type the catalog has no price for.
fn unpriced_nodes(addr: &Address, pc: &PoolChange) -> Option<PlanError> {
    let cat = catalog::catalog();
    // Deliberately dropped: an unknown kind is already `cost`'s own error for this pool,
    // reported once there; saying it again here would only repeat it.
    let kind = pc.provider_kind.parse::<ProviderKind>().ok()?;
    let mut unknown: BTreeMap<&str, i64> = BTreeMap::new();
    // A floating pool leaving another provider block has its old nodes in that one's
    // catalog (`pool_cost` prices those that stay there).
    let elsewhere = pc.placement_before.as_ref().is_some_and(|b| b.provider != pc.provider);
    let known = |t: &str| {
        cat.instance_type(kind, t).is_some()
            || (elsewhere && ProviderKind::ALL.into_iter().any(|k| cat.instance_type(k, t).is_some()))
    };
    for t in pc.before_types.iter().filter(|t| !known(&t.instance_type)) {
        *unknown.entry(&t.instance_type).or_default() += i64::from(t.count);
    }
    for d in &pc.deletes {
        if let Some(n) = unknown.get_mut(d.instance_type.as_str()).filter(|n| **n > 0) {
            *n -= 1;
        }
    }
    for b in &pc.creates {
        if let Some(t) = b.instance_types.first().filter(|t| cat.instance_type(kind, t).is_none()) {
            *unknown.entry(t).or_default() += i64::from(b.count);
        }
    }
    let kept: Vec<String> = unknown.iter().filter(|(_, n)| **n > 0).map(|(t, n)| format!("{n} × `{t}`")).collect();
    (!kept.is_empty()).then(|| PlanError {
        address: addr.clone(),
        message: format!(
            "`{addr}` cannot be priced: the {} catalog has no price for its nodes {}",
            pc.provider_kind,
            kept.join(", ")
        ),
        hint: Some(format!(
            "pin `instance_types` to types the catalog prices so these nodes are replaced (`gpuplan offers --gpu {}` lists them), or remove the nodes from the pool",
            pc.gpu
        )),
        location: None,
 span: None,
    })
}

/// A pool that asks for nodes but costs nothing would launch none of them.
fn priced_at_nothing(p: &PoolCost) -> Option<PlanError> {
    let nodes = p.on_demand_after + p.spot_after;
    (nodes > 0 && p.hourly_after <= 0.0).then(|| PlanError {
        address: p.address.clone(),
        message: format!(
            "`{}` asks for {} of {} × {} in {}, but the plan launches none: it would cost 0.00 USD/h",
            p.address,
            crate::model::words::nodes(nodes as usize),
            p.gpus_after / u64::from(nodes),
            p.gpu,
            p.region
        ),
        hint: Some("run `gpuplan validate` to see which zones of the region sell this shape".into()),
        location: None,
        span: None,
    })
}

/// Job nodes (VM pools on clouds run each replica on a node of its own) in the cost of
/// their pool, its quotas and the fleet: the ones running now in "before" and "after",
/// the ones this plan launches in "after", at the pool's price for their capacity.
pub fn add_job_nodes(report: &mut CostReport, jobs: &[crate::model::JobPlacement], spec: &Spec) {
    let mut added: BTreeMap<Address, (f64, f64)> = BTreeMap::new();
    for j in jobs {
        let running: Vec<Capacity> =
            j.runs.iter().filter(|r| r.is_active() && r.has_own_node()).map(|r| r.capacity).collect();
        let launching: Vec<Capacity> =
            j.launches.iter().filter(|l| l.request.shape.is_some()).map(|l| l.capacity).collect();
        if running.is_empty() && launching.is_empty() {
            continue;
        }
        let Some(p) = report.pools.iter_mut().find(|p| p.address == j.pool) else { continue };
        let gpn = spec.gpu_pools.get(&j.pool).map_or(0, |s| u64::from(s.gpus_per_node.value));
        let (before, after) = add_to_pool(p, gpn, &running, &launching);
        let e = added.entry(j.pool.clone()).or_default();
        e.0 += before;
        e.1 += after;
    }
    if added.is_empty() {
        return;
    }
    add_to_totals(report, &added);
}

/// Job nodes running (`running`) and launched (`launching`) in one pool's cost, `gpn`
/// GPUs each; returns what they add to its spend per hour before and after the plan.
fn add_to_pool(p: &mut PoolCost, gpn: u64, running: &[Capacity], launching: &[Capacity]) -> (f64, f64) {
    let price = |c: Capacity, p: &PoolCost| {
        match c {
            Capacity::OnDemand | Capacity::Reserved => p.on_demand_price.as_ref(),
            Capacity::Spot => p.spot_price.as_ref(),
        }
        .map_or(0.0, |x| x.usd_per_hour)
    };
    let (mut before, mut after) = (0.0, 0.0);
    // Job nodes do not move with the pool: they run through its move's peak too.
    let job_nodes = (running.len() + launching.len()) as u32;
    if let Some(k) = p.peak.as_mut() {
        k.nodes += job_nodes;
        k.gpus += gpn * u64::from(job_nodes);
    }
    for c in running {
        let usd = price(*c, p);
        before += usd;
        after += usd;
        p.gpus_before += gpn;
        p.gpus_after += gpn;
        match c {
            Capacity::OnDemand | Capacity::Reserved => {
                p.on_demand_before += 1;
                p.on_demand_after += 1;
                p.on_demand_hourly_after += usd;
            }
            Capacity::Spot => {
                p.spot_before += 1;
                p.spot_after += 1;
                p.spot_hourly_after += usd;
            }
        }
    }
    for c in launching {
        let usd = price(*c, p);
        after += usd;
        p.gpus_after += gpn;
        match c {
            Capacity::OnDemand | Capacity::Reserved => {
                p.on_demand_after += 1;
                p.on_demand_hourly_after += usd;
            }
            Capacity::Spot => {
                p.spot_after += 1;
                p.spot_hourly_after += usd;
            }
        }
    }
    p.hourly_before = money(p.hourly_before + before);
    p.hourly_after = money(p.hourly_after + after);
    if let Some(k) = p.peak.as_mut() {
        k.hourly_usd = money(k.hourly_usd + after);
    }
    p.on_demand_hourly_after = money(p.on_demand_hourly_after);
    p.spot_hourly_after = money(p.spot_hourly_after);
    p.price_per_gpu_hour = if p.gpus_after == 0 { 0.0 } else { money(p.hourly_after / p.gpus_after as f64) };
    if let Some(r) = p.range.as_mut() {
        r.hourly_min = money(r.hourly_min + after);
        r.hourly_expected = money(r.hourly_expected + after);
        r.hourly_max = money(r.hourly_max + after);
    }
    (before, after)
}

/// What job nodes add to each pool (before, after) in the fleet's totals and its quotas'.
fn add_to_totals(report: &mut CostReport, added: &BTreeMap<Address, (f64, f64)>) {
    let (before, after): (f64, f64) = added.values().fold((0.0, 0.0), |a, v| (a.0 + v.0, a.1 + v.1));
    report.hourly_before = money(report.hourly_before + before);
    report.hourly_after = money(report.hourly_after + after);
    report.hourly_delta = money(report.hourly_after - report.hourly_before);
    report.monthly_before = money(report.hourly_before * HOURS_PER_MONTH);
    report.monthly_after = money(report.hourly_after * HOURS_PER_MONTH);
    report.monthly_delta = money(report.hourly_delta * HOURS_PER_MONTH);
    report.on_demand_hourly_after = money(report.pools.iter().map(|p| p.on_demand_hourly_after).sum());
    report.spot_hourly_after = money(report.pools.iter().map(|p| p.spot_hourly_after).sum());
    report.range.hourly_min = money(report.range.hourly_min + after);
    report.range.hourly_expected = money(report.range.hourly_expected + after);
    report.range.hourly_max = money(report.range.hourly_max + after);
    for q in report.quotas.iter_mut() {
        let mine: Vec<&PoolCost> = report.pools.iter().filter(|p| q.pools.contains(&p.address)).collect();
        q.gpus_after = mine.iter().map(|p| p.gpus_after).sum();
        let extra: f64 = q.pools.iter().filter_map(|a| added.get(a)).map(|v| v.1).sum();
        q.hourly_after = money(q.hourly_after + extra);
        q.hourly_max = money(q.hourly_max + extra);
        q.monthly_after = money(q.hourly_after * HOURS_PER_MONTH);
        q.peak = quota_peak(&mine);
    }
}

fn pool_cost(addr: &Address, pc: &PoolChange, kind: ProviderKind, spec: &Spec, prices: &PriceBook) -> Option<PoolCost> {
    let spec_pool = spec.gpu_pools.get(addr).map(Box::as_ref);
    let shape = spec_pool.and_then(|p| shape::shape(spec, p, catalog::catalog()));
    // Each node's disks are priced with it: the node prices below include them.
    let disks = shape.as_ref().and_then(|s| disks::cost(s, prices.rate(&pc.provider)));
    let disk_usd = disks.as_ref().map_or(0.0, |d| d.usd_per_node_hour);
    let with_disks = |p: Option<Price>| p.map(|p| disks::add(p, disk_usd, prices.rate(&pc.provider)));
    let price = |t: &str, cap| with_disks(prices.price(&pc.provider, kind, &pc.region, t, cap));
    // The sums read a price's USD alone: no price is made for them ([`disks::add`]'s sum).
    let usd =
        |t: &str, cap| prices.usd_per_hour(&pc.provider, kind, &pc.region, t, cap).map(|u| disks::add_usd(u, disk_usd));
    // A floating pool moving between regions or provider blocks ran its nodes, and keeps
    // those that stay for a running job, at the prices where it leaves.
    let (old_provider, old_kind, old_region) = where_before(pc, kind, spec);
    let usd_before = |t: &str, cap| {
        prices.usd_per_hour(old_provider, old_kind, old_region, t, cap).map(|u| disks::add_usd(u, disk_usd))
    };
    // After = (before − deletes) at the old prices + creates at the new ones, node by node,
    // so kept nodes keep their own price. Keyed by the plan's own type names (no copy).
    let mut kept: BTreeMap<(&str, Capacity), i64> = BTreeMap::new();
    // Nodes in Capacity Blocks are priced at the blocks' prepaid rates.
    let blocks = reserved::InBlocks::new(pc, prices, disk_usd);
    let mut hourly_before = blocks.before;
    for t in pc.before_types.iter().filter(|t| !blocks.holds(t.reservation.as_ref())) {
        // A node without a price that this plan removes leaves "before" short, but must not
        // keep the plan that replaces it from being priced; one that stays is an error
        // ([`unpriced_nodes`]) and leaves the pool unpriced below.
        hourly_before += usd_before(&t.instance_type, t.capacity).unwrap_or(0.0) * t.count as f64;
        *kept.entry((t.instance_type.as_str(), t.capacity)).or_default() += t.count as i64;
    }
    // A delete takes off a node "before" counted. Some deletes never were (a node stopped
    // outside gpuplan is terminated but was not live): taken off anyway, they would cancel
    // the creates that replace them and price the new nodes at nothing.
    for d in pc.deletes.iter().filter(|d| !blocks.holds(d.reservation.as_ref())) {
        if let Some(n) = kept.get_mut(&(d.instance_type.as_str(), d.capacity)).filter(|n| **n > 0) {
            *n -= 1;
        }
    }
    let preferred = shape
        .as_ref()
        .and_then(|s| s.instance_types.first().cloned())
        .or_else(|| pc.creates.first().and_then(|c| c.instance_types.first().cloned()))
        .or_else(|| pc.before_types.first().map(|t| t.instance_type.clone()))?;
    let mut after: BTreeMap<(&str, Capacity), i64> = BTreeMap::new();
    for c in pc.creates.iter().filter(|c| !blocks.holds(c.reservation.as_ref().map(|r| &r.id))) {
        let t = c.instance_types.first().unwrap_or(&preferred);
        *after.entry((t.as_str(), c.capacity)).or_default() += c.count as i64;
    }
    let (mut od_after, mut spot_after) = (blocks.after(), 0.0);
    let new = priced_at(&after, &usd)?;
    for (od, spot) in [priced_at(&kept, &usd_before)?, new] {
        od_after += od;
        spot_after += spot;
    }
    let hourly_after = od_after + spot_after;
    let peak = moves(pc).then(|| {
        let created: u32 = pc.creates.iter().map(|c| c.count).sum();
        Peak {
            nodes: pc.before.nodes() + created,
            gpus: pc.before.gpus() + u64::from(created) * u64::from(pc.after.gpus_per_node),
            hourly_usd: hourly_before + new.0 + new.1 + blocks.new,
        }
    });
    let od_price = price(&preferred, Capacity::OnDemand);
    let spot_price = price(&preferred, Capacity::Spot);
    let gpus_after = pc.after.gpus();
    let range =
        spec_pool.and_then(|p| spend_range(addr, p, spec, [od_price.as_ref(), spot_price.as_ref()], hourly_after));
    let alternatives = match (spec_pool, &shape) {
        (Some(p), Some(s)) if p.instance_types.is_empty() => alternatives_of(s, &preferred, &usd),
        _ => vec![],
    };
    Some(PoolCost {
        address: addr.clone(),
        provider: pc.provider.clone(),
        region: pc.region.clone(),
        gpu: pc.gpu.clone(),
        instance_type: preferred,
        gpus_before: pc.before.gpus(),
        gpus_after,
        on_demand_before: pc.before.on_demand,
        on_demand_after: pc.after.on_demand,
        spot_before: pc.before.spot,
        spot_after: pc.after.spot,
        hourly_before,
        hourly_after,
        on_demand_hourly_after: od_after,
        spot_hourly_after: spot_after,
        price_per_gpu_hour: if gpus_after == 0 { 0.0 } else { hourly_after / gpus_after as f64 },
        on_demand_price: od_price,
        peak,
        spot_price,
        range,
        alternatives,
        disks,
    })
}

/// On-demand and spot spend per hour of `nodes` (instance type and capacity → count) at
/// the prices `at` gives; `None` when one of them has no price.
fn priced_at(
    nodes: &BTreeMap<(&str, Capacity), i64>,
    at: &dyn Fn(&str, Capacity) -> Option<f64>,
) -> Option<(f64, f64)> {
    let mut sums = (0.0, 0.0);
    for ((t, cap), n) in nodes {
        let n = (*n).max(0) as f64;
        if n == 0.0 {
            continue;
        }
        let p = at(t, *cap)? * n;
        match cap {
            Capacity::OnDemand | Capacity::Reserved => sums.0 += p,
            Capacity::Spot => sums.1 += p,
        }
    }
    Some(sums)
}

/// The spend range of a pool whose node count something else moves: an autoscaler, or
/// `ignore_changes` handing `nodes.desired` to someone else. `min < max` alone moves
/// nothing: plan and apply keep such a pool at `desired`, and it has no range.
/// `prices` are the on-demand and spot prices of its instance type.
fn spend_range(
    addr: &Address,
    p: &GpuPool,
    spec: &Spec,
    prices: [Option<&Price>; 2],
    hourly_after: f64,
) -> Option<Range> {
    // Few autoscalers per spec: a scan is cheaper than building a set per call.
    let autoscaled = spec.autoscalers.values().any(|a| &a.pool.value == addr);
    let ignored = p
        .meta
        .lifecycle
        .as_ref()
        .is_some_and(|l| l.ignore_changes.iter().any(|s| s.value == "nodes" || s.value == "nodes.desired"));
    if !autoscaled && !ignored {
        return None;
    }
    let usd = |x: Option<&Price>| x.map(|x| x.usd_per_hour).unwrap_or(0.0);
    let node_cost = |n: u32| {
        let (od, spot) = shape::split(n, p.mix.on_demand_base.value, p.mix.spot_percent.value);
        usd(prices[0]) * od as f64 + usd(prices[1]) * spot as f64
    };
    Some(Range {
        hourly_min: node_cost(p.nodes.min.value),
        hourly_expected: hourly_after,
        hourly_max: node_cost(p.nodes.max.value),
    })
}

/// A pool that lets gpuplan choose: the first instance types of its shape with their
/// on-demand prices, the chosen one marked.
fn alternatives_of(
    s: &shape::PoolShape,
    preferred: &str,
    usd: &dyn Fn(&str, Capacity) -> Option<f64>,
) -> Vec<Alternative> {
    s.instance_types
        .iter()
        .take(4)
        .filter_map(|t| {
            usd(t, Capacity::OnDemand).map(|usd| Alternative {
                instance_type: t.clone(),
                usd_per_hour: money(usd),
                chosen: *t == preferred,
            })
        })
        .collect()
}

/// A floating pool this plan moves to another candidate: its new nodes start while all
/// the old ones still run (docs/design/floating-pools.md).
fn moves(pc: &PoolChange) -> bool {
    match (&pc.placement_before, &pc.placement) {
        (Some(b), Some(a)) => b.provider != a.provider || b.region != a.region,
        _ => false,
    }
}

/// A quota's pools at the peak of the moves among them (the others at "after"); `None`
/// when none of them moves.
fn quota_peak(mine: &[&PoolCost]) -> Option<Peak> {
    mine.iter().any(|p| p.peak.is_some()).then(|| {
        let at = |p: &PoolCost| {
            p.peak.unwrap_or(Peak {
                nodes: p.on_demand_after + p.spot_after,
                gpus: p.gpus_after,
                hourly_usd: p.hourly_after,
            })
        };
        let sum = mine.iter().map(|p| at(p)).fold(Peak::default(), |a, b| Peak {
            nodes: a.nodes + b.nodes,
            gpus: a.gpus + b.gpus,
            hourly_usd: a.hourly_usd + b.hourly_usd,
        });
        Peak { hourly_usd: money(sum.hourly_usd), ..sum }
    })
}

/// Where a pool's nodes ran before this plan: the provider block (name and kind) and region
/// a floating pool is leaving, else the pool's own.
fn where_before<'a>(pc: &'a PoolChange, kind: ProviderKind, spec: &Spec) -> (&'a str, ProviderKind, &'a str) {
    let Some(b) = pc.placement_before.as_ref() else { return (&pc.provider, kind, &pc.region) };
    // A provider block gone from the spec: priced as the pool's kind, the best guess left.
    let block =
        spec.providers.get(&b.provider).or_else(|| spec.providers.values().find(|p| p.local_name() == b.provider));
    let old_kind = block.and_then(|p| p.kind.value).unwrap_or(kind);
    (&b.provider, old_kind, &b.region)
}

/// A pool's money fields as reports show them (1/10000 USD).
fn round_pool(mut p: PoolCost) -> PoolCost {
    p.hourly_before = money(p.hourly_before);
    p.hourly_after = money(p.hourly_after);
    p.on_demand_hourly_after = money(p.on_demand_hourly_after);
    p.spot_hourly_after = money(p.spot_hourly_after);
    p.price_per_gpu_hour = money(p.price_per_gpu_hour);
    p.disks = p.disks.map(|d| crate::plan::report::DiskCost { usd_per_node_hour: money(d.usd_per_node_hour), ..d });
    p.peak = p.peak.map(|k| Peak { hourly_usd: money(k.hourly_usd), ..k });
    p.range = p.range.map(|r| Range {
        hourly_min: money(r.hourly_min),
        hourly_expected: money(r.hourly_expected),
        hourly_max: money(r.hourly_max),
    });
    p
}

/// Pools a quota covers: its `pools`, plus the pools of jobs charged to it.
pub fn quota_pools(spec: &Spec, quota: &Address) -> Vec<Address> {
    // A set, not `Vec::contains` per job: 100,000 queued jobs over 20 quotas made that
    // scan a tenth of a no-op plan.
    let mut out: std::collections::BTreeSet<&Address> =
        spec.quotas.get(quota).map(|q| q.pools.iter().map(|p| &p.value).collect()).unwrap_or_default();
    let charged = spec.jobs.values().filter(|j| j.quota.as_ref().is_some_and(|q| &q.value == quota));
    out.extend(charged.map(|j| &j.pool.value));
    out.into_iter().cloned().collect()
}

/// [`quota_pools`] of every quota, in one pass over the jobs (one scan per quota reads
/// 100,000 jobs 20 times over). Each quota's pools are sorted, each once.
pub fn all_quota_pools(spec: &Spec) -> BTreeMap<Address, Vec<Address>> {
    let mut sets: BTreeMap<&Address, std::collections::BTreeSet<&Address>> =
        spec.quotas.iter().map(|(a, q)| (a, q.pools.iter().map(|p| &p.value).collect())).collect();
    for j in spec.jobs.values() {
        if let Some(q) = &j.quota
            && let Some(set) = sets.get_mut(&q.value)
        {
            set.insert(&j.pool.value);
        }
    }
    sets.into_iter().map(|(q, set)| (q.clone(), set.into_iter().cloned().collect())).collect()
}

fn quota_costs(spec: &Spec, pools: &[PoolCost]) -> Vec<QuotaCost> {
    all_quota_pools(spec)
        .into_iter()
        .map(|(q, covered)| {
            // `covered` is sorted, each pool once ([`all_quota_pools`]): searched in place.
            let mine: Vec<&PoolCost> = pools.iter().filter(|p| covered.binary_search(&p.address).is_ok()).collect();
            let gpus_max = covered
                .iter()
                .filter_map(|a| spec.gpu_pools.get(a))
                .map(|p| p.nodes.max.value as u64 * p.gpus_per_node.value as u64)
                .sum();
            let hourly_after: f64 = mine.iter().map(|p| p.hourly_after).sum();
            QuotaCost {
                address: q,
                pools: covered,
                gpus_after: mine.iter().map(|p| p.gpus_after).sum(),
                gpus_max,
                hourly_after: money(hourly_after),
                hourly_max: money(mine.iter().map(|p| p.range.map(|r| r.hourly_max).unwrap_or(p.hourly_after)).sum()),
                monthly_after: money(hourly_after * HOURS_PER_MONTH),
                peak: quota_peak(&mine),
            }
        })
        .collect()
}

#[cfg(test)]
mod tests;
