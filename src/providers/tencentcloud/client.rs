//! One signed API 3.0 call: JSON POST with the X-TC-* headers, TC3-HMAC-SHA256, with
//! the provider block's credentials ([`Client::call`]) or given ones ([`send`]: STS).

use serde_json::Value;

use super::errors::api_error;
use crate::providers::http::{CloudConfig, Credentials, Endpoint, network_error, unix_now};
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
        let creds = self.config.credentials.get(&self.http).await?;
        let endpoint = endpoint_for(self.config.endpoint.as_ref(), service);
        send(&self.http, &endpoint, &Call { service, version, action, region, body }, Some(&creds)).await
    }
}

/// One API 3.0 request.
#[derive(Clone, Copy)]
pub struct Call<'a> {
    pub service: &'a str,
    pub version: &'a str,
    pub action: &'a str,
    /// Empty for region-less calls.
    pub region: &'a str,
    pub body: &'a Value,
}

/// The block's endpoint (one for every service: a private or test endpoint), else the
/// service's public host.
pub fn endpoint_for(configured: Option<&Endpoint>, service: &str) -> Endpoint {
    configured
        .cloned()
        .unwrap_or_else(|| Endpoint { scheme: "https".into(), authority: format!("{service}.tencentcloudapi.com") })
}

/// Send one call, signed with `creds` (their session token in `X-TC-Token`), or unsigned
/// (`Authorization: SKIP`) for the calls Tencent serves without a signature
/// (`AssumeRoleWithWebIdentity`), and return the `Response` object.
pub async fn send(
    http: &reqwest::Client,
    endpoint: &Endpoint,
    call: &Call<'_>,
    creds: Option<&Credentials>,
) -> Result<Value, ProviderError> {
    let Call { service, version, action, region, body } = *call;
    let payload = serde_json::to_vec(body).unwrap_or_default();
    let timestamp = unix_now();
    let authorization = match creds {
        Some(c) => {
            let request = tc3::Request {
                method: "POST",
                host: &endpoint.authority,
                content_type: CONTENT_TYPE,
                service,
                timestamp,
                payload: &payload,
            };
            tc3::sign(&c.id, c.secret.expose(), &request).authorization
        }
        None => "SKIP".to_string(),
    };
    let mut req = http
        .post(endpoint.url("/"))
        .header("Content-Type", CONTENT_TYPE)
        .header("X-TC-Action", action)
        .header("X-TC-Timestamp", timestamp.to_string())
        .header("X-TC-Version", version)
        .header("X-TC-Language", "en-US")
        .header("X-TC-RequestClient", concat!("gpuplan/", env!("CARGO_PKG_VERSION")))
        .header("Authorization", authorization);
    if !region.is_empty() {
        req = req.header("X-TC-Region", region);
    }
    if let Some(t) = creds.and_then(|c| c.token.as_ref()) {
        req = req.header("X-TC-Token", t.expose());
    }
    let what = format!("{action} in {region}");
    let resp = req.body(payload).send().await.map_err(|e| network_error(&format!("Tencent Cloud {what}"), &e))?;
    let status = resp.status();
    let text = resp.text().await.map_err(|e| network_error(&format!("Tencent Cloud {what}"), &e))?;
    if !status.is_success() {
        let class =
            if status.is_server_error() || status.as_u16() == 429 { ErrorClass::Retryable } else { ErrorClass::Fatal };
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
