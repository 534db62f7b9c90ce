//! The warm-node runner of the two signed-JSON clouds, over their run-command agents
//! (Tencent's TAT, Alibaba's Cloud Assistant): which agents are online, a job's script
//! sent to its warm node, a send found again by its launch token, its status, output and
//! cancel, a short check command and its answer, and GPU health reads. The logic is here
//! once; each cloud writes only its [`AgentApi`]: four calls in its own actions and field
//! names, and its status words ([`Agent`]).
//!
//! [`Agents`] is the port object both clouds hand out: it is their [`RunCommandPort`]
//! and [`HealthPort`]; their `JobPort` sends warm-node runs through it.

use std::collections::BTreeMap;

use async_trait::async_trait;

use super::run_command::Agent;
use crate::model::health::NodeHealth;
use crate::providers::health::HealthPort;
use crate::providers::launch::{queued_on_warm_node, split_command_run};
use crate::providers::{
    AgentState, ErrorClass, JobState, JobStatus, LaunchJob, ProviderError, RunCommandPort, boot, health_read, userdata,
};

/// The longest a job's send may run without a `max_runtime` (24 hours).
pub const DEFAULT_TIMEOUT_SECS: u64 = 86_400;

/// One command for a node's agent.
pub struct Command<'a> {
    /// The shell script, plain (the cloud encodes it as its API wants).
    pub script: &'a str,
    pub timeout_secs: u64,
    /// The command's name in the cloud's console (`gpuplan-job`, `gpuplan-health`).
    pub name: &'a str,
    /// The launch a job's send is for: its token and attempt go with the send (TAT's
    /// `Description`, Cloud Assistant's `ClientToken`).
    pub launch: Option<&'a LaunchJob>,
}

/// What the agent answers about one send on one node.
pub struct Answer {
    /// The agent's status word (`SUCCESS`, `Running`).
    pub status: String,
    pub code: Option<i64>,
    /// The agent's reason for a failure, if it gave one.
    pub why: String,
    /// The command's output, base64 as the agent returns it.
    pub output: String,
}

/// One cloud's run-command API, in its own actions and field names.
#[async_trait]
pub trait AgentApi: Send + Sync {
    /// The agent's name and status words.
    const AGENT: &'static Agent;
    /// Instance ids per agent-status call.
    const AGENT_BATCH: usize;
    /// The longest `Timeout` the agent takes, if it has a ceiling.
    const MAX_TIMEOUT_SECS: Option<u64>;

    /// The agents the cloud reports for one batch of `ids` (at most [`Self::AGENT_BATCH`]).
    async fn agent_batch(&self, region: &str, ids: &[String]) -> Result<Vec<(String, AgentState)>, ProviderError>;

    /// Send `cmd` to `node`: the agent's id of the send.
    async fn send(&self, region: &str, node: &str, cmd: &Command<'_>) -> Result<String, ProviderError>;

    /// The send's answer on `node`; `None` while the agent lists none (yet).
    async fn answer(&self, region: &str, node: &str, send: &str) -> Result<Option<Answer>, ProviderError>;

    /// Stop the send on `node`.
    async fn stop(&self, region: &str, node: &str, send: &str) -> Result<(), ProviderError>;

    /// The send made to `node` under launch `token`, where sends take no idempotency
    /// token (TAT: the token is in its description). `None` for an agent whose sends do
    /// (Cloud Assistant's `ClientToken`): sending again under the token is that send.
    async fn find(&self, _region: &str, _node: &str, _token: &str) -> Result<Option<String>, ProviderError> {
        Ok(None)
    }
}

/// The runner over one cloud's [`AgentApi`].
pub struct Agents<A> {
    api: A,
}

impl<A: AgentApi> Agents<A> {
    pub fn new(api: A) -> Self {
        Agents { api }
    }

    pub fn api(&self) -> &A {
        &self.api
    }

    /// Run the job's script on its warm node (`req.node_id`); the node stays in its pool.
    /// `values`: the job's secrets read at send time, which travel only in the script.
    pub async fn launch(&self, req: &LaunchJob, values: &BTreeMap<String, String>) -> Result<JobStatus, ProviderError> {
        let env = |key: &str| match values.get(key) {
            Some(v) => Some(v.clone()),
            None if key.contains(':') => None,
            // Unset (or not UTF-8) is `None`, which `secrets::steps_with` turns into the
            // located "not set" error: nothing is sent without it.
            None => std::env::var(key).ok(),
        };
        let script = userdata::job_script_with(&LaunchJob { keep_node: true, ..req.clone() }, &env)?;
        let timeout = req.max_runtime_secs.map_or(DEFAULT_TIMEOUT_SECS, |s| s + 300);
        let timeout_secs = A::MAX_TIMEOUT_SECS.map_or(timeout, |max| timeout.min(max));
        let cmd = Command { script: &script, timeout_secs, name: "gpuplan-job", launch: Some(req) };
        let send = self.api.send(&req.region, &req.node_id, &cmd).await?;
        Ok(queued_on_warm_node(req, &send, &format!("{} invocation {send}", A::AGENT.name)))
    }

