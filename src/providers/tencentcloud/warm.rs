//! Jobs on warm CVM nodes through TAT (TencentCloud Automation Tools), the run-command
//! agent on CVM images.
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

use std::collections::BTreeMap;

use base64::Engine as _;
use serde_json::{Value, json};

use super::TencentProvider;
use crate::providers::launch::{queued_on_warm_node, split_command_run};
use crate::providers::signed_json::run_command::Agent;
use crate::providers::userdata;
use crate::providers::{AgentState, ErrorClass, JobState, JobStatus, LaunchJob, ProviderError};

const TAT_VERSION: &str = "2020-10-28";
/// Instance ids per `DescribeAutomationAgentStatus` call.
const AGENT_BATCH: usize = 100;
/// TAT's longest `Timeout` (seconds).
const MAX_TIMEOUT_SECS: u64 = 86_400;

impl TencentProvider {
    pub(super) async fn tat(&self, action: &str, region: &str, body: &Value) -> Result<Value, ProviderError> {
        self.client.call("tat", TAT_VERSION, action, region, body).await
    }

    pub(super) async fn agent_states(
        &self,
        region: &str,
        ids: &[String],
    ) -> Result<BTreeMap<String, AgentState>, ProviderError> {
        let mut out: BTreeMap<String, AgentState> =
            ids.iter().map(|id| (id.clone(), AgentState::Offline("no TAT agent reported".into()))).collect();
        for batch in ids.chunks(AGENT_BATCH) {
            let body = json!({"InstanceIds": batch, "Limit": AGENT_BATCH});
            let resp = self.tat("DescribeAutomationAgentStatus", region, &body).await?;
            for a in resp["AutomationAgentSet"].as_array().into_iter().flatten() {
                let Some(id) = a["InstanceId"].as_str() else { continue };
                let state = match a["AgentStatus"].as_str() {
                    Some("Online") => AgentState::Online,
                    other => AgentState::Offline(format!("TAT agent {}", other.unwrap_or("unknown"))),
                };
                out.insert(id.to_string(), state);
            }
        }
        Ok(out)
    }

    /// Run the job's script on its warm node (`req.node_id`); the node stays in its pool.
    pub(super) async fn launch_on_node(&self, req: &LaunchJob) -> Result<JobStatus, ProviderError> {
        // `tencent-ssm:` values are read now and travel only in the agent's parameters.
        let values = self.send_time_secrets(req).await?;
        let env = |key: &str| match values.get(key) {
            Some(v) => Some(v.clone()),
            None if key.contains(':') => None,
            None => std::env::var(key).ok(),
        };
        let script = userdata::job_script_with(&LaunchJob { keep_node: true, ..req.clone() }, &env)?;
        let timeout = req.max_runtime_secs.map_or(MAX_TIMEOUT_SECS, |s| (s + 300).min(MAX_TIMEOUT_SECS));
        let body = json!({
            "Content": base64::engine::general_purpose::STANDARD.encode(script),
            "InstanceIds": [req.node_id],
            "CommandType": "SHELL",
            "Timeout": timeout,
            "CommandName": "gpuplan-job",
            // The token first: TAT keeps 120 characters.
            "Description": format!("gpuplan {} {} attempt {}", req.token, req.job, req.attempt).chars().take(120).collect::<String>(),
        });
        let resp = self.tat("RunCommand", &req.region, &body).await?;
        let invocation = resp["InvocationId"].as_str().filter(|i| !i.is_empty()).ok_or_else(|| {
            ProviderError::new(ErrorClass::Retryable, "BadResponse", "TAT RunCommand returned no InvocationId")
        })?;
        Ok(queued_on_warm_node(req, invocation, &format!("TAT invocation {invocation}")))
    }

