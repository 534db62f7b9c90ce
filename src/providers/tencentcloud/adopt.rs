//! What `import`, `moved` and `removed` ask of Tencent Cloud ([`Retag`], for the shared
//! adoption port of `signed_json::adopt`). CVM has no tag-writing call,
//! so tags are set with the Tag API's `TagResources` and taken off with `UnTagResources`
//! (at most 10 resources and 10 tags per call), naming each instance by its six-segment
//! resource name `qcs::cvm:REGION:uin/OWNER:instance/ID`; the owner's UIN comes from STS
//! `GetCallerIdentity`, asked once. Reads are CVM `DescribeInstances`. Nothing here
//! launches, stops or terminates an instance.

use serde_json::{Value, json};

use super::TencentProvider;
use crate::providers::signed_json::adopt::Retag;
use crate::providers::{ErrorClass, ProviderError};

pub const TAG_VERSION: &str = "2018-08-13";
pub const STS_VERSION: &str = "2018-08-13";
/// Resources and tags per `TagResources` / `UnTagResources` call.
const TAG_BATCH: usize = 10;

#[async_trait::async_trait]
impl Retag for TencentProvider {
    const IDS_PER_CALL: usize = TAG_BATCH;
    const TAGS_PER_CALL: usize = TAG_BATCH;
    /// Not being terminated.
    const ADOPTABLE: fn(&Value) -> bool = |i| i["InstanceState"].as_str() != Some("TERMINATING");

    /// The instances' six-segment resource names, with the owner's UIN.
    async fn resources(&self, region: &str, ids: &[String]) -> Result<Vec<String>, ProviderError> {
        let uin = self.owner_uin().await?;
        Ok(ids.iter().map(|id| format!("qcs::cvm:{region}:uin/{uin}:instance/{id}")).collect())
    }

    /// `UnTagResources`.
    async fn untag(&self, region: &str, resources: &[String], keys: &[String]) -> Result<(), ProviderError> {
        let body = json!({"ResourceList": resources, "TagKeys": keys});
        let resp = self.client.call("tag", TAG_VERSION, "UnTagResources", region, &body).await?;
        failed(&resp, "UnTagResources")
    }

    /// `TagResources`.
    async fn tag(&self, region: &str, resources: &[String], tags: &[(&str, &str)]) -> Result<(), ProviderError> {
        let tags: Vec<Value> = tags.iter().map(|(k, v)| json!({"TagKey": k, "TagValue": v})).collect();
        let body = json!({"ResourceList": resources, "Tags": tags});
        let resp = self.client.call("tag", TAG_VERSION, "TagResources", region, &body).await?;
        failed(&resp, "TagResources")
    }
}

impl TencentProvider {
    /// The account UIN that owns the instances (STS `GetCallerIdentity`'s `AccountId`).
    async fn owner_uin(&self) -> Result<String, ProviderError> {
        if let Some(uin) = self.own.owner_uin.lock().unwrap_or_else(|e| e.into_inner()).clone() {
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
        *self.own.owner_uin.lock().unwrap_or_else(|e| e.into_inner()) = Some(uin.clone());
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
