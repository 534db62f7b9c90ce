//! The job API calls (minimal for now): launch on a live node (after the node's readiness
//! check, `health::readiness_failure`), status, cancel, preempt.
//!
//! A job runs for the configured `job_duration` of wall-clock time from launch, then
//! succeeds, or fails when the failure-injection draw for its id counter says so. Reclaims
//! and terminations of its node end it early (see `world::end_nodes`).

use super::catalog_check::invalid;
use super::cloud::SimCloud;
use super::health::readiness_failure;
use super::rng::{self, Stream};
use std::collections::BTreeMap;

use super::world::{Change, JobEnd, SimJob, private_address};
use crate::providers::job_env::{self, ENV_MASTER_ADDR, ENV_MASTER_PORT, ENV_NNODES, ENV_NODE_RANK};
use crate::providers::{JobState, JobStatus, LaunchJob, ProviderError};

impl SimCloud {
    pub(super) fn api_launch_job(&self, req: &LaunchJob) -> Result<JobStatus, ProviderError> {
        let mut inner = self.lock();
        self.begin(&mut inner, "launch_job")?;
        let now = inner.world.now_ms();
        if let Some(job) = inner.world.job_by_token(&req.token) {
            return Ok(job.status(now));
        }
        let node = match inner.world.nodes.get(&req.node_id) {
            Some(n) if n.is_managed() => n,
            _ => return Err(invalid("SimNodeNotFound", format!("no gpuplan node `{}` to run a job on", req.node_id))),
        };
        if !node.is_live() {
            return Err(invalid(
                "SimNodeNotRunning",
                format!("node `{}` is {:?}, not running", req.node_id, node.state).to_lowercase(),
            ));
        }
        let region = node.region.clone();
        let rendezvous = rendezvous(req, &req.node_id);
        let mut next = inner.world.counter;
        let n = next;
        let id = inner.next_id("j-", self.config.seed, &mut next);
        let duration_ms = u64::try_from(self.config.job_duration.as_millis()).unwrap_or(u64::MAX);
        let job = SimJob {
            id,
            job: req.job.clone(),
            pool: req.pool.clone(),
            node_id: req.node_id.clone(),
            region,
            attempt: req.attempt,
            token: req.token.clone(),
            started_ms: now,
            ends_ms: now.saturating_add(duration_ms),
            will_fail: rng::chance(self.config.seed, Stream::JobFailure, n, self.config.failure_rate),
            // The node's readiness check runs before the job: a node that fails it ends
            // the run at once, saying the node failed, not the job.
            ended: readiness_failure(inner.world.faults.get(&req.node_id), req.readiness).map(|why| JobEnd {
                state: JobState::Failed,
                at_ms: now,
                message: Some(crate::providers::userdata::readiness::message(&why)),
            }),
            rendezvous,
        };
        let status = job.status(now);
        inner.commit(vec![Change::Counter { next }, Change::Job { job }])?;
        Ok(status)
    }

    pub(super) fn api_job_status(&self, region: &str, id: &str) -> Result<JobStatus, ProviderError> {
        let mut inner = self.lock();
        self.begin(&mut inner, "job_status")?;
        let now = inner.world.now_ms();
        Ok(find(&inner.world.jobs, region, id)?.status(now))
    }

    /// Cancel a running job; a finished one is returned as it is.
    pub(super) fn api_cancel_job(&self, region: &str, id: &str) -> Result<JobStatus, ProviderError> {
        self.end_job(region, id, "cancel_job", JobState::Cancelled, "cancelled")
    }

    /// Stop a running job for gpuplan's own reasons (preemption, its node removed).
    pub(super) fn api_preempt_job(&self, region: &str, id: &str) -> Result<JobStatus, ProviderError> {
        self.end_job(region, id, "preempt_job", JobState::Preempted, "stopped by gpuplan")
    }

    fn end_job(
        &self,
        region: &str,
        id: &str,
        call: &str,
        state: JobState,
        message: &str,
    ) -> Result<JobStatus, ProviderError> {
        let mut inner = self.lock();
        self.begin(&mut inner, call)?;
        let now = inner.world.now_ms();
        let job = find(&inner.world.jobs, region, id)?;
        if job.is_running(now) {
            let end = JobEnd { state, at_ms: now, message: Some(message.into()) };
            inner.commit(vec![Change::JobsEnded { ids: vec![id.to_string()], end }])?;
        }
        Ok(find(&inner.world.jobs, region, id)?.status(now))
    }
}

/// What a multi-node job's replica sees of its rendezvous: the variables its launch
/// carried, replica 0 reading its own node's address as its boot script does on a cloud.
fn rendezvous(req: &LaunchJob, node_id: &str) -> BTreeMap<String, String> {
    let Some(rank) = job_env::node_rank(&req.env) else { return BTreeMap::new() };
    let mut env: BTreeMap<String, String> = req
        .env
        .iter()
        .filter(|(k, _)| [ENV_MASTER_ADDR, ENV_MASTER_PORT, ENV_NNODES, ENV_NODE_RANK].contains(&k.as_str()))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    if rank == 0 {
        env.entry(ENV_MASTER_ADDR.into()).or_insert_with(|| private_address(node_id));
    }
    env
}

fn find<'a>(jobs: &'a BTreeMap<String, SimJob>, region: &str, id: &str) -> Result<&'a SimJob, ProviderError> {
    jobs.get(id)
        .filter(|j| j.region == region)
        .ok_or_else(|| invalid("SimJobNotFound", format!("no job `{id}` in region `{region}`")))
}
