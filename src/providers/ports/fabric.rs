//! The fabric port (docs/design/big-runs.md, `network { fabric }`): what a cloud must have
//! in place, beside the nodes, before nodes of a fast fabric can reach each other over
//! it. On AWS that is the self-referencing all-traffic rules EFA needs on the pool's
//! security groups; the interfaces themselves go with each launch (`NodePort`).

use async_trait::async_trait;

use crate::model::ProviderError;
use crate::model::hardware::Fabric;

#[async_trait]
pub trait FabricPort: Send + Sync {
    /// Readies `region` for nodes with `fabric`: what is already in place is kept and
    /// nothing is sent for it, so asking again changes nothing.
    async fn ensure_fabric(&self, region: &str, fabric: Fabric) -> Result<(), ProviderError>;
}
