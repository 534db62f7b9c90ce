//! GPU health on ECS nodes through Cloud Assistant
//! ([`crate::providers::health::HealthPort`]): each node whose agent runs gets a
//! `RunCommand` (`RunShellScript`, base64) of the capture script of
//! [`crate::providers::health_read`] (all sent before any answer is awaited), then its
//! `DescribeInvocationResults` output is parsed by `health::parse`. A node whose agent is
//! not running, or that gives no answer in time, is left out (never reported healthy).
//! `cordon` needs no call on VMs.

use async_trait::async_trait;
use base64::Engine as _;

use super::AlibabaProvider;
use super::warm::output;
use crate::model::health::NodeHealth;
use crate::providers::health::HealthPort;
use crate::providers::launch::command_run_id;
use crate::providers::{AgentState, ErrorClass, Provider, ProviderError, boot, health_read};

#[async_trait]
impl HealthPort for AlibabaProvider {
    async fn read_health(&self, region: &str, ids: &[String]) -> Result<Vec<NodeHealth>, ProviderError> {
        let agents = self.agent_states(region, ids).await?;
        let script = base64::engine::general_purpose::STANDARD.encode(health_read::capture_script());
        let mut sent = Vec::new();
        for id in ids.iter().filter(|id| agents.get(*id) == Some(&AgentState::Online)) {
            let params = vec![
                ("Type".to_string(), "RunShellScript".to_string()),
                ("CommandContent".into(), script.clone()),
                ("ContentEncoding".into(), "Base64".into()),
                ("InstanceId.1".into(), id.clone()),
                ("Timeout".into(), health_read::TIMEOUT_SECS.to_string()),
                ("Name".into(), "gpuplan-health".into()),
            ];
            let resp = self.client.ecs("RunCommand", region, params).await?;
            let invoke = resp["InvokeId"].as_str().filter(|i| !i.is_empty()).ok_or_else(|| {
                ProviderError::new(
                    ErrorClass::Retryable,
                    "BadResponse",
                    "Cloud Assistant RunCommand returned no InvokeId",
                )
            })?;
            sent.push((id, command_run_id(id, invoke)));
        }
        let reads = sent.into_iter().map(|(id, run)| async move {
            let answer = health_read::wait_output(|| async {
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
            .await?;
            Ok(answer.and_then(|text| health_read::node_health(id, &text, self.clock_ms())))
        });
        health_read::gather(reads).await
    }

    async fn cordon(&self, _region: &str, _id: &str) -> Result<(), ProviderError> {
        Ok(())
    }
}
