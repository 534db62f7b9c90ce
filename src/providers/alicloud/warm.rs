//! Cloud Assistant, Alibaba Cloud's run-command agent (ECS 2014-05-26 RPC actions): its
//! calls and status words ([`CloudAssistant`]) for the shared warm-node runner
//! (`signed_json::agents`), which runs jobs on warm nodes, GPU health reads and the boot
//! check of job nodes.
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

use std::sync::Arc;

use async_trait::async_trait;
use base64::Engine as _;

use super::client::Client;
use crate::providers::signed_json::agents::{AgentApi, Answer, Command};
use crate::providers::signed_json::run_command::Agent;
use crate::providers::{AgentState, ErrorClass, ProviderError};

fn p(k: impl Into<String>, v: impl Into<String>) -> (String, String) {
    (k.into(), v.into())
}

/// Cloud Assistant's calls, for the shared runner (`signed_json::agents`).
pub struct CloudAssistant {
    pub client: Arc<Client>,
}

#[async_trait]
impl AgentApi for CloudAssistant {
    const AGENT: &'static Agent = &CLOUD_ASSISTANT;
    const AGENT_BATCH: usize = 50;
    /// No ceiling: a command without `max_runtime` gets 24 hours.
    const MAX_TIMEOUT_SECS: Option<u64> = None;

    /// `DescribeCloudAssistantStatus`: `CloudAssistantStatus` `true` is online.
    async fn agent_batch(&self, region: &str, ids: &[String]) -> Result<Vec<(String, AgentState)>, ProviderError> {
        let mut params: Vec<(String, String)> =
            ids.iter().enumerate().map(|(i, id)| p(format!("InstanceId.{}", i + 1), id.as_str())).collect();
        params.push(p("MaxResults", Self::AGENT_BATCH.to_string()));
        let resp = self.client.ecs("DescribeCloudAssistantStatus", region, params).await?;
        let set = &resp["InstanceCloudAssistantStatusSet"]["InstanceCloudAssistantStatus"];
        Ok(set
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|a| {
                let state = match a["CloudAssistantStatus"].as_str() {
                    Some("true") => AgentState::Online,
                    _ => AgentState::Offline("Cloud Assistant agent not running".into()),
                };
                Some((a["InstanceId"].as_str()?.to_string(), state))
            })
            .collect())
    }

    /// `RunCommand` (`RunShellScript`, base64 content). A job's send carries its launch
    /// token as `ClientToken`: one launch, one invocation, however often it is retried.
    async fn send(&self, region: &str, node: &str, cmd: &Command<'_>) -> Result<String, ProviderError> {
        let mut params = vec![
            p("Type", "RunShellScript"),
            p("CommandContent", base64::engine::general_purpose::STANDARD.encode(cmd.script)),
            p("ContentEncoding", "Base64"),
            p("InstanceId.1", node),
            p("Timeout", cmd.timeout_secs.to_string()),
            p("Name", cmd.name),
        ];
        if let Some(req) = cmd.launch {
            params.push(p("Description", format!("gpuplan {} attempt {}", req.job, req.attempt)));
            params.push(p("ClientToken", crate::providers::http::client_token(&req.token, "")));
        }
        let resp = self.client.ecs("RunCommand", region, params).await?;
        let invoke = resp["InvokeId"].as_str().filter(|i| !i.is_empty()).ok_or_else(|| {
            ProviderError::new(ErrorClass::Retryable, "BadResponse", "Cloud Assistant RunCommand returned no InvokeId")
        })?;
        Ok(invoke.to_string())
    }

    /// `DescribeInvocationResults` of the invocation on the node, output in base64.
    async fn answer(&self, region: &str, node: &str, invoke: &str) -> Result<Option<Answer>, ProviderError> {
        let params = vec![p("InvokeId", invoke), p("InstanceId", node), p("ContentEncoding", "Base64")];
        let resp = self.client.ecs("DescribeInvocationResults", region, params).await?;
        let set = &resp["Invocation"]["InvocationResults"]["InvocationResult"];
        Ok(set.as_array().and_then(|r| r.first()).map(|r| Answer {
            status: r["InvokeRecordStatus"].as_str().unwrap_or("").to_string(),
            code: r["ExitCode"].as_i64(),
            why: r["ErrorInfo"].as_str().unwrap_or("").to_string(),
            output: r["Output"].as_str().unwrap_or("").to_string(),
        }))
    }

    /// `StopInvocation` on the node.
    async fn stop(&self, region: &str, node: &str, invoke: &str) -> Result<(), ProviderError> {
        self.client.ecs("StopInvocation", region, vec![p("InvokeId", invoke), p("InstanceId.1", node)]).await?;
        Ok(())
    }
}

/// Cloud Assistant's invocation statuses (`InvokeRecordStatus`).
const CLOUD_ASSISTANT: Agent = Agent {
    name: "Cloud Assistant",
    unit: "invocation",
    record: "result",
    queued: &["Pending", "Scheduled"],
    running: &["Running", "Stopping"],
    succeeded: "Success",
    cancelled: &["Stopped", "Terminated"],
    timed_out: None,
    failed: "Failed",
    zero_with_reason_is_the_agents: true,
};

#[cfg(test)]
mod tests {
    use super::*;
    use crate::providers::JobState;

    fn result_state(status: &str, code: Option<i64>, why: &str, log: &str) -> (JobState, Option<String>) {
        CLOUD_ASSISTANT.state(status, code, why, log)
    }

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
