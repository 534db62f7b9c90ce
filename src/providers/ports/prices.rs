//! The price port: what a cloud sells a GPU model for. The Kubernetes job backend sells
//! nothing (its pools' prices are their provider's).

use async_trait::async_trait;

use crate::model::ProviderError;
use crate::model::node::Offer;

#[async_trait]
pub trait PricePort: Send + Sync {
    /// Priced offers for a GPU model (catalog prices, replaced by live ones if known).
    async fn offers(&self, gpu: &str, region: Option<&str>) -> Result<Vec<Offer>, ProviderError>;
}
