//! What `import`, `moved` and `removed` ask of Tencent Cloud. CVM has no tag-writing call,
//! so tags are set with the Tag API's `TagResources` and taken off with `UnTagResources`
//! (at most 10 resources and 10 tags per call), naming each instance by its six-segment
//! resource name `qcs::cvm:REGION:uin/OWNER:instance/ID`; the owner's UIN comes from STS
//! `GetCallerIdentity`, asked once. Reads are CVM `DescribeInstances`. Nothing here
//! launches, stops or terminates an instance.

use serde_json::{Value, json};

use super::TencentProvider;
use super::client::CVM_VERSION;
use super::cvm::{node_of, tags_of, to_any_node};
use crate::providers::{AdoptionPort, ErrorClass, Node, ProviderError, TAG_MANAGED, Tags, unowned_pool};

pub const TAG_VERSION: &str = "2018-08-13";
pub const STS_VERSION: &str = "2018-08-13";
/// Resources and tags per `TagResources` / `UnTagResources` call.
const TAG_BATCH: usize = 10;

#[async_trait::async_trait]
impl AdoptionPort for TencentProvider {
    /// The instances among `ids` that exist and are not being terminated, whatever their tags.
    async fn describe_nodes(&self, region: &str, ids: &[String]) -> Result<Vec<Node>, ProviderError> {
        let found = self.describe_ids(region, ids).await?;
        Ok(found
            .iter()
            .filter(|i| i["InstanceState"].as_str() != Some("TERMINATING"))
            .filter_map(|i| any(i, region))
            .collect())
    }

    /// Running instances without `gpuplan:managed=true` whose tags match every filter.
    async fn list_unmanaged(&self, region: &str, filters: &[(String, String)]) -> Result<Vec<Node>, ProviderError> {
        let filters: Vec<Value> =
            filters.iter().map(|(k, v)| json!({"Name": format!("tag:{k}"), "Values": [v]})).collect();
        let mut out = Vec::new();
        let mut offset = 0u64;
        loop {
            let mut body = json!({"Offset": offset, "Limit": 100});
            if !filters.is_empty() {
                body["Filters"] = json!(filters);
            }
            let resp = self.client.call("cvm", CVM_VERSION, "DescribeInstances", region, &body).await?;
            let page = resp["InstanceSet"].as_array().cloned().unwrap_or_default();
            let total = resp["TotalCount"].as_u64().unwrap_or(0);
            offset += page.len() as u64;
            let mine = page.iter().filter(|i| i["InstanceState"].as_str() == Some("RUNNING"));
            out.extend(mine.filter(|i| tags_of(i).get(TAG_MANAGED) != Some("true")).filter_map(|i| any(i, region)));
            if page.is_empty() || offset >= total {
                return Ok(out);
            }
        }
    }

    /// `UnTagResources` of `remove`, then `TagResources` of `set`, 10 instances a call.
    async fn tag_nodes(
        &self,
        region: &str,
        ids: &[String],
        set: &Tags,
        remove: &[String],
    ) -> Result<(), ProviderError> {
        let uin = self.owner_uin().await?;
        for batch in ids.chunks(TAG_BATCH) {
            let resources: Vec<String> =
                batch.iter().map(|id| format!("qcs::cvm:{region}:uin/{uin}:instance/{id}")).collect();
            for keys in remove.chunks(TAG_BATCH) {
                let body = json!({"ResourceList": resources, "TagKeys": keys});
                let resp = self.client.call("tag", TAG_VERSION, "UnTagResources", region, &body).await?;
                failed(&resp, "UnTagResources")?;
            }
            let pairs: Vec<(&str, &str)> = set.iter().collect();
            for tags in pairs.chunks(TAG_BATCH) {
                let tags: Vec<Value> = tags.iter().map(|(k, v)| json!({"TagKey": k, "TagValue": v})).collect();
                let body = json!({"ResourceList": resources, "Tags": tags});
                let resp = self.client.call("tag", TAG_VERSION, "TagResources", region, &body).await?;
                failed(&resp, "TagResources")?;
            }
        }
        Ok(())
    }
}

impl TencentProvider {
    /// The account UIN that owns the instances (STS `GetCallerIdentity`'s `AccountId`).
    async fn owner_uin(&self) -> Result<String, ProviderError> {
        if let Some(uin) = self.owner_uin.lock().unwrap_or_else(|e| e.into_inner()).clone() {
            return Ok(uin);
        }
        let resp = self.client.call("sts", STS_VERSION, "GetCallerIdentity", "ap-guangzhou", &json!({})).await?;
        let uin = match &resp["AccountId"] {
            Value::String(s) if !s.is_empty() => s.clone(),
            Value::Number(n) => n.to_string(),
            _ => {
                return Err(ProviderError::new(
                    ErrorClass::Fatal,
                    "NoAccountId",
                    "STS GetCallerIdentity named no AccountId: cannot name instances for the Tag API",
                ));
            }
        };
        *self.owner_uin.lock().unwrap_or_else(|e| e.into_inner()) = Some(uin.clone());
        Ok(uin)
    }
}

/// A partial failure (`FailedResources`) is a failure of the call: the caller records
/// nothing of the batch, and the next plan tags it again.
fn failed(resp: &Value, action: &str) -> Result<(), ProviderError> {
    let Some(first) = resp["FailedResources"].as_array().and_then(|a| a.first()) else { return Ok(()) };
    Err(ProviderError::new(
        ErrorClass::Invalid,
        first["Code"].as_str().unwrap_or("FailedResources").to_string(),
        format!(
            "{action} failed for {}: {}",
            first["Resource"].as_str().unwrap_or("?"),
            first["Message"].as_str().unwrap_or("")
        ),
    ))
}

fn any(inst: &Value, region: &str) -> Option<Node> {
    to_any_node(inst, region).or_else(|| node_of(inst, region, unowned_pool()))
}
