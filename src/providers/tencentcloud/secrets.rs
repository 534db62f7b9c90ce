//! `tencent-ssm:` secrets (Tencent Cloud Secrets Manager, SSM API 2019-09-23), read by
//! gpuplan at send time for a job on a warm node, whose TAT `RunCommand` carries the
//! value (docs/design/secrets.md): a node booted from user data is never handed one.
//!
//! - `ListSecretVersionIds`: the secret's versions; the newest (`CreateTime`) is read.
//! - `GetSecretValue` (`SecretName`, `VersionId`): its `SecretString`.
//!
//! The value goes into the script and nowhere else: not returned in an error, not logged.

use std::collections::BTreeMap;

use async_trait::async_trait;
use serde_json::json;

use super::TencentProvider;
use crate::model::secret::{SecretRef, SecretSource};
use crate::providers::signed_json::cloud::SendSecrets;
use crate::providers::{ErrorClass, LaunchJob, ProviderError};

const SSM_VERSION: &str = "2019-09-23";

#[async_trait]
impl SendSecrets for TencentProvider {
    /// The values of `req`'s `tencent-ssm:` secrets, by the reference's text.
    async fn send_time_secrets(&self, req: &LaunchJob) -> Result<BTreeMap<String, String>, ProviderError> {
        let mut out = BTreeMap::new();
        for r in req.secrets.values().filter(|r| r.source == SecretSource::TencentSsm) {
            if let std::collections::btree_map::Entry::Vacant(e) = out.entry(r.to_string()) {
                e.insert(self.secret_value(&req.region, r).await?);
            }
        }
        Ok(out)
    }
}

impl TencentProvider {
    async fn secret_value(&self, region: &str, r: &SecretRef) -> Result<String, ProviderError> {
        let named = |e: ProviderError| ProviderError { message: format!("reading `{r}`: {}", e.message), ..e };
        let body = json!({"SecretName": r.name});
        let versions =
            self.client.call("ssm", SSM_VERSION, "ListSecretVersionIds", region, &body).await.map_err(named)?;
        let newest = versions["Versions"]
            .as_array()
            .into_iter()
            .flatten()
            .max_by_key(|v| v["CreateTime"].as_u64().unwrap_or(0))
            .and_then(|v| v["VersionId"].as_str())
            .ok_or_else(|| {
                ProviderError::new(ErrorClass::Invalid, "SecretNotFound", format!("`{r}` has no version to read"))
            })?;
        let body = json!({"SecretName": r.name, "VersionId": newest});
        let value = self.client.call("ssm", SSM_VERSION, "GetSecretValue", region, &body).await.map_err(named)?;
        value["SecretString"].as_str().map(String::from).ok_or_else(|| {
            ProviderError::new(ErrorClass::Invalid, "SecretNotText", format!("`{r}` holds no SecretString"))
        })
    }
}
