//! Job nodes on CVM ([`JobNodes`]; the job port itself is the shared core's,
//! `signed_json::jobs`): one instance of the pool's shape per launch, booted with the
//! user-data job script. CVM has no console-output API, so the node stays up after the
//! job (the script does not power it off) and gpuplan reads the job's log and exit code
//! with TAT: a short `RunCommand` (`tail` of `/var/log/gpuplan-job.log`, well within the
//! agent's 60 s and 24 KB limits) and `DescribeInvocationTasks` with `HideOutput` false.
//! The exit code decides succeeded or failed; the node is then terminated
//! (`release_job_node`). A
//! job node that stopped before its exit code was read is stopped with its exit code
//! awaited (TAT answers again only if the node is started again), and `jobs::refresh`
//! fails its run after a grace: never a success.

use async_trait::async_trait;
use serde_json::Value;

use super::TencentProvider;
use super::cvm::tags_of;
use super::warm::Tat;
use crate::providers::launch;
use crate::providers::signed_json::agents::{AgentApi, Command};
use crate::providers::signed_json::cloud::{Instances, JobNodes};
use crate::providers::{ErrorClass, JobState, JobStatus, NodePort, ProviderError};

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

impl TencentProvider {
    /// The job's log on its node, through TAT. `Ok(None)` while the agent has not answered.
    async fn job_log(&self, region: &str, id: &str) -> Result<Option<String>, ProviderError> {
        let script = format!("tail -c 16384 {} 2>/dev/null || true", crate::providers::boot::JOB_LOG);
        let cmd = Command { script: &script, timeout_secs: 30, name: "gpuplan-job-log", launch: None };
        let tat = self.agents.api();
        let invocation = tat.send(region, id, &cmd).await?;
        // The agent answers in well under a second when it is up; a short, bounded wait.
        for _ in 0..20 {
            let answer = tat.answer(region, id, &invocation).await?;
            match answer.as_ref().map_or("PENDING", |a| a.status.as_str()) {
                "PENDING" | "DELIVERING" | "RUNNING" => {
                    tokio::time::sleep(std::time::Duration::from_millis(250)).await;
                }
                "SUCCESS" | "FAILED" => {
                    return Tat::AGENT.output(answer.as_ref().map_or("", |a| a.output.as_str())).map(Some);
                }
                // The agent is not there (yet): the job's state is what the instance says.
                _ => return Ok(None),
            }
        }
        Ok(None)
    }
}

#[async_trait]
impl JobNodes for TencentProvider {
    const STOCKOUT: &'static str = "ResourceInsufficient";
    /// CVM has no console output: the node stays up after the job so that TAT can read
    /// its exit code.
    const KEEP_JOB_NODE: bool = true;

    /// The instance's state, and for a running node whose job has finished, its exit
    /// code read through TAT.
    async fn node_status(&self, region: &str, id: &str) -> Result<JobStatus, ProviderError> {
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

    async fn node_cancel(&self, region: &str, id: &str) -> Result<JobStatus, ProviderError> {
        let inst = self.job_instance(region, id).await?;
        let mut status = job_status(&inst, id)?;
        if status.state.is_active() {
            self.terminate_nodes(region, &[id.to_string()]).await?;
            status.state = JobState::Cancelled;
            status.message = Some("cancelled: instance terminated".into());
        }
        Ok(status)
    }

    /// The job's log on its node, read through TAT.
    async fn node_output(&self, region: &str, id: &str) -> Result<String, ProviderError> {
        self.job_log(region, id).await?.ok_or_else(|| {
            ProviderError::new(
                ErrorClass::Retryable,
                "NoAgentAnswer",
                format!("the TAT agent on {id} did not answer; try again"),
            )
        })
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
