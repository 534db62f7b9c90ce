//! Multi-node jobs at apply (`jobs::regroup`, `providers::job_env`): the runs of a job
//! requeued whole are stopped before anything launches, and each replica after replica 0
//! carries replica 0's private address, which replica 0's launch answered. A replica whose
//! rendezvous address is not known yet (the cloud's launch answer had none) is not
//! launched: it stays queued until a refresh reads the address.

use crate::apply::{ApplyOptions, ProviderSet};
use crate::model::{JobPlacement, JobRun, ReplicaLaunch};
use crate::providers::job_env::{ENV_MASTER_ADDR, node_rank};

use super::Stopped;
use super::calls::stop;

/// Stop the other runs of every job the plan requeues whole, before the node changes.
pub(super) async fn stop_regrouped(
    jobs: &[JobPlacement],
    providers: &ProviderSet,
    opts: &ApplyOptions,
    stopped: &mut Stopped,
) {
    for j in jobs {
        let Some(g) = &j.regroup else { continue };
        for run in j.runs.iter().filter(|r| g.stops.contains(&r.id)) {
            if opts.cancel.is_cancelled() {
                continue;
            }
            let result = stop(providers, run).await;
            let msg = match &result {
                Ok(_) => format!("run {} stopped: {}; the job requeues whole", run.id, g.why),
                Err(e) => format!("could not stop run {} ({}): {e}", run.id, g.why),
            };
            opts.progress.event(&j.address.to_string(), &msg);
            stopped.0.insert(run.id.clone(), result);
        }
    }
}

/// The address replica `l` rendezvouses on when apply must set it: `Ok(None)` for a
/// launch that needs none from apply (not multi-node, replica 0 itself, or a rank whose
/// plan carries it); `Err(why)` when it is not known yet. `runs`: the job's runs as
/// recorded so far in this apply (replica 0's new run among them once it launched).
pub(super) fn master(j: &JobPlacement, l: &ReplicaLaunch, runs: &[JobRun]) -> Result<Option<String>, String> {
    // A cluster's pods find replica 0 by name (`providers::kube::manifest`).
    if l.replica == 0 || l.request.kube.is_some() || node_rank(&l.request.env).is_none() {
        return Ok(None);
    }
    let waits = || format!("replica {} waits for replica 0's private address", l.replica);
    match j.launches.iter().find(|r| r.replica == 0) {
        Some(first) => runs
            .iter()
            .find(|r| r.replica == 0 && r.attempt == first.attempt())
            .and_then(|r| r.address.clone())
            .map(Some)
            .ok_or_else(waits),
        None if l.request.env.contains_key(ENV_MASTER_ADDR) => Ok(None),
        None => Err(waits()),
    }
}
