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
    accrue(spec, state, clock).report(state, Some(&observed_runs(jobs)))
}

/// The runs of `jobs` as observed, by job address (jobs with none left out).
pub fn observed_runs(jobs: &[jobs::JobPlacement]) -> BTreeMap<String, Vec<crate::model::JobRun>> {
    jobs.iter().filter(|j| !j.runs.is_empty()).map(|j| (j.address.to_string(), j.runs.clone())).collect()
}

/// The ledger in `state` summed as [`spend_by`] sums it, before any job run's share:
/// [`Accrued::report`](crate::state::spend::Accrued::report) adds them.
pub fn accrue(spec: &Spec, state: &State, clock: impl Fn(&str) -> u64) -> crate::state::spend::Accrued {
    // The quotas covering each pool, in the quotas' order, found once: a ledger line looks
    // its pool up instead of searching every quota's list of pools (4,000 lines over two
    // quotas of 1,000 pools were a third of a no-op plan).
    let mut quotas: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for (q, pools) in cost::all_quota_pools(spec) {
        // Each quota's pools are distinct (a set).
        let q = q.to_string();
        for pool in pools {
            quotas.entry(pool.to_string()).or_default().push(q.clone());
        }
    }
    crate::state::spend::accrue(state, clock, |pool| quotas.get(pool).cloned().unwrap_or_default())
}
