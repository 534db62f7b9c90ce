//! The demand waiting per pool, for the autoscaler: which jobs wait, for how many GPUs,
//! since when. Read from a plan's jobs section, so it is pure.

use std::collections::BTreeMap;

use crate::addr::Address;
use crate::jobs::model::{Placement, WaitCode};
use crate::plan::Plan;

/// One job waiting for GPUs on a pool.
#[derive(Debug, Clone, PartialEq)]
pub struct Waiting {
    pub job: Address,
    /// GPUs still needed: replicas waiting × GPUs per replica.
    pub gpus: u64,
    /// Replicas waiting and GPUs each needs on one node.
    pub replicas: u32,
    pub gpus_per_replica: u32,
    /// Since when it waits (RFC 3339, recorded in state at apply); `None` when this plan
    /// is the first to see it wait (treat as "now").
    pub since: Option<String>,
    /// `quota`, `capacity` or `priority`: only `capacity` and `priority` waits are helped
    /// by more nodes.
    pub reason: Option<WaitCode>,
}

/// Jobs the plan could not admit, per pool, in admission order (priority, then age).
pub fn waiting(plan: &Plan) -> BTreeMap<Address, Vec<Waiting>> {
    let mut out: BTreeMap<Address, Vec<Waiting>> = BTreeMap::new();
    for j in plan.jobs.iter().filter(|j| j.placement == Placement::Waiting) {
        let waiting_replicas = j.replicas.saturating_sub(j.capacity.len() as u32).max(1);
        out.entry(j.pool.clone()).or_default().push(Waiting {
            job: j.address.clone(),
            gpus: waiting_replicas as u64 * j.gpus_per_replica as u64,
            replicas: waiting_replicas,
            gpus_per_replica: j.gpus_per_replica,
            since: j.waiting_since.clone(),
            reason: j.reason.as_ref().map(|r| r.code),
        });
    }
    out
}

/// Pools with jobs that more nodes would help (waits for capacity or priority).
pub fn scale_up_demand(plan: &Plan) -> BTreeMap<Address, u64> {
    waiting(plan)
        .into_iter()
        .map(|(pool, w)| (pool, w.iter().filter(|w| w.reason != Some(WaitCode::Quota)).map(|w| w.gpus).sum::<u64>()))
        .filter(|(_, g)| *g > 0)
        .collect()
}
