//! The secret-store port on AWS ([`SecretPort`]): whether an `aws-sm:` secret or an
//! `ssm:` parameter exists, asked without reading its value. Secrets Manager
//! `DescribeSecret` answers the secret's metadata (never `SecretString`); SSM
//! `DescribeParameters` with a `Name` filter answers the parameter's metadata (never its
//! value: `GetParameter` would return it, decrypted or not). Signed JSON 1.1 calls, as
//! `ssm.rs` makes them. `#KEY` is not checked: only the value knows its fields.
//!
//! The Secrets Manager endpoint is `AWS_ENDPOINT_URL_SECRETS_MANAGER`, else the provider
//! block's `endpoint`, else `AWS_ENDPOINT_URL`, else
//! `https://secretsmanager.<region>.amazonaws.com`.

use async_trait::async_trait;
use serde_json::json;

use super::AwsProvider;
use super::ssm::JsonService;
use crate::model::secret::{SecretRef, SecretSource};
use crate::providers::ProviderError;
use crate::providers::secrets::SecretPort;

const SECRETS_MANAGER: JsonService = JsonService { signing_name: "secretsmanager", target: "secretsmanager" };

#[async_trait]
impl SecretPort for AwsProvider {
    async fn secret_exists(&self, region: &str, secret: &SecretRef) -> Result<Option<bool>, ProviderError> {
        match secret.source {
            SecretSource::AwsSm => {
                let endpoint = self.service_endpoint("AWS_ENDPOINT_URL_SECRETS_MANAGER", "secretsmanager", region);
                let url = format!("{}/", endpoint.trim_end_matches('/'));
                let body = json!({"SecretId": secret.name});
                match super::read(|| self.json_call(SECRETS_MANAGER, region, &url, "DescribeSecret", &body)).await {
                    Ok(doc) => Ok(Some(doc["DeletedDate"].is_null())),
                    Err(e) if e.code == "ResourceNotFoundException" => Ok(Some(false)),
                    Err(e) => Err(e),
                }
            }
            SecretSource::Ssm => {
                let filter = json!([{"Key": "Name", "Option": "Equals", "Values": [secret.name]}]);
                let body = json!({"ParameterFilters": filter, "MaxResults": 1});
                let doc = super::read(|| self.ssm(region, "DescribeParameters", &body)).await?;
                let found = doc["Parameters"].as_array().is_some_and(|ps| ps.iter().any(|p| p["Name"] == secret.name));
                Ok(Some(found))
            }
            _ => Ok(None),
        }
    }
}
