//! The node port: the pool nodes a cloud makes, lists and terminates, and the quotas that
//! bound them. Every VM cloud has it; the Kubernetes job backend does not.

use async_trait::async_trait;

use crate::model::ProviderError;
use crate::model::node::{CreateNodes, CreateResult, ListFilter, NewPool, Node, QuotaLine};

#[async_trait]
pub trait NodePort: Send + Sync {
    /// Every node carrying gpuplan's tags in a region, paged internally (never one call
    /// per node).
    async fn list_nodes(&self, filter: &ListFilter) -> Result<Vec<Node>, ProviderError>;

    /// Ask, ahead of the plan, the reads a first create of these new pools will make,
    /// and keep the answers for the run's creates. Called while refresh lists the fleet,
    /// and only by an apply that executes its own plan. Nothing here writes; a failed
    /// read is only a lost head start (the create asks again and reports it), so there
    /// is no error to return. Clouds without such reads do nothing.
    async fn read_ahead(&self, _pools: &[NewPool]) {}

    /// Create one batch of nodes. Partial success returns the nodes made plus errors.
    async fn create_nodes(&self, req: &CreateNodes) -> Result<CreateResult, ProviderError>;

    /// Terminate nodes by id (batched by the provider to its API limit). Nodes without
    /// gpuplan's tags must be refused, never touched.
    async fn terminate_nodes(&self, region: &str, ids: &[String]) -> Result<Vec<String>, ProviderError>;

    /// The account quotas the cloud reports for launching instances in `region` (instance
    /// counts on Tencent, vCPUs on Alibaba), for `gpuplan check`. `Ok(None)`: this cloud
    /// does not report them through the API gpuplan uses.
    async fn quotas(&self, _region: &str) -> Result<Option<Vec<QuotaLine>>, ProviderError> {
        Ok(None)
    }
}
