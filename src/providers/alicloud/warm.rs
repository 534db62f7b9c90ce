//! Jobs on warm ECS nodes through Cloud Assistant, Alibaba Cloud's run-command agent
//! (ECS 2014-05-26 RPC actions).
//!
//! - `DescribeCloudAssistantStatus`: which pool nodes' agents run (`CloudAssistantStatus`
//!   `true`; only those are warm for jobs, the others are named in the plan with why).
//! - `RunCommand` (`RunShellScript`, base64 content): the job script itself on one node
//!   (`Timeout` from `max_runtime`, else 24 hours); the run's id is `<instance>/<invoke>`.
//! - `DescribeInvocationResults`: the invocation's status, exit code and output (Cloud
//!   Assistant keeps 24 KB).
//! - `StopInvocation`: cancel or preempt; the node stays in its pool.
//!
//! The boot check of a job node past its boot deadline (see [`crate::providers::boot`])
//! uses the same calls: is its agent running, then a short `RunCommand` of the check and
//! `DescribeInvocationResults` for its answer.

use std::collections::BTreeMap;

use base64::Engine as _;
use serde_json::Value;

use super::AlibabaProvider;
use crate::providers::launch::{command_run_id, queued_on_warm_node, split_command_run};
use crate::providers::signed_json::run_command::Agent;
use crate::providers::{AgentState, ErrorClass, JobState, JobStatus, LaunchJob, ProviderError};
use crate::providers::{boot, userdata};

/// Instance ids per `DescribeCloudAssistantStatus` call.
const AGENT_BATCH: usize = 50;
/// The command's timeout without a `max_runtime` (seconds).
const DEFAULT_TIMEOUT_SECS: u64 = 86_400;

fn p(k: impl Into<String>, v: impl Into<String>) -> (String, String) {
    (k.into(), v.into())
}

impl AlibabaProvider {
    pub(super) async fn agent_states(
        &self,
        region: &str,
        ids: &[String],
    ) -> Result<BTreeMap<String, AgentState>, ProviderError> {
        let mut out: BTreeMap<String, AgentState> = ids
            .iter()
            .map(|id| (id.clone(), AgentState::Offline("no Cloud Assistant agent reported".into())))
            .collect();
        for batch in ids.chunks(AGENT_BATCH) {
            let mut params: Vec<(String, String)> =
                batch.iter().enumerate().map(|(i, id)| p(format!("InstanceId.{}", i + 1), id.as_str())).collect();
            params.push(p("MaxResults", AGENT_BATCH.to_string()));
            let resp = self.client.ecs("DescribeCloudAssistantStatus", region, params).await?;
            let set = &resp["InstanceCloudAssistantStatusSet"]["InstanceCloudAssistantStatus"];
            for a in set.as_array().into_iter().flatten() {
                let Some(id) = a["InstanceId"].as_str() else { continue };
                let state = match a["CloudAssistantStatus"].as_str() {
                    Some("true") => AgentState::Online,
                    _ => AgentState::Offline("Cloud Assistant agent not running".into()),
                };
                out.insert(id.to_string(), state);
            }
        }
        Ok(out)
    }

    /// Run the job's script on its warm node (`req.node_id`); the node stays in its pool.
    pub(super) async fn launch_on_node(&self, req: &LaunchJob) -> Result<JobStatus, ProviderError> {
        // `alicloud-kms:` values are read now and travel only in the agent's parameters.
        let values = self.send_time_secrets(req).await?;
        let env = |key: &str| match values.get(key) {
            Some(v) => Some(v.clone()),
            None if key.contains(':') => None,
            None => std::env::var(key).ok(),
        };
        let script = userdata::job_script_with(&LaunchJob { keep_node: true, ..req.clone() }, &env)?;
        let timeout = req.max_runtime_secs.map_or(DEFAULT_TIMEOUT_SECS, |s| s + 300);
        let params = vec![
            p("Type", "RunShellScript"),
            p("CommandContent", base64::engine::general_purpose::STANDARD.encode(script)),
            p("ContentEncoding", "Base64"),
            p("InstanceId.1", req.node_id.as_str()),
            p("Timeout", timeout.to_string()),
            p("Name", "gpuplan-job"),
            p("Description", format!("gpuplan {} attempt {}", req.job, req.attempt)),
            // One launch, one invocation, however often the call is retried.
            p("ClientToken", crate::providers::http::client_token(&req.token, "")),
        ];
        let resp = self.client.ecs("RunCommand", &req.region, params).await?;
        let invoke = resp["InvokeId"].as_str().filter(|i| !i.is_empty()).ok_or_else(|| {
            ProviderError::new(ErrorClass::Retryable, "BadResponse", "Cloud Assistant RunCommand returned no InvokeId")
        })?;
        Ok(queued_on_warm_node(req, invoke, &format!("Cloud Assistant invocation {invoke}")))
    }

    /// The run's invocation result on its node.
    pub(super) async fn result(&self, region: &str, id: &str) -> Result<Value, ProviderError> {
        let (node, invoke) = split_command_run(id)?;
        let params = vec![p("InvokeId", invoke), p("InstanceId", node), p("ContentEncoding", "Base64")];
        let resp = self.client.ecs("DescribeInvocationResults", region, params).await?;
        let set = &resp["Invocation"]["InvocationResults"]["InvocationResult"];
        set.as_array().and_then(|r| r.first()).cloned().ok_or_else(|| {
            ProviderError::new(
                ErrorClass::Invalid,
                "JobNotFound",
                format!("Cloud Assistant has no result of run {id} in {region}"),
            )
        })
    }

