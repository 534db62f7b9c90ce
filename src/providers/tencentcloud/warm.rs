//! TAT (TencentCloud Automation Tools), the run-command agent on CVM images: its calls
//! and status words ([`Tat`]) for the shared warm-node runner (`signed_json::agents`),
//! which runs jobs on warm nodes, GPU health reads and job nodes' log reads.
//!
//! - `DescribeAutomationAgentStatus`: which pool nodes' agents are `Online` (only those
//!   are warm for jobs; the others are named in the plan with why).
//! - `RunCommand`: the job script itself on one node (`Timeout` from `max_runtime`, at
//!   most TAT's 86,400 s); the run's id is `<instance>/<invocation>`.
//! - `DescribeInvocationTasks` (`HideOutput` false): the task's status, exit code and
//!   output (TAT keeps the last 24 KB).
//! - `CancelInvocation`: cancel or preempt; the node stays in its pool.
//! - `DescribeInvocationTasks` (by instance) and `DescribeInvocations`: after an apply
//!   stopped between a `RunCommand` and its record, whether that send happened. TAT takes
//!   no idempotency token, so the launch's token goes first in the invocation's
//!   `Description`, and the intent to send is in state before the send
//!   (`JobRecord::sending`).

use std::sync::Arc;

use async_trait::async_trait;
use base64::Engine as _;
use serde_json::{Value, json};

use super::client::Client;
use crate::providers::signed_json::agents::{AgentApi, Answer, Command};
use crate::providers::signed_json::run_command::Agent;
use crate::providers::{AgentState, ErrorClass, ProviderError};

pub const TAT_VERSION: &str = "2020-10-28";

/// TAT's calls, for the shared runner (`signed_json::agents`).
pub struct Tat {
    pub client: Arc<Client>,
}

impl Tat {
    pub async fn tat(&self, action: &str, region: &str, body: &Value) -> Result<Value, ProviderError> {
        self.client.call("tat", TAT_VERSION, action, region, body).await
    }

    /// The invocations of `node`'s tasks: `DescribeInvocationTasks` by instance, 100 a page.
    async fn invocations_on(&self, region: &str, node: &str) -> Result<Vec<String>, ProviderError> {
        let mut invocations: Vec<String> = Vec::new();
        let mut offset = 0u64;
        loop {
            let body = json!({"Filters": [{"Name": "instance-id", "Values": [node]}], "Limit": 100, "Offset": offset, "HideOutput": true});
            let resp = self.tat("DescribeInvocationTasks", region, &body).await?;
            let tasks = resp["InvocationTaskSet"].as_array().cloned().unwrap_or_default();
            invocations.extend(tasks.iter().filter_map(|t| t["InvocationId"].as_str().map(String::from)));
            offset += tasks.len() as u64;
            if tasks.is_empty() || offset >= resp["TotalCount"].as_u64().unwrap_or(0) {
                break;
            }
        }
        invocations.sort();
        invocations.dedup();
        Ok(invocations)
    }
}

#[async_trait]
impl AgentApi for Tat {
    const AGENT: &'static Agent = &TAT;
    const AGENT_BATCH: usize = 100;
    /// TAT's longest `Timeout`.
    const MAX_TIMEOUT_SECS: Option<u64> = Some(86_400);

    /// `DescribeAutomationAgentStatus`: `Online`, or the status it reports.
    async fn agent_batch(&self, region: &str, ids: &[String]) -> Result<Vec<(String, AgentState)>, ProviderError> {
        let body = json!({"InstanceIds": ids, "Limit": Self::AGENT_BATCH});
        let resp = self.tat("DescribeAutomationAgentStatus", region, &body).await?;
        let set = resp["AutomationAgentSet"].as_array().into_iter().flatten();
        Ok(set
            .filter_map(|a| {
                let state = match a["AgentStatus"].as_str() {
                    Some("Online") => AgentState::Online,
                    other => AgentState::Offline(format!("TAT agent {}", other.unwrap_or("unknown"))),
                };
                Some((a["InstanceId"].as_str()?.to_string(), state))
            })
            .collect())
    }

