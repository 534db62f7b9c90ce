//! Quotas while floating pools move. A move starts the new nodes while all the old ones
//! still run (docs/design/floating-pools.md), so a quota's `max_gpus` and
//! `budget.hourly_usd` are checked at that peak as well as after the plan. Pure.
//!
//! [`breaches`] finds each limit a move's peak breaks while "after" fits it (a limit that
//! "after" breaks already fails the quota's own verdict). The engine keeps a move that can
//! wait where it is ([`holds`]); one that cannot (its current placement can no longer hold
//! the pool) is a plan error at the moving pool ([`errors`]). `budget.monthly_usd` is a
//! run rate over a month: the overlap, which lasts while the new nodes start, is not
//! checked against it.

use std::collections::BTreeMap;

use crate::addr::Address;
use crate::cost::placement::{Hold, Resolved};
use crate::cost::{CostReport, Peak, PoolCost};
use crate::model::money::usd;
use crate::plan::model::{PlacementAction, PlanError};
use crate::spec::Spec;

/// One quota limit broken while both sets of the moving pools run.
#[derive(Debug, Clone, PartialEq)]
pub struct Breach {
    pub quota: Address,
    /// The quota's pools that move in this plan.
    pub moving: Vec<Address>,
    /// `32 GPUs > max_gpus 16`.
    pub detail: String,
    /// `would hold 32 GPUs, above its max_gpus 16 (gpu_pool.train: 16 GPUs where it
    /// runs + 16 where it goes)`.
    pub claim: String,
}

/// Every quota limit the plan's moves break at their peak.
pub fn breaches(spec: &Spec, cost: &CostReport) -> Vec<Breach> {
    let mut out = Vec::new();
    for q in &cost.quotas {
        let (Some(peak), Some(limits)) = (q.peak, spec.quotas.get(&q.address)) else { continue };
        let moving: Vec<&PoolCost> =
            cost.pools.iter().filter(|p| p.peak.is_some() && q.pools.contains(&p.address)).collect();
        let max_gpus = limits.max_gpus.as_ref().map(|m| u64::from(m.value));
        if let Some(max) = max_gpus
            && peak.gpus > max
            && q.gpus_after <= max
        {
            out.push(gpus(&q.address, &moving, peak, max));
        }
        let max_hourly = limits.budget.as_ref().and_then(|b| b.hourly_usd.as_ref()).map(|h| h.value);
        if let Some(max) = max_hourly
            && peak.hourly_usd > max + 1e-9
            && q.hourly_after <= max + 1e-9
        {
            out.push(hourly(&q.address, &moving, peak, max));
        }
    }
    out
}

fn gpus(quota: &Address, moving: &[&PoolCost], peak: Peak, max: u64) -> Breach {
    let parts: Vec<String> = moving
        .iter()
        .map(|p| {
            let new = p.peak.map_or(0, |k| k.gpus.saturating_sub(p.gpus_before));
            format!("{}: {} GPUs where it runs + {new} where it goes", p.address, p.gpus_before)
        })
        .collect();
    Breach {
        quota: quota.clone(),
        moving: moving.iter().map(|p| p.address.clone()).collect(),
        detail: format!("{} GPUs > max_gpus {max}", peak.gpus),
        claim: format!("would hold {} GPUs, above its max_gpus {max} ({})", peak.gpus, parts.join("; ")),
    }
}

fn hourly(quota: &Address, moving: &[&PoolCost], peak: Peak, max: f64) -> Breach {
    let parts: Vec<String> = moving
        .iter()
        .map(|p| {
            let new = p.peak.map_or(0.0, |k| k.hourly_usd - p.hourly_before);
            format!("{}: {} USD/h where it runs + {} where it goes", p.address, usd(p.hourly_before), usd(new))
        })
        .collect();
    Breach {
        quota: quota.clone(),
        moving: moving.iter().map(|p| p.address.clone()).collect(),
        detail: format!("{} USD/h > budget.hourly_usd {} USD/h", usd(peak.hourly_usd), usd(max)),
        claim: format!(
            "would cost {} USD/h, above its budget.hourly_usd {} USD/h ({})",
            usd(peak.hourly_usd),
            usd(max),
            parts.join("; ")
        ),
    }
}

/// The moves of `breaches` that can wait: each stays where it is, naming the first quota
/// it would break.
pub fn holds(breaches: &[Breach], placed: &Resolved) -> BTreeMap<Address, Hold> {
    let mut out = BTreeMap::new();
    for b in breaches {
        for addr in &b.moving {
            let Some(c) = placed.chosen.get(addr) else { continue };
            if c.decision.action == PlacementAction::Move && c.can_stay.is_some() {
                out.entry(addr.clone())
                    .or_insert_with(|| Hold { quota: b.quota.to_string(), detail: b.detail.clone() });
            }
        }
    }
    out
}

/// A plan error at each moving pool of each breach: the moves that could not wait.
pub fn errors(breaches: &[Breach]) -> Vec<PlanError> {
    let mut out = Vec::new();
    for b in breaches {
        for addr in &b.moving {
            out.push(PlanError {
                address: addr.clone(),
                message: format!("during the move both sets run: {} {}", b.quota, b.claim),
                hint: Some(format!(
                    "the pool cannot stay where it runs; raise `{}`'s limit to cover the overlap, or make the pool smaller for the move",
                    b.quota
                )),
                location: None,
                span: None,
            });
        }
    }
    out
}