    pub(super) async fn command_output(&self, region: &str, id: &str) -> Result<String, ProviderError> {
        output(&self.result(region, id).await?)
    }

    pub(super) async fn command_status(&self, region: &str, id: &str) -> Result<JobStatus, ProviderError> {
        let r = self.result(region, id).await?;
        let (node, _) = split_command_run(id)?;
        let log = output(&r)?;
        let why = r["ErrorInfo"].as_str().unwrap_or("");
        let (state, message) =
            result_state(r["InvokeRecordStatus"].as_str().unwrap_or(""), r["ExitCode"].as_i64(), why, &log);
        Ok(JobStatus {
            id: id.to_string(),
            job: crate::addr::Address::new(crate::addr::Kind::Job, "unknown"),
            node_id: node.to_string(),
            state,
            attempt: 0,
            message,
            started_ms: None,
            finished_ms: None,
            address: None,
        })
    }

    /// Whether the job's log exists on job node `id`, asked through Cloud Assistant.
    /// `Ok(None)`: its agent is not running, or gave no answer in time.
    pub(super) async fn job_log_exists(&self, region: &str, id: &str) -> Result<Option<bool>, ProviderError> {
        let agents = self.agent_states(region, &[id.to_string()]).await?;
        if agents.get(id) != Some(&AgentState::Online) {
            return Ok(None);
        }
        let params = vec![
            p("Type", "RunShellScript"),
            p("CommandContent", base64::engine::general_purpose::STANDARD.encode(boot::probe_script())),
            p("ContentEncoding", "Base64"),
            p("InstanceId.1", id),
            p("Timeout", "30"),
            p("Name", "gpuplan-boot-check"),
        ];
        let resp = self.client.ecs("RunCommand", region, params).await?;
        let invoke = resp["InvokeId"].as_str().filter(|i| !i.is_empty()).ok_or_else(|| {
            ProviderError::new(ErrorClass::Retryable, "BadResponse", "Cloud Assistant RunCommand returned no InvokeId")
        })?;
        let run = command_run_id(id, invoke);
        boot::wait_answer(|| async {
            match self.result(region, &run).await {
                Ok(r) => Ok(match r["InvokeRecordStatus"].as_str().unwrap_or("") {
                    "Pending" | "Scheduled" | "Running" => boot::Check::Pending,
                    "Success" => boot::Check::Output(output(&r)?),
                    _ => boot::Check::Ended,
                }),
                // The result is listed a moment after RunCommand.
                Err(e) if e.code == "JobNotFound" => Ok(boot::Check::Pending),
                Err(e) => Err(e),
            }
        })
        .await
    }

    /// Stop the invocation (the job's container stops with it); the node stays.
    pub(super) async fn cancel_command(&self, region: &str, id: &str) -> Result<JobStatus, ProviderError> {
        let before = self.command_status(region, id).await?;
        if !matches!(before.state, JobState::Queued | JobState::Running) {
            return Ok(before);
        }
        let (node, invoke) = split_command_run(id)?;
        self.client.ecs("StopInvocation", region, vec![p("InvokeId", invoke), p("InstanceId.1", node)]).await?;
        Ok(JobStatus { state: JobState::Cancelled, message: Some("cancelled".into()), ..before })
    }
}

/// Cloud Assistant's invocation statuses (`InvokeRecordStatus`).
const CLOUD_ASSISTANT: Agent = Agent {
    name: "Cloud Assistant",
    unit: "invocation",
    queued: &["Pending", "Scheduled"],
    running: &["Running", "Stopping"],
    succeeded: "Success",
    cancelled: &["Stopped", "Terminated"],
    timed_out: None,
    failed: "Failed",
    zero_with_reason_is_the_agents: true,
};

/// An invocation result's output, decoded.
pub(super) fn output(r: &Value) -> Result<String, ProviderError> {
    CLOUD_ASSISTANT.output(r["Output"].as_str().unwrap_or(""))
}

/// A run's state from its result's `InvokeRecordStatus` and exit code.
fn result_state(status: &str, code: Option<i64>, why: &str, log: &str) -> (JobState, Option<String>) {
    CLOUD_ASSISTANT.state(status, code, why, log)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn result_states_map_to_job_states() {
        assert_eq!(result_state("Pending", None, "", "").0, JobState::Queued);
        assert_eq!(result_state("Running", None, "", "").0, JobState::Running);
        assert_eq!(result_state("Success", Some(0), "", "").0, JobState::Succeeded);
        let (s, m) = result_state("Failed", Some(4), "", "");
        assert_eq!((s, m.as_deref()), (JobState::Failed, Some("exited 4 (read with Cloud Assistant)")));
        let (_, m) = result_state("Failed", Some(0), "InstanceNotRunning", "");
        assert_eq!(m.as_deref(), Some("Cloud Assistant invocation failed: InstanceNotRunning"));
        assert_eq!(result_state("Stopped", None, "", "").0, JobState::Cancelled);
    }
}
