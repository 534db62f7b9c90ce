//! The jobs running on each pool now: the runs state records as queued or running (as
//! refresh last observed them, when it did), of jobs not cancelled. Policies read them
//! as `plan.pools[…].running_jobs`, so `no_destroy_pool_with_jobs` stops a destroy only
//! while something runs, not whenever the spec names a job. Pure.

use std::collections::{BTreeMap, BTreeSet};

use crate::addr::{Address, Kind};
use crate::model::{JobRun, JobStatus};
use crate::state::State;

/// Pool address → the jobs running on it, each once, in address order.
pub type RunningJobs = BTreeMap<Address, Vec<Address>>;

/// The running jobs of every pool. `observed` (run id → status, from a refresh) wins over
/// the state's record: a run that ended since the last apply no longer counts.
pub fn by_pool(state: &State, observed: Option<&BTreeMap<String, JobStatus>>) -> RunningJobs {
    let mut live: Vec<(Address, &JobRun, Option<Address>)> = Vec::new();
    for (key, r) in &state.resources {
        let Some(rec) = r.job.as_ref().filter(|rec| !rec.cancelled) else { continue };
        let Ok(job) = key.parse::<Address>() else { continue };
        let configured = configured_pool(r);
        for run in rec.runs.iter().filter(|run| still_active(run, observed)) {
            live.push((job.clone(), run, configured.clone()));
        }
    }
    if live.is_empty() {
        return RunningJobs::new();
    }
    // Only the nodes these runs use are looked up, so a large fleet with a few jobs costs
    // one pass over its nodes and no index of them.
    let wanted: BTreeSet<&str> = live.iter().map(|(_, run, _)| run.node_id.as_str()).collect();
    let mut node_pool: BTreeMap<&str, Address> = BTreeMap::new();
    for (key, r) in state.resources.iter().filter(|(_, r)| r.kind == Kind::GpuPool.as_str()) {
        for n in r.nodes.iter().filter(|n| wanted.contains(n.id.as_str())) {
            if let Ok(pool) = key.parse::<Address>() {
                node_pool.insert(n.id.as_str(), pool);
            }
        }
    }
    let mut out: BTreeMap<Address, BTreeSet<Address>> = BTreeMap::new();
    for (job, run, configured) in live {
        // The pool whose node it runs on; a run on a node of its own (a job VM, a
        // Kubernetes pod) belongs to the pool its job was applied with.
        let Some(pool) = node_pool.get(run.node_id.as_str()).cloned().or(configured) else { continue };
        out.entry(pool).or_default().insert(job);
    }
    out.into_iter().map(|(pool, jobs)| (pool, jobs.into_iter().collect())).collect()
}

fn still_active(run: &JobRun, observed: Option<&BTreeMap<String, JobStatus>>) -> bool {
    match observed.and_then(|o| o.get(&run.id)) {
        // A run whose node stopped (exit code awaited) runs no more.
        Some(s) => matches!(s.state, crate::model::JobState::Queued | crate::model::JobState::Running),
        None => matches!(run.status, crate::model::JobState::Queued | crate::model::JobState::Running),
    }
}

/// The `pool` the job was last applied with (its configuration in state).
fn configured_pool(r: &crate::state::ResourceState) -> Option<Address> {
    let pool = r.config.get("pool")?;
    pool.as_str()?.parse().ok()
}

#[cfg(test)]
mod tests;