    /// `RunCommand` (`SHELL`, base64 content). A job's send carries its launch token first
    /// in its `Description` (TAT keeps 120 characters).
    async fn send(&self, region: &str, node: &str, cmd: &Command<'_>) -> Result<String, ProviderError> {
        let mut body = json!({
            "Content": base64::engine::general_purpose::STANDARD.encode(cmd.script),
            "InstanceIds": [node],
            "CommandType": "SHELL",
            "Timeout": cmd.timeout_secs,
            "CommandName": cmd.name,
        });
        if let Some(req) = cmd.launch {
            let description = format!("gpuplan {} {} attempt {}", req.token, req.job, req.attempt);
            body["Description"] = json!(description.chars().take(120).collect::<String>());
        }
        let resp = self.tat("RunCommand", region, &body).await?;
        let invocation = resp["InvocationId"].as_str().filter(|i| !i.is_empty()).ok_or_else(|| {
            ProviderError::new(ErrorClass::Retryable, "BadResponse", "TAT RunCommand returned no InvocationId")
        })?;
        Ok(invocation.to_string())
    }

    /// `DescribeInvocationTasks` of the invocation on the node, with its output.
    async fn answer(&self, region: &str, node: &str, invocation: &str) -> Result<Option<Answer>, ProviderError> {
        let body = json!({
            "Filters": [{"Name": "invocation-id", "Values": [invocation]}, {"Name": "instance-id", "Values": [node]}],
            "HideOutput": false,
        });
        let resp = self.tat("DescribeInvocationTasks", region, &body).await?;
        Ok(resp["InvocationTaskSet"].as_array().and_then(|t| t.first()).map(|task| Answer {
            status: task["TaskStatus"].as_str().unwrap_or("").to_string(),
            code: task["TaskResult"]["ExitCode"].as_i64(),
            why: task["ErrorInfo"].as_str().unwrap_or("").to_string(),
            output: task["TaskResult"]["Output"].as_str().unwrap_or("").to_string(),
        }))
    }

    /// `CancelInvocation` on the node.
    async fn stop(&self, region: &str, node: &str, invocation: &str) -> Result<(), ProviderError> {
        self.tat("CancelInvocation", region, &json!({"InvocationId": invocation, "InstanceIds": [node]})).await?;
        Ok(())
    }

    /// The node's invocations (see [`Tat::invocations_on`]), then their descriptions
    /// (`DescribeInvocations`, 100 ids a call): the one that carries the token.
    async fn find(&self, region: &str, node: &str, token: &str) -> Result<Option<String>, ProviderError> {
        for batch in self.invocations_on(region, node).await?.chunks(100) {
            let resp = self.tat("DescribeInvocations", region, &json!({"InvocationIds": batch, "Limit": 100})).await?;
            let set = resp["InvocationSet"].as_array().into_iter().flatten();
            let found = set
                .filter(|i| i["Description"].as_str().is_some_and(|d| crate::providers::launch::carries(d, token)))
                .find_map(|i| i["InvocationId"].as_str());
            if let Some(invocation) = found {
                return Ok(Some(invocation.to_string()));
            }
        }
        Ok(None)
    }
}

/// TAT's task statuses (`TaskStatus`).
const TAT: Agent = Agent {
    name: "TAT",
    unit: "task",
    record: "task",
    queued: &["PENDING", "DELIVERING", "DELIVER_DELAYED"],
    running: &["RUNNING", "CANCELLING"],
    succeeded: "SUCCESS",
    cancelled: &["CANCELLED", "TERMINATED"],
    timed_out: Some(("TIMEOUT", "timed out (TAT Timeout)")),
    failed: "FAILED",
    zero_with_reason_is_the_agents: false,
};

#[cfg(test)]
mod tests {
    use super::*;
    use crate::providers::JobState;

    fn task_state(status: &str, code: Option<i64>, why: &str, log: &str) -> (JobState, Option<String>) {
        TAT.state(status, code, why, log)
    }

    #[test]
    fn task_states_map_to_job_states() {
        assert_eq!(task_state("DELIVERING", None, "", "").0, JobState::Queued);
        assert_eq!(task_state("RUNNING", None, "", "").0, JobState::Running);
        assert_eq!(task_state("SUCCESS", Some(0), "", "").0, JobState::Succeeded);
        let (s, m) = task_state("FAILED", Some(2), "", "x");
        assert_eq!((s, m.as_deref()), (JobState::Failed, Some("exited 2 (read with TAT)")));
        let (s, m) = task_state("TASK_TIMEOUT", None, "agent unresponsive", "");
        assert_eq!((s, m.as_deref()), (JobState::Failed, Some("TAT task TASK_TIMEOUT: agent unresponsive")));
        assert_eq!(task_state("CANCELLED", None, "", "").0, JobState::Cancelled);
    }
}
