//! Job nodes no run owns (found by refresh), terminated in the jobs phase of an apply.

use super::noop;
use crate::addr::Address;
use crate::apply::{ApplyOptions, Outcome, ProviderSet, Status};
use crate::plan::Plan;

/// Job nodes no run owns (found by refresh): terminated.
pub(super) async fn release_orphan_job_nodes(
    plan: &Plan,
    providers: &ProviderSet,
    opts: &ApplyOptions,
) -> Vec<Outcome> {
    let mut outcomes = Vec::new();
    for o in &plan.orphan_job_nodes {
        let address: Address = o.job.parse().unwrap_or_else(|_| Address::new(crate::addr::Kind::Job, "unknown"));
        if opts.cancel.is_cancelled() {
            let why = format!("orphan job node {} not terminated: {}", o.node_id, opts.cancel.reason());
            outcomes.push(noop(address, Status::Skipped(why)));
            continue;
        }
        let result = match providers.get(&o.provider) {
            // A provider without jobs made no job node to release.
            Some(p) => match p.jobs() {
                Some(jobs) => jobs.release_job_node(&o.region, &o.node_id).await.map_err(|e| e.to_string()),
                None => Ok(()),
            },
            None => Err(format!("provider `{}` is not configured", o.provider)),
        };
        match result {
            Ok(()) => opts.progress.event(&o.job, &format!("orphan job node {} terminated", o.node_id)),
            Err(e) => outcomes
                .push(noop(address, Status::Failed(format!("could not terminate orphan job node {}: {e}", o.node_id)))),
        }
    }
    outcomes
}
