//! The reserved-capacity port (docs/design/big-runs.md): how gpuplan finds Capacity Block
//! offerings, buys a block or an On-Demand Capacity Reservation, reads the reservations
//! it bought and cancels the ones that can be cancelled. A cloud that sells none returns
//! `None` from [`super::Provider::reservations`], and the spec refuses the block there.

use async_trait::async_trait;

use crate::model::ProviderError;
use crate::model::reservation::{Offering, OfferingQuery, ReserveRequest, Reserved};

#[async_trait]
pub trait ReservationPort: Send + Sync {
    /// The Capacity Block offerings of `region` that match `q`, cheapest first.
    async fn capacity_block_offerings(&self, region: &str, q: &OfferingQuery) -> Result<Vec<Offering>, ProviderError>;

    /// Buys `req`: a Capacity Block by its offering, or a new On-Demand Capacity
    /// Reservation. A retry under the same token answers with the first purchase.
    async fn reserve(&self, region: &str, req: &ReserveRequest) -> Result<Reserved, ProviderError>;

    /// The reservations `ids` of `region` as the cloud holds them now; an id the cloud no
    /// longer knows is left out.
    async fn describe_reservations(&self, region: &str, ids: &[String]) -> Result<Vec<Reserved>, ProviderError>;

    /// Cancels a cancellable reservation (an already cancelled or expired one is done).
    async fn cancel_reservation(&self, region: &str, id: &str) -> Result<(), ProviderError>;
}
