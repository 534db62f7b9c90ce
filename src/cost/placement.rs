//! Floating pools: where each one lives, decided from prices and known capacity. Pure.
//!
//! [`decide`] prices every candidate of a pool's `placement {}` at current prices (live
//! where the cloud publishes them, else the catalog's), marks the candidates the pool was
//! recently found short in, and chooses, with one sentence of reason
//! (docs/design/floating-pools.md): a new pool goes to the best candidate; a placed pool stays
//! unless it can no
//! longer live where it is (it moves at once), or another candidate saves at least
//! `min_saving` percent of its hourly cost and it has stayed `min_stay`.
//!
//! [`resolve`] turns a spec with floating pools into one whose pools all name a provider
//! and region, so that the diff, cost, policies and apply treat them as any other pool; it
//! never reads a clock, the clouds or the state file itself.

use std::collections::BTreeMap;

use crate::addr::Address;
use crate::catalog;
use crate::cost::PriceBook;
use crate::plan::model::{CandidateRow, PlacementAction, PlacementDecision};
use crate::plan::shape;
use crate::providers::Capacity;
use crate::spec::Spec;
use crate::spec::model::{Candidate, GpuPool, Placement, Strategy};
use crate::state::State;
use crate::state::model::{PlacementRecord, ResourceState, ShortRecord};

/// One floating pool's choice: the decision to show and the record apply keeps.
#[derive(Debug, Clone)]
pub struct Chosen {
    pub decision: PlacementDecision,
    /// Where the pool lives after the plan is applied.
    pub record: PlacementRecord,
    /// Where it lived before (what apply falls back to when the target is short).
    pub before: Option<PlacementRecord>,
    /// The candidates (indices into `candidates`) apply tries, best first, when the chosen
    /// one has no room for the nodes it creates: the usable ones, of any provider block.
    pub alternates: Vec<usize>,
    /// The current candidate, when the pool could stay there (priced, not known short):
    /// a move from it may wait ([`Hold`]); one without it cannot.
    pub can_stay: Option<usize>,
}

/// A move kept from happening: `quota` would be broken while both sets of nodes run, as
/// `detail` says (`32 GPUs > max_gpus 16`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hold {
    pub quota: String,
    pub detail: String,
}

/// The spec with every floating pool placed, and each pool's choice.
#[derive(Debug, Clone)]
pub struct Resolved {
    pub spec: Spec,
    pub chosen: BTreeMap<Address, Chosen>,
}

/// Place every floating pool of `spec`; `None` when it has none (the spec is used as is).
/// `now_ms` is the clock of each provider block by name (the sim's own for sim). A pool in
/// `holds` that would move, and could stay, stays (its move would break a quota while
/// both sets run).
pub fn resolve(
    spec: &Spec,
    state: &State,
    prices: &PriceBook,
    clocks: &BTreeMap<String, u64>,
    holds: &BTreeMap<Address, Hold>,
) -> Option<Resolved> {
    if spec.gpu_pools.values().all(|p| p.placement.is_none()) {
        return None;
    }
    let mut out = spec.clone();
    let mut chosen = BTreeMap::new();
    for (addr, pool) in &spec.gpu_pools {
        let Some(placement) = &pool.placement else { continue };
        let prior = state.resources.get(&addr.to_string());
        let Some((i, c)) = decide(spec, addr, pool, placement, prior, prices, clocks) else { continue };
        let (i, c) = match (holds.get(addr), c.can_stay) {
            (Some(h), Some(cur)) if c.decision.action == PlacementAction::Move => hold(c, i, cur, h, placement),
            _ => (i, c),
        };
        if let Some(p) = out.gpu_pools.get_mut(addr) {
            **p = pool.placed_in(&placement.candidates[i]);
        }
        chosen.insert(addr.clone(), c);
    }
    Some(Resolved { spec: out, chosen })
}

/// A candidate as priced: its hourly cost, the price's source, what is known short.
struct Priced {
    hourly: Option<f64>,
    source: String,
    short: Option<ShortRecord>,
}

