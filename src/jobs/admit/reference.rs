//! The admission before it was made near-linear, kept verbatim as the reference the
//! differential property test compares [`super::admit`] with: a straightforward loop
//! that re-scans the queue, the quotas and the earlier admissions for every job.

use std::collections::BTreeMap;

use super::{Admission, Demand, PoolRoom, QuotaRoom, needs, preferences};
use crate::addr::Address;
use crate::jobs::model::{WaitCode, WaitReason, priority_str};
use crate::model::money::usd;
use crate::providers::Capacity;
use crate::spec::model::Priority;

/// Admit `demands` into `pools` within `quotas`. Returns one decision per demand, in
/// admission order.
pub fn admit(
    mut demands: Vec<Demand>,
    pools: &BTreeMap<Address, PoolRoom>,
    quotas: &BTreeMap<Address, QuotaRoom>,
) -> Vec<Admission> {
    super::order(&mut demands);
    let initial = pools.clone();
    let mut pools = pools.clone();
    let mut quotas = quotas.clone();
    let mut takers: BTreeMap<Address, Vec<Taker>> = BTreeMap::new();
    let mut out = Vec::with_capacity(demands.len());
    // Fair share, when a quota sets `weight`: among the waiting jobs of the highest
    // priority left, the one whose quota uses the fewest GPUs per unit of weight goes
    // next (ties: age); otherwise priority, then age.
    let fair = quotas.values().any(|q| q.weight.is_some());
    let mut remaining: std::collections::VecDeque<Demand> = demands.into();
    while let Some(first) = remaining.front() {
        let next = if fair {
            let top = first.priority;
            let share = |d: &Demand| d.quota.as_ref().and_then(|q| quotas.get(q)).map_or(0.0, QuotaRoom::share);
            remaining
                .iter()
                .enumerate()
                .filter(|(_, d)| d.priority == top)
                .min_by(|(i, a), (j, b)| share(a).total_cmp(&share(b)).then(i.cmp(j)))
                .map_or(0, |(i, _)| i)
        } else {
            0
        };
        let Some(d) = remaining.remove(next) else { break };
        let before: Vec<u32> = pools.get(&d.pool).map(|r| r.nodes.iter().map(|n| n.free).collect()).unwrap_or_default();
        let mut decision = decide(&d, &initial, &mut pools, &mut quotas, &takers);
        // Why it came after others of its priority: its quota's share.
        if fair
            && let (Some(r), Some(q)) = (decision.reason.as_mut(), d.quota.as_ref())
            && matches!(r.code, WaitCode::Capacity)
            && let Some(qr) = quotas.get(q)
        {
            r.message += &format!(
                " (fair share: `{q}` has {} GPUs in use at weight {}, so quotas using less per weight went first)",
                qr.used_gpus,
                qr.weight.unwrap_or(1.0)
            );
        }
        if decision.placed.is_some()
            && let Some(room) = pools.get(&d.pool)
        {
            let taken = room.nodes.iter().zip(&before).map(|(n, b)| b - n.free).collect();
            takers.entry(d.pool.clone()).or_default().push(Taker {
                priority: d.priority,
                address: d.address.clone(),
                taken,
            });
        }
        out.push(decision);
    }
    out
}

/// A job admitted earlier in this round: what it took from each node of its pool.
struct Taker {
    priority: Priority,
    address: Address,
    taken: Vec<u32>,
}

fn wait(d: &Demand, code: WaitCode, message: String) -> Admission {
    Admission { address: d.address.clone(), placed: None, reason: Some(WaitReason { code, message }) }
}

/// The quota's refusal of GPUs it does not allow or has no room for, if any.
fn over_quota(d: &Demand, room: &PoolRoom, q: &Address, qr: &QuotaRoom) -> Option<Admission> {
    if !qr.allowed_gpus.is_empty() && !qr.allowed_gpus.iter().any(|g| g == &room.gpu) {
        return Some(wait(
            d,
            WaitCode::Quota,
            format!("`{q}` does not allow {} GPUs (allowed: {})", room.gpu, qr.allowed_gpus.join(", ")),
        ));
    }
    let max = qr.max_gpus.filter(|max| qr.used_gpus + d.gpus() > *max)?;
    Some(wait(
        d,
        WaitCode::Quota,
        format!("`{q}` allows {max} GPUs; {} are in use and this job needs {}", qr.used_gpus, d.gpus()),
    ))
}

