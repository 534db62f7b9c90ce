//! The placement-group port (docs/design/big-runs.md, `network { placement_group }`): a
//! cloud's named groups that pack a pool's nodes of one zone close together. gpuplan
//! names them (`gpuplan-<lineage>-<pool>-<zone>`), makes one before the first node of
//! its pool and zone launches into it and deletes it once the pool's nodes are gone.
//! Each cloud's group: an EC2 cluster placement group, an Alibaba Cloud deployment set
//! (strategy `LowLatency`), a Tencent Cloud HPC cluster (`fabric = "rdma"`: HCC instance
//! types launch only into one).

use async_trait::async_trait;

use crate::model::{ErrorClass, ProviderError, Tags};

/// How long to wait before asking again to delete a group still in use.
pub const IN_USE_WAIT_SECS: f64 = 15.0;

/// A group the cloud still finds in use right after its nodes' terminate (their shutdown
/// takes a while): the delete is asked again under the throttle's longer retries, at
/// least [`IN_USE_WAIT_SECS`] apart (about three minutes in all), instead of failing.
pub fn still_in_use(mut e: ProviderError) -> ProviderError {
    e.class = ErrorClass::Throttled;
    e.retry_after_secs = Some(IN_USE_WAIT_SECS);
    e
}

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

#[cfg(test)]
mod tests {
    use super::*;

    /// The apply's retry policy (`apply::policy`) retries a throttled call, at least
    /// `retry_after_secs` later, up to ten times.
    #[test]
    fn a_group_still_in_use_is_asked_again_at_least_fifteen_seconds_later() {
        let e = still_in_use(ProviderError::new(ErrorClass::Invalid, "DependencyViolation.NotEmpty", "in use"));
        assert_eq!((e.class, e.retry_after_secs), (ErrorClass::Throttled, Some(IN_USE_WAIT_SECS)));
        assert_eq!(e.code, "DependencyViolation.NotEmpty", "the cause stays readable");
    }
}