/// The choice for one floating pool: the candidate's index and the [`Chosen`].
pub fn decide(
    spec: &Spec,
    addr: &Address,
    pool: &GpuPool,
    placement: &Placement,
    prior: Option<&ResourceState>,
    prices: &PriceBook,
    clocks: &BTreeMap<String, u64>,
) -> Option<(usize, Chosen)> {
    let cands = &placement.candidates;
    if cands.is_empty() {
        return None;
    }
    let before = prior_placement(prior);
    let now = clock(clocks, before.as_ref(), cands);
    let retry = pool.mix.retry_preferred().as_millis() as u64;
    // Shortages are forgotten after `retry_preferred`: capacity comes back.
    let short: Vec<ShortRecord> = before
        .iter()
        .flat_map(|b| b.short.iter())
        .filter(|s| now < s.since_ms.saturating_add(retry))
        .cloned()
        .collect();
    let priced: Vec<Priced> = cands
        .iter()
        .map(|c| {
            let (hourly, source) = price(spec, &pool.placed_in(c), prices);
            let short = short.iter().find(|s| is(c, &s.provider, &s.region)).cloned();
            Priced { hourly, source, short }
        })
        .collect();
    let current = before.as_ref().and_then(|b| cands.iter().position(|c| is(c, &b.provider, &b.region)));
    let usable: Vec<usize> =
        (0..cands.len()).filter(|i| priced[*i].hourly.is_some() && priced[*i].short.is_none()).collect();
    let best = match placement.strategy.value {
        Strategy::Ordered => usable.first().copied(),
        Strategy::Cheapest => usable
            .iter()
            .copied()
            .min_by(|a, b| priced[*a].hourly.unwrap_or(f64::MAX).total_cmp(&priced[*b].hourly.unwrap_or(f64::MAX))),
    };
    let (action, index, reason) = choose(placement, cands, &priced, before.as_ref(), current, best, now);
    // Any provider block: apply creates nodes through each alternate's own.
    let mut alternates: Vec<usize> = usable.iter().copied().filter(|i| *i != index).collect();
    if placement.strategy.value == Strategy::Cheapest {
        alternates
            .sort_by(|a, b| priced[*a].hourly.unwrap_or(f64::MAX).total_cmp(&priced[*b].hourly.unwrap_or(f64::MAX)));
    }
    let record = match (action, &before) {
        (PlacementAction::Stay, Some(b)) => PlacementRecord { short: short.clone(), ..b.clone() },
        _ => PlacementRecord {
            provider: cands[index].provider.value.clone(),
            region: cands[index].region.value.clone(),
            // By the clock of the block it goes to, which the next plans decide by (the
            // sim's own clock and a real cloud's differ).
            since_ms: clocks.get(&cands[index].provider.value).copied().unwrap_or(now),
            short: short.clone(),
        },
    };
    let rows = cands
        .iter()
        .zip(&priced)
        .enumerate()
        .map(|(i, (c, p))| CandidateRow {
            provider: c.provider.value.clone(),
            region: c.region.value.clone(),
            hourly_usd: p.hourly.map(round2),
            price: p.source.clone(),
            capacity: match &p.short {
                Some(s) => format!("short since {}: {}", rfc3339(s.since_ms), s.reason),
                None => "ok".into(),
            },
            role: match (Some(i) == current, i == index) {
                (true, true) => "current, chosen".into(),
                (true, false) => "current".into(),
                (false, true) => "chosen".into(),
                (false, false) => String::new(),
            },
        })
        .collect();
    let decision = PlacementDecision {
        address: addr.clone(),
        action,
        chosen: cands[index].label(),
        current: before.as_ref().map(|b| format!("{} {}", b.provider, b.region)),
        reason,
        held_by: None,
        peak: None,
        candidates: rows,
    };
    let can_stay = current.filter(|c| priced[*c].hourly.is_some() && priced[*c].short.is_none());
    Some((index, Chosen { decision, record, before, alternates, can_stay }))
}

