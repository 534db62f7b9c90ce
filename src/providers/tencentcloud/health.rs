//! GPU health on CVM nodes through TAT ([`crate::providers::health::HealthPort`]): each
//! node whose TAT agent is online gets a `RunCommand` of the capture script of
//! [`crate::providers::health_read`] (all sent before any answer is awaited), then its
//! task's output (`DescribeInvocationTasks`, `HideOutput` false) is parsed by
//! `health::parse`. A node whose agent is offline, or that gives no answer in time, is
//! left out (never reported healthy). `cordon` needs no call on VMs.

use async_trait::async_trait;
use base64::Engine as _;
use serde_json::json;

use super::TencentProvider;
use super::warm::output;
use crate::model::health::NodeHealth;
use crate::providers::health::HealthPort;
use crate::providers::{AgentState, ErrorClass, Provider, ProviderError, boot, health_read};

#[async_trait]
impl HealthPort for TencentProvider {
    async fn read_health(&self, region: &str, ids: &[String]) -> Result<Vec<NodeHealth>, ProviderError> {
        let agents = self.agent_states(region, ids).await?;
        let script = base64::engine::general_purpose::STANDARD.encode(health_read::capture_script());
        let mut sent = Vec::new();
        for id in ids.iter().filter(|id| agents.get(*id) == Some(&AgentState::Online)) {
            let body = json!({
                "Content": script,
                "InstanceIds": [id],
                "CommandType": "SHELL",
                "Timeout": health_read::TIMEOUT_SECS,
                "CommandName": "gpuplan-health",
            });
            let run = self.tat("RunCommand", region, &body).await?;
            let invocation = run["InvocationId"].as_str().filter(|i| !i.is_empty()).ok_or_else(|| {
                ProviderError::new(ErrorClass::Retryable, "BadResponse", "TAT RunCommand returned no InvocationId")
            })?;
            sent.push((id, invocation.to_string()));
        }
        let reads = sent.into_iter().map(|(id, invocation)| async move {
            let ask = json!({"Filters": [{"Name": "invocation-id", "Values": [invocation]}], "HideOutput": false});
            let answer = health_read::wait_output(|| async {
                let resp = self.tat("DescribeInvocationTasks", region, &ask).await?;
                let task = &resp["InvocationTaskSet"][0];
                Ok(match task["TaskStatus"].as_str().unwrap_or("PENDING") {
                    "PENDING" | "DELIVERING" | "RUNNING" => boot::Check::Pending,
                    "SUCCESS" => boot::Check::Output(output(task)?),
                    _ => boot::Check::Ended,
                })
            })
            .await?;
            Ok(answer.and_then(|text| health_read::node_health(id, &text, self.clock_ms())))
        });
        health_read::gather(reads).await
    }

    async fn cordon(&self, _region: &str, _id: &str) -> Result<(), ProviderError> {
        Ok(())
    }
}
