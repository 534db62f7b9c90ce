//! What `import`, `moved` and `removed` ask of Alibaba Cloud ECS ([`Retag`], for the
//! shared adoption port of `signed_json::adopt`): `DescribeInstances` by
//! id, or all of a region less gpuplan's; `TagResources` / `UntagResources` on
//! `ResourceType=instance` in place (at most 50 instances and 20 tags per call). Nothing
//! here launches, stops or releases an instance.

use serde_json::Value;

use super::AlibabaProvider;
use crate::providers::ProviderError;
use crate::providers::signed_json::adopt::Retag;
use crate::providers::signed_json::cloud::Instances;

fn p(k: impl Into<String>, v: impl Into<String>) -> (String, String) {
    (k.into(), v.into())
}

#[async_trait::async_trait]
impl Retag for AlibabaProvider {
    const IDS_PER_CALL: usize = 50;
    const TAGS_PER_CALL: usize = 20;
    /// Pending or running.
    const ADOPTABLE: fn(&Value) -> bool = |i| AlibabaProvider::any_node(i, "").is_some_and(|n| n.is_live());

    /// ECS names instances by id (`ResourceType=instance`).
    async fn resources(&self, _region: &str, ids: &[String]) -> Result<Vec<String>, ProviderError> {
        Ok(ids.to_vec())
    }

    /// `UntagResources`.
    async fn untag(&self, region: &str, resources: &[String], keys: &[String]) -> Result<(), ProviderError> {
        let mut params = instances(resources);
        params.extend(keys.iter().enumerate().map(|(n, k)| p(format!("TagKey.{}", n + 1), k)));
        self.client.ecs("UntagResources", region, params).await.map(|_| ())
    }

    /// `TagResources`.
    async fn tag(&self, region: &str, resources: &[String], tags: &[(&str, &str)]) -> Result<(), ProviderError> {
        let mut params = instances(resources);
        for (n, (k, v)) in tags.iter().enumerate() {
            params.push(p(format!("Tag.{}.Key", n + 1), *k));
            params.push(p(format!("Tag.{}.Value", n + 1), *v));
        }
        self.client.ecs("TagResources", region, params).await.map(|_| ())
    }
}

/// The parameters that name instances to the tag calls.
fn instances(ids: &[String]) -> Vec<(String, String)> {
    let mut params = vec![p("ResourceType", "instance")];
    params.extend(ids.iter().enumerate().map(|(n, id)| p(format!("ResourceId.{}", n + 1), id)));
    params
}
