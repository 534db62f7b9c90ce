//! Job launches on CVM: one instance of the pool's shape per launch, booted with the
//! user-data job script; its state is the job's state. CVM has no console-output API,
//! so a job that powered its node off is reported succeeded with that caveat.

use serde_json::Value;

use super::TencentProvider;
use super::cvm::tags_of;
use crate::providers::http::job_node_request;
use crate::providers::launch;
use crate::providers::{JobState, JobStatus, LaunchJob, ProviderError};

impl TencentProvider {
    pub(super) async fn launch(&self, req: &LaunchJob) -> Result<JobStatus, ProviderError> {
        let made = self.run_instances(&job_node_request(req)?).await?;
        launch::launched(req, made, "ResourceInsufficient")
    }

    async fn job_instance(&self, region: &str, id: &str) -> Result<Value, ProviderError> {
        let found = self.describe_ids(region, &[id.to_string()]).await?;
        launch::job_instance(found, tags_of, region, id)
    }

    pub(super) async fn status(&self, region: &str, id: &str) -> Result<JobStatus, ProviderError> {
        let inst = self.job_instance(region, id).await?;
        job_status(&inst, id)
    }

    /// Terminate a finished job's instance (checked to be a gpuplan job node first).
    pub(super) async fn release(&self, region: &str, id: &str) -> Result<(), ProviderError> {
        self.job_instance(region, id).await?;
        self.terminate(region, &[id.to_string()]).await.map(|_| ())
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
    launch::job_status(id, &tags_of(inst), state, message)
}