    /// Run `id`'s answer (`<node>/<send>`); a run the agent does not list is not found.
    async fn answer_of(&self, region: &str, id: &str) -> Result<Answer, ProviderError> {
        let (node, send) = split_command_run(id)?;
        self.api.answer(region, node, send).await?.ok_or_else(|| {
            let Agent { name, record, .. } = A::AGENT;
            ProviderError::new(
                ErrorClass::Invalid,
                "JobNotFound",
                format!("{name} has no {record} of run {id} in {region}"),
            )
        })
    }

    /// Run `id`'s output, decoded.
    pub async fn output(&self, region: &str, id: &str) -> Result<String, ProviderError> {
        A::AGENT.output(&self.answer_of(region, id).await?.output)
    }

    /// Run `id`'s state from the agent's status word and exit code.
    pub async fn status(&self, region: &str, id: &str) -> Result<JobStatus, ProviderError> {
        let a = self.answer_of(region, id).await?;
        let (node, _) = split_command_run(id)?;
        let log = A::AGENT.output(&a.output)?;
        let (state, message) = A::AGENT.state(&a.status, a.code, &a.why, &log);
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

    /// Stop run `id` (the job's container stops with it); the node stays in its pool. A
    /// run that has ended is left as it is.
    pub async fn cancel(&self, region: &str, id: &str) -> Result<JobStatus, ProviderError> {
        let before = self.status(region, id).await?;
        if !matches!(before.state, JobState::Queued | JobState::Running) {
            return Ok(before);
        }
        let (node, send) = split_command_run(id)?;
        self.api.stop(region, node, send).await?;
        Ok(JobStatus { state: JobState::Cancelled, message: Some("cancelled".into()), ..before })
    }

    /// Where send `send` on `node` is, for a check that waits for its output: listed
    /// later, queued or running is pending; succeeded is its output; anything else ended.
    pub async fn check(&self, region: &str, node: &str, send: &str) -> Result<boot::Check, ProviderError> {
        let Some(a) = self.api.answer(region, node, send).await? else { return Ok(boot::Check::Pending) };
        let agent = A::AGENT;
        Ok(if agent.queued.contains(&a.status.as_str()) || agent.running.contains(&a.status.as_str()) {
            boot::Check::Pending
        } else if a.status == agent.succeeded {
            boot::Check::Output(agent.output(&a.output)?)
        } else {
            boot::Check::Ended
        })
    }

    /// Whether the job's log exists on job node `id`, asked through its agent (the boot
    /// check of [`crate::providers::boot`]). `Ok(None)`: the agent is not online, or gave
    /// no answer in time.
    pub async fn job_log_exists(&self, region: &str, id: &str) -> Result<Option<bool>, ProviderError> {
        let agents = self.agents(region, &[id.to_string()]).await?;
        if agents.get(id) != Some(&AgentState::Online) {
            return Ok(None);
        }
        let script = boot::probe_script();
        let cmd = Command { script: &script, timeout_secs: 30, name: "gpuplan-boot-check", launch: None };
        let send = self.api.send(region, id, &cmd).await?;
        boot::wait_answer(|| self.check(region, id, &send)).await
    }
}

#[async_trait]
impl<A: AgentApi> RunCommandPort for Agents<A> {
    /// Every id offline until the agent API reports it, [`AgentApi::AGENT_BATCH`] ids a call.
    async fn agents(&self, region: &str, ids: &[String]) -> Result<BTreeMap<String, AgentState>, ProviderError> {
        let unreported = format!("no {} agent reported", A::AGENT.name);
        let mut out: BTreeMap<String, AgentState> =
            ids.iter().map(|id| (id.clone(), AgentState::Offline(unreported.clone()))).collect();
        for batch in ids.chunks(A::AGENT_BATCH) {
            out.extend(self.api.agent_batch(region, batch).await?);
        }
        Ok(out)
    }
}

#[async_trait]
impl<A: AgentApi> HealthPort for Agents<A> {
    /// The capture script of [`health_read`] sent to every node whose agent is online (all
    /// sent before any answer is awaited), each answer parsed by `health::parse`. A node
    /// whose agent is offline, or that gives no answer in time, is left out (never
    /// reported healthy).
    async fn read_health(&self, region: &str, ids: &[String]) -> Result<Vec<NodeHealth>, ProviderError> {
        let agents = self.agents(region, ids).await?;
        let script = health_read::capture_script();
        let cmd =
            Command { script: &script, timeout_secs: health_read::TIMEOUT_SECS, name: "gpuplan-health", launch: None };
        let mut sent = Vec::new();
        for id in ids.iter().filter(|id| agents.get(*id) == Some(&AgentState::Online)) {
            sent.push((id, self.api.send(region, id, &cmd).await?));
        }
        let reads = sent.into_iter().map(|(id, send)| async move {
            let answer = health_read::wait_output(|| self.check(region, id, &send)).await?;
            Ok(answer.and_then(|text| health_read::node_health(id, &text, now_ms())))
        });
        health_read::gather(reads).await
    }

    /// VMs need no call: gpuplan itself stops placing and sending work there.
    async fn cordon(&self, _region: &str, _id: &str) -> Result<(), ProviderError> {
        Ok(())
    }
}

/// The wall clock in ms, the clock both clouds' providers run on.
fn now_ms() -> u64 {
    let since = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
    u64::try_from(since.as_millis()).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests;
