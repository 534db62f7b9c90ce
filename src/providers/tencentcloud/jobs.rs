//! Job launches on CVM: one instance of the pool's shape per launch, booted with the
//! user-data job script. CVM has no console-output API, so the node stays up after the
//! job (the script does not power it off) and gpuplan reads the job's log and exit code
//! with TAT: a short `RunCommand` (`tail` of `/var/log/gpuplan-job.log`, well within the
//! agent's 60 s and 24 KB limits) and `DescribeInvocationTasks` with `HideOutput` false.
//! The exit code decides succeeded or failed; the node is then terminated (`release`). A
//! job node that stopped before its exit code was read is stopped with its exit code
//! awaited (TAT answers again only if the node is started again), and `jobs::refresh`
//! fails its run after a grace: never a success.

use serde_json::Value;

use super::TencentProvider;
use super::cvm::tags_of;
use crate::providers::http::job_node_request;
use crate::providers::launch;
use crate::providers::{ErrorClass, JobState, JobStatus, LaunchJob, ProviderError};

/// Why a running job node whose agent answered has not started its job, when it is past
/// the boot deadline: the script's first step creates its log, so an agent that answers
/// with no log means the user data never ran (a broken image, cloud-init disabled). Not
/// before the deadline (still booting), and never on a guess: an instance without a
/// readable `CreatedTime` is left to its `max_runtime` deadline.
fn never_started(inst: &Value, log: &str, now_ms: u64) -> Option<String> {
    use crate::providers::boot;
    if !log.trim().is_empty() {
        return None;
    }
    let age_secs = boot::past_deadline(boot::created_ms(inst["CreatedTime"].as_str()?)?, now_ms)?;
    Some(boot::never_started(age_secs, "TAT"))
}

/// TAT (TencentCloud Automation Tools), the run-command agent on CVM.
const TAT_VERSION: &str = "2020-10-28";

impl TencentProvider {
    pub(super) async fn launch(&self, req: &LaunchJob) -> Result<JobStatus, ProviderError> {
        // The node stays up after the job so that TAT can read its exit code.
        let kept = LaunchJob { keep_node: true, ..req.clone() };
        let made = self.run_instances(&job_node_request(&kept)?).await?;
        launch::launched(req, made, "ResourceInsufficient")
    }

    /// The job's log on its node, through TAT. `Ok(None)` while the agent has not answered.
    pub(super) async fn job_log(&self, region: &str, id: &str) -> Result<Option<String>, ProviderError> {
        use base64::Engine as _;
        let b64 = base64::engine::general_purpose::STANDARD;
        let script = format!("tail -c 16384 {} 2>/dev/null || true", crate::providers::boot::JOB_LOG);
        let body = serde_json::json!({
            "Content": b64.encode(script),
            "InstanceIds": [id],
            "CommandType": "SHELL",
            "Timeout": 30,
            "CommandName": "gpuplan-job-log",
        });
        let run = self.client.call("tat", TAT_VERSION, "RunCommand", region, &body).await?;
        let Some(invocation) = run["InvocationId"].as_str().map(str::to_string) else {
            return Err(ProviderError::new(
                ErrorClass::Fatal,
                "BadResponse",
                "TAT RunCommand returned no InvocationId",
            ));
        };
        let ask = serde_json::json!({
            "Filters": [{"Name": "invocation-id", "Values": [invocation]}],
            "HideOutput": false,
        });
        // The agent answers in well under a second when it is up; a short, bounded wait.
        for _ in 0..20 {
            let resp = self.client.call("tat", TAT_VERSION, "DescribeInvocationTasks", region, &ask).await?;
            let task = &resp["InvocationTaskSet"][0];
            match task["TaskStatus"].as_str().unwrap_or("PENDING") {
                "PENDING" | "DELIVERING" | "RUNNING" => {
                    tokio::time::sleep(std::time::Duration::from_millis(250)).await;
                }
                "SUCCESS" | "FAILED" => {
                    let out = task["TaskResult"]["Output"].as_str().unwrap_or("");
                    let bytes = b64.decode(out).map_err(|e| {
                        ProviderError::new(ErrorClass::Fatal, "BadResponse", format!("TAT output is not base64: {e}"))
                    })?;
                    return Ok(Some(String::from_utf8_lossy(&bytes).into_owned()));
                }
                // The agent is not there (yet): the job's state is what the instance says.
                _ => return Ok(None),
            }
        }
        Ok(None)
    }

    async fn job_instance(&self, region: &str, id: &str) -> Result<Value, ProviderError> {
        let found = self.describe_ids(region, &[id.to_string()]).await?;
        launch::job_instance(found, tags_of, region, id)
    }

    pub(super) async fn status(&self, region: &str, id: &str) -> Result<JobStatus, ProviderError> {
        let inst = self.job_instance(region, id).await?;
        let mut status = job_status(&inst, id)?;
        // A running node whose job has finished: its exit code, through TAT.
        if status.state == JobState::Running
            && let Some(log) = self.job_log(region, id).await?
        {
            if let Some(code) = crate::providers::userdata::exit_code(&log) {
                status.state = if code == 0 { JobState::Succeeded } else { JobState::Failed };
                status.message = Some(crate::providers::userdata::exit_message(code, &log, "read with TAT"));
            } else if let Some(why) = never_started(&inst, &log, crate::providers::Provider::clock_ms(self)) {
                status.state = JobState::Failed;
                status.message = Some(why);
            }
        }
        Ok(status)
    }

    /// Terminate a finished job's instance (checked to be a gpuplan job node first).
    pub(super) async fn release(&self, region: &str, id: &str) -> Result<(), ProviderError> {
        self.job_instance(region, id).await?;
        self.terminate(region, &[id.to_string()]).await.map(|_| ())
    }

    pub(super) async fn cancel(&self, region: &str, id: &str) -> Result<JobStatus, ProviderError> {
        let inst = self.job_instance(region, id).await?;
        let mut status = job_status(&inst, id)?;
        if status.state.is_active() {
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
        // The job script keeps its node up; one that stopped ended without its exit code
        // being read (CVM has no console output, and TAT does not reach a stopped node).
        "STOPPED" | "STOPPING" => (
            JobState::Stopped,
            Some(format!(
                "CVM state {}; TAT cannot read the exit code of a stopped node",
                inst["InstanceState"].as_str().unwrap_or_default()
            )),
        ),
        "SHUTDOWN" | "TERMINATING" if spot && !by_us => (JobState::Preempted, Some("spot instance reclaimed".into())),
        "TERMINATING" | "SHUTDOWN" => (JobState::Cancelled, Some("instance terminated".into())),
        other => (JobState::Failed, Some(format!("instance is {other}"))),
    };
    let mut status = launch::job_status(id, &tags_of(inst), state, message)?;
    // RunInstances answers ids only: a multi-node job's replicas learn replica 0's
    // address here, from DescribeInstances.
    status.address = inst["PrivateIpAddresses"][0].as_str().map(String::from);
    Ok(status)
}