fn decide(
    d: &Demand,
    initial: &BTreeMap<Address, PoolRoom>,
    pools: &mut BTreeMap<Address, PoolRoom>,
    quotas: &mut BTreeMap<Address, QuotaRoom>,
    takers: &BTreeMap<Address, Vec<Taker>>,
) -> Admission {
    let Some(room) = pools.get_mut(&d.pool) else {
        return wait(d, WaitCode::Capacity, format!("`{}` has no nodes in this plan", d.pool));
    };
    let quota = d.quota.as_ref().and_then(|q| quotas.get(q).map(|r| (q, r)));
    if let Some(refused) = quota.and_then(|(q, qr)| over_quota(d, room, q, qr)) {
        return refused;
    }
    let prefs = preferences(d, room.fallback);
    let Some((nodes, placed)) = fit(&room.nodes, d, &prefs) else {
        let fits_initially = initial.get(&d.pool).and_then(|r| fit(&r.nodes, d, &prefs)).is_some();
        let takers = takers.get(&d.pool).map(Vec::as_slice).unwrap_or_default();
        // Would it fit if the higher-priority jobs had not taken anything?
        let mut without_higher = room.nodes.clone();
        let mut higher: Vec<&Address> = Vec::new();
        for t in takers.iter().filter(|t| t.priority < d.priority) {
            for (n, g) in without_higher.iter_mut().zip(&t.taken) {
                n.free += g;
            }
            if t.taken.iter().any(|g| *g > 0) {
                higher.push(&t.address);
            }
        }
        let what = needs(d, &prefs);
        if !higher.is_empty() && fit(&without_higher, d, &prefs).is_some() {
            let names: Vec<String> = higher.iter().take(3).map(|a| format!("`{a}`")).collect();
            return wait(
                d,
                WaitCode::Priority,
                format!("{what}; higher-priority jobs took them ({})", names.join(", ")),
            );
        }
        if fits_initially {
            return wait(
                d,
                WaitCode::Capacity,
                format!("{what}; {} priority jobs queued earlier took them", priority_str(d.priority)),
            );
        }
        let free: u32 = room.nodes.iter().filter(|n| prefs.contains(&n.capacity)).map(|n| n.free).sum();
        return wait(d, WaitCode::Capacity, format!("{what}; `{}` has {free} free on such nodes", d.pool));
    };
    if let Some((q, qr)) = quota {
        let cost: f64 = placed.iter().map(|c| room.price(*c) * d.gpus_per_replica as f64).sum();
        let hourly = qr.used_hourly_usd + cost;
        if let Some(limit) = qr.hourly_usd
            && hourly > limit + 1e-9
        {
            return wait(
                d,
                WaitCode::Quota,
                format!(
                    "`{q}` budget is {} USD/h; running jobs use {} and this one would add {}",
                    usd(limit),
                    usd(qr.used_hourly_usd),
                    usd(cost)
                ),
            );
        }
        if let Some(limit) = qr.monthly_usd
            && hourly * crate::cost::HOURS_PER_MONTH > limit + 1e-9
        {
            return wait(
                d,
                WaitCode::Quota,
                format!(
                    "`{q}` budget is {} USD/month; with this job its jobs would cost {} USD/month",
                    usd(limit),
                    usd(hourly * crate::cost::HOURS_PER_MONTH)
                ),
            );
        }
        let q = q.clone();
        if let Some(qr) = quotas.get_mut(&q) {
            qr.used_gpus += d.gpus();
            qr.used_hourly_usd = hourly;
        }
    }
    room.nodes = nodes;
    Admission { address: d.address.clone(), placed: Some(placed), reason: None }
}

/// Place every replica (best fit: the fullest node that still has room, preferred
/// capacity first). `None` unless all fit.
fn fit(nodes: &[super::NodeRoom], d: &Demand, prefs: &[Capacity]) -> Option<(Vec<super::NodeRoom>, Vec<Capacity>)> {
    let mut nodes = nodes.to_vec();
    let mut placed = Vec::with_capacity(d.replicas as usize);
    for _ in 0..d.replicas {
        let slot = prefs.iter().find_map(|cap| {
            nodes
                .iter()
                .enumerate()
                .filter(|(_, n)| n.capacity.market() == *cap && n.free >= d.gpus_per_replica)
                .min_by_key(|(i, n)| (n.free, *i))
                .map(|(i, _)| i)
        })?;
        nodes[slot].free -= d.gpus_per_replica;
        placed.push(nodes[slot].capacity);
    }
    Some((nodes, placed))
}
