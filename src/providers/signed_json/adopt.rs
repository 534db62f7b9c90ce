//! The adoption port of both signed-JSON clouds, once (`import`, `moved`, `removed`):
//! instances by id whatever their tags, the running ones of a region without gpuplan's
//! managed tag, and tags set and taken off in place, in batches of the cloud's limits.
//! Each cloud writes only its tag calls ([`Retag`]). Nothing here launches, stops or
//! releases an instance.

use async_trait::async_trait;
use serde_json::Value;

use super::cloud::{Cloud, CloudApi, Instances, Where};
use crate::providers::{AdoptionPort, Node, ProviderError, Tags};

/// A cloud's tag writes on instances.
#[async_trait]
pub trait Retag: Instances {
    /// Instances per tag call.
    const IDS_PER_CALL: usize;
    /// Tags per tag call.
    const TAGS_PER_CALL: usize;
    /// Whether an instance described by id is there to adopt (not going away).
    const ADOPTABLE: fn(&Value) -> bool;

    /// How the tag API names one batch of instances (at most [`Self::IDS_PER_CALL`]).
    async fn resources(&self, region: &str, ids: &[String]) -> Result<Vec<String>, ProviderError>;

    /// Take tags `keys` off the named instances (one call).
    async fn untag(&self, region: &str, resources: &[String], keys: &[String]) -> Result<(), ProviderError>;

    /// Set tags `tags` on the named instances (one call).
    async fn tag(&self, region: &str, resources: &[String], tags: &[(&str, &str)]) -> Result<(), ProviderError>;
}

#[async_trait]
impl<A: CloudApi> AdoptionPort for Cloud<A>
where
    Cloud<A>: Retag,
{
    /// The instances among `ids` that are there to adopt, whatever their tags.
    async fn describe_nodes(&self, region: &str, ids: &[String]) -> Result<Vec<Node>, ProviderError> {
        let found = self.describe_ids(region, ids).await?;
        Ok(found.iter().filter(|i| Self::ADOPTABLE(i)).filter_map(|i| Self::any_node(i, region)).collect())
    }

    /// Running instances without `gpuplan:managed=true` whose tags match every filter.
    async fn list_unmanaged(&self, region: &str, filters: &[(String, String)]) -> Result<Vec<Node>, ProviderError> {
        let found = self.describe_where(region, &Where { tags: filters, running: true }).await?;
        Ok(Self::unmanaged(&found, region))
    }

    /// For each batch of instances, the tags `remove` taken off, then `set` set, each in
    /// calls of the cloud's tag limit. A failed call fails the whole request: the caller
    /// records nothing of it, and the next plan asks again.
    async fn tag_nodes(
        &self,
        region: &str,
        ids: &[String],
        set: &Tags,
        remove: &[String],
    ) -> Result<(), ProviderError> {
        let pairs: Vec<(&str, &str)> = set.iter().collect();
        for batch in ids.chunks(Self::IDS_PER_CALL) {
            let resources = self.resources(region, batch).await?;
            for keys in remove.chunks(Self::TAGS_PER_CALL) {
                self.untag(region, &resources, keys).await?;
            }
            for tags in pairs.chunks(Self::TAGS_PER_CALL) {
                self.tag(region, &resources, tags).await?;
            }
        }
        Ok(())
    }
}