    /// The invocation sent to `node` under launch `token` (see the module docs), with its
    /// status: the node's tasks (`DescribeInvocationTasks` by instance, 100 a page), then
    /// their invocations' descriptions (`DescribeInvocations`, 100 ids a call).
    pub(super) async fn find_invocation(
        &self,
        region: &str,
        node: &str,
        token: &str,
    ) -> Result<Option<JobStatus>, ProviderError> {
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
        for batch in invocations.chunks(100) {
            let resp = self.tat("DescribeInvocations", region, &json!({"InvocationIds": batch, "Limit": 100})).await?;
            let set = resp["InvocationSet"].as_array().into_iter().flatten();
            let found = set
                .filter(|i| i["Description"].as_str().is_some_and(|d| crate::providers::launch::carries(d, token)))
                .find_map(|i| i["InvocationId"].as_str());
            if let Some(invocation) = found {
                let id = crate::providers::launch::command_run_id(node, invocation);
                return self.command_status(region, &id).await.map(Some);
            }
        }
        Ok(None)
    }

    /// The run's TAT task, with its output.
    async fn task(&self, region: &str, id: &str) -> Result<Value, ProviderError> {
        let (node, invocation) = split_command_run(id)?;
        let body = json!({
            "Filters": [{"Name": "invocation-id", "Values": [invocation]}, {"Name": "instance-id", "Values": [node]}],
            "HideOutput": false,
        });
        let resp = self.tat("DescribeInvocationTasks", region, &body).await?;
        resp["InvocationTaskSet"].as_array().and_then(|t| t.first()).cloned().ok_or_else(|| {
            ProviderError::new(ErrorClass::Invalid, "JobNotFound", format!("TAT has no task of run {id} in {region}"))
        })
    }

    pub(super) async fn command_output(&self, region: &str, id: &str) -> Result<String, ProviderError> {
        output(&self.task(region, id).await?)
    }

    pub(super) async fn command_status(&self, region: &str, id: &str) -> Result<JobStatus, ProviderError> {
        let task = self.task(region, id).await?;
        let (node, _) = split_command_run(id)?;
        let log = output(&task)?;
        let code = task["TaskResult"]["ExitCode"].as_i64();
        let why = task["ErrorInfo"].as_str().unwrap_or("");
        let (state, message) = task_state(task["TaskStatus"].as_str().unwrap_or(""), code, why, &log);
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

    /// Cancel the invocation (the job's container stops with it); the node stays.
    pub(super) async fn cancel_command(&self, region: &str, id: &str) -> Result<JobStatus, ProviderError> {
        let before = self.command_status(region, id).await?;
        if !matches!(before.state, JobState::Queued | JobState::Running) {
            return Ok(before);
        }
        let (node, invocation) = split_command_run(id)?;
        self.tat("CancelInvocation", region, &json!({"InvocationId": invocation, "InstanceIds": [node]})).await?;
        Ok(JobStatus { state: JobState::Cancelled, message: Some("cancelled".into()), ..before })
    }
}

/// TAT's task statuses (`TaskStatus`).
const TAT: Agent = Agent {
    name: "TAT",
    unit: "task",
    queued: &["PENDING", "DELIVERING", "DELIVER_DELAYED"],
    running: &["RUNNING", "CANCELLING"],
    succeeded: "SUCCESS",
    cancelled: &["CANCELLED", "TERMINATED"],
    timed_out: Some(("TIMEOUT", "timed out (TAT Timeout)")),
    failed: "FAILED",
    zero_with_reason_is_the_agents: false,
};

/// A TAT task's output, decoded.
pub(super) fn output(task: &Value) -> Result<String, ProviderError> {
    TAT.output(task["TaskResult"]["Output"].as_str().unwrap_or(""))
}

/// A run's state from its TAT task's `TaskStatus` and exit code.
fn task_state(status: &str, code: Option<i64>, why: &str, log: &str) -> (JobState, Option<String>) {
    TAT.state(status, code, why, log)
}

#[cfg(test)]
mod tests {
    use super::*;

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
