//! The run-command port: whether a pool node's agent (SSM, TAT, Cloud Assistant) is
//! online, so that a job may run on an idle warm node. A cloud without it runs jobs on
//! nodes of their own.

use std::collections::BTreeMap;

use async_trait::async_trait;

use crate::model::ProviderError;
use crate::model::node::AgentState;

#[async_trait]
pub trait RunCommandPort: Send + Sync {
    /// The run-command agent of each of these pool nodes (`ids` in `region`): a job runs
    /// on an idle warm node only when its agent is online (`LaunchJob::node_id`, through
    /// the cloud's run-command API).
    async fn agents(&self, region: &str, ids: &[String]) -> Result<BTreeMap<String, AgentState>, ProviderError>;
}
