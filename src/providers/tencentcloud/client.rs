//! One signed API 3.0 call: JSON POST with the X-TC-* headers, TC3-HMAC-SHA256.

use serde_json::Value;

use super::errors::api_error;
use crate::providers::http::{CloudConfig, Endpoint, network_error, unix_now};
use crate::providers::signing::tc3;
use crate::providers::{ErrorClass, ProviderError};

pub const CVM_VERSION: &str = "2017-03-12";
pub const TKE_VERSION: &str = "2018-05-25";
const CONTENT_TYPE: &str = "application/json";

pub struct Client {
    http: reqwest::Client,
    config: CloudConfig,
}

impl Client {
    pub fn new(config: CloudConfig) -> Result<Self, ProviderError> {
        Ok(Client { http: crate::providers::http::client()?, config })
    }

    pub fn config(&self) -> &CloudConfig {
        &self.config
    }

    /// Call `action` of `service` (`cvm`, `tke`) and return the `Response` object.
    pub async fn call(
        &self,
        service: &str,
        version: &str,
        action: &str,
        region: &str,
        body: &Value,
    ) -> Result<Value, ProviderError> {
        let creds = self.config.credentials.as_ref().map_err(|m| {
            ProviderError::new(
                ErrorClass::Auth,
                "MissingCredentials",
                format!(
                    "Tencent Cloud `{}`: {m}\nhint: export TENCENTCLOUD_SECRET_ID and TENCENTCLOUD_SECRET_KEY",
                    self.config.name
                ),
            )
        })?;
        let endpoint = self.config.endpoint.clone().unwrap_or_else(|| Endpoint {
            scheme: "https".into(),
            authority: format!("{service}.tencentcloudapi.com"),
        });
        let payload = serde_json::to_vec(body).unwrap_or_default();
        let timestamp = unix_now();
        let sig = tc3::sign(
            &creds.id,
            creds.secret.expose(),
            &tc3::Request {
                method: "POST",
                host: &endpoint.authority,
                content_type: CONTENT_TYPE,
                service,
                timestamp,
                payload: &payload,
            },
        );
        let mut req = self
            .http
            .post(endpoint.url("/"))
            .header("Content-Type", CONTENT_TYPE)
            .header("X-TC-Action", action)
            .header("X-TC-Timestamp", timestamp.to_string())
            .header("X-TC-Version", version)
            .header("X-TC-Language", "en-US")
            .header("X-TC-RequestClient", concat!("gpuplan/", env!("CARGO_PKG_VERSION")))
            .header("Authorization", sig.authorization);
        if !region.is_empty() {
            req = req.header("X-TC-Region", region);
        }
        if let Some(t) = &creds.token {
            req = req.header("X-TC-Token", t.expose());
        }
        let what = format!("{action} in {region}");
        let resp = req.body(payload).send().await.map_err(|e| network_error(&format!("Tencent Cloud {what}"), &e))?;
        let status = resp.status();
        let text = resp.text().await.map_err(|e| network_error(&format!("Tencent Cloud {what}"), &e))?;
        if !status.is_success() {
            let class = if status.is_server_error() || status.as_u16() == 429 {
                ErrorClass::Retryable
            } else {
                ErrorClass::Fatal
            };
            let snippet: String = text.chars().take(200).collect();
            return Err(ProviderError::new(
                class,
                format!("HTTP{}", status.as_u16()),
                format!("Tencent Cloud {what} answered HTTP {status}: {snippet}"),
            ));
        }
        let v: Value = serde_json::from_str(&text).map_err(|e| {
            ProviderError::new(ErrorClass::Fatal, "BadResponse", format!("Tencent Cloud {what}: not JSON ({e})"))
        })?;
        let response = v.get("Response").cloned().unwrap_or(Value::Null);
        if let Some(err) = response.get("Error") {
            let code = err.get("Code").and_then(Value::as_str).unwrap_or("UnknownError");
            let message = err.get("Message").and_then(Value::as_str).unwrap_or("");
            let rid = response.get("RequestId").and_then(Value::as_str).unwrap_or("");
            return Err(api_error(&what, code, message, rid));
        }
        if !response.is_object() {
            return Err(ProviderError::new(
                ErrorClass::Fatal,
                "BadResponse",
                format!("Tencent Cloud {what}: the answer has no `Response` object"),
            ));
        }
        Ok(response)
    }
}
