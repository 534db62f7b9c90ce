//! The cluster port: `gpuplan check` of a Kubernetes cluster jobs are submitted to. Only
//! the Kubernetes job backend runs clusters.

use async_trait::async_trait;

use crate::model::ProviderError;

#[async_trait]
pub trait ClusterPort: Send + Sync {
    /// Can the cluster (`region` is its locator) be reached with these credentials, does
    /// the namespace exist, are gpuplan's PriorityClasses there: a line saying what was
    /// found.
    async fn check_cluster(&self, region: &str, namespace: &str) -> Result<String, ProviderError>;
}
