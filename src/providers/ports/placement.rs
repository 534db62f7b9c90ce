//! The placement-group port (docs/design/big-runs.md, `network { placement_group }`): a
//! cloud's named groups that pack a pool's nodes of one zone close together. gpuplan
//! names them (`gpuplan-<lineage>-<pool>-<zone>`), makes one before the first node of
//! its pool and zone launches into it and deletes it once the pool's nodes are gone.
//! Each cloud's group: an EC2 cluster placement group, an Alibaba Cloud deployment set
//! (strategy `LowLatency`), a Tencent Cloud HPC cluster (`fabric = "rdma"`: HCC instance
//! types launch only into one).

use async_trait::async_trait;

use crate::model::{ProviderError, Tags};

#[async_trait]
pub trait PlacementPort: Send + Sync {
    /// Makes group `name` of `strategy` (`cluster`) in `region` for the nodes of `zone`
    /// (a Tencent HPC cluster is of one zone; EC2 and ECS groups are regional), tagged
    /// with `tags` (gpuplan's ownership tags). A group of that name gpuplan already owns
    /// is done; one gpuplan does not own is an error, never taken over.
    async fn ensure_group(
        &self,
        region: &str,
        zone: &str,
        name: &str,
        strategy: &str,
        tags: &Tags,
    ) -> Result<(), ProviderError>;

    /// Deletes group `name` of `region`; one the cloud no longer knows is done.
    async fn delete_group(&self, region: &str, name: &str) -> Result<(), ProviderError>;
}
