//! Tencent's [`Wire`] for the shared signed-JSON client (`signed_json::client`): API 3.0
//! JSON POSTs with the X-TC-* headers, TC3-HMAC-SHA256, with the provider block's
//! credentials ([`Client::call`]) or given ones (`signed_json::client::send`: STS).

use serde_json::Value;

use super::errors::api_error;
use crate::providers::http::{Endpoint, unix_now};
use crate::providers::signed_json::{
    self,
    client::{To, Wire, http_error},
};
use crate::providers::signing::tc3;
use crate::providers::{ErrorClass, ProviderError};

pub const CVM_VERSION: &str = "2017-03-12";
pub const TKE_VERSION: &str = "2018-05-25";
const CONTENT_TYPE: &str = "application/json";

/// Tencent Cloud's wire: API 3.0 JSON POSTs signed with TC3-HMAC-SHA256.
pub struct Tc3;

/// The provider block's client: [`Client::call`].
pub type Client = signed_json::client::Client<Tc3>;

impl signed_json::client::Client<Tc3> {
    /// Call `action` of `service` (`cvm`, `tke`) and return the `Response` object.
    pub async fn call(
        &self,
        service: &str,
        version: &str,
        action: &str,
        region: &str,
        body: &Value,
    ) -> Result<Value, ProviderError> {
        let endpoint = endpoint_for(self.config().endpoint.as_ref(), service);
        self.signed(&endpoint, &Call { service, version, action, region, body }).await
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

impl Wire for Tc3 {
    const CLOUD: &'static str = "Tencent Cloud";
    type Call<'a> = Call<'a>;

    /// Signed with `creds` (their session token in `X-TC-Token`), or unsigned
    /// (`Authorization: SKIP`) for the calls Tencent serves without a signature
    /// (`AssumeRoleWithWebIdentity`).
    fn request(to: &To<'_>, call: &Call<'_>) -> (String, reqwest::RequestBuilder) {
        let (Call { service, version, action, region, body }, To { http, endpoint, creds }) = (*call, *to);
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
        (format!("{action} in {region}"), req.body(payload))
    }

    /// The `Response` object; API 3.0 answers errors with HTTP 200 and `Response.Error`.
    fn answer(status: reqwest::StatusCode, text: &str, what: &str) -> Result<Value, ProviderError> {
        if !status.is_success() {
            return Err(http_error(Self::CLOUD, what, status, &status.to_string(), text));
        }
        let v: Value = serde_json::from_str(text).map_err(|e| {
            ProviderError::new(ErrorClass::Fatal, "BadResponse", format!("Tencent Cloud {what}: not JSON ({e})"))
        })?;
        let response = v.get("Response").cloned().unwrap_or(Value::Null);
        if let Some(err) = response.get("Error") {
            let code = err.get("Code").and_then(Value::as_str).unwrap_or("UnknownError");
            let message = err.get("Message").and_then(Value::as_str).unwrap_or("");
            let rid = response.get("RequestId").and_then(Value::as_str).unwrap_or("");
            return Err(api_error(what, code, message, rid));
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
