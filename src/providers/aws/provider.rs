//! The [`Provider`] trait over [`AwsProvider`], and the ports whose calls live in several
//! files (`fleet.rs`, `nodes.rs`, `ahead.rs`, `jobs.rs`, `ssm.rs`); the price port is
//! `prices.rs`'s, the adoption port `adopt.rs`'s.

use async_trait::async_trait;

use std::collections::BTreeMap;

use super::AwsProvider;
use crate::providers::launch::is_command_run;
use crate::providers::ports::LogSink;
use crate::providers::{
    AdoptionPort, AgentState, CreateNodes, CreateResult, JobPort, JobStatus, LaunchJob, ListFilter, LogPort, NewPool,
    Node, NodePort, PricePort, Provider, ProviderError, RunCommandPort,
};
use crate::spec::model::ProviderKind;

#[async_trait]
impl Provider for AwsProvider {
    fn kind(&self) -> ProviderKind {
        ProviderKind::Aws
    }

    /// GPU health through the run-command agent (`health.rs`).
    fn health(&self) -> Option<&dyn crate::providers::health::HealthPort> {
        Some(self)
    }

    fn credential_source(&self) -> Option<String> {
        self.credentials.source()
    }

    fn nodes(&self) -> Option<&dyn NodePort> {
        Some(self)
    }

    fn prices(&self) -> Option<&dyn PricePort> {
        Some(self)
    }

    fn jobs(&self) -> Option<&dyn JobPort> {
        Some(self)
    }

    fn logs(&self) -> Option<&dyn LogPort> {
        Some(self)
    }

    fn adoption(&self) -> Option<&dyn AdoptionPort> {
        Some(self)
    }

    fn run_command(&self) -> Option<&dyn RunCommandPort> {
        Some(self)
    }

    /// Capacity Blocks and On-Demand Capacity Reservations (`reservations.rs`).
    fn reservations(&self) -> Option<&dyn crate::providers::reservations::ReservationPort> {
        Some(self)
    }

    /// `aws-sm:` and `ssm:` references checked without reading them (`secrets.rs`).
    fn secrets(&self) -> Option<&dyn crate::providers::secrets::SecretPort> {
        Some(self)
    }

    fn placement(&self) -> Option<&dyn crate::providers::PlacementPort> {
        Some(self)
    }

    /// EFA's security group rules (`efa.rs`).
    fn fabric(&self) -> Option<&dyn crate::providers::FabricPort> {
        Some(self)
    }
}

#[async_trait]
impl NodePort for AwsProvider {
    async fn list_nodes(&self, filter: &ListFilter) -> Result<Vec<Node>, ProviderError> {
        self.list(filter).await
    }

    /// The type check, subnet look-up and template look-up of the new pools' first
    /// fleets (`ahead.rs`).
    async fn read_ahead(&self, pools: &[NewPool]) {
        self.read_ahead_creates(pools).await
    }

    async fn create_nodes(&self, req: &CreateNodes) -> Result<CreateResult, ProviderError> {
        match &req.reservation {
            Some(target) => self.create_reserved(req, target).await,
            None => self.create(req).await,
        }
    }

    async fn terminate_nodes(&self, region: &str, ids: &[String]) -> Result<Vec<String>, ProviderError> {
        self.terminate(region, ids).await
    }
}

#[async_trait]
impl RunCommandPort for AwsProvider {
    async fn agents(&self, region: &str, ids: &[String]) -> Result<BTreeMap<String, AgentState>, ProviderError> {
        self.agent_states(region, ids).await
    }
}

#[async_trait]
impl JobPort for AwsProvider {
    /// On a warm node when the plan chose one (Run Command), else on a node made for it.
    async fn launch_job(&self, req: &LaunchJob) -> Result<JobStatus, ProviderError> {
        match (&req.shape, req.node_id.is_empty()) {
            (None, false) => self.launch_on_node(&req.region, req).await,
            _ => self.launch(req).await,
        }
    }

    /// `ListCommands` of the warm node: the command whose comment carries the token.
    async fn find_sent(&self, region: &str, node_id: &str, token: &str) -> Result<Option<JobStatus>, ProviderError> {
        self.find_command(region, node_id, token).await
    }

    async fn job_status(&self, region: &str, id: &str) -> Result<JobStatus, ProviderError> {
        if is_command_run(id) { self.command_status(region, id).await } else { self.status(region, id).await }
    }

    async fn list_job_nodes(&self, filter: &ListFilter) -> Result<Vec<Node>, ProviderError> {
        self.list_tagged(filter, true).await
    }

    /// The job's instance, once the job has ended: `cancel` of a finished job only
    /// terminates its (stopped) instance.
    async fn release_job_node(&self, region: &str, id: &str) -> Result<(), ProviderError> {
        self.cancel(region, id).await.map(|_| ())
    }

    /// A job on a warm node: its command is cancelled and the node stays in its pool.
    async fn cancel_job(&self, region: &str, id: &str) -> Result<JobStatus, ProviderError> {
        if is_command_run(id) { self.cancel_command(region, id).await } else { self.cancel(region, id).await }
    }
}

#[async_trait]
impl LogPort for AwsProvider {
    /// The job's own output: what its node's log or console holds (one replica per node).
    async fn job_logs(&self, region: &str, id: &str, _follow: bool, out: &LogSink<'_>) -> Result<(), ProviderError> {
        let text =
            if is_command_run(id) { self.command_output(region, id).await? } else { self.console(region, id).await? };
        for line in crate::providers::userdata::job_output(&text) {
            out(0, line);
        }
        Ok(())
    }
}
