//! The job port's calls an apply makes, each through [`ports`]: a provider without jobs
//! cannot launch, cancel or stop a run (the missing port's error), and made no job node to
//! release.

use crate::apply::ProviderSet;
use crate::model::JobRun;
use crate::providers::{
    JobStatus, LaunchJob, Provider, ProviderError, TAG_ADDRESS, TAG_LINEAGE, TAG_MANAGED, TAG_PROVIDER, Tags, ports,
};

/// Stop one run for gpuplan's own reasons (see `JobPort::preempt_job`).
pub(super) async fn stop(providers: &ProviderSet, run: &JobRun) -> Result<JobStatus, String> {
    match providers.get(&run.provider) {
        Some(p) => async { ports::jobs_of(p.as_ref())?.preempt_job(&run.region, &run.id).await }
            .await
            .map_err(|e| e.to_string()),
        None => Err(format!("provider `{}` is not configured", run.provider)),
    }
}

/// Launch one run; a provider without jobs cannot. A node made for the run launches once
/// what its pool's fabric needs is in place ([`crate::providers::FabricPort`]) and, when
/// it launches into its pool's group (placement group, HPC cluster, deployment set), once
/// the group is made or found ([`crate::providers::PlacementPort`], tagged as the pool's
/// groups are, `apply::groups`), both fenced.
pub(super) async fn launch(p: &dyn Provider, req: &LaunchJob) -> Result<JobStatus, ProviderError> {
    let jobs = ports::jobs_of(p)?;
    if let (Some(shape), Some(port)) = (&req.shape, p.fabric())
        && let Some(fabric) = shape.hardware.as_ref().and_then(|h| h.fabric)
    {
        port.ensure_fabric(&shape.region, fabric).await?;
    }
    if let (Some(shape), Some(port)) = (&req.shape, p.placement())
        && let Some(name) = shape.hardware.as_ref().and_then(|h| h.placement_group.as_deref())
    {
        let own = [TAG_MANAGED, TAG_LINEAGE, TAG_ADDRESS, TAG_PROVIDER];
        let tags: Tags = shape.tags.iter().filter(|(k, _)| own.contains(k)).collect();
        port.ensure_group(&shape.region, &shape.zone, name, crate::apply::groups::STRATEGY, &tags).await?;
    }
    jobs.launch_job(req).await
}

/// Cancel one run; a provider without jobs cannot.
pub(super) async fn cancel(p: &dyn Provider, region: &str, id: &str) -> Result<JobStatus, ProviderError> {
    ports::jobs_of(p)?.cancel_job(region, id).await
}

/// Release the node a run's job VM was; a provider without jobs made none.
pub(super) async fn release(p: &dyn Provider, region: &str, id: &str) -> Result<(), ProviderError> {
    match p.jobs() {
        Some(jobs) => jobs.release_job_node(region, id).await,
        None => Ok(()),
    }
}