/// A move turned into a stay at `cur`, its candidate `target`: the reason names the quota
/// and keeps the move's own, the target becomes the first alternate.
fn hold(mut c: Chosen, target: usize, cur: usize, h: &Hold, placement: &Placement) -> (usize, Chosen) {
    let cands = &placement.candidates;
    let why = c.decision.reason.trim_start_matches("move: ").to_string();
    c.decision.reason = format!(
        "stay: moving to {} would exceed {} during the overlap ({} while both sets run), though {why}",
        cands[target].label(),
        h.quota,
        h.detail
    );
    c.decision.action = PlacementAction::Stay;
    c.decision.chosen = cands[cur].label();
    c.decision.held_by = Some(h.quota.clone());
    for (i, row) in c.decision.candidates.iter_mut().enumerate() {
        row.role = match (i == cur, i == target) {
            (true, _) => "current, chosen".into(),
            (false, true) => "held".into(),
            (false, false) => String::new(),
        };
    }
    if let Some(b) = &c.before {
        c.record = PlacementRecord { short: c.record.short.clone(), ..b.clone() };
    }
    c.alternates.retain(|i| *i != cur);
    c.alternates.insert(0, target);
    (cur, c)
}

/// Create, stay or move, which candidate, and the sentence that says why.
fn choose(
    placement: &Placement,
    cands: &[Candidate],
    priced: &[Priced],
    before: Option<&PlacementRecord>,
    current: Option<usize>,
    best: Option<usize>,
    now: u64,
) -> (PlacementAction, usize, String) {
    let label = |i: usize| cands[i].label();
    let cost = |i: usize| priced[i].hourly.map_or("no price".to_string(), |h| format!("{h:.2} USD/h"));
    let why_best = |i: usize| match placement.strategy.value {
        Strategy::Cheapest => format!("{} is the cheapest candidate with capacity ({})", label(i), cost(i)),
        Strategy::Ordered => format!("{} is the first candidate with capacity", label(i)),
    };
    let Some(cur) = current else {
        let Some(b) = best else {
            // Nowhere known to hold it: the first priced candidate, tried again.
            let i = (0..cands.len()).find(|i| priced[*i].hourly.is_some()).unwrap_or(0);
            return (PlacementAction::Create, i, format!("create: every candidate is short; trying {}", label(i)));
        };
        return match before {
            Some(p) => (
                PlacementAction::Move,
                b,
                format!("move: {} {} is no longer a candidate; {}", p.provider, p.region, why_best(b)),
            ),
            None => (PlacementAction::Create, b, format!("create: {}", why_best(b))),
        };
    };
    let Some(b) = best else {
        return (PlacementAction::Stay, cur, "stay: no other candidate is known to have capacity".to_string());
    };
    if b == cur {
        return (PlacementAction::Stay, cur, format!("stay: {}", why_best(cur)));
    }
    if let Some(s) = &priced[cur].short {
        let reason = format!("move: {} short since {}; {}", label(cur), rfc3339(s.since_ms), why_best(b));
        return (PlacementAction::Move, b, reason);
    }
    let since = before.map_or(0, |p| p.since_ms);
    let stayed = now.saturating_sub(since);
    let min_stay = placement.min_stay().as_millis() as u64;
    let young = stayed < min_stay;
    match placement.strategy.value {
        Strategy::Ordered => {
            if young {
                let reason = format!(
                    "stay: {} comes first and has capacity, but {} was placed {} ago (min_stay {})",
                    label(b),
                    label(cur),
                    ago(stayed),
                    ago(min_stay)
                );
                return (PlacementAction::Stay, cur, reason);
            }
            (PlacementAction::Move, b, format!("move: {} comes first in the order and has capacity", label(b)))
        }
        Strategy::Cheapest => {
            let (Some(hc), Some(hb)) = (priced[cur].hourly, priced[b].hourly) else {
                return (PlacementAction::Move, b, format!("move: {} has no price now; {}", label(cur), why_best(b)));
            };
            let saving = if hc > 0.0 { (hc - hb) / hc * 100.0 } else { 0.0 };
            let min = placement.min_saving();
            if saving < min {
                let reason = format!(
                    "stay: {} is {} % cheaper ({} vs {}), below min_saving {} %",
                    label(b),
                    pct(saving.floor()),
                    cost(b),
                    cost(cur),
                    pct(min)
                );
                return (PlacementAction::Stay, cur, reason);
            }
            if young {
                let reason = format!(
                    "stay: {} is {} % cheaper, but {} was placed {} ago (min_stay {})",
                    label(b),
                    pct(saving),
                    label(cur),
                    ago(stayed),
                    ago(min_stay)
                );
                return (PlacementAction::Stay, cur, reason);
            }
            let reason = format!(
                "move: {} is {} % cheaper than {} ({} vs {}; min_saving {} %)",
                label(b),
                pct(saving),
                label(cur),
                cost(b),
                cost(cur),
                pct(min)
            );
            (PlacementAction::Move, b, reason)
        }
    }
}

