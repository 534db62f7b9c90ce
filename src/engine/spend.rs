//! Month-to-date spend from the state's ledger, by clocks the caller read: shared by
//! [`gather`](super::gather) (the spend quotas are checked against) and
//! [`compose`](super::compose) (the spend a plan shows). Pure.

use std::collections::BTreeMap;

use crate::cost;
use crate::jobs;
use crate::spec::Spec;
use crate::state::State;

/// Month-to-date spend from the ledger in `state`, each line by `clock` of its provider
/// (the sim cloud's own, the wall clock for real clouds), per pool, quota and job, with
/// the runs in `jobs` as observed.
pub fn spend_by(
    spec: &Spec,
    state: &State,
    clock: impl Fn(&str) -> u64,
    jobs: &[jobs::JobPlacement],
) -> crate::state::spend::SpendReport {
    let observed: BTreeMap<String, Vec<crate::model::JobRun>> =
        jobs.iter().filter(|j| !j.runs.is_empty()).map(|j| (j.address.to_string(), j.runs.clone())).collect();
    let quotas: Vec<(String, Vec<String>)> = cost::all_quota_pools(spec)
        .into_iter()
        .map(|(q, pools)| (q.to_string(), pools.iter().map(ToString::to_string).collect()))
        .collect();
    crate::state::spend::month_to_date(
        state,
        clock,
        |pool| quotas.iter().filter(|(_, pools)| pools.iter().any(|p| p == pool)).map(|(q, _)| q.clone()).collect(),
        Some(&observed),
    )
}
