//! `alicloud-kms:` secrets (Alibaba Cloud KMS secrets, API 2016-01-20), read by gpuplan at
//! send time for a job on a warm node, whose Cloud Assistant `RunCommand` carries the
//! value (docs/design/secrets.md): a node booted from user data is never handed one.
//!
//! - `GetSecretValue` (`SecretName`): the current version's `SecretData`.
//!
//! The value goes into the script and nowhere else: not returned in an error, not logged.

use std::collections::BTreeMap;

use async_trait::async_trait;

use super::AlibabaProvider;
use crate::model::secret::SecretSource;
use crate::providers::signed_json::cloud::SendSecrets;
use crate::providers::{ErrorClass, LaunchJob, ProviderError};

#[async_trait]
impl SendSecrets for AlibabaProvider {
    /// The values of `req`'s `alicloud-kms:` secrets, by the reference's text.
    async fn send_time_secrets(&self, req: &LaunchJob) -> Result<BTreeMap<String, String>, ProviderError> {
        let mut out = BTreeMap::new();
        for r in req.secrets.values().filter(|r| r.source == SecretSource::AlicloudKms) {
            if out.contains_key(&r.to_string()) {
                continue;
            }
            let params = vec![("SecretName".to_string(), r.name.clone())];
            let doc = self
                .client
                .kms("GetSecretValue", &req.region, params)
                .await
                .map_err(|e| ProviderError { message: format!("reading `{r}`: {}", e.message), ..e })?;
            let value = doc["SecretData"].as_str().map(String::from).ok_or_else(|| {
                ProviderError::new(ErrorClass::Invalid, "SecretNotText", format!("`{r}` holds no SecretData"))
            })?;
            out.insert(r.to_string(), value);
        }
        Ok(out)
    }
}
