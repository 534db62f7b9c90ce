//! Job launches on CVM: one instance of the pool's shape per launch, booted with the
//! user-data job script; its state is the job's state. CVM has no console-output API,
//! so a job that powered its node off is reported succeeded with that caveat.

use serde_json::Value;

use super::TencentProvider;
use super::cvm::tags_of;
use crate::providers::http::job_node_request;
use crate::providers::{ErrorClass, JobState, JobStatus, LaunchJob, ProviderError, TAG_ATTEMPT, TAG_JOB};

impl TencentProvider {
    pub(super) async fn launch(&self, req: &LaunchJob) -> Result<JobStatus, ProviderError> {
        let shape = job_node_request(req)?;
        let made = self.run_instances(&shape).await?;
        let Some(node) = made.nodes.first() else {
            return Err(made.errors.into_iter().next().unwrap_or_else(|| {
                ProviderError::new(ErrorClass::OutOfCapacity, "ResourceInsufficient", "no instance was created")
            }));
        };
        Ok(JobStatus {
            id: node.id.clone(),
            job: req.job.clone(),
            node_id: node.id.clone(),
            state: JobState::Queued,
            attempt: req.attempt,
            message: Some(format!("instance {} in {} boots the job", node.id, node.zone)),
        })
    }

    async fn job_instance(&self, region: &str, id: &str) -> Result<Value, ProviderError> {
        let found = self.describe_ids(region, &[id.to_string()]).await?;
        found.into_iter().find(|i| tags_of(i).contains_key(TAG_JOB)).ok_or_else(|| {
            ProviderError::new(
                ErrorClass::Invalid,
                "JobNotFound",
                format!("no gpuplan job instance `{id}` in {region}"),
            )
        })
    }

    pub(super) async fn status(&self, region: &str, id: &str) -> Result<JobStatus, ProviderError> {
        let inst = self.job_instance(region, id).await?;
        job_status(&inst, id)
    }

    pub(super) async fn cancel(&self, region: &str, id: &str) -> Result<JobStatus, ProviderError> {
        let inst = self.job_instance(region, id).await?;
        let mut status = job_status(&inst, id)?;
        if matches!(status.state, JobState::Queued | JobState::Running) {
            self.terminate(region, &[id.to_string()]).await?;
            status.state = JobState::Cancelled;
            status.message = Some("cancelled: instance terminated".into());
        }
        Ok(status)
    }
}

fn job_status(inst: &Value, id: &str) -> Result<JobStatus, ProviderError> {
    let tags = tags_of(inst);
    let spot = inst["InstanceChargeType"].as_str() == Some("SPOTPAID");
    let by_us = inst["LatestOperation"].as_str() == Some("TerminateInstances");
    let (state, message) = match inst["InstanceState"].as_str().unwrap_or_default() {
        "PENDING" | "STARTING" => (JobState::Queued, None),
        "RUNNING" | "REBOOTING" => (JobState::Running, None),
        "STOPPED" | "STOPPING" => (
            JobState::Succeeded,
            Some("the job powered its node off; CVM offers no console output to read its exit code".to_string()),
        ),
        "SHUTDOWN" | "TERMINATING" if spot && !by_us => (JobState::Preempted, Some("spot instance reclaimed".into())),
        "TERMINATING" | "SHUTDOWN" => (JobState::Cancelled, Some("instance terminated".into())),
        other => (JobState::Failed, Some(format!("instance is {other}"))),
    };
    let job = tags.get(TAG_JOB).and_then(|j| j.parse().ok()).ok_or_else(|| {
        ProviderError::new(
            ErrorClass::Invalid,
            "JobNotFound",
            format!("instance `{id}` carries no valid {TAG_JOB} tag"),
        )
    })?;
    Ok(JobStatus {
        id: id.to_string(),
        job,
        node_id: id.to_string(),
        state,
        attempt: tags.get(TAG_ATTEMPT).and_then(|a| a.parse().ok()).unwrap_or(0),
        message,
    })
}
