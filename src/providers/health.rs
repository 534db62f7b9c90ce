//! The GPU health port (`docs/design/gpu-health.md`): how gpuplan reads a node's GPU
//! signals where it runs (VM pools through the run-command agents; Kubernetes through node
//! conditions, labels and allocatable; the sim cloud from its scripted faults) and how it
//! keeps new work off a quarantined node. A cloud without a way to read them returns
//! `None` from [`super::Provider::health`].

use async_trait::async_trait;

use crate::model::ProviderError;
use crate::model::health::NodeHealth;

#[async_trait]
pub trait HealthPort: Send + Sync {
    /// Reads the health of these nodes (`ids` in `region`). A node the cloud could not
    /// read this time (agent offline) is left out, never reported healthy.
    async fn read_health(&self, region: &str, ids: &[String]) -> Result<Vec<NodeHealth>, ProviderError>;

    /// Keeps new jobs off a quarantined node: Kubernetes marks it unschedulable; VM clouds
    /// need no call (gpuplan itself stops placing and warm-node sends there).
    async fn cordon(&self, region: &str, id: &str) -> Result<(), ProviderError>;
}
