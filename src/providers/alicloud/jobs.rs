//! Job launches on ECS: one instance of the pool's shape per launch, booted with the
//! user-data job script. A stopped instance's exit code is read back from
//! GetInstanceConsoleOutput (base64 console text with the `gpuplan-job-exit=N` line).

use base64::Engine as _;
use serde_json::Value;

use super::AlibabaProvider;
use super::ecs::{capacity_of, recycling, tags_of};
use crate::providers::http::job_node_request;
use crate::providers::userdata::exit_code;
use crate::providers::{Capacity, ErrorClass, JobState, JobStatus, LaunchJob, ProviderError, TAG_ATTEMPT, TAG_JOB};

impl AlibabaProvider {
    pub(super) async fn launch(&self, req: &LaunchJob) -> Result<JobStatus, ProviderError> {
        let shape = job_node_request(req)?;
        let made = self.run_instances(&shape).await?;
        let Some(node) = made.nodes.first() else {
            return Err(made.errors.into_iter().next().unwrap_or_else(|| {
                ProviderError::new(ErrorClass::OutOfCapacity, "OperationDenied.NoStock", "no instance was created")
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
        let mut status = base_status(&inst, id)?;
        if inst["Status"].as_str() == Some("Stopped") && status.state != JobState::Preempted {
            let params = vec![("InstanceId".to_string(), id.to_string())];
            let resp = self.client.ecs("GetInstanceConsoleOutput", region, params).await?;
            let console = resp["ConsoleOutput"]
                .as_str()
                .and_then(|b| base64::engine::general_purpose::STANDARD.decode(b).ok())
                .map(|b| String::from_utf8_lossy(&b).into_owned())
                .unwrap_or_default();
            (status.state, status.message) = match exit_code(&console) {
                Some(0) => (JobState::Succeeded, Some("exit code 0".into())),
                Some(code) => (JobState::Failed, Some(format!("exit code {code}"))),
                None => (JobState::Failed, Some("the node stopped without printing an exit code".into())),
            };
        }
        Ok(status)
    }

    pub(super) async fn cancel(&self, region: &str, id: &str) -> Result<JobStatus, ProviderError> {
        let inst = self.job_instance(region, id).await?;
        let mut status = base_status(&inst, id)?;
        if matches!(status.state, JobState::Queued | JobState::Running) {
            self.delete(region, &[id.to_string()]).await?;
            status.state = JobState::Cancelled;
            status.message = Some("cancelled: instance deleted".into());
        }
        Ok(status)
    }
}

fn base_status(inst: &Value, id: &str) -> Result<JobStatus, ProviderError> {
    let tags = tags_of(inst);
    let (state, message) = if capacity_of(inst) == Capacity::Spot && recycling(inst) {
        (JobState::Preempted, Some("spot instance reclaimed".to_string()))
    } else {
        match inst["Status"].as_str().unwrap_or_default() {
            "Pending" | "Starting" => (JobState::Queued, None),
            "Running" | "Stopping" => (JobState::Running, None),
            "Stopped" => (JobState::Succeeded, None),
            other => (JobState::Failed, Some(format!("instance is {other}"))),
        }
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