/// The pool's hourly cost in one candidate at `prices`, and where the price comes from.
/// Priced at `nodes.desired` (one node for an empty pool, so that candidates compare).
fn price(spec: &Spec, pool: &GpuPool, prices: &PriceBook) -> (Option<f64>, String) {
    let Some(s) = shape::shape(spec, pool, catalog::catalog()) else {
        return (None, "not on offer".into());
    };
    let Some(t) = s.instance_types.first() else { return (None, "not on offer".into()) };
    let n = pool.nodes.desired.value.max(1);
    let (od, spot) = shape::split(n, pool.mix.on_demand_base.value, pool.mix.spot_percent.value);
    let od_price = prices.price(&s.provider, s.provider_kind, &s.region, t, Capacity::OnDemand);
    let spot_price = prices.price(&s.provider, s.provider_kind, &s.region, t, Capacity::Spot);
    let (Some(o), Some(sp)) = (od_price, spot_price) else { return (None, "no price".into()) };
    let hourly = od as f64 * o.usd_per_hour + spot as f64 * sp.usd_per_hour;
    // The price that weighs most says where the number comes from.
    let main = if spot >= od { &sp } else { &o };
    (Some(hourly), format!("{} {}", main.source, main.as_of))
}

/// Where the pool lives by the state: its placement record, else (a pool that just
/// became floating) the provider and region it was applied in, old enough to move.
fn prior_placement(prior: Option<&ResourceState>) -> Option<PlacementRecord> {
    let r = prior?;
    if let Some(p) = &r.placement {
        return Some(p.clone());
    }
    if r.nodes.is_empty() {
        return None;
    }
    Some(PlacementRecord { provider: r.provider.clone()?, region: r.region.clone()?, since_ms: 0, short: vec![] })
}

/// The clock to decide by: the current placement's provider, else the first candidate's.
fn clock(clocks: &BTreeMap<String, u64>, before: Option<&PlacementRecord>, cands: &[Candidate]) -> u64 {
    before
        .and_then(|b| clocks.get(&b.provider))
        .or_else(|| cands.iter().find_map(|c| clocks.get(&c.provider.value)))
        .copied()
        .unwrap_or(0)
}

fn is(c: &Candidate, provider: &str, region: &str) -> bool {
    c.provider.value == provider && c.region.value == region
}

fn round2(x: f64) -> f64 {
    (x * 100.0).round() / 100.0
}

fn pct(x: f64) -> String {
    format!("{}", x.round() as i64)
}

/// `2h`, `45m`: how long, to the minute.
fn ago(ms: u64) -> String {
    let mins = ms / 60_000;
    match (mins / 60, mins % 60) {
        (0, m) => format!("{m}m"),
        (h, 0) => format!("{h}h"),
        (h, m) => format!("{h}h{m}m"),
    }
}

fn rfc3339(ms: u64) -> String {
    crate::model::time::rfc3339_ms(ms)
}
