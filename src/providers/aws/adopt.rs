//! What `import`, `moved` and `removed` ask of EC2: `DescribeInstances` by id or by the
//! absence of gpuplan's tag, and `CreateTags` / `DeleteTags` in place (at most 1,000 ids
//! per call, as EC2 allows). Nothing here launches, stops or terminates an instance.

use aws_sdk_ec2::types::{Filter, InstanceStateName, Tag};

use super::errors::from_sdk;
use super::nodes::{filter, is_managed, node_of, tags, to_node};
use super::{AwsProvider, Bucket, PAGE, read};
use crate::providers::{AdoptionPort, Node, ProviderError, Tags, unowned_pool};

/// Ids per `instance-id` filter.
const IDS_PER_DESCRIBE: usize = 200;

#[async_trait::async_trait]
impl AdoptionPort for AwsProvider {
    /// The instances among `ids` that exist and are not terminated, whatever their tags.
    async fn describe_nodes(&self, region: &str, ids: &[String]) -> Result<Vec<Node>, ProviderError> {
        let mut out = Vec::new();
        for chunk in ids.chunks(IDS_PER_DESCRIBE) {
            let found = self.describe_all(region, vec![filter("instance-id", chunk.iter().cloned())]).await?;
            out.extend(found.iter().filter(|i| !gone(i)).filter_map(|i| any_node(i, region)));
        }
        Ok(out)
    }

    /// Running instances without `gpuplan:managed=true` whose tags match every filter.
    async fn list_unmanaged(&self, region: &str, filters: &[(String, String)]) -> Result<Vec<Node>, ProviderError> {
        let mut f: Vec<Filter> = vec![filter("instance-state-name", ["running"])];
        f.extend(filters.iter().map(|(k, v)| filter(&format!("tag:{k}"), [v.clone()])));
        let found = self.describe_all(region, f).await?;
        Ok(found.iter().filter(|i| !is_managed(&tags(i))).filter_map(|i| any_node(i, region)).collect())
    }

    /// `DeleteTags` of `remove`, then `CreateTags` of `set`, in batches of at most 1,000 ids.
    async fn tag_nodes(
        &self,
        region: &str,
        ids: &[String],
        set: &Tags,
        remove: &[String],
    ) -> Result<(), ProviderError> {
        let client = self.client(region).await?;
        for batch in ids.chunks(PAGE) {
            if !remove.is_empty() {
                let keys: Vec<Tag> = remove.iter().map(|k| Tag::builder().key(k).build()).collect();
                read(|| async {
                    self.pace(region, "DeleteTags", Bucket::CreateTags, None).await;
                    client
                        .delete_tags()
                        .set_resources(Some(batch.to_vec()))
                        .set_tags(Some(keys.clone()))
                        .send()
                        .await
                        .map_err(|e| from_sdk("DeleteTags", e))
                })
                .await?;
            }
            if !set.is_empty() {
                let tags: Vec<Tag> = set.iter().map(|(k, v)| Tag::builder().key(k).value(v).build()).collect();
                read(|| async {
                    self.pace(region, "CreateTags", Bucket::CreateTags, None).await;
                    client
                        .create_tags()
                        .set_resources(Some(batch.to_vec()))
                        .set_tags(Some(tags.clone()))
                        .send()
                        .await
                        .map_err(|e| from_sdk("CreateTags", e))
                })
                .await?;
            }
        }
        Ok(())
    }
}

fn gone(i: &aws_sdk_ec2::types::Instance) -> bool {
    matches!(i.state().and_then(|s| s.name()), Some(InstanceStateName::Terminated | InstanceStateName::ShuttingDown))
}

/// An instance as a node, gpuplan's or not: one without an address tag reports
/// [`unowned_pool`].
fn any_node(i: &aws_sdk_ec2::types::Instance, region: &str) -> Option<Node> {
    to_node(i, region).or_else(|| node_of(i, region, unowned_pool()))
}
