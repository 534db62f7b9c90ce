//! Job nodes on ECS ([`JobNodes`]; the job port itself is the shared core's,
//! `signed_json::jobs`): one instance of the pool's shape per launch, booted with the
//! user-data job script. A stopped instance's exit code is read back from
//! GetInstanceConsoleOutput (base64 console text with the `gpuplan-job-exit=N` line);
//! while the console shows none, the run is stopped with its exit code awaited, read
//! again at each refresh until `jobs::refresh` fails it after a grace. A
//! running node past the boot deadline whose Cloud Assistant answers that it has no job
//! log never started its job: its run fails (see [`crate::providers::boot`]).

use async_trait::async_trait;
use base64::Engine as _;
use serde_json::Value;

use super::AlibabaProvider;
use super::ecs::{capacity_of, recycling, tags_of};
use crate::providers::signed_json::cloud::{Instances, JobNodes};
use crate::providers::userdata::exit_code;
use crate::providers::{Capacity, JobState, JobStatus, NodePort, ProviderError};
use crate::providers::{boot, launch};

impl AlibabaProvider {
    /// A running job node past the boot deadline: is its job's log there? (The console
    /// cannot tell: ECS caches it at boot and shutdown only.)
    async fn boot_check(&self, region: &str, inst: &Value, running: JobStatus) -> JobStatus {
        let now = crate::providers::Provider::clock_ms(self);
        let created = inst["CreationTime"].as_str().and_then(boot::created_ms);
        let Some(age_secs) = created.and_then(|at| boot::past_deadline(at, now)) else { return running };
        let check = self.agents.job_log_exists(region, &running.node_id).await;
        boot::verdict(running, age_secs, "Cloud Assistant", check)
    }
}

#[async_trait]
impl JobNodes for AlibabaProvider {
    const STOCKOUT: &'static str = "OperationDenied.NoStock";
    /// The job script powers its node off; its exit code is read from the console.
    const KEEP_JOB_NODE: bool = false;

    /// The instance's state, and for a stopped one the exit line on its console.
    async fn node_status(&self, region: &str, id: &str) -> Result<JobStatus, ProviderError> {
        let inst = self.job_instance(region, id).await?;
        let mut status = base_status(&inst, id)?;
        if inst["Status"].as_str() == Some("Running") && status.state == JobState::Running {
            return Ok(self.boot_check(region, &inst, status).await);
        }
        if inst["Status"].as_str() == Some("Stopped") && status.state != JobState::Preempted {
            // ECS caches the console at boot and at shutdown, and the cache comes late: no
            // exit line (or no answer) yet is awaited, never a failure that spends a retry
            // until the grace from the stop has passed (`jobs::refresh`). ECS gives no
            // stop time: the grace counts from when gpuplan first sees the node stopped.
            let console = match self.node_output(region, id).await {
                Ok(c) => c,
                Err(e) => {
                    status.state = JobState::Stopped;
                    status.message = Some(format!("ECS status Stopped; its console is not readable: {e}"));
                    return Ok(status);
                }
            };
            (status.state, status.message) = match exit_code(&console) {
                Some(0) => (JobState::Succeeded, Some("exit code 0".into())),
                Some(code) => {
                    (JobState::Failed, Some(crate::providers::userdata::exit_message(code, &console, "console output")))
                }
                None => (JobState::Stopped, Some("ECS status Stopped; no exit line on its console".into())),
            };
        }
        Ok(status)
    }

    async fn node_cancel(&self, region: &str, id: &str) -> Result<JobStatus, ProviderError> {
        let inst = self.job_instance(region, id).await?;
        let mut status = base_status(&inst, id)?;
        if status.state.is_active() {
            self.terminate_nodes(region, &[id.to_string()]).await?;
            status.state = JobState::Cancelled;
            status.message = Some("cancelled: instance deleted".into());
        }
        Ok(status)
    }

    /// A job node's console output as ECS cached it (at boot, and at the shutdown the job
    /// script ends with).
    async fn node_output(&self, region: &str, id: &str) -> Result<String, ProviderError> {
        let params = vec![("InstanceId".to_string(), id.to_string())];
        let resp = self.client.ecs("GetInstanceConsoleOutput", region, params).await?;
        let Some(b64) = resp["ConsoleOutput"].as_str() else { return Ok(String::new()) };
        let bytes = base64::engine::general_purpose::STANDARD.decode(b64).map_err(|e| {
            ProviderError::new(
                crate::providers::ErrorClass::Fatal,
                "BadResponse",
                format!("GetInstanceConsoleOutput of {id} is not base64: {e}"),
            )
        })?;
        Ok(String::from_utf8_lossy(&bytes).into_owned())
    }
}

fn base_status(inst: &Value, id: &str) -> Result<JobStatus, ProviderError> {
    let (state, message) = if capacity_of(inst) == Capacity::Spot && recycling(inst) {
        (JobState::Preempted, Some("spot instance reclaimed".to_string()))
    } else {
        match inst["Status"].as_str().unwrap_or_default() {
            "Pending" | "Starting" => (JobState::Queued, None),
            "Running" | "Stopping" => (JobState::Running, None),
            // Ended, or not: the console's exit line says (`status`).
            "Stopped" => (JobState::Stopped, None),
            other => (JobState::Failed, Some(format!("instance is {other}"))),
        }
    };
    let mut status = launch::job_status(id, &tags_of(inst), state, message)?;
    // RunInstances answers ids only: a multi-node job's replicas learn replica 0's
    // address here, from DescribeInstances (a VPC instance's first private address).
    status.address = inst["VpcAttributes"]["PrivateIpAddress"]["IpAddress"][0].as_str().map(String::from);
    Ok(status)
}
