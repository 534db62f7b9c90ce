//! Cluster placement groups on EC2 ([`PlacementPort`]): `DescribePlacementGroups` by
//! name first, so a group gpuplan already made is found again (an apply retried after
//! `CreatePlacementGroup` answered makes no second one); `CreatePlacementGroup` with
//! gpuplan's ownership tags; `DeletePlacementGroup`, where a group EC2 no longer knows is
//! done. A group of gpuplan's name that another state or someone else made is refused,
//! never launched into or deleted.

use async_trait::async_trait;
use aws_sdk_ec2::types::{PlacementGroup, PlacementGroupState, PlacementStrategy, ResourceType, Tag, TagSpecification};

use super::errors::from_sdk;
use super::nodes::filter;
use super::{AwsProvider, Bucket};
use crate::providers::{ErrorClass, PlacementPort, ProviderError, TAG_LINEAGE, TAG_MANAGED, Tags};

/// EC2's answer for a group name it does not know.
const UNKNOWN: &str = "InvalidPlacementGroup.Unknown";
/// EC2's answer while instances (shutting down ones included) are still in the group.
const IN_USE: &str = "InvalidPlacementGroup.InUse";
/// How long to wait before asking again to delete a group still in use.
const IN_USE_WAIT_SECS: f64 = 15.0;

/// A group still in use right after its nodes' terminate: their shutdown takes a while,
/// so the delete is asked again under the throttle's longer retries (at least
/// [`IN_USE_WAIT_SECS`] apart, about three minutes in all) instead of failing at once.
fn still_in_use(mut e: ProviderError) -> ProviderError {
    e.class = ErrorClass::Throttled;
    e.retry_after_secs = Some(IN_USE_WAIT_SECS);
    e
}

fn tag_of<'a>(g: &'a PlacementGroup, key: &str) -> Option<&'a str> {
    g.tags().iter().find(|t| t.key() == Some(key)).and_then(|t| t.value())
}

impl AwsProvider {
    /// The live group named `name` in `region`, if any (a group being deleted is gone).
    async fn group_named(&self, region: &str, name: &str) -> Result<Option<PlacementGroup>, ProviderError> {
        let client = self.client(region).await?;
        self.pace(region, "DescribePlacementGroups", Bucket::NonMutating, None).await;
        let out = client
            .describe_placement_groups()
            .filters(filter("group-name", [name]))
            .send()
            .await
            .map_err(|e| from_sdk("DescribePlacementGroups", e))?;
        let live = |g: &&PlacementGroup| {
            g.group_name() == Some(name)
                && !matches!(g.state(), Some(PlacementGroupState::Deleting | PlacementGroupState::Deleted))
        };
        Ok(out.placement_groups().iter().find(live).cloned())
    }
}

#[async_trait]
impl PlacementPort for AwsProvider {
    async fn ensure_group(
        &self,
        region: &str,
        _zone: &str,
        name: &str,
        strategy: &str,
        tags: &Tags,
    ) -> Result<(), ProviderError> {
        if let Some(g) = self.group_named(region, name).await? {
            let ours = tag_of(&g, TAG_MANAGED) == Some("true") && tag_of(&g, TAG_LINEAGE) == tags.get(TAG_LINEAGE);
            if ours {
                return Ok(());
            }
            return Err(ProviderError::new(
                ErrorClass::Invalid,
                "PlacementGroupNotOwned",
                format!(
                    "placement group `{name}` in {region} exists but was not made by this state (no matching \
                     `{TAG_MANAGED}` and `{TAG_LINEAGE}` tags): rename or delete it, gpuplan will not launch into it"
                ),
            ));
        }
        let specs = TagSpecification::builder()
            .resource_type(ResourceType::PlacementGroup)
            .set_tags(Some(tags.iter().map(|(k, v)| Tag::builder().key(k).value(v).build()).collect()))
            .build();
        let client = self.client(region).await?;
        self.pace(region, "CreatePlacementGroup", Bucket::Mutating, None).await;
        client
            .create_placement_group()
            .group_name(name)
            .strategy(PlacementStrategy::from(strategy))
            .tag_specifications(specs)
            .send()
            .await
            .map_err(|e| from_sdk("CreatePlacementGroup", e))?;
        Ok(())
    }

    async fn delete_group(&self, region: &str, name: &str) -> Result<(), ProviderError> {
        let client = self.client(region).await?;
        self.pace(region, "DeletePlacementGroup", Bucket::Mutating, None).await;
        match client
            .delete_placement_group()
            .group_name(name)
            .send()
            .await
            .map_err(|e| from_sdk("DeletePlacementGroup", e))
        {
            Err(e) if e.code == UNKNOWN => Ok(()),
            Err(e) if e.code == IN_USE => Err(still_in_use(e)),
            other => other.map(|_| ()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The apply's retry policy (`apply::policy`) retries a throttled call, at least
    /// `retry_after_secs` later, up to ten times.
    #[test]
    fn a_group_still_in_use_is_asked_again_at_least_fifteen_seconds_later() {
        let e = still_in_use(ProviderError::new(ErrorClass::Invalid, IN_USE, "in use"));
        assert_eq!(e.class, ErrorClass::Throttled);
        assert_eq!(e.retry_after_secs, Some(IN_USE_WAIT_SECS));
        assert_eq!(e.code, IN_USE, "the cause stays readable");
    }
}
