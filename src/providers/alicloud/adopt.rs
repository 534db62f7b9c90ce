//! What `import`, `moved` and `removed` ask of Alibaba Cloud ECS: `DescribeInstances` by
//! id, or all of a region less gpuplan's; `TagResources` / `UntagResources` on
//! `ResourceType=instance` in place (at most 50 instances and 20 tags per call). Nothing
//! here launches, stops or releases an instance.

use serde_json::Value;

use super::AlibabaProvider;
use super::ecs::{tags_of, to_any_node};
use crate::providers::{AdoptionPort, Node, ProviderError, TAG_MANAGED, Tags, unowned_pool};

/// Instances per tag call, and tags per call.
const IDS_PER_CALL: usize = 50;
const TAGS_PER_CALL: usize = 20;

fn p(k: impl Into<String>, v: impl Into<String>) -> (String, String) {
    (k.into(), v.into())
}

#[async_trait::async_trait]
impl AdoptionPort for AlibabaProvider {
    /// The instances among `ids` that exist, whatever their tags.
    async fn describe_nodes(&self, region: &str, ids: &[String]) -> Result<Vec<Node>, ProviderError> {
        let found = self.describe_ids(region, ids).await?;
        Ok(found.iter().filter_map(|i| any(i, region)).filter(Node::is_live).collect())
    }

    /// Running instances without `gpuplan:managed=true` whose tags match every filter.
    async fn list_unmanaged(&self, region: &str, filters: &[(String, String)]) -> Result<Vec<Node>, ProviderError> {
        let mut base = vec![p("MaxResults", "100"), p("Status", "Running")];
        for (n, (k, v)) in filters.iter().enumerate() {
            base.push(p(format!("Tag.{}.Key", n + 1), k));
            base.push(p(format!("Tag.{}.Value", n + 1), v));
        }
        let mut out = Vec::new();
        let mut next: Option<String> = None;
        loop {
            let mut params = base.clone();
            if let Some(t) = &next {
                params.push(p("NextToken", t));
            }
            let resp = self.client.ecs("DescribeInstances", region, params).await?;
            let page = resp["Instances"]["Instance"].as_array().cloned().unwrap_or_default();
            let running = page.iter().filter(|i| i["Status"].as_str() == Some("Running"));
            out.extend(running.filter(|i| tags_of(i).get(TAG_MANAGED) != Some("true")).filter_map(|i| any(i, region)));
            match resp["NextToken"].as_str().filter(|t| !t.is_empty()) {
                Some(t) if Some(t) != next.as_deref() => next = Some(t.to_string()),
                _ => return Ok(out),
            }
        }
    }

    /// `UntagResources` of `remove`, then `TagResources` of `set`, 50 instances a call.
    async fn tag_nodes(
        &self,
        region: &str,
        ids: &[String],
        set: &Tags,
        remove: &[String],
    ) -> Result<(), ProviderError> {
        for batch in ids.chunks(IDS_PER_CALL) {
            let resources: Vec<(String, String)> =
                batch.iter().enumerate().map(|(n, id)| p(format!("ResourceId.{}", n + 1), id)).collect();
            for keys in remove.chunks(TAGS_PER_CALL) {
                let mut params = vec![p("ResourceType", "instance")];
                params.extend(resources.iter().cloned());
                params.extend(keys.iter().enumerate().map(|(n, k)| p(format!("TagKey.{}", n + 1), k)));
                self.client.ecs("UntagResources", region, params).await?;
            }
            let pairs: Vec<(&str, &str)> = set.iter().collect();
            for tags in pairs.chunks(TAGS_PER_CALL) {
                let mut params = vec![p("ResourceType", "instance")];
                params.extend(resources.iter().cloned());
                for (n, (k, v)) in tags.iter().enumerate() {
                    params.push(p(format!("Tag.{}.Key", n + 1), *k));
                    params.push(p(format!("Tag.{}.Value", n + 1), *v));
                }
                self.client.ecs("TagResources", region, params).await?;
            }
        }
        Ok(())
    }
}

fn any(inst: &Value, region: &str) -> Option<Node> {
    to_any_node(inst, region).or_else(|| super::ecs::node_of(inst, region, unowned_pool()))
}
