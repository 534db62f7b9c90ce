//! One signed call: RPC style for ECS (parameters in the query, `/` signed) and ROA
//! style for ACK (the resource path signed), both ACS3-HMAC-SHA256, with the provider
//! block's credentials ([`Client::call`]) or given ones ([`send`]: STS).

use std::collections::BTreeMap;

use serde_json::Value;

use super::errors::api_error;
use crate::providers::http::{CloudConfig, Credentials, Endpoint, network_error, unix_now};
use crate::providers::signing::{acs3, iso8601, sha256_hex};
use crate::providers::{ErrorClass, ProviderError};

pub const ECS_VERSION: &str = "2014-05-26";
pub const CS_VERSION: &str = "2015-12-15";
pub const KMS_VERSION: &str = "2016-01-20";

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

    /// An ECS RPC call; `RegionId` is added.
    pub async fn ecs(
        &self,
        action: &str,
        region: &str,
        mut params: Vec<(String, String)>,
    ) -> Result<Value, ProviderError> {
        params.push(("RegionId".into(), region.into()));
        self.call("ecs", ECS_VERSION, "POST", "/", action, region, &params, b"").await
    }

    /// A KMS RPC call; `RegionId` is added.
    pub async fn kms(
        &self,
        action: &str,
        region: &str,
        mut params: Vec<(String, String)>,
    ) -> Result<Value, ProviderError> {
        params.push(("RegionId".into(), region.into()));
        self.call("kms", KMS_VERSION, "POST", "/", action, region, &params, b"").await
    }

    /// A CS (ACK) ROA call.
    pub async fn cs(
        &self,
        method: &str,
        path: &str,
        action: &str,
        region: &str,
        query: &[(String, String)],
    ) -> Result<Value, ProviderError> {
        self.call("cs", CS_VERSION, method, path, action, region, query, b"").await
    }

    /// A CS (ROA) call with a JSON body, e.g. `POST /clusters/{id}/attach`.
    pub async fn cs_json(&self, path: &str, action: &str, region: &str, body: &Value) -> Result<Value, ProviderError> {
        let bytes = serde_json::to_vec(body).expect("a JSON value always serializes");
        self.call("cs", CS_VERSION, "POST", path, action, region, &[], &bytes).await
    }

    #[allow(clippy::too_many_arguments)]
    async fn call(
        &self,
        product: &str,
        version: &str,
        method: &str,
        path: &str,
        action: &str,
        region: &str,
        query: &[(String, String)],
        body: &[u8],
    ) -> Result<Value, ProviderError> {
        let creds = self.config.credentials.get(&self.http).await?;
        let endpoint = self.config.endpoint.clone().unwrap_or_else(|| Endpoint {
            scheme: "https".into(),
            authority: format!("{product}.{region}.aliyuncs.com"),
        });
        let call = Call { version, method, path, action, region, query, body };
        send(&self.http, &endpoint, &call, Some(&creds)).await
    }
}

/// One request: RPC (`path` `/`, parameters in `query`) or ROA (a resource path).
#[derive(Clone, Copy)]
pub struct Call<'a> {
    pub version: &'a str,
    pub method: &'a str,
    pub path: &'a str,
    pub action: &'a str,
    /// For messages.
    pub region: &'a str,
    pub query: &'a [(String, String)],
    pub body: &'a [u8],
}

/// Send one call, signed with `creds` (their STS token in `x-acs-security-token`), or
/// anonymous for the calls Alibaba serves without a signature (`AssumeRoleWithOIDC`).
pub async fn send(
    http: &reqwest::Client,
    endpoint: &Endpoint,
    call: &Call<'_>,
    creds: Option<&Credentials>,
) -> Result<Value, ProviderError> {
    let Call { version, method, path, action, region, query, body } = *call;
    let payload_hash = sha256_hex(body);
    let mut headers: BTreeMap<String, String> = BTreeMap::new();
    if !body.is_empty() {
        headers.insert("content-type".into(), "application/json".into());
    }
    headers.insert("host".into(), endpoint.authority.clone());
    headers.insert("x-acs-action".into(), action.into());
    headers.insert("x-acs-version".into(), version.into());
    headers.insert("x-acs-date".into(), iso8601(unix_now()));
    headers.insert("x-acs-signature-nonce".into(), uuid::Uuid::new_v4().simple().to_string());
    headers.insert("x-acs-content-sha256".into(), payload_hash.clone());
    if let Some(t) = creds.and_then(|c| c.token.as_ref()) {
        headers.insert("x-acs-security-token".into(), t.expose().to_string());
    }
    let authorization = creds.map(|c| {
        let request = acs3::Request { method, path, query, headers: &headers, payload_hash: &payload_hash };
        acs3::sign(&c.id, c.secret.expose(), &request).authorization
    });
    let qs = acs3::canonical_query(query);
    let url = endpoint.url(&format!("{}{}{qs}", acs3::canonical_uri(path), if qs.is_empty() { "" } else { "?" }));
    let method_v = reqwest::Method::from_bytes(method.as_bytes()).unwrap_or(reqwest::Method::POST);
    let mut req = http.request(method_v, url).header("Accept", "application/json");
    for (k, v) in headers.iter().filter(|(k, _)| k.as_str() != "host") {
        req = req.header(k.as_str(), v.as_str());
    }
    if let Some(a) = authorization {
        req = req.header("Authorization", a);
    }
    if !body.is_empty() {
        req = req.body(body.to_vec());
    }
    let what = format!("{action} in {region}");
    let resp = req.send().await.map_err(|e| network_error(&format!("Alibaba Cloud {what}"), &e))?;
    let status = resp.status().as_u16();
    let text = resp.text().await.map_err(|e| network_error(&format!("Alibaba Cloud {what}"), &e))?;
    let v: Value = match serde_json::from_str(&text) {
        Ok(v) => v,
        Err(_) => {
            let class = if status >= 500 || status == 429 { ErrorClass::Retryable } else { ErrorClass::Fatal };
            let snippet: String = text.chars().take(200).collect();
            return Err(ProviderError::new(
                class,
                format!("HTTP{status}"),
                format!("Alibaba Cloud {what} answered HTTP {status} without JSON: {snippet}"),
            ));
        }
    };
    // Errors come as 4xx/5xx, and some gateways answer 200 with a `Code`.
    let code = v.get("Code").and_then(Value::as_str).or_else(|| v.get("code").and_then(Value::as_str));
    if status >= 300 || code.is_some_and(|c| !c.is_empty() && c != "200") {
        let code = code.unwrap_or("UnknownError");
        let message = v.get("Message").or_else(|| v.get("message")).and_then(Value::as_str).unwrap_or("");
        let rid = v.get("RequestId").or_else(|| v.get("requestId")).and_then(Value::as_str).unwrap_or("");
        return Err(api_error(&what, code, message, rid, status));
    }
    Ok(v)
}
