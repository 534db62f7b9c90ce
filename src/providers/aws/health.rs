//! GPU health on EC2 nodes through Systems Manager Run Command
//! ([`crate::providers::health::HealthPort`]): the nodes whose SSM agent is online get
//! one `SendCommand` (`AWS-RunShellScript`, up to 50 instances) of the capture script of
//! [`crate::providers::health_read`], then each node's `GetCommandInvocation` output is
//! parsed by `health::parse`. A node whose agent is offline, or that gives no answer in
//! time, is left out (never reported healthy). `cordon` needs no call: gpuplan itself
//! stops placing jobs and warm-node sends on a quarantined VM.

use async_trait::async_trait;
use serde_json::json;

use super::AwsProvider;
use crate::model::health::NodeHealth;
use crate::providers::health::HealthPort;
use crate::providers::launch::command_run_id;
use crate::providers::{AgentState, ErrorClass, Provider, ProviderError, boot, health_read};

/// Instances per `SendCommand` (its `InstanceIds` limit).
const SEND_BATCH: usize = 50;

#[async_trait]
impl HealthPort for AwsProvider {
    async fn read_health(&self, region: &str, ids: &[String]) -> Result<Vec<NodeHealth>, ProviderError> {
        let agents = self.agent_states_once(region, ids).await?;
        let online: Vec<String> =
            ids.iter().filter(|id| agents.get(*id) == Some(&AgentState::Online)).cloned().collect();
        let mut out = Vec::new();
        for batch in online.chunks(SEND_BATCH) {
            let timeout = health_read::TIMEOUT_SECS.to_string();
            let body = json!({
                "DocumentName": "AWS-RunShellScript",
                "InstanceIds": batch,
                "Comment": "gpuplan health read",
                "TimeoutSeconds": 30,
                "Parameters": {"commands": [health_read::capture_script()], "executionTimeout": [timeout]},
            });
            let doc = self.ssm(region, "SendCommand", &body).await?;
            let command = doc["Command"]["CommandId"].as_str().filter(|c| !c.is_empty()).ok_or_else(|| {
                ProviderError::new(ErrorClass::Retryable, "BadResponse", "SendCommand returned no CommandId")
            })?;
            let reads = batch.iter().map(|id| async move {
                let run = command_run_id(id, command);
                let answer = health_read::wait_output(|| async {
                    match self.invocation(region, &run).await {
                        Ok(doc) => Ok(match doc["Status"].as_str().unwrap_or("") {
                            "Pending" | "InProgress" | "Delayed" => boot::Check::Pending,
                            "Success" => {
                                boot::Check::Output(doc["StandardOutputContent"].as_str().unwrap_or("").to_string())
                            }
                            _ => boot::Check::Ended,
                        }),
                        // SSM lists an invocation a moment after SendCommand.
                        Err(e) if e.code == "JobNotFound" => Ok(boot::Check::Pending),
                        Err(e) => Err(e),
                    }
                })
                .await?;
                Ok(answer.and_then(|text| health_read::node_health(id, &text, self.clock_ms())))
            });
            out.extend(health_read::gather(reads).await?);
        }
        Ok(out)
    }

    async fn cordon(&self, _region: &str, _id: &str) -> Result<(), ProviderError> {
        Ok(())
    }
}
